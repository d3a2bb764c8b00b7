"""`pnk sync --rebuild` carries paid extractions across from the index it replaces (spec §6.4, "--rebuild's
empty before cannot see a recorded backend"): keyed on doc_id, copied with ATTACH DATABASE, never
re-extracted, independent of the extraction cache — so `--clear-cache` and `--rebuild` compose in
either order. Through `pnk sync` with the real `anthropic` client against the local Messages API."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("anthropic", reason="the [claude] extra is not installed: the paid path cannot run")
pytest.importorskip("pypdfium2", reason="the [pdf] extra is not installed: nothing renders pages")

from pinakes.extract.cache import ExtractCache
from pinakes.kb import KBPaths
from pinakes.manifest import Manifest
from pinakes.sync.clear_cache import clear_extract_cache
from tests.fake_anthropic import FakeAnthropic, scanned_pdf
from tests.paid_helpers import paid_kb, sync

KEY = "sk-ant-rebuild-test-key"
PAGE_TEXTS = {1: "The harbour ledger of 1888, first page.", 2: "Second page: tonnage landed at the quay."}


@pytest.fixture
def server() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        fake.page_texts = dict(PAGE_TEXTS)
        yield fake


@pytest.fixture
def kb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: FakeAnthropic) -> Path:
    """A KB with one scanned PDF extracted by the paid backend, and its paid cache entry removed."""
    root = paid_kb(tmp_path / "kb", monkeypatch, server, key=KEY, name="rebuild")
    (root / "docs/scan.pdf").write_bytes(scanned_pdf(2))
    (root / "docs/notes.md").write_text("# Notes\n\nA free document beside the scan.\n", encoding="utf-8")
    assert sync(root, "--extract=claude-vision") == 0
    assert len(server.messages_requests()) == 1
    return root



def clear_paid_cache(kb: Path) -> None:
    clear_extract_cache(kb, include_paid=True, assume_yes=True, quiet=True)
    assert list(ExtractCache(KBPaths(kb).extract_cache).paid_entries()) == []


def indexed(kb: Path, path: str) -> tuple[str | None, list[tuple[str, int | None, int | None]], int]:
    """(extraction backend, chunks with pages, vectors) of the active document at `path`."""
    conn = sqlite3.connect(KBPaths(kb).index_db)
    try:
        row = conn.execute("SELECT id, extraction_backend FROM documents WHERE path = ? AND state = 'active'",
                           (path,)).fetchone()
        if row is None:
            return None, [], 0
        chunks = conn.execute("SELECT text, page_start, page_end FROM chunks WHERE doc_id = ? ORDER BY ordinal",
                              (row[0],)).fetchall()
        vectors = conn.execute("SELECT count(*) FROM embeddings e JOIN chunks c ON c.id = e.chunk_id "
                               "WHERE c.doc_id = ?", (row[0],)).fetchone()[0]
        fts = conn.execute("SELECT count(*) FROM chunks_fts f JOIN chunks c ON c.id = f.rowid "
                           "WHERE chunks_fts MATCH 'tonnage' AND c.doc_id = ?", (row[0],)).fetchone()[0]
        assert fts == sum("tonnage" in text for text, _a, _b in chunks)  # full-text search follows the copy
        return row[1], chunks, vectors
    finally:
        conn.close()


def failures(kb: Path) -> list[tuple[str, str]]:
    conn = sqlite3.connect(KBPaths(kb).index_db)
    try:
        return conn.execute("SELECT path, error FROM failures").fetchall()
    finally:
        conn.close()


@pytest.mark.parametrize("order", ["clear-then-rebuild", "rebuild-then-clear"])
def test_clear_cache_and_rebuild_keep_a_paid_extraction_in_either_order(
        kb: Path, server: FakeAnthropic, capsys: pytest.CaptureFixture[str], order: str) -> None:
    before = indexed(kb, "docs/scan.pdf")
    assert before[0] == "claude-vision" and before[2] == len(before[1]) > 0
    capsys.readouterr()

    if order == "clear-then-rebuild":
        assert sync(kb, "--clear-cache=paid", "--yes", "--rebuild", "--extract=pypdfium2") == 0
    else:
        assert sync(kb, "--rebuild", "--extract=pypdfium2") == 0
        clear_paid_cache(kb)
        assert sync(kb, "--rebuild", "--extract=pypdfium2") == 0
    out = capsys.readouterr().out

    assert indexed(kb, "docs/scan.pdf") == before  # row, chunks and vectors, never re-extracted
    assert "carried 1 paid extraction across the rebuild" in out
    assert failures(kb) == []
    assert len(server.messages_requests()) == 1  # nothing paid again
    assert indexed(kb, "docs/notes.md")[2] > 0  # the free document was rebuilt as usual
    assert sync(kb, "--extract=pypdfium2") == 0 and indexed(kb, "docs/scan.pdf") == before  # and it stays


def test_a_pdf_changed_since_its_paid_extraction_is_carried_at_the_old_text_and_fails(
        kb: Path, server: FakeAnthropic, capsys: pytest.CaptureFixture[str]) -> None:
    before = indexed(kb, "docs/scan.pdf")
    (kb / "docs/scan.pdf").write_bytes(scanned_pdf(3))
    clear_paid_cache(kb)
    capsys.readouterr()

    assert sync(kb, "--rebuild", "--extract=pypdfium2") == 1

    err = capsys.readouterr().err
    assert "changed since its paid claude-vision extraction" in err and "--extract=claude-vision" in err
    assert indexed(kb, "docs/scan.pdf") == before  # the old text stays searchable rather than vanishing
    assert [path for path, _error in failures(kb)] == ["docs/scan.pdf"]
    assert len(server.messages_requests()) == 1


def test_a_paid_extraction_renamed_before_the_rebuild_is_carried_by_its_doc_id(
        kb: Path, server: FakeAnthropic) -> None:
    before = indexed(kb, "docs/scan.pdf")
    (kb / "docs/scan.pdf").rename(kb / "docs/harbour.pdf")
    (kb / "docs/scan.pdf.pnk.yaml").rename(kb / "docs/harbour.pdf.pnk.yaml")
    clear_paid_cache(kb)

    assert sync(kb, "--rebuild", "--extract=pypdfium2") == 0

    assert indexed(kb, "docs/harbour.pdf") == before
    assert indexed(kb, "docs/scan.pdf") == (None, [], 0)
    assert len(server.messages_requests()) == 1


def test_a_paid_rebuild_without_the_cache_never_pays_again_for_an_unchanged_pdf(
        kb: Path, server: FakeAnthropic) -> None:
    before = indexed(kb, "docs/scan.pdf")
    clear_paid_cache(kb)
    ledger = KBPaths(kb).ledger.read_bytes()

    assert sync(kb, "--rebuild", "--extract=claude-vision") == 0

    assert indexed(kb, "docs/scan.pdf") == before
    assert len(server.messages_requests()) == 1 and KBPaths(kb).ledger.read_bytes() == ledger


def test_without_the_carry_a_cleared_cache_would_have_lost_the_document(
        kb: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The control: with the carry disabled, the same rebuild fails the document as unavailable, so
    the tests above are measuring the carry and not the cache."""
    from pinakes.pipeline import paid_carry as paid

    def nothing_to_carry(previous: sqlite3.Connection | None, manifest: Manifest) -> paid.CarryPlan:
        return paid.CarryPlan()

    monkeypatch.setattr(paid, "paid_rows_to_carry", nothing_to_carry)
    clear_paid_cache(kb)
    capsys.readouterr()
    assert sync(kb, "--rebuild", "--extract=pypdfium2") != 0
    assert "text is on no store on this machine" in capsys.readouterr().err
    assert indexed(kb, "docs/scan.pdf") == (None, [], 0)


