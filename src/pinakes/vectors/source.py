"""What the approximate index is derived from: the index's active vectors, read in chunk-id order.

The vector file is content-addressed by `content_key`: the model identity, the build parameters
and every active row's (chunk id, `embeddings.checksum`), so any vector written, replaced or
removed, any document leaving the active state, changes it. The checksum already covers the
vector's bytes and its text key (index/vector_rows.py); a row carried from an index that predates
checksums (NULL) is keyed by a hash of its vector bytes instead, so it is never left out.

Reading the keys costs 16 bytes a row (~1 s at 1M rows on the development machine), against the
1.5 GB an exact search reads for the same rows; a searching process pays it once per index
generation, not per query.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import xxhash
from numpy.typing import NDArray

_ACTIVE = ("FROM embeddings e JOIN chunks c ON c.id = e.chunk_id JOIN documents d ON d.id = c.doc_id "
           "WHERE d.state = 'active'")
BATCH_ROWS = 16_384
# Rows a build reads and adds at a time. Each is held three times in transit (the fetched rows, the
# joined bytes, the index's int8 copy): ~6 MiB at 4,096 rows, ~25 MiB at 16,384. The rows an add
# changes neither the CPU nor, with one thread, the graph (docs/perf/vector-tiers.md, 300k levers).
BUILD_BATCH_ROWS = 4_096
_LOOKUP_ROWS = 500  # ids per `IN (...)` lookup: far below every SQLite's variable limit
# The same rows looked up by chunk id: CROSS JOIN keeps SQLite's planner on this order (embeddings
# by id, then its chunk, then its document). Left free it starts from `documents_state` and walks
# every active document's chunks: 7.5 ms against 0.3 ms for 50 ids in a 13k-chunk index.
_BY_ID = ("FROM embeddings e CROSS JOIN chunks c ON c.id = e.chunk_id CROSS JOIN documents d ON d.id = c.doc_id "
          "WHERE d.state = 'active'")


@dataclass(frozen=True)
class RowKeys:
    """Each active vector's chunk id (ascending) and the 64-bit checksum of its row."""

    chunk_ids: NDArray[np.int64]
    checksums: NDArray[np.uint64]

    def __len__(self) -> int:
        return int(self.chunk_ids.shape[0])


def row_keys(conn: sqlite3.Connection) -> RowKeys:
    """The keys of every active vector, in one streamed pass (16 bytes a row held, not a Python
    tuple a row) that reads a vector only when its checksum is missing."""
    cursor = conn.execute(
        f"SELECT e.chunk_id, e.checksum, CASE WHEN e.checksum IS NULL THEN e.vector END {_ACTIVE} "
        "ORDER BY e.chunk_id"
    )
    id_parts: list[NDArray[np.int64]] = []
    digest_parts: list[bytes] = []
    while batch := cursor.fetchmany(BATCH_ROWS):
        rows = cast("list[tuple[int, bytes | None, bytes | None]]", batch)
        id_parts.append(np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows)))
        digest_parts.append(b"".join(_row_digest(checksum, vector) for _, checksum, vector in rows))
    chunk_ids = np.concatenate(id_parts) if id_parts else np.zeros(0, np.int64)
    return RowKeys(chunk_ids, np.frombuffer(b"".join(digest_parts), dtype=np.uint64).copy())


def _row_digest(checksum: bytes | None, vector: bytes | None) -> bytes:
    if checksum is not None and len(checksum) == 8:
        return checksum
    return xxhash.xxh3_64_digest(vector or checksum or b"")


def content_key(keys: RowKeys, identity: Mapping[str, str], params: Mapping[str, object]) -> str:
    """The address of the vector file these rows, this model and these parameters make."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(json.dumps({"identity": dict(identity), "params": dict(params)}, sort_keys=True).encode())
    digest.update(keys.chunk_ids.tobytes())
    digest.update(keys.checksums.tobytes())
    return digest.hexdigest()


def vector_batches(conn: sqlite3.Connection, dim: int) -> Iterator[tuple[NDArray[np.int64], NDArray[np.float32]]]:
    """Every active vector, (chunk ids, rows) a batch at a time, so a build never holds them all."""
    cursor = conn.execute(f"SELECT e.chunk_id, e.vector {_ACTIVE} ORDER BY e.chunk_id")
    while batch := cursor.fetchmany(BUILD_BATCH_ROWS):
        yield as_arrays(batch, dim)


def vectors_of(conn: sqlite3.Connection, chunk_ids: Sequence[int], dim: int) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
    """The active rows among `chunk_ids` (any order; absent or inactive ones left out), exact float32."""
    found: list[tuple[int, bytes]] = []
    for start in range(0, len(chunk_ids), _LOOKUP_ROWS):
        part = [int(chunk_id) for chunk_id in chunk_ids[start:start + _LOOKUP_ROWS]]
        found.extend(conn.execute(
            f"SELECT e.chunk_id, e.vector {_BY_ID} AND e.chunk_id IN ({','.join('?' * len(part))})", part
        ).fetchall())
    return as_arrays(found, dim)


def as_arrays(rows: Sequence[tuple[int, bytes]], dim: int) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
    if any(len(vector) != dim * 4 for _, vector in rows):
        raise ValueError(f"the index holds a vector that is not {dim} float32 values wide")
    ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
    matrix = np.frombuffer(b"".join(row[1] for row in rows), dtype=np.float32).reshape(len(rows), dim)
    return ids, matrix
