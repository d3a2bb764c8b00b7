"""Which vector file answers for an index now, known without reading every row.

The content key (source.content_key) is the proof that a file answers for the index's rows, but
computing it reads every active row's id and checksum: 1.7 to 3.3 s at 1M rows on the development
machine (docs/perf/vector-tiers.md), paid by every cold `pnk search`. So the step that writes the
file also records, in the index's meta, the key it wrote it for (`META_KEY`), in a transaction after
the file is in place, and a searching process compares that with the file's footer instead.

Why the recorded key can be trusted: it is written by the sync's `vectors` step, which runs after
every stage that writes vectors or changes a document's state, and only while the sync's
`sync_started_at` mark is present. Every sync writes that mark before its first change and removes
it only when it completes (sync/engine.py), after this step. So when the mark is absent, no change
has been made since some sync's vectors step ran to the end, and the key it recorded is the key of
the rows now. When the mark is present (a sync running, or killed or stopped before its end), the
recorded key proves nothing and the key is computed from the rows, as before. A step that could not
write the file (its library is not installed) records that instead of a key, and a KB below the
threshold records that it has no file, so a search of a small KB reads one meta row and no file.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes.index.chunk_counts import recorded_since_completed_sync
from pinakes.vectors.fileformat import VectorFileUnusable, vector_file_path

if TYPE_CHECKING:  # numpy and the engine are imported by `open_for_index` only: `recorded_state` needs neither
    from pinakes.vectors.approximate import OpenVectorFile

META_KEY = "vector_file"  # the content key of the file the last vectors step left, or one of:
BELOW_THRESHOLD = "below-threshold"  # the index held too few vectors for a file: exact search
NOT_BUILT = "not-built"  # the file's library was not installed when the step ran
NOT_WANTED = "numpy-tier"  # the manifest asked for exact search at any size: no file is kept


def recorded_state(conn: sqlite3.Connection) -> str | None:
    """What the last vectors step recorded, when it holds for the index now (see the module);
    None when it may not (a sync started since and has not completed, or no step recorded any)."""
    meta = recorded_since_completed_sync(conn, META_KEY)
    return None if meta is None else meta.get(META_KEY)


def open_for_index(conn: sqlite3.Connection, pinakes_dir: Path, identity: Mapping[str, str], dim: int, *,
                   min_rows: int, check_body: bool = False) -> OpenVectorFile | None:
    """The vector file that answers for the index behind `conn` now, opened; None when the index
    holds fewer than `min_rows` active vectors (exact search is the tier there, not a fallback);
    VectorFileUnusable when a file should answer and cannot (missing, stale, damaged, its library
    not installed). Call inside the read transaction the search runs in."""
    from pinakes.vectors import engine
    from pinakes.vectors.approximate import open_vector_file
    from pinakes.vectors.engine import DEFAULT_PARAMS
    from pinakes.vectors.source import content_key, row_keys

    recorded = recorded_state(conn)
    if recorded == BELOW_THRESHOLD:
        return None
    if recorded == NOT_BUILT:
        engine.load_library()  # still not installed: "unavailable"
        raise VectorFileUnusable("missing", "the last sync could not build it (usearch was not installed then)")
    if recorded is None or recorded == NOT_WANTED:
        keys = row_keys(conn)
        if len(keys) < min_rows:
            return None
        expected = content_key(keys, identity, DEFAULT_PARAMS)
    else:
        expected = recorded
    return open_vector_file(vector_file_path(pinakes_dir), expected, identity, dim, check_body=check_body)
