"""What a vector row must be to be stored, and what a stored one must be to stand in for the model:
the one rule the embed stage, the reuse lookups, an edited document's kept rows and doctor apply.

Every `embeddings` row carries `checksum` = xxh3-64 of its vector's bytes then its content key,
written in the INSERT that writes the vector. Any flipped bit in either changes it, which a
unit-length test cannot see: a flipped sign keeps the length exactly, and a flipped low mantissa
bit moves it by less than float32 rounding does. A row without a checksum was written under schema
8 or earlier (or copied from such an index by a rebuild): nothing vouches for its bytes, so it is
judged by what it is, the model's width, finite, and unit length within float32 rounding
(`LEGACY_UNIT_TOLERANCE`), which catches a flipped exponent and the high mantissa bits, never a sign.

What the model returns is checked before it is stored (`invalid_vectors`): a NaN, an infinity, or a
row whose length is not 1 (an all-zero row is what a component beyond float32's range becomes once
normalised) fails its batch, naming the model, instead of entering the index as a vector that
matches nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import xxhash

# How far a vector's length may stray from 1 when the model has just returned it, or when its row
# carries a checksum (float32 rounding over 384-1024 components stays below 1e-6).
UNIT_TOLERANCE = 1e-3
# ... and for a row without a checksum: ten times float32 rounding, so that a stored flip of a high
# mantissa bit is seen (at 1e-3 a flip of the top one in a typical component still passed).
LEGACY_UNIT_TOLERANCE = 1e-5

StoredRow = tuple[bytes, bytes | None, bytes | None]  # (vector, text_key, checksum) as the index holds them


# Keys per lookup statement (well under SQLite's bound-parameter limit).
LOOKUP_BATCH = 500


def text_key(prefix: bytes, text: str) -> bytes:
    """A content key: xxh3-128 of `prefix` (a model's identity, a tokenizer's fingerprint) then the
    exact text (pipeline/vector_reuse.py, pipeline/token_counts.py)."""
    return xxhash.xxh3_128_digest(prefix + text.encode("utf-8", "surrogatepass"))


def row_checksum(vector: bytes, text_key: bytes | None) -> bytes:
    """The checksum a row with these bytes carries (8 bytes)."""
    return xxhash.xxh3_64_digest(vector + (text_key or b""))


def stored_row(vector: np.ndarray, text_key: bytes | None) -> tuple[bytes, bytes]:
    """The (vector, checksum) bytes to INSERT for one float32 row."""
    blob = np.ascontiguousarray(vector, dtype=np.float32).tobytes()
    return blob, row_checksum(blob, text_key)


def row_faults(rows: Sequence[StoredRow], dim: int) -> list[str | None]:
    """Per stored row, why it cannot stand in for the model's vector (None: it can). One array
    operation for the lot, not one per row."""
    faults: list[str | None] = [None] * len(rows)
    whole: list[int] = []
    for position, (vector, text_key, checksum) in enumerate(rows):
        if len(vector) != dim * 4:
            faults[position] = f"it holds {len(vector) / 4:g} components, not {dim}"
        elif checksum is not None and row_checksum(vector, text_key) != checksum:
            faults[position] = "its checksum does not match its bytes (a flipped bit)"
        else:
            whole.append(position)
    if not whole:
        return faults
    matrix = np.frombuffer(b"".join(rows[position][0] for position in whole), dtype=np.float32).reshape(len(whole), dim)
    tolerances = [UNIT_TOLERANCE if rows[position][2] is not None else LEGACY_UNIT_TOLERANCE for position in whole]
    for position, fault in zip(whole, _shape_faults(matrix, tolerances), strict=True):
        faults[position] = fault
    return faults


def invalid_vectors(matrix: np.ndarray, dim: int) -> list[tuple[int, str]]:
    """The rows of a model's answer that must never be stored, with why: (row, reason)."""
    if matrix.ndim != 2 or matrix.shape[1] != dim:
        return [(0, f"the answer has shape {matrix.shape}, not (rows, {dim})")]
    found = _shape_faults(np.asarray(matrix, dtype=np.float32), [UNIT_TOLERANCE] * matrix.shape[0])
    return [(row, _ZERO_FROM_MODEL if fault == _ZERO else fault) for row, fault in enumerate(found) if fault is not None]


_ZERO = "it is all zeros"
# A provider normalises what its model returns (embed/_common.py, embed/provider_openai.py), and a
# length it cannot take (NaN, infinite, overflowing float32) leaves the row all zeros.
_ZERO_FROM_MODEL = (f"{_ZERO} (what a vector holding NaN, an infinity or a component beyond float32's range "
                    "becomes when the provider normalises it)")


def _shape_faults(matrix: np.ndarray, tolerances: Sequence[float]) -> list[str | None]:
    """Per row: not finite, all zeros, or a length more than its tolerance away from 1 (in float64,
    so that no finite float32 component overflows the sum)."""
    with np.errstate(invalid="ignore", over="ignore"):
        finite: list[bool] = np.isfinite(matrix).all(axis=1).astype(bool).tolist()
        lengths: list[float] = [float(value) for value in np.linalg.norm(matrix.astype(np.float64), axis=1)]
    faults: list[str | None] = []
    for is_finite, length, tolerance in zip(finite, lengths, tolerances, strict=True):
        if not is_finite:
            faults.append("it holds NaN or infinity")
        elif length == 0.0:
            faults.append(_ZERO)
        elif abs(length - 1.0) > tolerance:
            faults.append(f"its length is {length:.7g}, not 1")
        else:
            faults.append(None)
    return faults