def test_after_an_embedding_model_change_nothing_is_carried_and_the_rebuild_says_why(kb: Path) -> None:
    """Vectors from two models cannot be mixed: the carry plan is empty and names the reason (the
    documents then come back from the extraction cache, as before the carry existed)."""
    from dataclasses import replace

    from pinakes.manifest import load_manifest
    from pinakes.pipeline.paid_carry import paid_rows_to_carry

    manifest = load_manifest(kb / "pinakes.toml")
    previous = sqlite3.connect(f"{KBPaths(kb).index_db.resolve().as_uri()}?mode=ro", uri=True)
    try:
        same = paid_rows_to_carry(previous, manifest)
        other = replace(manifest, embedding=replace(manifest.embedding, model="another/model"))
        changed = paid_rows_to_carry(previous, other)
    finally:
        previous.close()
    assert len(same.doc_ids) == 1 and same.skipped is None
    assert changed.doc_ids == () and changed.skipped is not None and "embedding model changed" in changed.skipped


def test_a_renamed_paid_extraction_is_kept_by_a_plain_free_sync_without_the_cache(
        kb: Path, server: FakeAnthropic) -> None:
    """The same rule without a rebuild: a rename reaches pairing's Rename row, and this connection's
    own row for the doc_id answers before the (cleared) cache is ever asked."""
    before = indexed(kb, "docs/scan.pdf")
    (kb / "docs/scan.pdf").rename(kb / "docs/harbour.pdf")
    (kb / "docs/scan.pdf.pnk.yaml").rename(kb / "docs/harbour.pdf.pnk.yaml")
    clear_paid_cache(kb)

    assert sync(kb, "--extract=pypdfium2") == 0

    assert indexed(kb, "docs/harbour.pdf") == before
    assert len(server.messages_requests()) == 1
