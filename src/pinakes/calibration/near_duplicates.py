"""The near-duplicate passages of self-calibration's questions, found in one pass over the stored vectors.

A question's unanswerable twin is searched without the documents whose passages are within
NEAR_DUPLICATE_COSINE of its source passage (calibration/questions.py). Finding them once took every
active vector as one float32 matrix (1.5 GB at 1M chunks, on top of a first sync's own memory) and one
product over all of it per question. Here the questions' source vectors are read by id and the stored
rows stream past them a batch at a time (vectors/source.py `vector_batches`): one pass for all
questions, holding one batch, whatever the KB's size.

Each batch is compared with every source in one matrix product, and a pair that product puts near
the threshold is measured again as the whole-matrix rule measured it, the row against its source
vector, so the rounding of a blocked product never moves a passage across the line.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from pinakes.errors import ModelMismatchError
from pinakes.search.shared_ranks import NEAR_DUPLICATE_COSINE  # one threshold with hybrid fusion's

# A pair the batched product puts this close below the threshold is measured again row by row:
# float32 products of unit vectors differ by a few 1e-7 between one summation order and another.
_RECHECK_MARGIN = 1e-4


def near_chunks(batches: Iterable[tuple[NDArray[np.int64], NDArray[np.float32]]],
                sources: Mapping[int, NDArray[np.float32]]) -> dict[int, set[int]]:
    """For each source chunk id, the chunk ids of `batches` within NEAR_DUPLICATE_COSINE of its vector
    (itself included, when the batches hold it)."""
    found: dict[int, set[int]] = {chunk_id: set() for chunk_id in sources}
    if not sources:
        return found
    source_ids = list(sources)
    stacked = np.stack([sources[chunk_id] for chunk_id in source_ids]).astype(np.float32, copy=False)
    for ids, rows in batches:
        rows_near, columns = np.nonzero(rows @ stacked.T >= NEAR_DUPLICATE_COSINE - _RECHECK_MARGIN)
        for row, column in zip(rows_near.tolist(), columns.tolist(), strict=True):
            if float((rows[row:row + 1] @ stacked[column])[0]) >= NEAR_DUPLICATE_COSINE:
                found[source_ids[column]].add(int(ids[row]))
    return found


def stored_near_chunks(conn: sqlite3.Connection, source_ids: Sequence[int], dim: int | None,
                       index_path: object = None) -> dict[int, set[int]]:
    """`near_chunks` over the index's active vectors, for those of `source_ids` that have one."""
    from pinakes.vectors.source import vector_batches, vectors_of

    first = conn.execute("SELECT length(vector) FROM embeddings LIMIT 1").fetchone()
    if first is None or not source_ids:
        return {}
    width = dim if dim is not None else int(first[0]) // 4
    try:
        ids, vectors = vectors_of(conn, sorted(set(source_ids)), width)
        sources = {int(chunk_id): vector for chunk_id, vector in zip(ids.tolist(), vectors, strict=True)}
        return near_chunks(vector_batches(conn, width), sources)
    except ValueError as exc:  # a row of another width: what loading the matrix refused the same way
        raise ModelMismatchError(f"the index holds vectors that are not {width} values wide: {exc}",
                                 remedy="pnk sync --rebuild",
                                 path=str(index_path) if index_path is not None else None) from exc
