"""Which vectors a search ranks with: the float32 matrix (exact, search/vectors.py) or the
approximate vector file (`pinakes.vectors`), decided once per index generation.

- `numpy` (the manifest's `[retrieval] vector_tier`), or an index below `ANN_MIN_ROWS` active vectors:
  the matrix, as always.
- `auto` above it: the vector file, when it answers for this generation (vectors/freshness.py). When
  it is missing, stale, damaged or its library is not installed, the matrix, and every vector
  search of the generation carries a note saying why (`fallback_note`): never a different answer
  silently.

With the file, a filtered search never loads the rows it allows at once (at 1M chunks a filter that
leaves out one document would be a 1.5 GB float32 matrix, on every search; self-calibration asks
hundreds of such searches, each question with its source document left out). By how many active
rows the filter leaves out (counted by SQL, at most `OVERFETCH_MAX_EXCLUDED` + 1 read):
- **at most `OVERFETCH_MAX_EXCLUDED`, and fewer than it allows: the vector file, over-fetched.** The
  file is asked for its usual candidates plus one per row left out; those rows are dropped and the
  rest rescored exactly, as an unfiltered search's are. The answer is the file's own best among the
  allowed rows: the quality an unfiltered search has at this size (approximate candidates, exact
  cosines), and never a row the filter leaves out.
- **otherwise: exact, in batches.** The allowed rows are read by one SQL, `SCAN_BATCH_ROWS` at a
  time, each batch scored and only the best `limit` kept: the exact search's answer over the subset
  (the same cosines, ties on chunk id) in memory bounded by the batch, in time proportional to the
  rows allowed.
Either way the candidates' float rows, read from the index to rescore them exactly, are also what
the confidence features read (search/signals.py).

The graph channel (`graph_rows`, off unless the manifest asks for `expand`) still loads the whole
matrix on its first expanding search: its neighbours' documents are scored over every row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np

from pinakes.lexical.filters import SearchFilters, document_where
from pinakes.search import vectors
from pinakes.search.generation import Generation
from pinakes.search.twice import leaves_out_only
from pinakes.vectors import (
    VectorFileUnusable,
    approximate_candidates,
    fallback_note,
    vectors_of,
)
from pinakes.vectors import build as vector_build
from pinakes.vectors.approximate import MIN_CANDIDATES, OVERSAMPLE
from pinakes.vectors.freshness import open_for_index
from pinakes.vectors.source import as_arrays

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from pinakes.embed.base import ModelIdentity
    from pinakes.search.graph import GraphView
    from pinakes.search.settings import SearchSettings

Hits = list[tuple[int, float]]

# A filtered search the vector file answers: up to this many active rows left out, the file is asked
# for that many more candidates (its k and breadth grow by them: at 1.12M rows ~0.22 s of CPU for
# 16,000 against ~0.02 s for 1,000, and a few MB; an exact scan of the rows allowed reads ~1.6 GB
# out of SQLite: docs/perf/vector-tiers.md, "Filtered searches without a matrix"); past it, the allowed rows are
# scanned exactly, this many at a time (~12 MiB of float32 at 384 dimensions, load_matrix's batch).
OVERFETCH_MAX_EXCLUDED = 16_384
SCAN_BATCH_ROWS = vectors.LOAD_BATCH_ROWS
# Active rows with their document, for the filter's SQL over `d`.
_ROWS = ("FROM embeddings e JOIN chunks c ON c.id = e.chunk_id JOIN documents d ON d.id = c.doc_id "
         "WHERE d.state = 'active'")


def decide(generation: Generation, index_path: Path, identity: ModelIdentity, tier: str, *,
           release_pages: bool = False) -> None:
    """Open the vector file for this generation when it should answer (once per generation);
    `release_pages`: SearchSettings.release_vector_pages."""
    if generation.tier_decided:
        return
    generation.tier_decided = True
    if tier == "numpy":
        return
    from pinakes.embed.base import identity_meta

    try:
        generation.vector_file = open_for_index(generation.conn, index_path.parent, identity_meta(identity),
                                                identity.dim,
                                                min_rows=vector_build.ANN_MIN_ROWS, release_pages=release_pages)
    except VectorFileUnusable as unusable:
        generation.vector_note = fallback_note(unusable)


def prepare(generation: Generation, index_path: Path, identity: ModelIdentity, settings: SearchSettings,
            filters: SearchFilters, notes: list[str]
            ) -> tuple[vectors.VectorMatrix | None, NDArray[np.bool_] | None, str | None]:
    """(the rows an exact search ranks, None when the vector file answers; the filter's row mask
    over them; the name of the time this took, when it read rows); the fallback's note joins
    `notes`. The tier is decided once per generation, the matrix loaded once."""
    decide(generation, index_path, identity, settings.vector_tier, release_pages=settings.release_vector_pages)
    if generation.vector_note is not None:
        notes.append(generation.vector_note)
    if generation.vector_file is not None:  # a filter is applied as the file is asked (`approximate`)
        return None, None, "vector_tier"
    lap = None if generation.matrix is not None else "load_matrix"
    matrix = full_matrix(generation, index_path)
    return matrix, allowed_rows(generation, matrix, filters), lap


def full_matrix(generation: Generation, index_path: Path) -> vectors.VectorMatrix:
    """The generation's whole matrix, loaded once (the exact tier, and the graph channel's rows)."""
    if generation.matrix is None:
        dim = generation.meta.get("embedding_dim")
        generation.matrix = vectors.load_matrix(generation.conn, int(dim) if dim and dim.isdigit() else None,
                                                index_path)
    return generation.matrix


def graph_rows(generation: Generation, index_path: Path, filters: SearchFilters, mask: NDArray[np.bool_] | None
               ) -> tuple[GraphView, NDArray[np.bool_] | None]:
    """The graph channel's view of every row (loaded on its first expanding search when the vector
    file answers the vector side), and the filter's mask over them."""
    from pinakes.search.graph import GraphView

    matrix = full_matrix(generation, index_path)
    if generation.graph_view is None:
        generation.graph_view = GraphView(matrix)
    return generation.graph_view, allowed_rows(generation, matrix, filters) if mask is None else mask


