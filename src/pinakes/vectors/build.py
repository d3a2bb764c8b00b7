"""Building the vector file from the index: unchanged, updated in place of a rebuild, or built whole,
one piece at a time.

`refresh_vector_file` is the whole step a sync runs after embed (docs/perf/vector-tiers.md and the
wiring in the module docstring of pinakes.vectors):

- below `ANN_MIN_ROWS` active vectors the file is not wanted: one left from a larger past is
  removed (exact search answers, and a stale file must not linger);
- a file whose footer carries the content key of the index's rows now is left as it is;
- an intact file of the same model and parameters, when at most `INCREMENTAL_MAX_SHARE` of its rows
  differ, is updated: each piece whose id range holds a removed, changed or new row is loaded, has
  the removed and changed rows removed and the new ones added (HNSW adds without a rebuild; its
  removals are marks the search skips) and is saved; the others are copied byte for byte. New ids
  above every piece's rows fill the last piece up to `PIECE_ROWS`, then start new pieces;
- anything else (no file, a damaged one, another model, too much changed, more than twice the
  pieces its rows need, left small by removals, or a piece of more rows than `PIECE_ROWS` now: the
  file does not record the size its pieces were cut to, so one built when a release cut larger
  pieces, or grown past it by an update, is found by its rows) is built whole: the rows
  streamed in id order fill a piece of `PIECE_ROWS`, which is saved, copied into the file and freed
  before the next one is started.

Either way the step holds one piece in memory at a time, never the whole index: at 1.1M rows one
index held +0.7-0.8 GB inside a sync, past issue #45's 1 GB bar (docs/perf/vector-tiers.md, vecpieces).

Every write is a new file renamed over the old one (fileformat.write_vector_file): a reader or a
crash sees the old file or the new one. The old file stays until the rename, so a reader that
mapped it keeps answering from it.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from pinakes.vectors import engine
from pinakes.vectors.fileformat import (
    MAX_ID,
    Header,
    Piece,
    PieceContent,
    VectorFileUnusable,
    check_piece_ids,
    copy_range,
    piece_temp,
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
# Rows of one piece, the most a build or an update holds in memory at once. Measured at 1M rows
# (docs/perf/vector-tiers.md, "vecpieces"): a whole build peaked at 715 MB as one index, 430 MB in
# pieces of 2^19, 271 MB in pieces of 2^18; the vector side's p50 ~6 → ~9 → ~15 ms (every piece is
# searched at the same breadth); recall@10 0.9955 → 0.9985 → 0.9995. The whole `pnk search` at
# 1,118,812 chunks (docs/perf/search.md, 2026-12-07): warm hybrid p50 45-49 ms in 3 pieces of 2^19,
# 65-73 ms in 5 of 2^18 (the bar is 50); the 700k first sync with 2^18 peaked at 720 MB, the vector
# step then holding ~0.3 GB + one piece (2^19: ~0.4 GB). Read when a build starts, so a test can make
# it small.
PIECE_ROWS = 1 << 19
_ADD_ROWS = 16_384  # new rows read and added at a time by an update


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
    pieces: int = 0  # the file's pieces
    pieces_written: int = 0  # of them, built or updated (the rest copied as they were)


def refresh_vector_file(conn: sqlite3.Connection, pinakes_dir: Path, identity: Mapping[str, str], dim: int, *,
                        min_rows: int = ANN_MIN_ROWS, params: Mapping[str, object] = engine.DEFAULT_PARAMS,
                        threads: int = 0) -> RefreshReport:
    """Bring `.pinakes/vectors.ann` in line with the index's active vectors (see the module)."""
    started = time.perf_counter()
    path = vector_file_path(pinakes_dir)
    piece_rows = max(1, PIECE_ROWS)
    with _snapshot(conn):
        keys = row_keys(conn)
        if len(keys) < min_rows:
            path.unlink(missing_ok=True)
            return RefreshReport("below-threshold", len(keys))
        engine.load_library()  # unavailable: raised before any work, the caller notes and skips
        key = content_key(keys, identity, params)
        previous, why = _previous(path, identity, params, dim)
        if previous is not None and previous[0].content_key == key:
            return RefreshReport("unchanged", len(keys), file_bytes=previous[0].file_bytes,
                                 pieces=len(previous[0].pieces))
        changes = _changes(previous[1], previous[2], keys) if previous is not None else None
        written = [0]
        if previous is not None and changes is not None:
            added, removed = changes
            fragmented = len(previous[0].pieces) > 2 * -(-len(keys) // piece_rows) + 1
            largest = max(piece.rows for piece in previous[0].pieces)
            if fragmented:
                why = f"{len(previous[0].pieces)} pieces hold {len(keys)} rows: removals left them small"
            elif largest > piece_rows:  # an update would load it whole: past the memory bar the pieces keep
                why = f"a piece holds {largest} rows, more than the {piece_rows} of a piece now"
            elif len(added) + len(removed) <= INCREMENTAL_MAX_SHARE * max(1, len(keys)):
                pieces = _updated_pieces(conn, path, previous[0], previous[1], keys, added, removed,
                                         piece_rows, threads, written)
                try:
                    header = _write(path, pieces, keys, key, identity, params, dim)
                except VectorFileUnusable as unusable:  # a copy that went wrong: the old file stays, built whole
                    why, written[0] = unusable.detail, 0
                    del pieces  # the update's suspended piece goes before the build holds one of its own
                else:
                    return RefreshReport("incremental", len(keys), len(added), len(removed),
                                         time.perf_counter() - started, header.file_bytes,
                                         pieces=len(header.pieces), pieces_written=written[0])
            else:
                why = f"{len(added) + len(removed)} of {len(keys)} rows changed"
        header = _write(path, _built_pieces(conn, keys, dim, params, piece_rows, threads, written), keys, key,
                        identity, params, dim)
    return RefreshReport("full", len(keys), len(keys), 0, time.perf_counter() - started, header.file_bytes, why,
                         len(header.pieces), written[0])


def _built_pieces(conn: sqlite3.Connection, keys: RowKeys, dim: int, params: Mapping[str, object],
                  piece_rows: int, threads: int, written: list[int]) -> Iterator[PieceContent]:
    """Every active row, streamed in id order, as pieces of `piece_rows`: each is yielded to be
    saved, and freed when the writer asks for the next (one piece held at a time)."""
    ids = keys.chunk_ids
    starts = list(range(0, max(1, len(ids)), piece_rows))
    batches = _Rows(vector_batches(conn, dim))
    for number, start in enumerate(starts):
        end = min(start + piece_rows, len(ids))
        index = engine.new_index(dim, params)
        for batch_ids, rows in _take(batches, end - start):
            if not np.array_equal(batch_ids, ids[start:start + len(batch_ids)]):
                raise RuntimeError("the index's rows changed under the vector file's build")
            index.add(batch_ids, rows, threads=threads)
            start += len(batch_ids)
        from_id = 0 if number == 0 else int(ids[starts[number]])
        to_id = int(ids[end]) if number + 1 < len(starts) else MAX_ID
        written[0] += 1
        yield PieceContent(end - starts[number], from_id, to_id, save=_saver(index))
        index.reset()  # the writer has saved it: free its memory before the next piece is built
        del index


class _Rows:
    """The active rows in id order, handed out in runs of any length (a batch split at a piece's end)."""

    def __init__(self, batches: Iterator[tuple[NDArray[np.int64], NDArray[np.float32]]]) -> None:
        self.batches = batches
        self.left: tuple[NDArray[np.int64], NDArray[np.float32]] | None = None


def _take(rows: _Rows, count: int) -> Iterator[tuple[NDArray[np.int64], NDArray[np.float32]]]:
    """The next `count` rows of `rows`, in the batches they come in (the last one split)."""
    while count > 0:
        batch = rows.left if rows.left is not None else next(rows.batches, None)
        rows.left = None
        if batch is None:
            raise RuntimeError("the index's rows changed under the vector file's build")
        ids, vectors = batch
        if len(ids) > count:
            rows.left = (ids[count:], vectors[count:])
            ids, vectors = ids[:count], vectors[:count]
        count -= len(ids)
        yield ids, vectors


def _updated_pieces(conn: sqlite3.Connection, path: Path, old: Header, old_ids: NDArray[np.int64], keys: RowKeys,
                    added: NDArray[np.int64], removed: NDArray[np.int64], piece_rows: int, threads: int,
                    written: list[int]) -> Iterator[PieceContent]:
    """The old file's pieces, updated: copied as they are when nothing in their id range changed,
    else loaded one at a time, updated and yielded to be saved; new ids past the last piece's rows
    fill it up to `piece_rows`, then new pieces. A piece left with no rows is dropped (its range
    joins the one before it)."""
    plan = _plan(old.pieces, old_ids, added, removed, piece_rows)
    kept = [(piece, extra) for piece, extra in plan if _rows_in(keys.chunk_ids, piece.from_id, piece.to_id)]
    kept = kept or plan[:1]
    for number, (piece, extra) in enumerate(kept):
        from_id = 0 if number == 0 else piece.from_id
        to_id = kept[number + 1][0].from_id if number + 1 < len(kept) else MAX_ID
        rows = _rows_in(keys.chunk_ids, from_id, to_id)
        gone = removed[(removed >= piece.from_id) & (removed < piece.to_id)]
        new = added[(added >= piece.from_id) & (added < piece.to_id)] if extra is None else extra
        if piece.size and not len(gone) and not len(new):
            yield PieceContent(rows, from_id, to_id, copy_from=(path, piece.offset, piece.size), copied=piece)
            continue
        index = engine.new_index(old.dim, old.params)
        if piece.size:
            _load_piece(index, path, piece)
        if len(gone):
            index.remove(gone, threads=threads)
        for start in range(0, len(new), _ADD_ROWS):
            ids, vectors = vectors_of(conn, new[start:start + _ADD_ROWS].tolist(), old.dim)
            index.add(ids, vectors, threads=threads)
        if len(index) != rows:
            raise RuntimeError(f"an updated piece holds {len(index)} rows, the index {rows} in its range")
        written[0] += 1
        yield PieceContent(rows, from_id, to_id, save=_saver(index))
        index.reset()
        del index


def _plan(pieces: tuple[Piece, ...], old_ids: NDArray[np.int64], added: NDArray[np.int64],
          removed: NDArray[np.int64], piece_rows: int) -> list[tuple[Piece, NDArray[np.int64] | None]]:
    """The old pieces, with new ones (size 0) for the new ids that overflow the last: each with the
    ids to add to it when they are not simply the added ids in its range (None)."""
    last = pieces[-1]
    held = old_ids[old_ids >= last.from_id]
    above = added[added > (int(held[-1]) if len(held) else last.from_id - 1)]
    staying = last.rows - int(np.count_nonzero(removed >= last.from_id))
    room = max(0, piece_rows - staying - (int(np.count_nonzero(added >= last.from_id)) - len(above)))
    if len(above) <= room:
        return [(piece, None) for piece in pieces]
    overflow = above[room:]
    plan: list[tuple[Piece, NDArray[np.int64] | None]] = [(piece, None) for piece in pieces[:-1]]
    first_new = int(overflow[0])
    plan.append((replace(last, to_id=first_new),
                 added[(added >= last.from_id) & (added < first_new)]))
    for start in range(0, len(overflow), piece_rows):
        part = overflow[start:start + piece_rows]
        to_id = int(overflow[start + piece_rows]) if start + piece_rows < len(overflow) else MAX_ID
        plan.append((Piece(0, 0, 0, int(part[0]), to_id), part))
    return plan


def _rows_in(chunk_ids: NDArray[np.int64], from_id: int, to_id: int) -> int:
    return int(np.searchsorted(chunk_ids, to_id) - np.searchsorted(chunk_ids, from_id))


def _load_piece(index: engine.AnnIndex, path: Path, piece: Piece) -> None:
    """A piece of the old file into `index`, to be updated: its bytes copied (by the kernel) to a
    temp file the library loads from its path, so they are never held twice. Reading the payload
    into a buffer first held it twice at the peak (1,083 MB against 617 MB for 917k rows;
    docs/perf/vector-tiers.md)."""
    with piece_temp(path) as temp:
        with open(path, "rb") as source, open(temp, "r+b") as target:
            copy_range(source.fileno(), piece.offset, piece.size, target.fileno())
        index.load(str(temp))


def _saver(index: engine.AnnIndex) -> Callable[[Path], object]:
    def save(temp: Path) -> object:
        return index.save(str(temp))
    return save


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
    try:
        check_piece_ids(path, header, ids)
    except VectorFileUnusable as unusable:
        return None, unusable.detail
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


def _write(path: Path, pieces: Iterator[PieceContent], keys: RowKeys, key: str, identity: Mapping[str, str],
           params: Mapping[str, object], dim: int) -> Header:
    library, _ = engine.load_library()
    header = Header(library=library, dim=dim, rows=len(keys), content_key=key, params=dict(params),
                    identity=dict(identity))
    return write_vector_file(path, header, pieces, keys.chunk_ids, keys.checksums, engine.codes_span)


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
