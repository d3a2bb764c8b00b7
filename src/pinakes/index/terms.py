"""Each chunk's term frequencies (table `chunk_terms`), counted by the index's own FTS5 tokenizer.

FTS5's bm25() fixes k1 at 1.2 and b at 0.75, and the keyword side ranks better with its own
(search/bm25.py, docs/QUALITY.md). FTS5 holds every term's count inside its doclists, but hands it
to Python only by walking every posting of the term (fts5vocab 'instance'): 14 ms a query at 100k
chunks. Written beside each chunk, in the transaction that writes it, the counts cost the keyword
side ~2 ms a query instead (docs/perf/search.md).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence

from pinakes.index.schema import FTS_TOKENIZE
from pinakes.lexical.tokenizer import Tokenizer

_local = threading.local()


def record_term_frequencies(conn: sqlite3.Connection, chunks: Sequence[tuple[int, str, str]]) -> None:
    """Write the term counts of these (chunk id, text, context) triples: `frequency` in the text,
    `context_frequency` in the context (pipeline/context.py), which the keyword side weighs apart
    (search/bm25.py). The tokenizer shadows each exactly as the chunks_fts triggers do
    (lexical/scripts.py): one pass of the tokenizer over both fields, counted by SQLite, and the
    rows (in the table's key order) written by one statement."""
    if not chunks:
        return
    tokenizer: Tokenizer | None = getattr(_local, "tokenizer", None)
    if tokenizer is None:
        tokenizer = _local.tokenizer = Tokenizer(FTS_TOKENIZE)
    conn.executemany("INSERT INTO chunk_terms (chunk_id, term, frequency, context_frequency) VALUES (?, ?, ?, ?)",
                     tokenizer.paired_counts(chunks))
