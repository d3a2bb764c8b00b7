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
from dataclasses import dataclass
from typing import TYPE_CHECKING

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


def load_matrix(conn: sqlite3.Connection, expected_dim: int | None, index_path: object = None) -> VectorMatrix:
    """Every active chunk's vector, read once into one contiguous array."""
    rows = conn.execute(
        "SELECT e.chunk_id, c.doc_id, e.vector FROM embeddings e "
        "JOIN chunks c ON c.id = e.chunk_id JOIN documents d ON d.id = c.doc_id "
        "WHERE d.state = 'active' ORDER BY e.chunk_id"
    ).fetchall()
    if not rows:
        return VectorMatrix(
            np.zeros((0, expected_dim or 0), dtype=np.float32), np.zeros(0, dtype=np.int64),
            np.zeros(0, dtype=np.int32), (),
        )
    blob = b"".join(row[2] for row in rows)
    width = len(rows[0][2])
    if width % 4 or len(blob) != width * len(rows):
        raise ModelMismatchError(
            "the index holds vectors of different widths; it was written by more than one model",
            remedy="pnk sync --rebuild",
            path=str(index_path) if index_path is not None else None,
        )
    dim = width // 4
    if expected_dim is not None and dim != expected_dim:
        raise ModelMismatchError(
            f"the index holds {dim}-dimensional vectors but the embedding model produces {expected_dim}",
            remedy="pnk sync --rebuild",
            path=str(index_path) if index_path is not None else None,
        )
    vectors = np.frombuffer(blob, dtype=np.float32).reshape(len(rows), dim)
    positions: dict[str, int] = {}
    doc_rows = np.fromiter(
        (positions.setdefault(row[1], len(positions)) for row in rows), dtype=np.int32, count=len(rows)
    )
    return VectorMatrix(
        vectors=np.ascontiguousarray(vectors),
        chunk_ids=np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows)),
        doc_rows=doc_rows,
        documents=tuple(positions),
    )


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
