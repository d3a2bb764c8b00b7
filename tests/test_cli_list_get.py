"""`pnk list` and `pnk get`: the indexed documents with their IDs, and a document's indexed text —
read by the same reader as MCP `pinakes_get` — for a person or as JSON."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from pinakes.cli import main
from pinakes.errors import EXIT_CONFIG, EXIT_DATA, EXIT_UNAVAILABLE
from pinakes.serve.config import load_kb
from pinakes.serve.tools import PinakesTools
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.test_serve_helpers import (
    ALPHA,
    add_indexed_pdf,
    call_tool,
    doc_ids,
    make_kb,
    manifest_fake_embedder,
    sync_kb,
)

HARBOUR = "Boats rest in the harbour at night.\n"
GARDEN = "Gardens need water and sun.\n\tIndented\twith tabs.\r\nA CRLF line.\n"
PDF_PAGES = ["Revenue grew in the first quarter.", "Costs for the hangar rose sharply.", "Outlook: stable."]


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    root = make_kb(tmp_path / "kb", "planes", {"alpha.md": ALPHA, "sea/harbour.md": HARBOUR, "garden.txt": GARDEN})
    sidecar = root / "docs" / "alpha.md.pnk.yaml"
    sync_kb(root)
    sidecar.write_text(sidecar.read_text(encoding="utf-8").replace("tags: []", "tags: [aviation, design]"),
                       encoding="utf-8")
    sync_kb(root)
    return root


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def listed(capsys: pytest.CaptureFixture[str], kb: Path, *flags: str) -> list[dict[str, Any]]:
    code, out, _ = run(capsys, "-C", str(kb), "list", "--json", *flags)
    assert code == 0, out
    payload = json.loads(out)
    assert payload["ok"] is True and payload["count"] == len(payload["documents"])
    return payload["documents"]


# -- pnk list ----------------------------------------------------------------------------------------


def test_list_shows_every_document_with_its_id_title_type_chunks_and_state(
    kb: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = doc_ids(kb)
    code, out, err = run(capsys, "-C", str(kb), "list")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].split() == ["ID", "TYPE", "CHUNKS", "STATE", "PATH", "—", "TITLE"]
    rows = {line.split()[0]: line for line in lines[1:4]}
    assert set(rows) == set(ids.values())
    alpha = rows[ids["docs/alpha.md"]].split()
    assert alpha[1:4] == ["markdown", alpha[2], "indexed"] and int(alpha[2]) >= 1
    assert rows[ids["docs/alpha.md"]].endswith("docs/alpha.md — Alpha")  # the H1
    assert rows[ids["docs/garden.txt"]].endswith("docs/garden.txt — garden.txt")  # no title: the file name
    assert lines[4].startswith("3 documents, ")


def test_list_json_carries_every_field(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    documents = listed(capsys, kb)
    assert [d["path"] for d in documents] == ["docs/alpha.md", "docs/garden.txt", "docs/sea/harbour.md"]
    alpha = documents[0]
    assert alpha["id"] == doc_ids(kb)["docs/alpha.md"]
    assert (alpha["title"], alpha["source_type"], alpha["state"], alpha["tags"], alpha["failure"]) == (
        "Alpha", "markdown", "indexed", ["aviation", "design"], None)
    assert isinstance(alpha["chunks"], int) and alpha["chunks"] >= 1
    assert {"mtime", "indexed_at"} <= set(alpha)
    assert documents[2]["title"] == "harbour.md"


@pytest.mark.parametrize(("flags", "paths"), [
    (("--type", "text"), ["docs/garden.txt"]),
    (("--path", "docs/sea/"), ["docs/sea/harbour.md"]),
    (("--tag", "aviation"), ["docs/alpha.md"]),
    (("--tag", "aviation", "--tag", "nope", "--all-tags"), []),
    (("--since", "2000-01-01", "--until", "2999-12-31"), ["docs/alpha.md", "docs/garden.txt", "docs/sea/harbour.md"]),
    (("--until", "2000-01-01"), []),
])
def test_list_takes_searchs_filters(
    kb: Path, capsys: pytest.CaptureFixture[str], flags: tuple[str, ...], paths: list[str]
) -> None:
    assert [d["path"] for d in listed(capsys, kb, *flags)] == paths


def test_an_empty_filtered_list_says_so(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-C", str(kb), "list", "--tag", "nope")
    assert code == 0 and out.strip() == "No documents matched the filters."


@pytest.mark.parametrize(("flags", "fragment"), [
    (("--type", "xlsx"), "unknown source type"),
    (("--since", "last tuesday"), "not an ISO date"),
    (("--all-tags",), "--all-tags needs at least one --tag"),
])
def test_list_refuses_bad_filters_like_search(
    kb: Path, capsys: pytest.CaptureFixture[str], flags: tuple[str, ...], fragment: str
) -> None:
    code, out, err = run(capsys, "-C", str(kb), "list", *flags)
    assert code == EXIT_CONFIG and out == "" and fragment in err


def test_list_states_follow_the_disk_and_the_last_sync(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (kb / "docs" / "sea" / "harbour.md").write_text(HARBOUR + "More boats.\n", encoding="utf-8")
    (kb / "docs" / "garden.txt").unlink()
    states = {d["path"]: d["state"] for d in listed(capsys, kb)}
    assert states == {"docs/alpha.md": "indexed", "docs/garden.txt": "missing", "docs/sea/harbour.md": "modified"}
    code, out, _ = run(capsys, "-C", str(kb), "list")
    assert code == 0 and "missing / modified: run `pnk status`" in out
    # A sync that fails on a document keeps its previous version indexed, and list says so.
    (kb / "docs" / "alpha.md").write_bytes(b"# Alpha\n\xff\xfe not utf-8\n")
    report = run_sync(kb, SyncOptions(), embedder=manifest_fake_embedder(kb))
    assert [failure.path for failure in report.failures] == ["docs/alpha.md"]
    alpha = next(d for d in listed(capsys, kb) if d["path"] == "docs/alpha.md")
    assert alpha["state"] == "failed" and alpha["failure"]["stage"] == "unextractable"
    assert "UTF-8" in alpha["failure"]["error"]


def test_list_without_an_index_names_sync(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = make_kb(tmp_path / "kb", "empty", {"a.md": "# A\n"})
    code, _, err = run(capsys, "-C", str(root), "list")
    assert code == EXIT_UNAVAILABLE and "no index yet" in err and "pnk sync" in err


# -- pnk get -----------------------------------------------------------------------------------------


def test_get_prints_the_whole_indexed_text_under_a_cited_header(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc_id = doc_ids(kb)["docs/alpha.md"]
    code, out, err = run(capsys, "-C", str(kb), "get", doc_id)
    assert code == 0 and err == ""
    header, meta, blank, *body = out.rstrip("\n").split("\n")
    assert header == f"Alpha — docs/alpha.md:0-{len(ALPHA)} · characters 0-{len(ALPHA)} of {len(ALPHA)}"
    assert meta == f"{doc_id} · markdown · tags: aviation, design"
    assert blank == "" and "\n".join(body) + "\n" == ALPHA


def test_get_range_is_a_citations_offsets(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc_id = doc_ids(kb)["docs/alpha.md"]
    code, out, _ = run(capsys, "-C", str(kb), "get", doc_id, "--range", "9-20", "--json")
    payload = json.loads(out)
    assert code == 0 and payload["ok"] is True
    assert payload["text"] == ALPHA[9:20]
    assert (payload["citation"], payload["char_start"], payload["char_end"], payload["total_chars"]) == (
        "docs/alpha.md:9-20", 9, 20, len(ALPHA))
    assert (payload["title"], payload["doc_id"], payload["page_count"]) == ("Alpha", doc_id, None)
    code, out, _ = run(capsys, "-C", str(kb), "get", doc_id, "--range", "9-", "--json")
    assert json.loads(out)["text"] == ALPHA[9:]
    code, out, _ = run(capsys, "-C", str(kb), "get", doc_id, "--range", "9-99999", "--json")
    assert json.loads(out)["char_end"] == len(ALPHA)  # an end past the text is clamped


def test_get_and_pinakes_get_read_the_same_text(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc_id = doc_ids(kb)["docs/garden.txt"]
    tools = PinakesTools([load_kb(kb)])
    try:
        served = call_tool(tools, "pinakes_get", {"doc_id": doc_id, "char_start": 3, "char_end": 40})
    finally:
        tools.close()
    code, out, _ = run(capsys, "-C", str(kb), "get", doc_id, "--range", "3-40", "--json")
    payload = json.loads(out)
    assert code == 0 and payload["text"] == GARDEN[3:40]
    assert served["citation"] == payload["citation"] and served["title"] == payload["title"] == "garden.txt"
    assert f"\n{GARDEN[3:40]}\n" in served["evidence"]


def test_get_pages_of_a_pdf_with_page_markers(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc_id = add_indexed_pdf(kb, "docs/report.pdf", PDF_PAGES)
    code, out, _ = run(capsys, "-C", str(kb), "get", doc_id, "--pages", "2-3")
    assert code == 0
    lines = out.rstrip("\n").split("\n")
    assert lines[0] == "report — docs/report.pdf:p2-3 · pages 2-3 of 3"
    assert lines[3:] == ["[page 2]", PDF_PAGES[1], "[page 3]", PDF_PAGES[2]]
    code, out, _ = run(capsys, "-C", str(kb), "get", doc_id, "--pages", "2", "--json")
    payload = json.loads(out)
    assert (payload["citation"], payload["page_start"], payload["page_end"], payload["page_count"]) == (
        "docs/report.pdf:p2", 2, 2, 3)
    code, out, _ = run(capsys, "-C", str(kb), "get", doc_id, "--pages", "3-", "--json")
    assert json.loads(out)["text"] == f"[page 3]\n{PDF_PAGES[2]}"


@pytest.mark.parametrize(("flags", "fragment"), [
    (("--range", "20-10"), "END greater than START"),
    (("--range", "abc"), "is not START-END"),
    (("--range", "99999-"), "past the end of docs/alpha.md"),
    (("--pages", "1"), "--pages applies to paged documents (PDFs); docs/alpha.md is markdown"),
    (("--pages", "0"), "1 <= N <= M"),
])
def test_get_refuses_a_range_that_does_not_fit(
    kb: Path, capsys: pytest.CaptureFixture[str], flags: tuple[str, ...], fragment: str
) -> None:
    code, out, err = run(capsys, "-C", str(kb), "get", doc_ids(kb)["docs/alpha.md"], *flags)
    assert code == EXIT_CONFIG and out == "" and fragment in err and "remedy:" in err


def test_get_refuses_pages_past_the_end_of_a_pdf(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc_id = add_indexed_pdf(kb, "docs/report.pdf", PDF_PAGES)
    code, _, err = run(capsys, "-C", str(kb), "get", doc_id, "--pages", "7-9")
    assert code == EXIT_CONFIG and "has 3 pages" in err


def test_range_and_pages_are_exclusive(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["-C", str(kb), "get", doc_ids(kb)["docs/alpha.md"], "--range", "0-5", "--pages", "1"])
    assert exited.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_an_unknown_id_names_it_and_suggests_list(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    absent = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
    code, _, err = run(capsys, "-C", str(kb), "get", absent)
    assert code == EXIT_CONFIG and absent in err and "pnk list" in err
    code, out, _ = run(capsys, "-C", str(kb), "get", absent, "--json")
    payload = json.loads(out)
    assert payload["ok"] is False and payload["error"] == "UnknownDocumentError" and "pnk list" in payload["remedy"]


def test_get_names_a_document_every_way_pnk_link_does(
    kb: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """One resolver (links/addresses.py): a path (from the working directory, or KB-relative with -C),
    the ULID, a pnk:// URI and self:PATH all name the same document."""
    doc_id = doc_ids(kb)["docs/alpha.md"]
    monkeypatch.chdir(tmp_path)  # outside the KB: docs/alpha.md is KB-relative here
    names = ["docs/alpha.md", doc_id, f"pnk://self/{doc_id}", "self:docs/alpha.md", str(kb / "docs" / "alpha.md")]
    payloads: list[dict[str, Any]] = []
    for name in names:
        code, out, err = run(capsys, "-C", str(kb), "get", name, "--json")
        assert code == 0, (name, err)
        payloads.append(json.loads(out))
    assert all(payload == payloads[0] for payload in payloads) and payloads[0]["text"] == ALPHA
    monkeypatch.chdir(kb / "docs" / "sea")
    code, out, _ = run(capsys, "get", "harbour.md", "--json")  # relative to the working directory
    assert code == 0 and json.loads(out)["text"] == HARBOUR

    code, _, err = run(capsys, "-C", str(kb), "get", "docs/nowhere.md")
    assert code == EXIT_CONFIG and "no document at 'docs/nowhere.md'" in err
    code, _, err = run(capsys, "-C", str(kb), "get", "elsewhere:docs/alpha.md")
    assert code == EXIT_CONFIG and "'elsewhere' in 'elsewhere:docs/alpha.md' is not a known KB alias" in err


