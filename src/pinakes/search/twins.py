"""Near-duplicate chunks ("twins") share one rank in the vector list that hybrid fusion reads.

A bi-encoder puts two chunks that differ in a few words (a company's two quarterly filings, one
section under two versions of a manual) within a hair of each other: which twin it ranks first
is noise (0.0004-0.014 cosine on the development filings), yet reciprocal rank fusion reads that
order as a full rank of evidence and lets it outvote a keyword side that separated the twins by
the very words they differ in (the period in the running head). Twins therefore take the best
rank among them in the vector list; the keyword side, then coverage, the best rank and storage
order decide between them, as they decide any other tie (docs/QUALITY.md, "Twins": on the
development filings hybrid was significantly below the keyword side on 4 of 40 held-out halves,
and on none with twins; no other corpus lost significantly).

Only hybrid fusion reads these ranks: `--mode vector` keeps the cosine order; in hybrid results a
twin's reported vector rank is the shared one and its cosine its own. The cost is one matrix product
over the list's own rows (candidates_per_source of them: ~0.1 ms at 50).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pinakes.search.fusion import competition_ranks

if TYPE_CHECKING:  # NumPy loads with the first search, not with the settings that name the threshold
    from pinakes.search.vectors import VectorMatrix

# Chunk vectors at least this similar are one passage to the vector side, and to self-calibration,
# which leaves a question's near-duplicates out of its no-answer search (calibration/near_duplicates.py).
# A company's two quarters' sections lie at 0.98 and above on the development filings; a threshold
# of 0.98 was measured too (docs/QUALITY.md, "Twins").
NEAR_DUPLICATE_COSINE = 0.95


def shared_ranks(hits: Sequence[tuple[int, float]], rows: VectorMatrix | None,
                 similarity: float | None = NEAR_DUPLICATE_COSINE) -> list[int] | None:
    """The vector list's ranks (best first; equal cosines share a rank, as fusion counts them)
    with each group of twins (pairs at `similarity` or above, joined transitively) given the best
    rank in it; None when nothing is shared (no twins, no rows to compare, or `similarity` None)."""
    if similarity is None or rows is None or len(hits) < 2 or len(rows) == 0:
        return None
    import numpy as np

    ids = np.fromiter((chunk_id for chunk_id, _ in hits), dtype=np.int64, count=len(hits))
    at = np.minimum(np.searchsorted(rows.chunk_ids, ids), len(rows) - 1)
    if not bool(np.all(rows.chunk_ids[at] == ids)):
        return None  # a row the list names is not among those it was ranked from: share nothing
    listed = rows.vectors[at]
    near = listed @ listed.T >= similarity
    near[np.diag_indices(len(hits))] = True
    if int(near.sum()) == len(hits):
        return None
    # Each position takes the first position of its group: the smallest label among its twins,
    # spread until nothing moves (as many rounds as the longest chain of twins, mostly one).
    group = np.arange(len(hits))
    while True:
        spread = np.where(near, group[None, :], len(hits)).min(axis=1)
        if np.array_equal(spread, group):
            break
        group = spread
    ranks = np.fromiter((rank for rank, _, _ in competition_ranks(hits)), dtype=np.int64, count=len(hits))
    return ranks[group].tolist()  # a group's first position holds its best rank: ranks never fall
