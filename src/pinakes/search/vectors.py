"""The vector retriever: exact cosine in NumPy over one contiguous float32 matrix (spec §3.1).

The matrix holds every active chunk's unit vector, loaded once per index generation and kept in
process; a search is one matrix-vector product. A filter restricts the candidate rows; it never
re-ranks after the fact. Candidates with a non-positive cosine are dropped, never padded in: no
shared direction is not weak evidence, it is none.

The query's own vector is held to the rule a stored one is (index/vector_rows.py): a model or an
endpoint that answers NaN, an infinity or all zeros (what a provider's normalisation makes of
either) gives a vector that ranks nothing, and empty vector results would read as "nothing is
similar". `usable_query_vector` refuses it as an endpoint failure, so the search answers with
keyword results and a note, as it does when the endpoint is down.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np

from pinakes.errors import EmbeddingEndpointError, ModelMismatchError
from pinakes.index.vector_rows import invalid_vectors

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from pinakes.embed.base import Embedder


@dataclass(frozen=True)
class VectorMatrix:
    """Rows of unit vectors and, per row, the chunk id and the document id it belongs to."""

    vectors: NDArray[np.float32]  # (rows, dim), C-contiguous
    chunk_ids: NDArray[np.int64]  # (rows,), ascending
    doc_rows: NDArray[np.int32]  # (rows,), index into `documents`
    documents: tuple[str, ...]  # distinct document ids

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def __len__(self) -> int:
        return int(self.vectors.shape[0])

    @property
    def nbytes(self) -> int:
        return int(self.vectors.nbytes + self.chunk_ids.nbytes)


# Rows read per step of `load_matrix`: each step's vectors are copied into the matrix and let go, so
# loading holds the matrix and one step, not every row as a Python tuple and a joined copy (2x).
LOAD_BATCH_ROWS = 8192


def load_matrix(conn: sqlite3.Connection, expected_dim: int | None, index_path: object = None,
                where: tuple[str, Sequence[object]] | None = None) -> VectorMatrix:
    """Every active chunk's vector (those of the documents `where` allows, an SQL condition on `d`,
    when given), read once into one contiguous array, a batch at a time."""
    sql = ("SELECT e.chunk_id, c.doc_id, e.vector FROM embeddings e "
           "JOIN chunks c ON c.id = e.chunk_id JOIN documents d ON d.id = c.doc_id "
           f"WHERE d.state = 'active'{f' AND ({where[0]})' if where else ''} ORDER BY e.chunk_id")
    # Every row, active or not, read from the smallest b-tree: an upper bound to size the arrays by
    # (pages past the rows filled are never touched, so never resident).
    upper = int(conn.execute("SELECT count(*) FROM embeddings").fetchone()[0])
    cursor = conn.execute(sql, list(where[1]) if where else [])
    loaded: _Loading | None = None
    while batch := cursor.fetchmany(LOAD_BATCH_ROWS):
        rows = cast("list[tuple[int, str, bytes]]", batch)
        if loaded is None:
            loaded = _Loading(_checked_dim(len(rows[0][2]), expected_dim, index_path), upper)
        loaded.add(rows, index_path)
    if loaded is None:
        return VectorMatrix(
            np.zeros((0, expected_dim or 0), dtype=np.float32), np.zeros(0, dtype=np.int64),
            np.zeros(0, dtype=np.int32), (),
        )
    return loaded.matrix()


class _Loading:
    """The arrays `load_matrix` fills, sized by an upper bound of the rows."""

    def __init__(self, dim: int, upper: int):
        self.dim, self.count = dim, 0
        self.vectors = np.empty((max(upper, 1), dim), dtype=np.float32)
        self.chunk_ids = np.empty(max(upper, 1), dtype=np.int64)
        self.doc_rows = np.empty(max(upper, 1), dtype=np.int32)
        self.positions: dict[str, int] = {}

    def add(self, rows: list[tuple[int, str, bytes]], index_path: object) -> None:
        width = self.dim * 4
        if any(len(row[2]) != width for row in rows):
            raise _mismatch("the index holds vectors of different widths; it was written by more than one model",
                            index_path)
        start, end = self.count, self.count + len(rows)
        if end > self.vectors.shape[0]:  # only when rows were added since the count (no snapshot)
            grown = max(end, 2 * self.vectors.shape[0])
            self.vectors = np.resize(self.vectors, (grown, self.dim))
            self.chunk_ids, self.doc_rows = np.resize(self.chunk_ids, grown), np.resize(self.doc_rows, grown)
        self.vectors[start:end] = np.frombuffer(b"".join(row[2] for row in rows), dtype=np.float32).reshape(-1, self.dim)
        self.chunk_ids[start:end] = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
        positions = self.positions
        self.doc_rows[start:end] = np.fromiter((positions.setdefault(row[1], len(positions)) for row in rows),
                                               dtype=np.int32, count=len(rows))
        self.count = end

    def matrix(self) -> VectorMatrix:
        count = self.count
        return VectorMatrix(vectors=self.vectors[:count], chunk_ids=self.chunk_ids[:count],
                            doc_rows=self.doc_rows[:count], documents=tuple(self.positions))


def _checked_dim(width: int, expected_dim: int | None, index_path: object) -> int:
    if width % 4:
        raise _mismatch("the index holds vectors of different widths; it was written by more than one model",
                        index_path)
    dim = width // 4
    if expected_dim is not None and dim != expected_dim:
        raise _mismatch(f"the index holds {dim}-dimensional vectors but the embedding model produces {expected_dim}",
                        index_path)
    return dim


def _mismatch(message: str, index_path: object) -> ModelMismatchError:
    return ModelMismatchError(message, remedy="pnk sync --rebuild",
                              path=str(index_path) if index_path is not None else None)


def row_mask(matrix: VectorMatrix, allowed_doc_ids: set[str]) -> NDArray[np.bool_]:
    """Which rows belong to an allowed document."""
    allowed = np.fromiter((doc in allowed_doc_ids for doc in matrix.documents), dtype=bool,
                          count=len(matrix.documents))
    return allowed[matrix.doc_rows]


def usable_query_vector(embedder: Embedder, query: str) -> NDArray[np.float32]:
    """The model's unit vector for `query`; EmbeddingEndpointError when it cannot rank anything
    (not finite, all zeros, not of unit length). Its width is vector_search's to check."""
    vector = np.asarray(embedder.embed_query(query), dtype=np.float32).reshape(-1)
    faults = invalid_vectors(vector.reshape(1, -1), vector.shape[0])
    if faults:
        identity = embedder.identity
        raise EmbeddingEndpointError(
            f"the embedding model {identity.model} ({identity.provider}) gave this query a vector that "
            f"cannot rank passages: {faults[0][1]}",
            remedy="check the model, or the embedding server's logs and the model it serves; keyword search "
                   "answers meanwhile")
    return vector


def vector_search(
    matrix: VectorMatrix,
    query: NDArray[np.float32],
    limit: int,
    mask: NDArray[np.bool_] | None = None,
) -> list[tuple[int, float]]:
    """(chunk_id, cosine) best first, only positive cosines, at most `limit`."""
    if limit <= 0 or len(matrix) == 0:
        return []
    query = np.asarray(query, dtype=np.float32).reshape(-1)
    if query.shape[0] != matrix.dim:
        raise ModelMismatchError(
            f"the query vector has {query.shape[0]} dimensions but the index holds {matrix.dim}",
            remedy="pnk sync --rebuild",
        )
    scores = matrix.vectors @ query
    if mask is not None:
        # Masked rows sink below every positive score, so the positive-only cut removes them.
        scores = np.where(mask, scores, np.float32(-np.inf))
    count = min(limit, scores.shape[0])
    top = np.argpartition(-scores, count - 1)[:count] if count < scores.shape[0] else np.arange(count)
    # Ties break on chunk id so the order never depends on argpartition's internals.
    order = sorted(top.tolist(), key=lambda row: (-float(scores[row]), int(matrix.chunk_ids[row])))
    return [(int(matrix.chunk_ids[row]), float(scores[row])) for row in order if scores[row] > 0.0]
