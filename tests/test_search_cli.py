"""`pnk search`: readable output, --json, flags, and error exits without tracebacks."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from pinakes.cli import main
from pinakes.errors import EXIT_CONFIG, EXIT_DATA, EXIT_UNAVAILABLE
from pinakes.kb import KBPaths
from tests.fakes import HashEmbedder, substitute_embedder
from tests.kb_helpers import SEARCH_MAX_TOKENS, SEARCH_OVERLAP, SEARCH_ROOTS, Doc, build_search_kb

MANIFEST = """\
[kb]
name = "search-test"
id = "01J9Z8Y7X6W5V4T3S2R1Q0P9N8"

[sources]
roots = {roots}

[embedding]
provider = "sentence-transformers"
model = "test/hash-bow"
dim = 64

[chunking]
max_tokens = {max_tokens}
overlap = {overlap}

[retrieval]
rerank = {rerank}
"""


def manifest(*, rerank: bool = False) -> str:
    """The search corpus's manifest (tests/kb_helpers.py), naming the test embedder (HashEmbedder)."""
    return MANIFEST.format(roots=json.dumps(list(SEARCH_ROOTS)), max_tokens=SEARCH_MAX_TOKENS,
                           overlap=SEARCH_OVERLAP, rerank=str(rerank).lower())


def make_kb(root: Path, *, rerank: bool = False) -> KBPaths:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pinakes.toml").write_text(manifest(rerank=rerank))
    (root / "docs").mkdir(exist_ok=True)
    return KBPaths(root)