def allowed_rows(generation: Generation, matrix: vectors.VectorMatrix, filters: SearchFilters
                 ) -> NDArray[np.bool_] | None:
    """The filter's row mask over `matrix`; None when nothing is filtered."""
    if not filters.active:
        return None
    if leaves_out_only(filters):
        # The matrix holds the active documents' rows only (`vectors.load_matrix`, this generation's),
        # so a filter that only leaves documents out allows every other one of them: no query (the
        # left-out search of each self-calibration question, 200 in a sync: #45).
        left_out = set(filters.exclude_doc_ids)
        return vectors.row_mask(matrix, {doc_id for doc_id in matrix.documents if doc_id not in left_out})
    where, params = document_where(filters, "d")
    allowed = {row[0] for row in generation.conn.execute(f"SELECT d.id FROM documents d WHERE {where}", params)}
    return vectors.row_mask(matrix, allowed)


def approximate(generation: Generation, query: NDArray[np.float32], limit: int,
                filters: SearchFilters | None = None) -> tuple[Hits, vectors.VectorMatrix]:
    """The vector file's best `limit` among the rows `filters` allows (exact cosines, positive only)
    and the candidates' rows as a small matrix (ascending chunk ids), for the confidence features.
    A filter that leaves out many rows is answered by an exact scan instead (see the module)."""
    opened = generation.vector_file
    assert opened is not None
    conn, dim = generation.conn, opened.header.dim

    def exact_rows(ids: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
        return vectors_of(conn, ids.tolist(), dim)

    if filters is None or not filters.active:
        ids, scores, rows = approximate_candidates(opened, query, limit, exact_rows)
    else:
        where, params = document_where(filters, "d")
        left_out = left_out_rows(generation, filters, where, params)
        if left_out is None or 2 * len(left_out) >= opened.header.rows:  # a scan reads fewer rows
            ids, scores, rows = exact_scan(generation, where, params, query, limit, dim)
        else:
            ids, scores, rows = over_fetched(generation, query, limit, left_out, exact_rows)
    hits = [(int(chunk), float(score)) for chunk, score in zip(ids, scores, strict=True) if score > 0.0]
    return hits, candidate_matrix(ids, rows, dim)


def left_out_rows(generation: Generation, filters: SearchFilters, where: str, params: list[object]
                  ) -> NDArray[np.int64] | None:
    """The active rows (chunk ids) the filter leaves out; None when there are more than
    `OVERFETCH_MAX_EXCLUDED`. Only a filter's own documents are read when all it does is leave
    some out (self-calibration's), else every active document is tested against it."""
    if not replace(filters, exclude_doc_ids=()).active:
        marks = ", ".join("?" * len(filters.exclude_doc_ids))
        sql = f"SELECT e.chunk_id {_ROWS} AND d.id IN ({marks})"
        params = list(filters.exclude_doc_ids)
    else:
        sql = f"SELECT e.chunk_id {_ROWS} AND NOT ifnull(({where}), 0)"
    cursor = generation.conn.execute(f"{sql} LIMIT ?", [*params, OVERFETCH_MAX_EXCLUDED + 1])
    found = np.fromiter((row[0] for row in cursor), dtype=np.int64)
    return found if len(found) <= OVERFETCH_MAX_EXCLUDED else None


def over_fetched(generation: Generation, query: NDArray[np.float32], limit: int, left_out: NDArray[np.int64],
                 exact_rows: Callable[[NDArray[np.int64]], tuple[NDArray[np.int64], NDArray[np.float32]]]
                 ) -> tuple[NDArray[np.int64], NDArray[np.float32], NDArray[np.float32]]:
    """The file's candidates as an unfiltered search takes them (vectors/approximate.py), each piece
    asked for one more per row it holds that is left out, so that dropping those leaves as many:
    (ids, cosines, rows), best first."""
    opened = generation.vector_file
    assert opened is not None
    dim = opened.header.dim
    empty = (np.zeros(0, np.int64), np.zeros(0, np.float32), np.zeros((0, dim), np.float32))
    if limit <= 0 or opened.header.rows == 0:
        return empty
    query = np.asarray(query, dtype=np.float32).reshape(-1)
    wanted = max(limit * OVERSAMPLE, MIN_CANDIDATES)
    ids, rows = exact_rows(opened.search(query, wanted, left_out))
    if len(ids) == 0:
        return empty
    scores = rows @ query
    order = np.lexsort((ids, -scores))[:limit]
    return ids[order], scores[order], rows[order]


def exact_scan(generation: Generation, where: str, params: list[object], query: NDArray[np.float32], limit: int,
               dim: int) -> tuple[NDArray[np.int64], NDArray[np.float32], NDArray[np.float32]]:
    """The exact best `limit` of the rows the filter allows, read `SCAN_BATCH_ROWS` at a time:
    (ids, cosines, rows), best first, ties on chunk id (search/vectors.py's order)."""
    query = np.asarray(query, dtype=np.float32).reshape(-1)
    best_ids, best_scores = np.zeros(0, np.int64), np.zeros(0, np.float32)
    best_rows = np.zeros((0, dim), np.float32)
    if limit <= 0:
        return best_ids, best_scores, best_rows
    cursor = generation.conn.execute(f"SELECT e.chunk_id, e.vector {_ROWS} AND ({where})", params)
    while batch := cursor.fetchmany(SCAN_BATCH_ROWS):
        ids, rows = as_arrays(cast("list[tuple[int, bytes]]", batch), dim)
        ids, rows = np.concatenate([best_ids, ids]), np.concatenate([best_rows, rows])
        scores = np.concatenate([best_scores, rows[len(best_ids):] @ query])
        order = np.lexsort((ids, -scores))[:limit]
        best_ids, best_scores, best_rows = ids[order], scores[order], np.ascontiguousarray(rows[order])
    return best_ids, best_scores, best_rows


def candidate_matrix(ids: NDArray[np.int64], rows: NDArray[np.float32], dim: int) -> vectors.VectorMatrix:
    order = np.argsort(ids, kind="stable")
    return vectors.VectorMatrix(np.ascontiguousarray(rows[order], dtype=np.float32).reshape(-1, dim), ids[order],
                                np.zeros(len(ids), dtype=np.int32), ())


def with_row(generation: Generation, matrix: vectors.VectorMatrix, chunk_id: int) -> vectors.VectorMatrix:
    """The rows the confidence features read: `matrix` (what the vector side ranked), with
    `chunk_id`'s row added when a smaller one lacks it (the top passage a keyword search found)."""
    at = int(np.searchsorted(matrix.chunk_ids, chunk_id))
    if matrix is generation.matrix or (at < len(matrix) and int(matrix.chunk_ids[at]) == chunk_id):
        return matrix
    ids, rows = vectors_of(generation.conn, [chunk_id], matrix.dim)
    if not len(ids):
        return matrix
    return candidate_matrix(np.concatenate([matrix.chunk_ids, ids]), np.concatenate([matrix.vectors, rows]),
                            matrix.dim)