def test_get_takes_a_pnk_uri_of_this_kb_and_a_lower_case_id(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc_id = doc_ids(kb)["docs/sea/harbour.md"]
    for name in (f"pnk://self/{doc_id}", f"pnk://{load_kb(kb).kb_id}/{doc_id}", doc_id.lower()):
        code, out, _ = run(capsys, "-C", str(kb), "get", name, "--json")
        assert code == 0 and json.loads(out)["text"] == HARBOUR
    code, _, err = run(capsys, "-C", str(kb), "get", f"pnk://01ARZ3NDEKTSV4RRFFQ69G5FAV/{doc_id}")
    assert code == EXIT_CONFIG and "another KB" in err


def test_get_refuses_a_file_changed_since_indexing_and_names_sync(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc_id = doc_ids(kb)["docs/alpha.md"]
    (kb / "docs" / "alpha.md").write_text(ALPHA.replace("lift", "drag"), encoding="utf-8")
    code, _, err = run(capsys, "-C", str(kb), "get", doc_id)
    assert code == EXIT_DATA and "changed since it was indexed" in err and "pnk sync" in err


def test_get_refuses_a_source_that_resolves_outside_the_kb(
    kb: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc_id = doc_ids(kb)["docs/sea/harbour.md"]
    outside = tmp_path / "outside.md"
    outside.write_text(HARBOUR, encoding="utf-8")
    (kb / "docs" / "sea" / "harbour.md").unlink()
    os.symlink(outside, kb / "docs" / "sea" / "harbour.md")
    code, _, err = run(capsys, "-C", str(kb), "get", doc_id)
    assert code == EXIT_DATA and "resolves outside the KB" in err


def test_human_output_escapes_the_kbs_text_but_keeps_tabs_and_drops_crlfs_cr(
    kb: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc_id = doc_ids(kb)["docs/garden.txt"]
    code, out, _ = run(capsys, "-C", str(kb), "get", doc_id)
    assert code == 0
    assert "\tIndented\twith tabs." in out and "A CRLF line." in out and "\r" not in out
    (kb / "docs" / "garden.txt").write_text("Red \x1b[31malert\x1b[0m and a \u202e bidi override.\n",
                                            encoding="utf-8")
    sync_kb(kb)
    code, out, _ = run(capsys, "-C", str(kb), "get", doc_id)
    assert "\x1b" not in out and "\u202e" not in out and "\\x1b[31malert" in out and "\\u202e" in out
    code, out, _ = run(capsys, "-C", str(kb), "get", doc_id, "--json")
    assert "\x1b[31malert" in json.loads(out)["text"]  # JSON: as it is


def test_help_lists_the_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["list", "--help"])
    out = capsys.readouterr().out
    for flag in ("--tag", "--all-tags", "--path", "--since", "--until", "--type", "--json", "-C"):
        assert flag in out
    with pytest.raises(SystemExit):
        main(["get", "--help"])
    out = capsys.readouterr().out
    for flag in ("ID", "--range", "--pages", "--json", "-C"):
        assert flag in out
