"""The vectors stage's core: keep `.pinakes/vectors.ann`, the approximate vector file, in line with
the index's active vectors after embed (docs/perf/vector-tiers.md; the file itself is
`pinakes.vectors`).

Below `ANN_MIN_ROWS` active vectors there is no file (exact search is the tier); above it the file
is left as it is, updated in place, or built whole (`refresh_vector_file`), then the key it answers
for is recorded in the index's meta (`vectors.freshness`), so a searching process need not read
every row to know the file is current. When usearch is not installed the KB stays searchable
exactly: the sync says so in a note and does not fail. A KB whose manifest asks for exact search at
any size (`[retrieval] vector_tier = "numpy"`) keeps no file.
"""

from __future__ import annotations

import importlib.util
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes.embed.base import identity_meta
from pinakes.index import chunk_counts, schema
from pinakes.pipeline.run import SyncContext
from pinakes.vectors.fileformat import VectorFileUnusable, read_header, vector_file_path
from pinakes.vectors.freshness import BELOW_THRESHOLD, META_KEY, NOT_BUILT, NOT_WANTED, recorded_state

if TYPE_CHECKING:  # the builder (numpy, usearch) is imported by `refresh` only: `is_current` (a no-op) needs neither
    from pinakes.vectors.build import RefreshReport


def refresh(ctx: SyncContext) -> RefreshReport | None:
    """Bring the vector file in line with the index this sync wrote; record what was done in the
    report and the key in the index's meta. None when the library is not installed (noted)."""
    from pinakes.vectors import build as vector_build
    from pinakes.vectors.build import refresh_vector_file

    conn = ctx.writer()
    if ctx.manifest.retrieval.vector_tier == "numpy":  # exact at any size: a file would never be read
        vector_file_path(ctx.paths.state_dir).unlink(missing_ok=True)
        _record(conn, NOT_WANTED)
        return None
    identity = ctx.get_embedder().identity
    started = time.perf_counter()
    try:
        report = refresh_vector_file(conn, ctx.paths.state_dir, identity_meta(identity), identity.dim,
                                     min_rows=vector_build.ANN_MIN_ROWS)  # read when called: a test lowers it
    except VectorFileUnusable as unusable:
        _record(conn, NOT_BUILT)
        ctx.report.notes.append(f"no approximate vector file: {unusable.detail}; search stays exact (slower "
                                "and larger in memory at this size)")
        return None
    finally:
        ctx.report.timings["vectors"] = time.perf_counter() - started
    if report.mode == "below-threshold":
        _record(conn, BELOW_THRESHOLD)
    else:
        _record(conn, read_header(vector_file_path(ctx.paths.state_dir)).content_key)
    if report.mode in ("full", "incremental"):
        why = f" ({report.why_full})" if report.why_full else ""
        ctx.report.notes.append(
            f"vector file {'built whole' if report.mode == 'full' else 'updated'}: {report.rows} rows in "
            f"{report.pieces} {'piece' if report.pieces == 1 else 'pieces'} ({report.pieces_written} written), "
            f"+{report.added} -{report.removed} in {report.seconds:.1f}s{why}")
    return report


def is_current(conn: sqlite3.Connection | None, pinakes_dir: Path, tier: str) -> bool:
    """Whether the last vectors step's record still holds and needs nothing (a sync that changes no
    document asks this): a key the file on disk carries, a KB below the threshold, a library still
    not installed, the numpy tier still asked for. One meta read and a footer read; False when in doubt."""
    if conn is None:
        return False
    recorded = recorded_state(conn)
    if recorded is None or (recorded == NOT_WANTED) != (tier == "numpy"):
        return False
    if recorded == NOT_WANTED:
        return True
    if recorded == BELOW_THRESHOLD:
        return True
    if recorded == NOT_BUILT:
        return importlib.util.find_spec("usearch") is None
    try:
        return read_header(vector_file_path(pinakes_dir)).content_key == recorded
    except VectorFileUnusable:
        return False


def _record(conn: sqlite3.Connection, value: str) -> None:
    """The file's key, and the index's chunk counts (index/chunk_counts.py: read by BM25F instead of
    a scan), both as this last step of a sync's writes leaves the index."""
    with schema.transaction(conn):
        schema.write_meta(conn, {META_KEY: value, **chunk_counts.as_meta(chunk_counts.scanned(conn))})
