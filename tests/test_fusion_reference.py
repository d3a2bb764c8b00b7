"""Reciprocal rank fusion (search/fusion.py) against a plain statement of it, float for float.

The fusion runs in every hybrid search (400 times in a sync's self-calibration) and was made
cheaper (#45); every search's order and scores must stay what the plain statement gives: kept
here, with the lists a search can hand it (ties, a chunk in one list or both, repeated chunks,
weights other than 1, a graph list added).
"""

from __future__ import annotations

import random
from dataclasses import astuple

from pinakes.search.fusion import Candidate, FusionWeights, add_graph_list, reciprocal_rank_fusion


def best_rank_by_rule(candidate: Candidate) -> int:
    ranks = [rank for rank in (candidate.bm25_rank, candidate.vector_rank, candidate.graph_rank) if rank is not None]
    return min(ranks) if ranks else 1 << 30


def competition_ranks(ranked: list[tuple[int, float]]) -> list[tuple[int, int, float]]:
    out: list[tuple[int, int, float]] = []
    rank, previous = 0, None
    for position, (chunk_id, score) in enumerate(ranked, start=1):
        if score != previous:
            rank, previous = position, score
        out.append((rank, chunk_id, score))
    return out


def fusion_by_rule(keyword: list[tuple[int, float]], vector: list[tuple[int, float]], k: int,
                   weights: FusionWeights) -> list[Candidate]:
    candidates: dict[int, Candidate] = {}
    for rank, chunk_id, score in competition_ranks(keyword):
        candidate = candidates.setdefault(chunk_id, Candidate(chunk_id))
        candidate.bm25_rank, candidate.bm25_score = rank, score
        candidate.rrf += weights.keyword / (k + rank)
    for rank, chunk_id, score in competition_ranks(vector):
        candidate = candidates.setdefault(chunk_id, Candidate(chunk_id))
        candidate.vector_rank, candidate.cosine = rank, score
        candidate.rrf += weights.vector / (k + rank)
    return sorted(candidates.values(), key=lambda c: (-c.rrf, best_rank_by_rule(c), c.chunk_id))


def made_up_list(generator: random.Random, chunks: int, length: int, repeats: bool) -> list[tuple[int, float]]:
    ids = [generator.randrange(chunks) for _ in range(length)] if repeats else generator.sample(range(chunks), length)
    scores = sorted((round(generator.uniform(0, 3), 1) for _ in ids), reverse=True)  # rounded: many ties
    return list(zip(ids, scores, strict=True))


def test_fusion_is_the_rule_float_for_float() -> None:
    generator = random.Random(45)
    for case in range(600):
        chunks = generator.choice((5, 40, 400))
        keyword = made_up_list(generator, chunks, generator.randrange(0, min(chunks, 50) + 1), repeats=case % 7 == 0)
        vector = made_up_list(generator, chunks, generator.randrange(0, min(chunks, 50) + 1), repeats=case % 11 == 0)
        k = generator.choice((0, 1, 60))
        weights = FusionWeights(generator.choice((1.0, 0.0, 0.37)), generator.choice((1.0, 0.0, 1.9)))
        fused = reciprocal_rank_fusion(keyword, vector, k, weights)
        expected = fusion_by_rule(keyword, vector, k, weights)
        assert [astuple(c) for c in fused] == [astuple(c) for c in expected]
        assert [c.best_rank for c in fused] == [best_rank_by_rule(c) for c in expected]
        graph = made_up_list(generator, chunks, generator.randrange(0, min(chunks, 10) + 1), repeats=False)
        added = add_graph_list(fused, graph, k, 0.5)
        assert [c.best_rank for c in added] == [best_rank_by_rule(c) for c in added]
        assert [(-c.rrf, c.best_rank, c.chunk_id) for c in added] == sorted(
            (-c.rrf, best_rank_by_rule(c), c.chunk_id) for c in added)


def test_a_candidate_no_list_ranked_sorts_last() -> None:
    assert Candidate(1).best_rank == best_rank_by_rule(Candidate(1)) == 1 << 30
    assert Candidate(1, vector_rank=3, graph_rank=2).best_rank == 2
