"""The index's chunk counts recorded by the sync (index/chunk_counts.py) equal the scan's answer in
every state the sync leaves: a first sync, an edit, a removal, a sync killed before it completed, an
index from before the record existed; and BM25F reads the record instead of scanning."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pinakes.index import chunk_counts
from pinakes.index.chunk_counts import SCANNED_SQL, ChunkCounts
from pinakes.search.bm25 import DocumentFrequencies, ensure_vocabulary
from tests.fakes import FakeEmbedder
from tests.kb_helpers import Doc, delete_documents, init_test_kb, sync, write_documents
from tests.test_sync_faults import run as run_killable


def _long(topic: str, sections: int) -> str:
    body = " ".join(f"{topic} sentence {n} about budgets, ledgers and quarterly filings." for n in range(60))
    return "\n\n".join(f"# {topic} part {n}\n\n{body}" for n in range(sections))


DOCS = [Doc("docs/alpha.md", _long("alpha", 3)), Doc("docs/beta.md", _long("beta", 1)),
        Doc("docs/gamma.md", _long("gamma", 2))]


def _index(kb: Path) -> sqlite3.Connection:
    return sqlite3.connect(kb / ".pinakes" / "index.db")


def _counts(kb: Path) -> tuple[ChunkCounts | None, ChunkCounts, ChunkCounts]:
    """(recorded, what a searcher reads, the scan)."""
    conn = _index(kb)
    try:
        return chunk_counts.recorded(conn), chunk_counts.of_index(conn), chunk_counts.scanned(conn)
    finally:
        conn.close()


def _assert_recorded_exactly(kb: Path) -> ChunkCounts:
    recorded, read, scan = _counts(kb)
    assert recorded == scan and read == scan
    return scan


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    root = init_test_kb(tmp_path / "kb", FakeEmbedder().identity, max_tokens=128, overlap=0)
    write_documents(root, DOCS)
    sync(root, FakeEmbedder())
    return root


def test_a_first_sync_records_the_scans_counts(kb: Path) -> None:
    counts = _assert_recorded_exactly(kb)
    assert counts.documents == 3 and counts.chunks > 3  # documents of several chunks: the two differ


def test_an_edit_and_a_removal_record_the_new_counts(kb: Path) -> None:
    before = _assert_recorded_exactly(kb)
    write_documents(kb, [Doc("docs/beta.md", _long("beta", 4))])
    sync(kb, FakeEmbedder())
    edited = _assert_recorded_exactly(kb)
    assert edited.chunks > before.chunks and edited.documents == 3
    delete_documents(kb, ["docs/alpha.md"], FakeEmbedder())
    removed = _assert_recorded_exactly(kb)
    assert removed.documents == 2 and removed.chunks < edited.chunks


def test_a_sync_that_changes_nothing_keeps_a_record_that_holds(kb: Path) -> None:
    sync(kb, FakeEmbedder())
    _assert_recorded_exactly(kb)


def test_an_index_from_before_the_record_is_scanned_and_recorded_at_its_next_change(kb: Path) -> None:
    with _index(kb) as conn:
        conn.execute("DELETE FROM meta WHERE key = ?", (chunk_counts.META_KEY,))
    recorded, read, scan = _counts(kb)
    assert recorded is None and read == scan
    write_documents(kb, [Doc("docs/delta.md", _long("delta", 2))])
    sync(kb, FakeEmbedder())
    assert _assert_recorded_exactly(kb).documents == 4


@pytest.mark.parametrize("value", ["", "12", "12 x", "-1 3", "1 2 3"])
def test_a_record_this_cannot_read_is_not_trusted(kb: Path, value: str) -> None:
    with _index(kb) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = ?", (value, chunk_counts.META_KEY))
    recorded, read, scan = _counts(kb)
    assert recorded is None and read == scan


@pytest.mark.heavy  # three synced subprocesses, one killed (~6 s)
@pytest.mark.parametrize("fault", ["sync.after-delete", "sync.after-document-write", "sync.before-graph"])
def test_a_sync_killed_before_it_completed_leaves_the_record_untrusted(tmp_path: Path, fault: str) -> None:
    root = init_test_kb(tmp_path / "kb", FakeEmbedder().identity, max_tokens=128, overlap=0)
    write_documents(root, DOCS)
    assert run_killable(root).returncode == 0
    before = _assert_recorded_exactly(root)
    (root / "docs/alpha.md").unlink()
    write_documents(root, [Doc("docs/beta.md", _long("beta", 4))])
    killed = run_killable(root, fault=fault)
    assert killed.returncode != 0
    recorded, read, scan = _counts(root)
    assert scan != before  # the killed sync changed chunks before it died: the old record is wrong now
    assert recorded is None and read == scan
    assert run_killable(root).returncode == 0
    after = _assert_recorded_exactly(root)
    assert after.documents == 2


def _in_fields(kb: Path, terms: list[str]) -> tuple[dict[str, int], list[str]]:
    """BM25F's document frequencies of `terms` on a fresh reader, and the SQL it ran."""
    conn = _index(kb)
    statements: list[str] = []
    try:
        ensure_vocabulary(conn)
        conn.set_trace_callback(statements.append)
        return DocumentFrequencies(conn).in_fields(terms), statements
    finally:
        conn.close()


def test_bm25f_reads_the_record_and_answers_as_the_scan_does(kb: Path) -> None:
    terms = ["alpha", "budget", "ledger", "part"]
    with_record, statements = _in_fields(kb, terms)
    assert SCANNED_SQL not in statements
    with _index(kb) as conn:
        conn.execute("DELETE FROM meta WHERE key = ?", (chunk_counts.META_KEY,))
    scanned, statements = _in_fields(kb, terms)
    assert SCANNED_SQL in statements
    assert with_record == scanned


def test_bm25f_scans_while_a_sync_is_unfinished(kb: Path) -> None:
    with _index(kb) as conn:
        conn.execute("INSERT INTO meta (key, value) VALUES ('sync_started_at', '2026-12-06T20:00:00Z')")
    _in_fields_answer, statements = _in_fields(kb, ["alpha"])
    assert SCANNED_SQL in statements
