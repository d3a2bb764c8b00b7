"""Writing a document's new chunks: their rows, FTS entries, vectors and term counts, a table at a time.

The embed stage writes a document inside its own transaction (pipeline/embed.py); this module is the
part of that transaction that grows with the number of chunks. It was one INSERT per chunk and per
vector, each a round trip through the sqlite3 module, plus two passes of the FTS5 tokenizer for the
term counts. Here each table gets one statement for the whole slice (`executemany`): the chunk ids
are assigned up front as SQLite would assign them (one more than the largest, `max(id) + 1`, the
rowid rule for a table without AUTOINCREMENT; the writer holds the write lock, so nothing else can
take one), which lets the vectors and term counts go in by id without a statement per row. The
FTS5 rows still come from the `chunks_fts_insert` trigger, row by row inside SQLite: the schema
and what FTS5 holds are unchanged. The index written is the one the row-at-a-time writer wrote,
ids included (docs/perf/writer.md).
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from pinakes.index.terms import record_term_frequencies
from pinakes.index.vector_rows import row_checksum
from pinakes.lexical.scripts import shadow


class ChunkRow(NamedTuple):
    """What the `chunks` table stores for one new chunk (its id aside)."""

    ordinal: int
    text: str
    char_start: int
    char_end: int
    token_count: int
    heading_path: tuple[str, ...] | None  # outermost heading first; None outside any heading
    page_start: int | None
    page_end: int | None
    context: str  # the document context (pipeline/context.py); "" when it has none


class Counted(NamedTuple):
    """What a chunk's write derives from its text and context, made elsewhere (the chunk-ahead
    worker, pipeline/chunk_ahead.py): its term counts as `record_term_frequencies` counts them, a
    JSON array of [term, in the text, in the context] arrays that SQLite reads itself
    (`json_each`), and the FTS5 shadows of its text and context (`lexical.scripts.shadow`)."""

    terms: str
    fts_text: str | None
    fts_context: str | None


def heading_json(heading_path: Sequence[str] | None) -> str | None:
    """How `chunks.heading_path` stores a heading trail (None: no heading)."""
    return _heading_json(tuple(heading_path)) if heading_path else None


@functools.lru_cache(maxsize=4096)
def _heading_json(heading_path: tuple[str, ...]) -> str:
    # A document's chunks share a few trails: each is encoded once, not once a chunk.
    return json.dumps(list(heading_path), ensure_ascii=False)


def insert_chunks(conn: sqlite3.Connection, doc_id: str, rows: Sequence[ChunkRow], vectors: np.ndarray,
                  keys: Sequence[bytes | None], counted: Sequence[Counted] | None = None) -> list[int]:
    """Insert `rows` (their FTS entries by the trigger), their vectors (row i of `vectors`, under
    content key `keys[i]`, with its checksum) and their term counts; call inside the document's
    transaction. `counted[i]`, when given, is row i's `Counted`, made elsewhere. Returns the new
    chunks' ids, in order."""
    if not rows:
        return []
    first = int(conn.execute("SELECT coalesce(max(id), 0) FROM chunks").fetchone()[0]) + 1
    ids = list(range(first, first + len(rows)))
    shadows = ([(made.fts_text, made.fts_context) for made in counted] if counted is not None
               else [(shadow(row.text), shadow(row.context)) for row in rows])
    conn.executemany(
        "INSERT INTO chunks (id, doc_id, ordinal, text, char_start, char_end, token_count, heading_path, "
        "page_start, page_end, fts_text, context, fts_context) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(chunk_id, doc_id, row.ordinal, row.text, row.char_start, row.char_end, row.token_count,
          heading_json(row.heading_path), row.page_start, row.page_end, fts_text, row.context or None, fts_context)
         for chunk_id, row, (fts_text, fts_context) in zip(ids, rows, shadows, strict=True)])
    matrix = np.ascontiguousarray(vectors, dtype=np.float32)
    blobs = [matrix[position].tobytes() for position in range(len(rows))]
    conn.executemany("INSERT INTO embeddings (chunk_id, vector, text_key, checksum) VALUES (?, ?, ?, ?)",
                     [(chunk_id, blob, key, row_checksum(blob, key))
                      for chunk_id, blob, key in zip(ids, blobs, keys, strict=True)])
    if counted is None:
        record_term_frequencies(conn, [(chunk_id, row.text, row.context) for chunk_id, row in zip(ids, rows, strict=True)])
    else:
        # json_extract, not `->>`: the operator needs SQLite 3.38, the spec's floor is 3.35 (doctor)
        conn.executemany("INSERT INTO chunk_terms (chunk_id, term, frequency, context_frequency) "
                         "SELECT ?, json_extract(value, '$[0]'), json_extract(value, '$[1]'), "
                         "json_extract(value, '$[2]') FROM json_each(?)",
                         [(chunk_id, made.terms) for chunk_id, made in zip(ids, counted, strict=True)])
    return ids

