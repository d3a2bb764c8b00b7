"""How many chunks the index holds and how many documents they belong to, known without a scan.

BM25F's document frequency (search/bm25.py, `DocumentFrequencies.in_fields`) needs the index's
documents per chunk. Counting them (`SCANNED_SQL`) walks the chunks' doc_id index: 1.5-1.7 s at
1.1M chunks when its pages are not cached, most of a truly cold `pnk search` (docs/perf/search.md),
and the vector side's reads queue behind it on the same connection. So the sync's vectors step,
the last of its stages that changes chunks or documents' states (pipeline/vector_file.py), records
both counts in the index's meta (`META_KEY`) in the transaction that records the vector file's key,
and a searching process reads one meta row instead.

The recorded counts are trusted under the rule the vector file's key follows (vectors/freshness.py):
only while no sync has started since without completing. Every sync writes `RUNNING_MARK` before
its first change and removes it only when it completes, after the vectors step; so when the mark is
absent nothing has changed since some sync recorded the counts, and when it is present (a sync
running, killed or stopped before its end) the counts are scanned, as they are for an index a
version without this record wrote (no row) or a row this cannot read.
"""

from __future__ import annotations

import sqlite3
from typing import NamedTuple

META_KEY = "chunk_counts"  # "<chunks> <documents holding a chunk>", written by `record`
RUNNING_MARK = "sync_started_at"  # sync/engine.py: present from a pipeline's start to its completion
SCANNED_SQL = "SELECT count(*), count(DISTINCT doc_id) FROM chunks"


class ChunkCounts(NamedTuple):
    chunks: int  # every chunk of the index, whatever its document's state
    documents: int  # the documents holding at least one of them


def recorded_since_completed_sync(conn: sqlite3.Connection, *keys: str) -> dict[str, str] | None:
    """The meta values at `keys` when they may be trusted (no sync has started since without
    completing); None when a sync's start mark is present."""
    marks = (*keys, RUNNING_MARK)
    meta = dict(conn.execute(f"SELECT key, value FROM meta WHERE key IN ({', '.join('?' * len(marks))})", marks))
    if meta.get(RUNNING_MARK):
        return None
    return {key: value for key, value in meta.items() if key != RUNNING_MARK}


def scanned(conn: sqlite3.Connection) -> ChunkCounts:
    chunks, documents = conn.execute(SCANNED_SQL).fetchone()
    return ChunkCounts(int(chunks), int(documents))


def recorded(conn: sqlite3.Connection) -> ChunkCounts | None:
    """The counts the last vectors step recorded, when they hold for the index now; else None."""
    meta = recorded_since_completed_sync(conn, META_KEY)
    parts = (meta or {}).get(META_KEY, "").split()
    if len(parts) != 2 or not all(part.isdigit() for part in parts):
        return None
    return ChunkCounts(int(parts[0]), int(parts[1]))


def of_index(conn: sqlite3.Connection) -> ChunkCounts:
    """The counts, from the record when it holds (see the module), else from a scan. Read inside the
    transaction the answer is used in, so both are of the same snapshot."""
    return recorded(conn) or scanned(conn)


def as_meta(counts: ChunkCounts) -> dict[str, str]:
    """The meta row `recorded` reads, for the writer to put in its transaction."""
    return {META_KEY: f"{counts.chunks} {counts.documents}"}
