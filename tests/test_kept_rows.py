"""An edited document keeps the rows of its unchanged chunks (pipeline/embed.py
`_keep_unchanged_rows`): the index it leaves is the one a fresh sync of the new text builds, row for
row (positions, FTS, term counts, vectors), whatever the edit moved, duplicated or removed."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, cast

import numpy as np

from pinakes.kb import KBPaths
from pinakes.pipeline.context import embedding_input
from tests.fakes import HashEmbedder
from tests.kb_helpers import Doc, build_kb, sync

PARAGRAPHS = 60


def paragraph(number: int) -> str:
    words = " ".join(f"w{number}x{k}" for k in range(20 + number % 5))
    return f"Paragraph {number} says: {words}."


def manual(numbers: list[int], heading_at: int = 30) -> str:
    parts = ["# Manual"]
    for position, number in enumerate(numbers):
        if position == heading_at:
            parts.append("## Second part")
        parts.append(paragraph(number))
    return "\n\n".join(parts) + "\n"


def index_rows(root: Path) -> dict[str, object]:
    conn = sqlite3.connect(KBPaths(root).index_db)
    try:
        conn.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('integrity-check')")  # raises if the FTS disagrees
        chunks = conn.execute(
            "SELECT c.ordinal, c.text, c.char_start, c.char_end, c.token_count, c.heading_path, c.page_start, "
            "c.page_end, c.fts_text, c.context, e.vector, e.text_key FROM chunks c JOIN documents d ON d.id = c.doc_id "
            "JOIN embeddings e ON e.chunk_id = c.id WHERE d.path = 'docs/manual.md' ORDER BY c.ordinal").fetchall()
        terms = conn.execute(
            "SELECT c.ordinal, t.term, t.frequency, t.context_frequency FROM chunk_terms t "
            "JOIN chunks c ON c.id = t.chunk_id JOIN documents d ON d.id = c.doc_id "
            "WHERE d.path = 'docs/manual.md' ORDER BY c.ordinal, t.term").fetchall()
        found = {term: conn.execute(
            "SELECT c.ordinal FROM chunks_fts f JOIN chunks c ON c.id = f.rowid JOIN documents d ON d.id = c.doc_id "
            "WHERE chunks_fts MATCH ? AND d.path = 'docs/manual.md' ORDER BY c.ordinal", (term,)).fetchall()
            for term in ("paragraph", "w7x3", "w45x1", "second", "manual")}
        return {"chunks": chunks, "terms": terms, "found": found}
    finally:
        conn.close()


def chunk_ids(root: Path) -> set[int]:
    conn = sqlite3.connect(KBPaths(root).index_db)
    try:
        return {row[0] for row in conn.execute("SELECT id FROM chunks")}
    finally:
        conn.close()


def test_an_edited_document_leaves_the_rows_a_fresh_sync_of_its_text_builds(tmp_path: Path) -> None:
    original = list(range(PARAGRAPHS))
    root = tmp_path / "edited"
    build_kb(root, [Doc("docs/manual.md", manual(original))], HashEmbedder(), max_tokens=60, overlap=6)
    before = chunk_ids(root)
    # A paragraph inserted near the start (every later chunk shifts), one removed, one moved to the
    # end, one duplicated (two new chunks may match one old row: only one keeps it), the second
    # heading moved (the heading paths of the chunks between change).
    edited = [*original[:5], 1000, *original[5:20], *original[21:40], 12, *original[40:], 33]
    edited.remove(33)
    edited.append(33)
    (root / "docs/manual.md").write_text(manual(edited, heading_at=25), encoding="utf-8")
    report = sync(root, HashEmbedder())
    assert report.changed == ["docs/manual.md"]
    fresh = tmp_path / "fresh"
    build_kb(fresh, [Doc("docs/manual.md", manual(edited, heading_at=25))], HashEmbedder(), max_tokens=60, overlap=6)
    assert index_rows(root) == index_rows(fresh)
    kept = before & chunk_ids(root)
    assert len(kept) >= len(cast(list[object], index_rows(root)["chunks"])) // 3


def test_without_reuse_every_vector_is_the_models_again(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    build_kb(root, [Doc("docs/manual.md", manual(list(range(PARAGRAPHS))))], HashEmbedder(), max_tokens=60,
             overlap=6)
    placeholder = np.zeros(HashEmbedder().identity.dim, dtype=np.float32)
    placeholder[0] = 1.0
    conn = sqlite3.connect(KBPaths(root).index_db)
    with conn:
        conn.execute("UPDATE embeddings SET vector = ?", (placeholder.tobytes(),))
    conn.close()
    (root / "docs/manual.md").write_text(manual([*range(PARAGRAPHS), 1000]), encoding="utf-8")
    sync(root, HashEmbedder(), no_reuse=True)
    chunks = cast("list[tuple[Any, ...]]", index_rows(root)["chunks"])
    assert chunks
    for row in chunks:
        text, context, vector = row[1], row[9], row[10]
        expected = HashEmbedder().embed_documents([embedding_input(context or "", text)])[0]
        assert vector == expected.tobytes()
