"""Near-duplicate chunks in the vector list that hybrid fusion reads: the keyword side decides
between them.

A bi-encoder puts two chunks that differ in a few words (a company's two quarterly filings, one
section under two versions of a manual) within a hair of each other, and which of the two it ranks
first carries little: 0.0004-0.04 cosine on the development filings, where the words that differ
(the period in the running head) are the whole question. Reciprocal rank fusion reads that order as
a whole rank of evidence and let it outvote a keyword side that separated the two by exactly those
words. So when the keyword side ranks a chunk at least as high as a near-duplicate of it that the
vector side put above it, the chunk fuses with that near-duplicate's vector rank; the keyword ranks,
then coverage, the best own rank and storage order decide between them, as for any tie
(docs/QUALITY.md, "Near-duplicates defer to the keyword side": on the development filings hybrid was
significantly below the keyword side on 4 of 40 held-out halves before, on none after; no corpus lost
significantly).

Only direct pairs count (never a chain), only with keyword evidence for the lower chunk (a near-
duplicate the keyword side does not rank keeps its place: no passage jumps on storage order), only
among the vector list's first SHARED_WINDOW positions (one small matrix product, ~0.1 ms), and only
when both lists are present and weigh (search/fusion.py). Every reported vector rank and cosine
stays the chunk's own; `--mode vector` keeps the cosine order.
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
    positions above it whose vectors are at `similarity` or more to its own; None when there are
    none, no rows to compare, or `similarity` is None (off)."""
    if similarity is None or rows is None or len(hits) < 2 or len(rows) == 0:
        return None
    import numpy as np

    window = hits[:SHARED_WINDOW]
    ids = np.fromiter((chunk_id for chunk_id, _ in window), dtype=np.int64, count=len(window))
    at = np.minimum(np.searchsorted(rows.chunk_ids, ids), len(rows) - 1)
    if not bool(np.all(rows.chunk_ids[at] == ids)):
        return None  # a row the list names is not among those it was ranked from: share nothing
    listed = rows.vectors[at]
    pairs = np.triu(listed @ listed.T >= similarity, 1)  # [i, j]: i above j, near-duplicates
    lower, upper = np.nonzero(pairs.T)  # by the lower position, then the upper: one pass, no per-column call
    if not len(lower):
        return None
    firsts, starts = np.unique(lower, return_index=True)
    return dict(zip(firsts.tolist(), (group.tolist() for group in np.split(upper, starts[1:])), strict=True))
