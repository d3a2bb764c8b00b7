"""A reader querying in a loop while syncs and a rebuild run: it never errors and never sees a
half-described document (chunks without vectors, an active document without chunks)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from pinakes.index import schema
from pinakes.init import init_kb
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.fakes import FakeEmbedder


def snapshot_problems(conn: sqlite3.Connection) -> list[str]:
    problems: list[str] = []
    conn.execute("BEGIN")
    try:
        rows = conn.execute(
            "SELECT d.path, COUNT(c.id), COUNT(e.chunk_id) FROM documents d "
            "LEFT JOIN chunks c ON c.doc_id = d.id LEFT JOIN embeddings e ON e.chunk_id = c.id "
            "WHERE d.state = 'active' GROUP BY d.id").fetchall()
    finally:
        conn.execute("COMMIT")
    for path, chunks, vectors in rows:
        if chunks == 0 or chunks != vectors:
            problems.append(f"{path}: {chunks} chunks, {vectors} vectors")
    return problems


def test_reader_never_errors_or_sees_half_a_document(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    init_kb(kb, name="concurrency")
    for n in range(40):
        (kb / "docs" / f"d{n}.md").write_text(f"# Doc {n}\n\n" + f"Paragraph {n}. " * 50, encoding="utf-8")
    embedder = FakeEmbedder()
    assert run_sync(kb, SyncOptions(), embedder=embedder).ok
    index = kb / ".pinakes" / "index.db"
    stop = threading.Event()
    errors: list[str] = []
    reads = [0]

    def reader() -> None:
        conn = schema.open_reader(index)
        signature = schema.index_signature(index)
        try:
            while not stop.is_set():
                current = schema.index_signature(index)
                if current != signature:  # what a server does per request
                    conn.close()
                    conn = schema.open_reader(index)
                    signature = current
                errors.extend(snapshot_problems(conn))
                reads[0] += 1
        except Exception as exc:  # any error at all fails the test
            errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            conn.close()

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for round_ in range(3):
            for n in range(0, 40, 3):
                (kb / "docs" / f"d{n}.md").write_text(f"# Doc {n}\n\nround {round_} " * 40, encoding="utf-8")
            assert run_sync(kb, SyncOptions(), embedder=embedder).ok
        assert run_sync(kb, SyncOptions(rebuild=True), embedder=embedder).ok
    finally:
        stop.set()
        thread.join(timeout=30)
    assert errors == []
    assert reads[0] > 10
