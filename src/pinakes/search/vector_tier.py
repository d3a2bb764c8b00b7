"""Which vectors a search ranks with: the float32 matrix (exact, search/vectors.py) or the
approximate vector file (`pinakes.vectors`), decided once per index generation.

- `numpy` (the manifest's `[retrieval] vector_tier`), or an index below `ANN_MIN_ROWS` active vectors:
  the matrix, as always.
- `auto` above it: the vector file, when it answers for this generation (vectors/freshness.py). When
  it is missing, stale, damaged or its library is not installed, the matrix, and every vector
  search of the generation carries a note saying why (`fallback_note`): never a different answer
  silently.

With the file, a filtered search is exact over the rows the filter allows (read by one SQL, in
proportion to the subset, which is what a filter is for), and the candidates' float rows, read from
the index to rescore them exactly, are also what the confidence features read (search/signals.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pinakes.lexical.filters import SearchFilters, document_where
from pinakes.search import vectors
from pinakes.search.generation import Generation
from pinakes.vectors import (
    VectorFileUnusable,
    approximate_candidates,
    fallback_note,
    vectors_of,
)
from pinakes.vectors import build as vector_build
from pinakes.vectors.freshness import open_for_index

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from pinakes.embed.base import ModelIdentity
    from pinakes.search.graph import GraphView

Hits = list[tuple[int, float]]


def decide(generation: Generation, index_path: Path, identity: ModelIdentity, tier: str) -> None:
    """Open the vector file for this generation when it should answer (once per generation)."""
    if generation.tier_decided:
        return
    generation.tier_decided = True
    if tier == "numpy":
        return
    from pinakes.embed.base import identity_meta

    try:
        generation.vector_file = open_for_index(generation.conn, index_path.parent, identity_meta(identity),
                                                identity.dim,
                                                min_rows=vector_build.ANN_MIN_ROWS)
    except VectorFileUnusable as unusable:
        generation.vector_note = fallback_note(unusable)


def prepare(generation: Generation, index_path: Path, identity: ModelIdentity, tier: str, filters: SearchFilters,
            notes: list[str]) -> tuple[vectors.VectorMatrix | None, NDArray[np.bool_] | None, str | None]:
    """(the rows an exact search ranks, None when the vector file answers; the filter's row mask
    over them; the name of the time this took, when it read rows); the fallback's note joins
    `notes`. The tier is decided once per generation, the matrix loaded once."""
    decide(generation, index_path, identity, tier)
    if generation.vector_note is not None:
        notes.append(generation.vector_note)
    if generation.vector_file is not None:
        return (filtered_matrix(generation, filters, index_path) if filters.active else None), None, "vector_tier"
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


def filtered_matrix(generation: Generation, filters: SearchFilters, index_path: Path) -> vectors.VectorMatrix:
    """The rows a filter allows, for an exact search over them when the vector file answers."""
    dim = generation.meta.get("embedding_dim")
    where, params = document_where(filters, "d")
    return vectors.load_matrix(generation.conn, int(dim) if dim and dim.isdigit() else None, index_path,
                               where=(where, params))


def allowed_rows(generation: Generation, matrix: vectors.VectorMatrix, filters: SearchFilters
                 ) -> NDArray[np.bool_] | None:
    """The filter's row mask over `matrix`; None when nothing is filtered."""
    if not filters.active:
        return None
    where, params = document_where(filters, "d")
    allowed = {row[0] for row in generation.conn.execute(f"SELECT d.id FROM documents d WHERE {where}", params)}
    return vectors.row_mask(matrix, allowed)


def approximate(generation: Generation, query: NDArray[np.float32], limit: int) -> tuple[Hits, vectors.VectorMatrix]:
    """The vector file's best `limit` (exact cosines, positive only) and the candidates' rows as a
    small matrix (ascending chunk ids), for the confidence features."""
    opened = generation.vector_file
    assert opened is not None
    conn, dim = generation.conn, opened.header.dim

    def exact_rows(ids: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
        return vectors_of(conn, ids.tolist(), dim)

    ids, scores, rows = approximate_candidates(opened, query, limit, exact_rows)
    hits = [(int(chunk), float(score)) for chunk, score in zip(ids, scores, strict=True) if score > 0.0]
    return hits, candidate_matrix(ids, rows, dim)


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
