"""Searching with the vector file: open it for one index generation, ask it for candidates, rescore
them with the exact float vectors.

`open_vector_file` refuses (VectorFileUnusable) a file that is missing, damaged (footer, size or
body checksum; a searching process: each piece's graph checksum), stale (its content key is not the index's now), or that needs a library that is not
installed; the caller answers with the exact search and says why (`fallback_note`). Nothing a file
holds is trusted before those checks pass.

`approximate_search` keeps `search/vectors.py`'s contract: (chunk_id, cosine) best first, only
positive cosines, at most `limit`, ties broken on chunk id. The cosines are exact (each candidate's
float32 row read from the index and multiplied as the exact path does); only which rows are
candidates is approximate (the nearest over every piece of the file, by the index's own distance),
at recall@10 >= 0.98 measured on real vectors (docs/perf/vector-tiers.md).
"""

from __future__ import annotations

import mmap
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from pinakes.vectors import engine
from pinakes.vectors.fileformat import (
    REBUILD_BY_HAND,
    Header,
    VectorFileUnusable,
    check_answers_for,
    check_piece_ids,
    opened_file,
    read_header,
    read_rows,
    verify_body,
    verify_graphs,
)

# Candidates asked of the index per result wanted, and at least this many: the rescoring reads
# each one's float row (~1.5 KB) from the index.
OVERSAMPLE = 2
MIN_CANDIDATES = 50

# What the exact float rows of some chunk ids are: (the ids found, their rows). Ids the index no
# longer holds as active are left out, so a candidate removed since the build never comes back.
ExactRows = Callable[[NDArray[np.int64]], tuple[NDArray[np.int64], NDArray[np.float32]]]


@dataclass
class OpenVectorFile:
    """A checked vector file, memory-mapped once as a whole: each piece's index is a view of its
    range of the mapping, whose pages load as searches touch them."""

    path: Path
    header: Header
    pieces: list[engine.AnnIndex]
    _mapping: mmap.mmap
    _views: list[memoryview]
    # Hand back each piece's mapped pages once it has been searched (a file of several pieces only).
    # For a long run of searches in a process whose memory is bounded — self-calibration inside a
    # sync: a search maps nearly all of a piece it reads (the kernel maps 64 KiB around each fault,
    # and no madvise prevents it for pages in the page cache: docs/perf/sync.md "calpages"), so
    # without this the whole file's pages count in the process's memory after a few searches, with it
    # one piece's at most. Costs a re-fault of each piece's pages on every search.
    release_pages: bool = False

    def search(self, query: NDArray[np.float32], count: int,
               left_out: NDArray[np.int64] | None = None) -> NDArray[np.int64]:
        """The `count` nearest chunk ids by the index's own (approximate) distance, nearest first,
        over every piece: each is searched at the same breadth a single index would be (so a piece
        misses no more than the whole would), and their answers merged by distance, which is the same
        function of a row's int8 code in every piece.

        Ids in `left_out` are never answered: each piece is asked for one more candidate per left-out
        id in its own range, so dropping them still leaves it `count` (a filter's exclusions
        lie in one or two pieces; asking every piece for all of them walked each graph that much wider)."""
        ordered_out = np.sort(left_out) if left_out is not None and len(left_out) else None
        keys: list[NDArray[np.int64]] = []
        distances: list[NDArray[np.float32]] = []
        for number, index in enumerate(self.pieces):
            asked = count + (self._inside(ordered_out, number) if ordered_out is not None else 0)
            index.expansion_search = max(engine.EXPANSION_SEARCH, asked)
            found = index.search(query, asked, threads=1)
            keys.append(np.asarray(found.keys, dtype=np.int64))
            distances.append(np.asarray(found.distances, dtype=np.float32))
            if self.release_pages and len(self.pieces) > 1:
                self.release_piece(number)
        merged_keys, merged_distances = np.concatenate(keys), np.concatenate(distances)
        if ordered_out is not None:
            kept = ~np.isin(merged_keys, ordered_out)
            merged_keys, merged_distances = merged_keys[kept], merged_distances[kept]
        if len(keys) == 1:
            return merged_keys[:count]
        return merged_keys[np.lexsort((merged_keys, merged_distances))[:count]]

    def _inside(self, ordered_ids: NDArray[np.int64], number: int) -> int:
        """How many of `ordered_ids` (ascending) fall in piece `number`'s id range (the only ids it
        can hold: fileformat.check_piece_ids)."""
        piece = self.header.pieces[number]
        return int(np.searchsorted(ordered_ids, piece.to_id) - np.searchsorted(ordered_ids, piece.from_id))

    def release_piece(self, number: int) -> None:
        """Drop the process's mapping of a piece's pages (the page cache keeps them: a later search
        faults them back in without reading the disk)."""
        if not hasattr(mmap, "MADV_DONTNEED"):  # Windows: no madvise; its pages stay, as a plain searcher's do
            return
        piece = self.header.pieces[number]
        start = piece.offset - piece.offset % mmap.PAGESIZE
        self._mapping.madvise(mmap.MADV_DONTNEED, start, piece.offset + piece.size - start)

    def close(self) -> None:
        """Release the mapping; the indexes answer nothing after this."""
        for index in self.pieces:
            index.reset()
        for view in self._views:
            view.release()
        self._mapping.close()


