"""One generation of the index file, as a `Searcher` holds it between queries (search/core.py).

`schema.index_signature` names a generation. A writer's commit or an installed rebuild makes a new
one, which is opened afresh: the reader connection, its meta and tokenizer, and what is derived from
them once per generation (the float32 matrix or the approximate vector file, search/vector_tier.py;
the graph view, the coherence answers).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes.index import schema
from pinakes.lexical.tokenizer import Tokenizer
from pinakes.search import bm25
from pinakes.search.query import tokenizer_of

if TYPE_CHECKING:
    from pinakes.search.graph import GraphView
    from pinakes.search.vectors import VectorMatrix
    from pinakes.vectors import OpenVectorFile

Signature = tuple[tuple[int, int, int], ...]  # schema.index_signature


@dataclass
class Generation:
    """Everything derived from one generation of the index file."""

    signature: Signature
    conn: sqlite3.Connection
    meta: dict[str, str]
    tokenizer: Tokenizer
    chunk_count: int
    has_inactive_chunks: bool
    matrix: VectorMatrix | None = None
    # The vector tier, decided on the first vector search of the generation (search/vector_tier.py):
    # the vector file when it answers for this generation, else the matrix (and, when a file should
    # have answered, why it did not: a note every vector search of the generation carries).
    tier_decided: bool = False
    vector_file: OpenVectorFile | None = None
    vector_note: str | None = None
    graph_view: GraphView | None = None  # built on the first expanding search of this generation
    manifest_checked: bool = False
    # Fingerprints are code constants and the documents table is fixed within a generation, so
    # one extraction check per generation is the same answer as one per query.
    stale_paid: dict[str, str] | None = None
    model_checked_for: object = None  # the embedder identity this generation was checked against
    document_frequencies: bm25.DocumentFrequencies = field(init=False)

    def __post_init__(self) -> None:
        self.document_frequencies = bm25.DocumentFrequencies(self.conn)

    def close(self) -> None:
        if self.vector_file is not None:
            self.vector_file.close()
            self.vector_file = None
        self.tokenizer.close()
        self.conn.close()


def open_generation(index_path: Path, signature: Signature) -> Generation:
    """A reader on the index file and what every query of this generation reads from it."""
    conn = schema.open_reader(index_path)
    try:
        bm25.ensure_vocabulary(conn)
        meta = schema.read_meta(conn)
        chunk_count = count_chunks(conn)
        inactive = conn.execute(INACTIVE_CHUNKS_SQL).fetchone()[0]
        tokenizer = Tokenizer(tokenizer_of(conn))
    except BaseException:
        conn.close()
        raise
    return Generation(signature, conn, meta, tokenizer, chunk_count, bool(inactive))


# Whether any chunk belongs to a document that is not active, through the (small) state index and
# one chunk lookup per such document: never a scan of every chunk. Scanning chunks against documents
# read ~10 s of index pages scattered over a 4.9 GB index at 1.1M chunks when they were not cached
# (docs/perf/search.md, "cold `pnk search`"). `state` is 'active' or 'deleted' (a CHECK in the schema).
INACTIVE_CHUNKS_SQL = ("SELECT EXISTS (SELECT 1 FROM documents d WHERE d.state = 'deleted' "
                       "AND EXISTS (SELECT 1 FROM chunks c WHERE c.doc_id = d.id))")
# FTS5's averages record (rowid 1 of its data table) starts with the number of rows it indexes; the
# triggers give chunks_fts one row per chunk, in the transaction that writes the chunk, so it is
# count(*) of chunks in one page read instead of a scan of a ~50 MB index (0.9 s cold at 1.1M).
_FTS_AVERAGES_SQL = "SELECT block FROM chunks_fts_data WHERE id = 1"


def count_chunks(conn: sqlite3.Connection) -> int:
    """The number of chunks the index holds (every document's, active or not)."""
    try:
        row = conn.execute(_FTS_AVERAGES_SQL).fetchone()
    except sqlite3.OperationalError:
        row = None
    rows = fts5_varint(row[0]) if row is not None and isinstance(row[0], bytes) else None
    if rows is None:  # an index without the record (no row ever indexed), or one this cannot read
        return int(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
    return rows


def fts5_varint(data: bytes) -> int | None:
    """The SQLite varint at the start of `data` (big-endian, 7 bits a byte, the ninth byte whole);
    None when `data` ends inside it."""
    value = 0
    for position, byte in enumerate(data[:9]):
        if position == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value
    return None
