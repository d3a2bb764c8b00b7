"""Reciprocal Rank Fusion of the keyword and vector candidate lists.

RRF reads only ranks (score = sum over lists of 1 / (k + rank), rank counted from 1), which is
the point: BM25 scores and cosines live on unrelated scales and neither can be normalised into the
other honestly. Equal fused scores are common (rank 3 in one list only ties with rank 3 in the
other only), so ties are broken by query-term coverage — a tiebreak, never a veto — and only then
by the best single rank and the chunk id, so the order is deterministic.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

NO_RANK = 1 << 30  # the best rank of a candidate no list ranked


@dataclass
class Candidate:
    """One chunk on its way through the pipeline, carrying every stage's evidence."""

    chunk_id: int
    bm25_rank: int | None = None
    bm25_score: float | None = None
    vector_rank: int | None = None
    cosine: float | None = None
    rrf: float = 0.0
    coverage: float | None = None
    rerank: float | None = None
    graph_rank: int | None = None  # rank in the graph channel's list (search/graph.py)

    @property
    def best_rank(self) -> int:
        # Read in every fusion sort's key, for each of up to 2 x candidates_per_source candidates
        # (self-calibration: 400 searches in a sync, #45), hence no list and no min().
        best = NO_RANK
        for rank in (self.bm25_rank, self.vector_rank, self.graph_rank):
            if rank is not None and rank < best:
                best = rank
        return best


@dataclass(frozen=True)
class FusionWeights:
    """Each list's weight in the fusion and RRF's k. Fixed RRF (both 1) unless the KB's golden set
    fitted others ([retrieval.fusion], calibration/fusion_fit.py); a weight of 0 leaves that list's
    candidates in the pool only behind every candidate the other list found."""

    keyword: float = 1.0
    vector: float = 1.0


FIXED_RRF = FusionWeights()


def reciprocal_rank_fusion(
    keyword: Iterable[tuple[int, float]], vector: Iterable[tuple[int, float]], k: int,
    weights: FusionWeights = FIXED_RRF, near_duplicates: Mapping[int, Sequence[int]] | None = None,
) -> list[Candidate]:
    """Every candidate of either list, best fused score first (ties: best rank, chunk id).

    Each list arrives best first; equal scores share a rank (1, 2, 2, 4), because an order
    between exactly equal scores would be an accident of storage, not evidence. `near_duplicates`
    (search/shared_ranks.py: vector-list position -> the positions above it of its near-duplicates)
    extends that to an order the vector side cannot resolve: a chunk the keyword side ranks at least
    as high as a near-duplicate above it (or ranks when it does not) fuses with that one's vector rank,
    never above a chunk between them that both lists rank at least as high, when both lists are
    present and weigh. A candidate's `vector_rank` is always its own.
    """
    candidates: dict[int, Candidate] = {}
    for rank, chunk_id, score in _competition_ranks(keyword):
        candidate = candidates.get(chunk_id)
        if candidate is None:  # (setdefault would build a Candidate for every chunk, new or not)
            candidate = candidates[chunk_id] = Candidate(chunk_id)
        candidate.bm25_rank, candidate.bm25_score = rank, score
        candidate.rrf += weights.keyword / (k + rank)
    # One list alone, or one that weighs nothing, keeps its own order: nothing else can decide.
    shared = near_duplicates if candidates and weights.keyword > 0 and weights.vector > 0 else None
    listed: list[Candidate] = []  # the vector list so far, read only when something is shared
    for position, (rank, chunk_id, score) in enumerate(_competition_ranks(vector)):
        candidate = candidates.get(chunk_id)
        if candidate is None:
            candidate = candidates[chunk_id] = Candidate(chunk_id)
        candidate.vector_rank, candidate.cosine = rank, score
        fused_rank = rank
        if shared is not None:
            above = shared.get(position)
            if above and candidate.bm25_rank is not None:
                fused_rank = _deferred_rank(candidate.bm25_rank, rank, above, listed)
            listed.append(candidate)
        candidate.rrf += weights.vector / (k + fused_rank)
    return sorted(candidates.values(), key=_fused_key)


def _deferred_rank(keyword_rank: int, own: int, above: Sequence[int], listed: Sequence[Candidate]) -> int:
    """The vector rank this chunk (keyword rank `keyword_rank`, own vector rank `own`, next in
    `listed`) fuses with: that of a near-duplicate at a position in `above` that the keyword side
    ranks no higher (or not at all), but never above a chunk between the two that both lists rank
    at least as high as this one; `own` when no near-duplicate qualifies. A keyword tie defers too:
    the two then tie exactly and fall in the keyword list's own order (measured: the vector side's
    order between keyword-tied near-duplicates lost to it, docs/QUALITY.md)."""
    uppers = set(above)
    best, blocked = own, 0  # blocked: the best rank the chunks passed so far (upwards) leave open
    for position in range(len(listed) - 1, min(above) - 1, -1):  # from just above this chunk, upwards
        other = listed[position]
        other_rank = other.vector_rank if other.vector_rank is not None else own
        if position in uppers and (other.bm25_rank is None or keyword_rank <= other.bm25_rank):
            best = min(best, max(other_rank, blocked))
        if other.bm25_rank is not None and other.bm25_rank <= keyword_rank:  # both lists rank it as high
            blocked = max(blocked, other_rank + 1)
            if blocked >= best:
                break  # nothing further up can be reached
    return best


def _fused_key(candidate: Candidate) -> tuple[float, int, int]:
    return -candidate.rrf, candidate.best_rank, candidate.chunk_id


def add_graph_list(ranked: list[Candidate], graph: Iterable[tuple[int, float]], k: int,
                   weight: float) -> list[Candidate]:
    """`ranked` with the graph channel's list (chunk id, cosine; best first) fused in as one more
    reciprocal-rank list of weight `weight`, re-sorted as reciprocal_rank_fusion sorts."""
    candidates = {candidate.chunk_id: candidate for candidate in ranked}
    for rank, chunk_id, _cosine in _competition_ranks(graph):
        candidate = candidates.setdefault(chunk_id, Candidate(chunk_id))
        candidate.graph_rank = rank
        candidate.rrf += weight / (k + rank)
    return sorted(candidates.values(), key=_fused_key)


def _competition_ranks(ranked: Iterable[tuple[int, float]]) -> Iterator[tuple[int, int, float]]:
    rank, previous = 0, None
    for position, (chunk_id, score) in enumerate(ranked, start=1):
        if score != previous:
            rank, previous = position, score
        yield rank, chunk_id, score


def cut_with_ties(ranked: list[Candidate], width: int) -> list[Candidate]:
    """The first `width`, plus any candidate tied with the last one kept, so that a tiebreak
    applied afterwards (coverage) decides between tied candidates instead of list order."""
    if len(ranked) <= width:
        return list(ranked)
    boundary = ranked[width - 1].rrf
    end = width
    while end < len(ranked) and ranked[end].rrf == boundary:
        end += 1
    return ranked[:end]


def order_fused(candidates: list[Candidate]) -> list[Candidate]:
    """Fused order with coverage breaking exact ties."""
    return sorted(candidates, key=lambda c: (-c.rrf, -(c.coverage or 0.0), c.best_rank, c.chunk_id))


def order_reranked(candidates: list[Candidate]) -> list[Candidate]:
    """Cross-encoder order; coverage, then the fused order, break exact ties."""
    return sorted(
        candidates,
        key=lambda c: (-(c.rerank if c.rerank is not None else float("-inf")), -(c.coverage or 0.0),
                       -c.rrf, c.best_rank, c.chunk_id),
    )