def open_vector_file(path: Path, expected_key: str, identity: Mapping[str, str], dim: int, *,
                     check_body: bool = True, release_pages: bool = False) -> OpenVectorFile:
    """The file at `path` when it is intact and answers for the rows whose content key is
    `expected_key`, under this model; VectorFileUnusable otherwise. `check_body=False` (a searching
    process: docs/INVARIANTS.md) checks the footer, the sizes, each piece's row count and every
    byte of each piece but its vector codes (what the library follows pointers through), not the
    checksum of every byte, which the step that wrote the file and doctor check.

    The path is opened once: the footer, the body's checks and the mapping are all read through that
    one descriptor, so a sync renaming a new file over the path meanwhile leaves this reader with
    the old file whole, never the old footer over the new bytes (review9 F4).

    `release_pages` (OpenVectorFile's): each piece's pages are handed back as soon as it is viewed,
    as after each search: viewing a piece walks every node of its graph, so the pieces viewed before
    the last would otherwise all be resident at once (review10 F2), more than one piece's search
    holds once a file has more than three or four pieces."""
    with opened_file(path) as fd:  # closed once mapped: the mapping outlives it
        header = read_header(path, fd)
        check_answers_for(path, header, expected_key, identity, dim)
        if check_body:
            verify_body(path, header, fd)
            check_piece_ids(path, header, read_rows(path, header, fd)[0])
        verify_graphs(path, header, fd, engine.codes_span)  # before the library reads a byte (fileformat's docstring)
        engine.load_library()
        try:
            mapping = mmap.mmap(fd, header.file_bytes, access=mmap.ACCESS_READ)
        except OSError as exc:  # a memory limit (ulimit -v), a filesystem that cannot map
            raise VectorFileUnusable("unavailable", f"{path.name} could not be mapped ({exc.strerror})",
                                     "check the process's memory limit and that .pinakes/ is on a local "
                                     "filesystem; search answers exactly meanwhile") from exc
    indexes: list[engine.AnnIndex] = []
    views: list[memoryview] = []
    # Its close releases what is opened so far.
    opened = OpenVectorFile(path, header, indexes, mapping, views, release_pages=release_pages)
    number = 0
    try:
        for number, piece in enumerate(header.pieces):
            views.append(memoryview(mapping)[piece.offset:piece.offset + piece.size])
            index = engine.new_index(header.dim, header.params)
            indexes.append(index)
            index.view(views[-1])
            if len(index) < piece.rows:
                raise VectorFileUnusable("damaged", f"{path.name}'s piece {number} holds {len(index)} rows, its "
                                                    f"footer says {piece.rows}", REBUILD_BY_HAND)
            if release_pages and len(header.pieces) > 1:
                opened.release_piece(number)
        if release_pages and len(header.pieces) > 1:
            # Viewing a piece faults in up to 64 KiB around each page it reads, the edge of the
            # piece released before it included: handed back once more, every piece is released.
            for number in range(len(header.pieces)):
                opened.release_piece(number)
    except VectorFileUnusable:
        opened.close()
        raise
    except (RuntimeError, ValueError, KeyError, TypeError) as exc:  # usearch's, or a footer's params it cannot take
        opened.close()
        raise VectorFileUnusable("damaged", f"{path.name}'s piece {number} does not load ({exc})",
                                 REBUILD_BY_HAND) from exc
    return opened


def approximate_search(opened: OpenVectorFile, query: NDArray[np.float32], limit: int,
                       exact_rows: ExactRows) -> list[tuple[int, float]]:
    """(chunk_id, cosine) best first, only positive cosines, at most `limit` (see the module)."""
    ids, scores, _ = approximate_candidates(opened, query, limit, exact_rows)
    return [(int(chunk), float(score)) for chunk, score in zip(ids, scores, strict=True) if score > 0.0]


def approximate_candidates(opened: OpenVectorFile, query: NDArray[np.float32], limit: int, exact_rows: ExactRows
                           ) -> tuple[NDArray[np.int64], NDArray[np.float32], NDArray[np.float32]]:
    """The best `limit` candidates as (chunk ids, exact cosines, float rows), best first, ties on
    chunk id; the rows are what search's confidence features read (search/signals.py reads them
    from the in-memory matrix on the exact path)."""
    empty = (np.zeros(0, np.int64), np.zeros(0, np.float32), np.zeros((0, opened.header.dim), np.float32))
    if limit <= 0 or opened.header.rows == 0:
        return empty
    query = np.asarray(query, dtype=np.float32).reshape(-1)
    if query.shape[0] != opened.header.dim:
        raise ValueError(f"the query vector has {query.shape[0]} dimensions, the vector file {opened.header.dim}")
    wanted = max(limit * OVERSAMPLE, MIN_CANDIDATES)
    ids, rows = exact_rows(opened.search(query, wanted))
    if len(ids) == 0:
        return empty
    scores = rows @ query
    order = np.lexsort((ids, -scores))[:limit]
    return ids[order], scores[order], rows[order]


def fallback_note(unusable: VectorFileUnusable) -> str:
    """What search says when it answered exactly because the vector file could not."""
    return (f"vector search was exact (slower, more memory): the vector file is {unusable.reason} "
            f"({unusable.detail}); {unusable.remedy}")

