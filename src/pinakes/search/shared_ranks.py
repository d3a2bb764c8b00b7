"""Near-duplicate chunks in the vector list that hybrid fusion reads: the keyword side decides
between them.

A bi-encoder puts two chunks that differ in a few words (a company's two quarterly filings, one
section under two versions of a manual) within a hair of each other, and which of the two it ranks
first carries little: 0.0004-0.04 cosine on the development filings, where the words that differ
(the period in the running head) are the whole question. Reciprocal rank fusion reads that order as
a whole rank of evidence and let it outvote a keyword side that separated the two by exactly those
words. So when the keyword side ranks a chunk at least as high as a near-duplicate of it that the
vector side put above it, the chunk fuses with that near-duplicate's vector rank (search/fusion.py),
but never above a chunk between the two that both lists rank at least as high as it
(docs/QUALITY.md, "Near-duplicates defer to the keyword side"). Tied by the keyword side too, the
two tie exactly and fall in the keyword list's own order.

Only direct pairs count (never a chain); a chunk the keyword side does not rank keeps the vector
side's place; only the vector list's first SHARED_WINDOW positions are compared (0.1-0.5 ms a
search, bench/bench_shared_ranks.py); fusion reads them only when both lists are present and weigh.
Every reported vector rank and cosine stays the chunk's own; `--mode vector` keeps the cosine order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # NumPy loads with the first search, not with the settings that name the threshold
    from pinakes.search.vectors import VectorMatrix

# Chunk vectors at least this similar are near-duplicates: here, and to self-calibration, which
# leaves a question's near-duplicates out of its no-answer search (calibration/near_duplicates.py,
# which also rechecks pairs within float noise of the line: its set must not depend on batching).
# A company's two quarters' sections lie at 0.98 and above on the development filings; a threshold
# of 0.98 was measured too (docs/QUALITY.md).
NEAR_DUPLICATE_COSINE = 0.95
# Positions of the vector list compared (the most passages a search returns): past it a shared rank
# could not lift a chunk into any answer, and the n x n product stays small whatever
# candidates_per_source says.
SHARED_WINDOW = 100


def near_duplicates_above(hits: Sequence[tuple[int, float]], rows: VectorMatrix | None,
                          similarity: float | None = NEAR_DUPLICATE_COSINE) -> dict[int, list[int]] | None:
    """For each position of the vector list (from 0, within SHARED_WINDOW) that has any, the
    positions above it whose vectors are at `similarity` or more to its own, ascending; None when
    there are none, no rows to compare, or `similarity` is None (off). A chunk whose row is not in
    `rows` has none."""
    if similarity is None or rows is None or len(hits) < 2 or len(rows) == 0:
        return None
    import numpy as np

    window = hits[:SHARED_WINDOW]
    ids = np.fromiter((chunk_id for chunk_id, _ in window), dtype=np.int64, count=len(window))
    at = np.minimum(np.searchsorted(rows.chunk_ids, ids), len(rows) - 1)
    present = np.flatnonzero(rows.chunk_ids[at] == ids)  # a row missing from `rows` is nobody's near-duplicate
    listed = rows.vectors[at[present]]
    pairs = np.triu(listed @ listed.T >= similarity, 1)  # [i, j]: i above j, near-duplicates
    lower, upper = np.nonzero(pairs.T)  # by the lower position, then the upper: one pass, no per-column call
    if not len(lower):
        return None
    lower, upper = present[lower], present[upper]
    firsts, starts = np.unique(lower, return_index=True)
    return dict(zip(firsts.tolist(), (group.tolist() for group in np.split(upper, starts[1:])), strict=True))
