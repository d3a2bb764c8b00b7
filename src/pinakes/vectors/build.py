"""Building the vector file from the index: unchanged, updated in place of a rebuild, or built whole.

`refresh_vector_file` is the whole step a sync runs after embed (docs/perf/vector-tiers.md and the
wiring in the module docstring of pinakes.vectors):

- below `ANN_MIN_ROWS` active vectors the file is not wanted: one left from a larger past is
  removed (exact search answers, and a stale file must not linger);
- a file whose footer carries the content key of the index's rows now is left as it is;
- an intact file of the same model and parameters, when at most `INCREMENTAL_MAX_SHARE` of its rows
  differ, is loaded, has the removed and changed rows removed and the new ones added (HNSW adds
  without a rebuild; its removals are marks the search skips), and is written again;
- anything else (no file, a damaged one, another model, too much changed) is built whole.

Every write is a new file renamed over the old one (fileformat.write_vector_file): a reader or a
crash sees the old file or the new one. The old file stays until the rename, so a reader that
mapped it keeps answering from it.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Generator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from pinakes.vectors import engine
from pinakes.vectors.fileformat import (
    Header,
    VectorFileUnusable,
    read_header,
    read_rows,
    vector_file_path,
    verify_body,
    write_vector_file,
)
from pinakes.vectors.source import RowKeys, content_key, row_keys, vector_batches, vectors_of

# Measured (docs/perf/vector-tiers.md): below this many active vectors the exact float32 matrix is
# fast enough and small enough that an approximate index only adds a file and a dependency.
ANN_MIN_ROWS = 100_000
# Past this share of rows changed, a whole build costs little more than the update and leaves no
# removal marks behind.
INCREMENTAL_MAX_SHARE = 0.2


@dataclass(frozen=True)
class RefreshReport:
    """What the step did: mode is one of below-threshold, unchanged, incremental, full."""

    mode: str
    rows: int
    added: int = 0
    removed: int = 0
    seconds: float = 0.0
    file_bytes: int = 0
    why_full: str = ""  # for a full build: why the file on disk could not be updated


def refresh_vector_file(conn: sqlite3.Connection, pinakes_dir: Path, identity: Mapping[str, str], dim: int, *,
                        min_rows: int = ANN_MIN_ROWS, params: Mapping[str, object] = engine.DEFAULT_PARAMS,
                        threads: int = 0) -> RefreshReport:
    """Bring `.pinakes/vectors.ann` in line with the index's active vectors (see the module)."""
    started = time.perf_counter()
    path = vector_file_path(pinakes_dir)
    with _snapshot(conn):
        keys = row_keys(conn)
        if len(keys) < min_rows:
            path.unlink(missing_ok=True)
            return RefreshReport("below-threshold", len(keys))
        engine.load_library()  # unavailable: raised before any work, the caller notes and skips
        key = content_key(keys, identity, params)
        previous, why = _previous(path, identity, params, dim)
        if previous is not None and previous[0].content_key == key:
            return RefreshReport("unchanged", len(keys), file_bytes=previous[0].file_bytes)
        changes = _changes(previous[1], previous[2], keys) if previous is not None else None
        if previous is not None and changes is not None:
            added, removed = changes
            if len(added) + len(removed) <= INCREMENTAL_MAX_SHARE * max(1, len(keys)):
                index = _load_whole(path, dim, params)
                if len(removed):
                    index.remove(removed, threads=threads)
                for start in range(0, len(added), 16_384):
                    ids, rows = vectors_of(conn, added[start:start + 16_384].tolist(), dim)
                    index.add(ids, rows, threads=threads)
                header = _write(path, index, keys, key, identity, params, dim)
                return RefreshReport("incremental", len(keys), len(added), len(removed),
                                     time.perf_counter() - started, header.file_bytes)
            why = f"{len(added) + len(removed)} of {len(keys)} rows changed"
        index = engine.new_index(dim, params)
        for ids, rows in vector_batches(conn, dim):
            index.add(ids, rows, threads=threads)
        header = _write(path, index, keys, key, identity, params, dim)
    return RefreshReport("full", len(keys), len(keys), 0, time.perf_counter() - started, header.file_bytes, why)


def _previous(path: Path, identity: Mapping[str, str], params: Mapping[str, object], dim: int
              ) -> tuple[tuple[Header, NDArray[np.int64], NDArray[np.uint64]] | None, str]:
    """The file on disk when it is intact and of this model and these parameters; else why not."""
    try:
        header = read_header(path)
        verify_body(path, header)
    except VectorFileUnusable as unusable:
        return None, unusable.detail
    if dict(header.identity) != dict(identity) or dict(header.params) != dict(params) or header.dim != dim:
        return None, f"{path.name} was built for another model or other parameters"
    ids, checksums = read_rows(path, header)
    return (header, ids, checksums), ""


def _changes(old_ids: NDArray[np.int64], old_checksums: NDArray[np.uint64], keys: RowKeys
             ) -> tuple[NDArray[np.int64], NDArray[np.int64]] | None:
    """(rows to add, rows to remove): a changed row is both. None when the old ids are not ascending."""
    if len(old_ids) > 1 and not bool(np.all(old_ids[1:] > old_ids[:-1])):
        return None
    _, old_at, new_at = np.intersect1d(old_ids, keys.chunk_ids, assume_unique=True, return_indices=True)
    changed = old_ids[old_at[old_checksums[old_at] != keys.checksums[new_at]]]
    gone = np.setdiff1d(old_ids, keys.chunk_ids, assume_unique=True)
    new = np.setdiff1d(keys.chunk_ids, old_ids, assume_unique=True)
    return np.union1d(new, changed), np.union1d(gone, changed)


def _load_whole(path: Path, dim: int, params: Mapping[str, object]) -> engine.AnnIndex:
    """The file's index in memory, to be updated. The library reads it from the path itself: the
    payload lies at offset 0 and its reader stops where the payload ends. Reading the payload into a
    buffer first held it twice at the peak (1,083 MB against 617 MB for 917k rows;
    docs/perf/vector-tiers.md)."""
    index = engine.new_index(dim, params)
    index.load(str(path))
    return index


def _write(path: Path, index: engine.AnnIndex, keys: RowKeys, key: str, identity: Mapping[str, str],
           params: Mapping[str, object], dim: int) -> Header:
    library, _ = engine.load_library()
    header = Header(library=library, dim=dim, rows=len(keys), content_key=key, params=dict(params),
                    identity=dict(identity))
    return write_vector_file(path, header, lambda temp: index.save(str(temp)), keys.chunk_ids, keys.checksums)


@contextmanager
def _snapshot(conn: sqlite3.Connection) -> Generator[None]:
    """One read transaction, so the keys and the vectors are of the same commit."""
    if conn.in_transaction:
        yield
        return
    conn.execute("BEGIN")
    try:
        yield
    finally:
        conn.execute("ROLLBACK")