@pytest.fixture(scope="module")
def synced_kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The search corpus synced once; each test searches its own copy (some edit the manifest)."""
    root = tmp_path_factory.mktemp("search-cli") / "kb"
    build_search_kb(root, HashEmbedder(), manifest=manifest())
    return root


@pytest.fixture
def kb(synced_kb: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> KBPaths:
    """A KB whose manifest names the test embedder, with the embedder swapped in for the real one."""
    embedder = HashEmbedder()
    root = tmp_path / "kb"
    shutil.copytree(synced_kb, root)
    substitute_embedder(monkeypatch, lambda section, offline=None, threads=None: embedder)
    return KBPaths(root)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_human_output_lists_ranked_cited_passages(kb: KBPaths, capsys: pytest.CaptureFixture[str]):
    code, out, err = run(capsys, "-C", str(kb.root), "search", "kafka", "replication")
    assert code == 0 and err == ""
    first = out.splitlines()[0]
    # The citation as machines read it, then what it means in words, then the section.
    assert re.fullmatch(r"1\. Kafka — docs/kafka\.md:0-(\d+) · characters 0-\1 · Kafka", first), first
    assert "“# Kafka Kafka replication keeps copies" in out
    # No golden set and too few documents to self-calibrate: the shipped prior, named, whose one
    # threshold says it has no medium band.
    assert re.search(r"^confidence: (high|low), prior \(model:test/hash-bow .* \(low = high: this fit has no "
                     r"medium band\)\)$", out, flags=re.M), out
    # A keyword-only search has no evidence model: unknown, and how to calibrate is named.
    code, out, _ = run(capsys, "-C", str(kb.root), "search", "kafka", "replication", "--mode", "bm25")
    assert "confidence: unknown, unknown" in out
    assert "pnk eval --self-calibrate" in out and "pnk eval --init" in out  # how to make it more than unknown
    # The paid escalation names the user's own query, quoted so it pastes back as the same words.
    assert f"pnk -C {kb.root} ask --deep 'kafka replication'" in out
    # A search that is not confident names a next one when it has one to name (here: both retrievers).
    assert code == 0 and "next search to try: pnk search" in out and "combine both retrievers" in out


def test_the_escalation_hint_quotes_the_query_and_keeps_the_filters(kb: KBPaths, capsys: pytest.CaptureFixture[str]):
    query = "it's $HOME; `rm -rf` \"kafka\""
    code, out, _ = run(capsys, "search", "-C", str(kb.root), query, "--tag", "ops team", "--tag", "ops",
                       "--path", "docs/", "--since", "2020-01-01")
    assert code == 0 and not out.startswith("No passages matched.")  # the hint needs a match (next test)
    hint = next(line for line in out.splitlines() if line.startswith("To have Claude answer it"))
    command = hint.split("before the first call): ", 1)[1]
    assert shlex.split(command) == ["pnk", "-C", str(kb.root), "ask", "--deep", query, "--tag", "ops team",
                                    "--tag", "ops", "--path", "docs/", "--since", "2020-01-01"]


def test_paged_citation_and_tags_are_printed(kb: KBPaths, capsys: pytest.CaptureFixture[str]):
    code, out, _ = run(capsys, "search", "-C", str(kb.root), "revenue", "quarter", "--mode", "bm25")
    assert code == 0
    assert "Annual report — reports/annual.pdf:p2 · page 2" in out
    assert "tags: finance" in out


def test_json_output_is_the_result_dict(kb: KBPaths, capsys: pytest.CaptureFixture[str]):
    code, out, _ = run(capsys, "search", "-C", str(kb.root), "kafka replication", "--json", "-k", "2")
    payload = json.loads(out)
    assert code == 0 and payload["ok"] is True
    assert payload["query"] == "kafka replication" and payload["mode"] == "hybrid"
    assert len(payload["passages"]) == 2
    top = payload["passages"][0]
    assert top["citation"] == f"docs/kafka.md:{top['char_start']}-{top['char_end']}"  # the machine scheme
    assert payload["confidence"]["source"] == "prior" and payload["confidence"]["level"] in ("high", "low")


def test_filters_reach_the_search(kb: KBPaths, capsys: pytest.CaptureFixture[str]):
    code, out, _ = run(capsys, "search", "-C", str(kb.root), "kafka postgres tomatoes", "--json",
                       "--tag", "home", "--tag", "database", "--type", "markdown", "--path", "docs/",
                       "--since", "2026-01-01", "--until", "2026-12-31")
    assert code == 0
    assert [passage["path"] for passage in json.loads(out)["passages"]] == ["docs/postgres.md"]


def test_all_tags_requires_every_tag(kb: KBPaths, capsys: pytest.CaptureFixture[str]):
    code, out, _ = run(capsys, "search", "-C", str(kb.root), "kafka postgres", "--json",
                       "--tag", "ops", "--tag", "streaming", "--all-tags")
    assert code == 0
    assert {passage["path"] for passage in json.loads(out)["passages"]} == {"docs/kafka.md"}


def test_no_results_says_so_and_names_no_paid_escalation(kb: KBPaths, capsys: pytest.CaptureFixture[str]):
    code, out, _ = run(capsys, "search", "-C", str(kb.root), "kafka", "--tag", "nosuchtag")
    assert code == 0
    assert out.startswith("No passages matched.")
    assert "confidence: low" in out
    # Nothing matched: a paid answer over no passages answers nothing; the free remedy is named.
    assert "ask --deep" not in out and "To have Claude answer it" not in out
    assert "next search to try: pnk search kafka" in out and "search the whole KB" in out
    # The same words without the filter match, are not confident (confidence turned off), and do name it.
    manifest = kb.root / "pinakes.toml"
    manifest.write_text(manifest.read_text() + '\n[retrieval.confidence]\nsignal = "none"\n')
    code, out, _ = run(capsys, "search", "-C", str(kb.root), "kafka")
    assert code == 0 and "confidence: unknown, unknown" in out and "ask --deep kafka" in out
    assert "Confidence is turned off in pinakes.toml" in out


@pytest.mark.parametrize(("argv", "fragment"), [
    (["search"], "the query is empty"),
    (["search", "   "], "the query is empty"),
    (["search", "kafka", "--type", "xlsx"], "unknown source type"),
    (["search", "kafka", "--since", "last tuesday"], "not an ISO date"),
    (["search", "kafka", "-k", "zero"], "-k must be a positive whole number"),
    (["search", "kafka", "-k", "0"], "-k must be a positive whole number"),
    (["search", "kafka", "--mode", "semantic"], "unknown search mode"),
    (["search", "kafka", "--all-tags"], "--all-tags needs at least one --tag"),
])
def test_bad_arguments_exit_with_a_usage_error(kb: KBPaths, capsys: pytest.CaptureFixture[str], argv: list[str],
                                               fragment: str):
    code, out, err = run(capsys, "-C", str(kb.root), *argv)
    assert code == EXIT_CONFIG
    assert out == ""
    assert err.startswith("pnk: error: ") and fragment in err
    assert "Traceback" not in err


def test_errors_are_json_under_json(kb: KBPaths, capsys: pytest.CaptureFixture[str]):
    code, out, _ = run(capsys, "-C", str(kb.root), "search", "kafka", "--type", "xlsx", "--json")
    payload = json.loads(out)
    assert code == EXIT_CONFIG
    assert payload["ok"] is False and payload["error"] == "UsageError"


def test_missing_index_exits_unavailable_naming_pnk_sync(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    paths = make_kb(tmp_path / "kb")
    code, _, err = run(capsys, "-C", str(paths.root), "search", "kafka")
    assert code == EXIT_UNAVAILABLE
    assert "no index yet" in err and "pnk sync" in err


def test_model_mismatch_exits_naming_the_rebuild(kb: KBPaths, capsys: pytest.CaptureFixture[str]):
    text = kb.manifest.read_text().replace('model = "test/hash-bow"', 'model = "test/other-model"')
    kb.manifest.write_text(text)
    code, _, err = run(capsys, "-C", str(kb.root), "search", "kafka", "--mode", "bm25")
    assert code == EXIT_DATA
    assert "pnk sync --rebuild" in err


def test_rerank_on_without_weights_exits_unavailable(kb: KBPaths, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch):
    text = kb.manifest.read_text().replace("rerank = false", "rerank = true")
    kb.manifest.write_text(text + '\n[rerank]\nprovider = "fastembed"\n')
    code, _, err = run(capsys, "-C", str(kb.root), "search", "kafka")
    assert code == EXIT_UNAVAILABLE
    assert "rerank = false" in err and "--no-rerank" in err
    code, out, _ = run(capsys, "-C", str(kb.root), "search", "kafka", "--no-rerank")
    assert code == 0 and "rerank off" in out


def test_outside_a_kb_is_a_config_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    empty = tmp_path / "nowhere"
    empty.mkdir()
    code, _, err = run(capsys, "-C", str(empty), "search", "kafka")
    assert code == EXIT_CONFIG and "pnk init" in err


def test_help_lists_the_flags(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit):
        main(["search", "--help"])
    out = capsys.readouterr().out
    for flag in ("-k", "--tag", "--all-tags", "--path", "--since", "--until", "--type", "--no-rerank",
                 "--mode", "--json", "-C"):
        assert flag in out


def test_cwd_inside_the_kb_is_found(kb: KBPaths, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    nested = kb.root / "docs" / "deep"
    nested.mkdir(parents=True)
    monkeypatch.chdir(nested)
    code, out, _ = run(capsys, "search", "tomatoes", "--json")
    assert code == 0 and json.loads(out)["passages"][0]["path"] == "notes/garden.txt"


def test_names_titles_and_text_from_the_kb_never_reach_the_terminal_raw(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch,
                                                                        capsys: pytest.CaptureFixture[str]):
    embedder = HashEmbedder()
    paths = KBPaths(tmp_path / "kb")
    evil = Doc("docs/evil\x1b[2J\nname.md", "zebra crossing \x1b[31mred\x1b[0m text about zebras\n",
               title="Title\x1b]0;pwned\x07", tags=("t\x1b[1m",))
    build_search_kb(paths.root, embedder, manifest=manifest(), docs=[evil])
    substitute_embedder(monkeypatch, lambda section, offline=None, threads=None: embedder)
    code, out, _ = run(capsys, "-C", str(paths.root), "search", "zebra")
    assert code == 0 and "zebra" in out
    assert "\x1b" not in out and "\x07" not in out
    assert "Title\\x1b]0;pwned\\x07" in out and "evil\\x1b[2J\\nname.md" in out
    code, out, _ = run(capsys, "-C", str(paths.root), "search", "zebra", "--json")
    assert json.loads(out)["passages"][0]["path"] == "docs/evil\x1b[2J\nname.md"  # JSON: as it is


def test_a_document_without_a_title_is_shown_by_its_file_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]):
    embedder = HashEmbedder()
    paths = KBPaths(tmp_path / "kb")
    build_search_kb(paths.root, embedder, manifest=manifest(), docs=[
        Doc("docs/notes/travel.md", "trains to the coast and ferries to the islands\n")])
    substitute_embedder(monkeypatch, lambda section, offline=None, threads=None: embedder)
    code, out, _ = run(capsys, "-C", str(paths.root), "search", "ferries", "--mode", "bm25")
    assert code == 0
    assert out.splitlines()[0] == "1. travel.md — docs/notes/travel.md:0-46 · characters 0-46"
    code, out, _ = run(capsys, "-C", str(paths.root), "search", "ferries", "--mode", "bm25", "--json")
    passage = json.loads(out)["passages"][0]
    assert (passage["title"], passage["citation"]) == ("travel.md", "docs/notes/travel.md:0-46")


def test_a_huge_heading_is_shown_bounded_on_the_terminal_and_in_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]):
    """Issue #40: a 100 kB heading line was printed whole in every hit's heading trail."""
    from pinakes.display import MAX_HEADING_CHARS

    embedder = HashEmbedder()
    paths = KBPaths(tmp_path / "kb")
    outer, inner = "Harbour " * 12_500, "pier " * 5_000  # 100 kB and 25 kB heading lines
    build_search_kb(paths.root, embedder, manifest=manifest(), docs=[
        Doc("docs/harbour.md", f"# {outer}\n\n## {inner}\n\nzebra crossings at the quay\n")])
    substitute_embedder(monkeypatch, lambda section, offline=None, threads=None: embedder)
    code, out, _ = run(capsys, "-C", str(paths.root), "search", "zebra", "crossings", "--mode", "bm25", "--json")
    assert code == 0
    passage = json.loads(out)["passages"][0]
    assert passage["heading_path"] == [outer.strip()[:MAX_HEADING_CHARS - 1] + "…",
                                       inner.strip()[:MAX_HEADING_CHARS - 1] + "…"]
    code, out, _ = run(capsys, "-C", str(paths.root), "search", "zebra", "crossings", "--mode", "bm25")
    assert code == 0 and "zebra crossings" in out
    assert max(len(line) for line in out.splitlines()) < 3 * MAX_HEADING_CHARS + 200
