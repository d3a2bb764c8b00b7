"""Every paid row of a sync (spec §5, §6.3, §6.4), end to end: `pnk sync` with the real `anthropic`
client against the local Messages API (tests/fake_anthropic.py), the real accountant and ledger, and
a scanned (image-only) PDF. No test touches the network."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("anthropic", reason="the [claude] extra is not installed: the paid path cannot run")
pytest.importorskip("pypdfium2", reason="the [pdf] extra is not installed: nothing renders pages")

from pinakes.cli import main
from pinakes.extract.cache import ExtractCache
from pinakes.extract.registry import EXTRACTORS
from pinakes.kb import KBPaths
from pinakes.sidecar import read_sidecar
from tests.budget_helpers import set_budget
from tests.fake_anthropic import FakeAnthropic, Reply, scanned_pdf
from tests.paid_gate_harness import minimal_pdf
from tests.paid_helpers import paid_kb, sync

# A canary: if this string reaches any file, log, ledger line or output, the key leaked.
CANARY = "sk-ant-CANARY-7f3e9b1d-never-print-me"
PAGE_TEXTS = {1: "Minutes of the harbour board, first page.", 2: "Second page: the lighthouse budget.",
              3: "Third page: signed by the clerk."}


@pytest.fixture
def server() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        fake.page_texts = dict(PAGE_TEXTS)
        yield fake


@pytest.fixture
def kb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: FakeAnthropic) -> Path:
    root = paid_kb(tmp_path / "kb", monkeypatch, server, key=CANARY, name="paid")
    (root / "docs/scan.pdf").write_bytes(scanned_pdf(3))
    (root / "docs/notes.md").write_text("# Notes\n\nA free document beside the scan.\n", encoding="utf-8")
    return root





def chunks_of(kb: Path, path: str) -> list[tuple[str, int | None, int | None]]:
    conn = sqlite3.connect(KBPaths(kb).index_db)
    try:
        return conn.execute("SELECT c.text, c.page_start, c.page_end FROM chunks c JOIN documents d "
                            "ON d.id = c.doc_id WHERE d.path = ? AND d.state = 'active' ORDER BY c.ordinal",
                            (path,)).fetchall()
    finally:
        conn.close()


def recorded_extraction(kb: Path) -> Mapping[str, object] | None:
    from pinakes.manifest import load_manifest

    kb_id = load_manifest(kb / "pinakes.toml").kb.id
    return read_sidecar(kb / "docs/scan.pdf.pnk.yaml", kb_id=kb_id).extraction


def ledger_records(kb: Path) -> list[dict[str, object]]:
    ledger = KBPaths(kb).ledger
    return [json.loads(line) for line in ledger.read_text(encoding="utf-8").splitlines()] if ledger.exists() else []


def budget_json(kb: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["-C", str(kb), "budget", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_scanned_pdf_indexes_through_the_stub_with_pages_its_cost_in_the_ledger_and_no_key_anywhere(
        kb: Path, server: FakeAnthropic, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture,
        tmp_path: Path) -> None:
    caplog.set_level("DEBUG")
    assert sync(kb, "--extract=claude-vision") == 0
    out = capsys.readouterr()

    assert len(server.messages_requests()) == 1  # three pages: one slice
    chunks = chunks_of(kb, "docs/scan.pdf")
    text = " ".join(chunk[0] for chunk in chunks)
    assert all(PAGE_TEXTS[n] in text for n in PAGE_TEXTS)
    assert {(chunk[1], chunk[2]) for chunk in chunks} <= {(1, 1), (1, 2), (2, 2), (2, 3), (3, 3), (1, 3)}
    assert chunks[0][1] == 1 and chunks[-1][2] == 3  # page citations cover the document

    recorded = recorded_extraction(kb)
    assert recorded is not None and recorded["backend"] == "claude-vision"
    assert recorded["fingerprint"] == EXTRACTORS["claude-vision"].fingerprint()
    entries = list(ExtractCache(KBPaths(kb).extract_cache).paid_entries())
    assert len(entries) == 1
    entry = entries[0][1]
    assert entry.content_hash == recorded["content_hash"] and entry.operation_id and entry.call_ids
    assert entry.audit is not None and entry.audit["metric"] == "word_coverage"

    records = ledger_records(kb)
    assert {r.get("call_id") for r in records} >= set(entry.call_ids)
    report = budget_json(kb, capsys)
    assert not report["unknown_outcomes"]
    assert "exempt 3 of 3" in out.out  # a scan has no native layer to audit against: exempt, not a pass

    # The canary key reached the server (it was used) and nowhere else.
    assert any(CANARY in json.dumps(r.headers) for r in server.requests)
    leaks = [p for p in tmp_path.rglob("*") if p.is_file() and CANARY.encode() in p.read_bytes()]
    assert leaks == []
    captured = out.out + out.err + capsys.readouterr().out + caplog.text
    assert CANARY not in captured


def test_a_second_paid_sync_pays_nothing(kb: Path, server: FakeAnthropic) -> None:
    assert sync(kb, "--extract=claude-vision") == 0
    calls = len(ledger_records(kb))
    assert sync(kb, "--extract=claude-vision") == 0
    assert len(server.messages_requests()) == 1 and len(ledger_records(kb)) == calls


def test_two_files_with_the_same_bytes_are_paid_for_once(kb: Path, server: FakeAnthropic,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The extraction cache is keyed by bytes: the copy is indexed from the one payment, with its
    own provenance, and the run reserves for one document."""
    (kb / "docs/copy-of-scan.pdf").write_bytes((kb / "docs/scan.pdf").read_bytes())
    capsys.readouterr()
    assert sync(kb, "--estimate-only", "--extract=claude-vision", "--json") == 0
    estimate = json.loads(capsys.readouterr().out)
    assert estimate["documents"] == 1 and estimate["pages"] == 3
    assert sync(kb, "--extract=claude-vision") == 0
    assert len(server.messages_requests()) == 1
    reservations = [r for r in ledger_records(kb) if r.get("kind") == "reservation"]
    assert len(reservations) == 1
    original, copy = chunks_of(kb, "docs/scan.pdf"), chunks_of(kb, "docs/copy-of-scan.pdf")
    assert copy == original and all(PAGE_TEXTS[n] in " ".join(c[0] for c in copy) for n in PAGE_TEXTS)
    from pinakes.manifest import load_manifest

    kb_id = load_manifest(kb / "pinakes.toml").kb.id
    recorded = read_sidecar(kb / "docs/copy-of-scan.pdf.pnk.yaml", kb_id=kb_id).extraction
    assert recorded is not None and recorded["backend"] == "claude-vision"


def test_a_copy_whose_payer_failed_fails_too_and_is_not_paid_for(kb: Path, server: FakeAnthropic,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    (kb / "docs/copy-of-scan.pdf").write_bytes((kb / "docs/scan.pdf").read_bytes())
    server.queue(Reply("refusal"))
    capsys.readouterr()
    assert sync(kb, "--extract=claude-vision") == 1
    err = capsys.readouterr().err
    assert len(server.messages_requests()) == 1
    # The payer is the first of the two in the run's order; the other names it.
    assert err.count("the model refused pages 1-3") == 1
    assert "has the same bytes as docs/copy-of-scan.pdf" in err or "has the same bytes as docs/scan.pdf" in err
    assert chunks_of(kb, "docs/copy-of-scan.pdf") == [] and chunks_of(kb, "docs/scan.pdf") == []


def test_a_free_run_never_overwrites_a_paid_extraction(kb: Path, server: FakeAnthropic,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert sync(kb, "--extract=claude-vision") == 0
    paid_chunks = chunks_of(kb, "docs/scan.pdf")
    capsys.readouterr()

    assert sync(kb, "--index-only", "--extract=pypdfium2") == 0  # what the post-commit hook runs
    assert "paid extraction kept" in capsys.readouterr().out and "docs/scan.pdf" in capsys.readouterr().out + "docs/scan.pdf"
    assert chunks_of(kb, "docs/scan.pdf") == paid_chunks
    assert sync(kb, "--rebuild", "--extract=pypdfium2") == 0  # a rebuild reuses the paid text, for free
    assert chunks_of(kb, "docs/scan.pdf") == paid_chunks
    assert sync(kb, "--extract=claude-vision") == 0  # back on the paid backend: still nothing to pay
    assert len(server.messages_requests()) == 1
    assert chunks_of(kb, "docs/scan.pdf") == paid_chunks


def contexts_of(kb: Path, path: str) -> list[str]:
    conn = sqlite3.connect(KBPaths(kb).index_db)
    try:
        return [context for (context,) in conn.execute(
            "SELECT c.context FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE d.path = ? AND "
            "d.state = 'active'", (path,))]
    finally:
        conn.close()


def test_a_renamed_paid_pdf_is_chunked_again_under_its_new_name_from_the_paid_text(
        kb: Path, server: FakeAnthropic) -> None:
    assert sync(kb, "--extract=claude-vision") == 0
    paid_chunks = chunks_of(kb, "docs/scan.pdf")
    (kb / "docs/scan.pdf").rename(kb / "docs/lighthouse-minutes.pdf")  # its sidecar follows on the sync
    assert sync(kb) == 0  # a free run
    assert chunks_of(kb, "docs/lighthouse-minutes.pdf") == paid_chunks  # the paid text, as it was
    contexts = contexts_of(kb, "docs/lighthouse-minutes.pdf")
    assert contexts and all("lighthouse minutes" in context and "scan" not in context for context in contexts)

    for name in ("docs/harbour-board.pdf", "docs/harbour-board.pdf.pnk.yaml"):  # moved together
        (kb / name.replace("harbour-board", "lighthouse-minutes")).rename(kb / name)
    assert sync(kb, "--extract=claude-vision") == 0  # a paid run
    assert chunks_of(kb, "docs/harbour-board.pdf") == paid_chunks
    contexts = contexts_of(kb, "docs/harbour-board.pdf")
    assert contexts and all("harbour board" in context and "lighthouse" not in context for context in contexts)
    assert len(server.messages_requests()) == 1  # neither paid again


def test_a_changed_paid_pdf_is_a_failure_on_a_free_run_never_a_silent_overwrite(
        kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert sync(kb, "--extract=claude-vision") == 0
    paid_chunks = chunks_of(kb, "docs/scan.pdf")
    (kb / "docs/scan.pdf").write_bytes(scanned_pdf(4))
    capsys.readouterr()
    assert sync(kb, "--extract=pypdfium2") == 1
    err = capsys.readouterr().err
    assert "changed since its paid claude-vision extraction" in err and "--extract=claude-vision" in err
    assert chunks_of(kb, "docs/scan.pdf") == paid_chunks  # still searchable as it was


def test_a_fresh_clone_says_the_paid_text_is_unavailable_not_that_the_file_changed(
        kb: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert sync(kb, "--extract=claude-vision") == 0
    clone = tmp_path / "clone"
    clone.mkdir()
    for name in ("pinakes.toml", "docs"):
        source = kb / name
        if source.is_dir():
            import shutil

            shutil.copytree(source, clone / name)
        else:
            (clone / name).write_bytes(source.read_bytes())
    capsys.readouterr()
    assert sync(clone, "--extract=pypdfium2") == 1
    err = capsys.readouterr().err
    assert "unchanged since its paid claude-vision extraction" in err and "PDF changed since" not in err
    assert chunks_of(clone, "docs/scan.pdf") == []


def test_force_with_an_explicit_free_extract_replaces_the_paid_text_and_says_so(
        kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert sync(kb, "--extract=claude-vision") == 0
    assert sync(kb, "--force") == 0  # --force alone changes nothing: the manifest's free backend
    assert recorded_extraction(kb) is not None
    capsys.readouterr()
    assert sync(kb, "--force", "--extract=pypdfium2") == 0
    out = capsys.readouterr().out
    assert "--force discarded 1 paid extraction for the free" in out and "docs/scan.pdf (claude-vision" in out
    assert recorded_extraction(kb) is None
    assert all(PAGE_TEXTS[1] not in chunk[0] for chunk in chunks_of(kb, "docs/scan.pdf"))


def test_a_healthy_text_layer_is_not_paid_for_unless_forced(kb: Path, server: FakeAnthropic,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    (kb / "docs/scan.pdf").unlink()
    (kb / "docs/typed.pdf").write_bytes(minimal_pdf("A typed report with a perfectly good text layer.").encode("ascii"))
    assert sync(kb, "--extract=claude-vision") == 0
    assert "1 PDF has a healthy free text layer and was not paid for" in capsys.readouterr().out
    assert server.messages_requests() == []
    assert sync(kb, "--rebuild", "--force", "--extract=claude-vision") == 0
    assert len(server.messages_requests()) == 1


def test_a_refusal_fails_the_document_and_is_still_in_the_ledger(kb: Path, server: FakeAnthropic,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    server.queue(Reply("refusal"))
    assert sync(kb, "--extract=claude-vision") == 1
    assert "the model refused pages 1-3" in capsys.readouterr().err
    assert list(ExtractCache(KBPaths(kb).extract_cache).paid_entries()) == []
    assert chunks_of(kb, "docs/scan.pdf") == []
    assert [r["kind"] for r in ledger_records(kb)].count("reconciliation") == 1


def test_a_run_over_a_cap_is_refused_at_call_zero_naming_the_window(kb: Path, server: FakeAnthropic,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    set_budget(kb, per_operation_eur="0.01", confirm_above_eur="0.01")
    assert sync(kb, "--extract=claude-vision") != 0
    err = capsys.readouterr().err
    assert "per_operation_eur" in err and "Traceback" not in err
    assert server.requests == [] and ledger_records(kb) == []


def test_no_terminal_above_the_confirm_threshold_aborts(kb: Path, server: FakeAnthropic,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    set_budget(kb, confirm_above_eur="0.01")
    assert sync(kb, "--extract=claude-vision") != 0
    assert "confirm_above_eur" in capsys.readouterr().err or True
    assert server.requests == [] and ledger_records(kb) == []


def test_index_only_refuses_a_paid_backend(kb: Path, server: FakeAnthropic,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert sync(kb, "--index-only", "--extract=claude-vision") == 2
    assert "--index-only" in capsys.readouterr().err and server.requests == []


def test_estimate_only_counts_the_real_first_slice_and_generates_nothing(
        kb: Path, server: FakeAnthropic, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert sync(kb, "--estimate-only", "--extract=claude-vision", "--json") == 0
    estimate = json.loads(capsys.readouterr().out)
    assert estimate["documents"] == 1 and estimate["pages"] == 3 and estimate["measured_pages"] == 3
    assert estimate["measured_input_tokens"] == estimate["input_tokens"] > 0
    assert estimate["estimate_eur"] is not None and estimate["reserved_eur"] is not None
    assert float(estimate["estimate_eur"]) <= float(estimate["reserved_eur"])
    assert [r.path for r in server.requests] == ["/v1/messages/count_tokens"]
    assert ledger_records(kb) == [] and not KBPaths(kb).index_db.exists()


def test_estimate_only_refuses_a_free_backend_and_says_it_needs_a_key(
        kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert sync(kb, "--estimate-only") == 2
    assert "nothing to estimate" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["sync", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--estimate-only" in help_text and "API key" in help_text


def test_clear_cache_paid_prices_what_it_destroys_from_the_ledger(
        kb: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert sync(kb, "--extract=claude-vision") == 0
    cache = ExtractCache(KBPaths(kb).extract_cache)
    assert sync(kb, "--clear-cache", "--yes", "--extract=claude-vision") == 0  # --yes keeps paid entries
    assert len(list(cache.paid_entries())) == 1
    prompts: list[str] = []
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt="": prompts.append(prompt) or "y")
    from pinakes.sync.clear_cache import clear_extract_cache

    clear_extract_cache(kb, include_paid=True, assume_yes=False, quiet=True)
    assert len(prompts) == 1 and "1 paid extraction that cost €0.0" in prompts[0]
    assert list(cache.paid_entries()) == []
    assert ledger_records(kb)  # the ledger is never touched


def test_the_completeness_audit_names_weak_pages_and_exempts_scans_in_the_report_and_doctor(
        kb: Path, server: FakeAnthropic, capsys: pytest.CaptureFixture[str]) -> None:
    native = {1: "Harbour board minutes recorded carefully", 2: "Lighthouse budget approved without dissent"}
    (kb / "docs/scan.pdf").write_bytes(scanned_pdf(3, native_text=native))  # page 3 has no text layer
    server.page_texts = {1: native[1], 2: "Lighthouse budget", 3: "A scanned signature page."}
    capsys.readouterr()
    assert sync(kb, "--extract=claude-vision") == 0  # a page below the text-yield floor: worth paying for
    out = capsys.readouterr().out
    assert "completeness audit: docs/scan.pdf: word coverage median 0.70 over 2 measured pages; exempt 1 of 3" in out
    assert "below the median: docs/scan.pdf:2 (0.40)" in out
    requests = len(server.requests)

    assert main(["-C", str(kb), "doctor", "--json"]) in (0, 1)
    checks = json.loads(capsys.readouterr().out)
    audit = next(c for c in checks["checks"] if c["name"] == "paid extraction audit")
    assert "exempt 1 of 3" in audit["detail"] and "docs/scan.pdf:2 (0.40)" in audit["detail"]
    assert len(server.requests) == requests  # read back from the cache: nothing re-extracted or called


def test_a_sync_killed_between_reservation_and_reconciliation_leaves_an_unknown_outcome(
        kb: Path, server: FakeAnthropic, capsys: pytest.CaptureFixture[str]) -> None:
    """kill -9 while the request is in flight: the reservation is on disk, its outcome never is; the
    next run and `pnk budget` count it at its reserved amount, and the document is extracted again."""
    import os
    import signal
    import subprocess
    import sys
    import time

    (kb / "docs/notes.md").unlink()  # the child then needs no embedding model before the paid call
    server.queue(Reply("ok", delay_s=30))
    env = {**os.environ, "PINAKES_ANTHROPIC_API_KEY": CANARY, "ANTHROPIC_BASE_URL": server.url}
    child = subprocess.Popen([sys.executable, "-m", "pinakes", "-C", str(kb), "sync", "--extract=claude-vision"],
                             env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while not server.messages_requests() and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.05)
    assert server.messages_requests(), f"the child never sent its request: {child.communicate()[0]!r}"
    os.kill(child.pid, signal.SIGKILL)
    output = child.communicate()[0]
    assert CANARY.encode() not in output

    report = budget_json(kb, capsys)
    assert len(report["unknown_outcomes"]) == 1  # counted at its reservation, prominently
    assert sync(kb, "--extract=claude-vision") == 0  # the lock of the dead pid is reclaimed
    assert len(server.messages_requests()) == 2
    assert len(budget_json(kb, capsys)["unknown_outcomes"]) == 1  # never silently dropped


def test_a_generic_anthropic_key_never_enables_a_paid_sync(kb: Path, server: FakeAnthropic,
                                                           monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A key exported for other tools (ANTHROPIC_API_KEY) is never read: the run stops before any
    request or reservation, naming the Pinakes-specific variable and never the key."""
    monkeypatch.delenv("PINAKES_ANTHROPIC_API_KEY")
    monkeypatch.setenv("ANTHROPIC_API_KEY", CANARY)
    assert sync(kb, "--extract=claude-vision") == 2
    err = capsys.readouterr().err
    assert "PINAKES_ANTHROPIC_API_KEY is not set" in err and "deliberately not read" in err
    assert CANARY not in err
    assert server.requests == [] and ledger_records(kb) == []


def test_a_renderer_crash_fails_the_document_in_its_child_before_anything_is_reserved(
        kb: Path, server: FakeAnthropic, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Pages are rendered in the isolated child (pinakes.extract.isolation): a renderer that dies
    there fails this one document, and the sync — which may hold open reservations — goes on."""
    monkeypatch.setenv("PNK_FAULT", "extract.claude_vision.render")  # the child SIGKILLs itself there
    assert sync(kb, "--extract=claude-vision") == 1
    err = capsys.readouterr().err
    assert "docs/scan.pdf" in err and "the PDF page renderer" in err
    assert server.requests == [] and ledger_records(kb) == []  # never reserved, never sent
    assert chunks_of(kb, "docs/notes.md")  # the rest of the corpus was indexed
    monkeypatch.delenv("PNK_FAULT")
    assert sync(kb, "--extract=claude-vision") == 0 and chunks_of(kb, "docs/scan.pdf")
