"""Near-duplicates in the vector list defer to the keyword side in hybrid fusion (search/shared_ranks.py).

Two quarterly reports differ in one word, the month; the vector side ranks them with a chunk of
another document between them. The keyword side separates them by that one word. The vectors are placed by hand (tests/fakes.py `VectorTableEmbedder`) and the KB is
built by the product's sync.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pinakes.cli import main
from pinakes.eval import fusion_fit
from pinakes.eval.corpus import document_ranking, ndcg
from pinakes.search.core import Searcher, SearchSettings
from pinakes.search.fusion import FIXED_RRF, Candidate, FusionWeights, reciprocal_rank_fusion
from pinakes.search.shared_ranks import NEAR_DUPLICATE_COSINE, SHARED_WINDOW, near_duplicates_above
from pinakes.search.vectors import VectorMatrix
from tests.fakes import VectorTableEmbedder, substitute_embedder
from tests.kb_helpers import build_kb, searchable

MARCH = "Northwind net sales for the quarter ended March"
JUNE = "Northwind net sales for the quarter ended June"
BETWEEN = "Harbour crane maintenance schedule"
FAR = ("Tide tables for the estuary", "Ferry timetable for winter", "Lighthouse keeper rota")
QUERY_VECTOR = [1.0, 0.0, 0.0, 0.0]
PLACED = {
    MARCH: [0.8, 0.6, 0.0, 0.0],  # the vector side's first: cosine 0.800
    BETWEEN: [0.796, 0.0, 0.0, 0.605],  # 0.796, not a near-duplicate of either report
    JUNE: [0.79, 0.6, 0.1, 0.0],  # 0.792: 0.995 to MARCH
    **{text: [0.05, 0.0, 0.0, 1.0] for text in FAR},  # far below: the keyword side's words stay rare
}
FILES = {"march.md": MARCH, "between.md": BETWEEN, "june.md": JUNE,
         **{f"far{i}.md": text for i, text in enumerate(FAR)}}
QUESTION = "June net sales"


def unit(vector: list[float]) -> np.ndarray:
    array = np.asarray(vector, dtype=np.float32)
    return array / np.linalg.norm(array)


@pytest.fixture
def kb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, VectorTableEmbedder]:
    embedder = VectorTableEmbedder(PLACED, query=QUERY_VECTOR)
    substitute_embedder(monkeypatch, lambda section, offline=None, threads=None: embedder)
    root = tmp_path / "kb"
    build_kb(root, searchable({name: text + "\n" for name, text in FILES.items()}), embedder)
    assert sorted(embedder.embedded_chunks) == sorted(PLACED)  # every chunk got its placed vector
    return root, embedder


def test_the_placed_vectors_are_what_the_tests_say() -> None:
    q, march, between, june = (unit(v) for v in (QUERY_VECTOR, PLACED[MARCH], PLACED[BETWEEN], PLACED[JUNE]))
    assert float(q @ march) > float(q @ between) > float(q @ june)
    assert float(march @ june) >= NEAR_DUPLICATE_COSINE > max(float(march @ between), float(june @ between))


def search(root: Path, embedder: VectorTableEmbedder, mode: str, query: str = QUESTION,
           near_duplicate_cosine: float | None = NEAR_DUPLICATE_COSINE) -> list[tuple[str, int | None]]:
    settings = SearchSettings(rerank=False, final_k=10, near_duplicate_cosine=near_duplicate_cosine)
    with Searcher(root / ".pinakes" / "index.db", settings, embedder=embedder) as searcher:
        result = searcher.search(query, mode=mode)
    return [(passage.path, passage.scores.vector_rank) for passage in result.passages]


def test_the_keyword_side_decides_between_near_duplicates_the_vector_side_cannot_tell_apart(
        kb: tuple[Path, VectorTableEmbedder]) -> None:
    root, embedder = kb
    keyword = [path for path, _ in search(root, embedder, "bm25")]
    assert keyword[:2] == ["docs/june.md", "docs/march.md"]

    hybrid = search(root, embedder, "hybrid")
    assert hybrid[0][0] == "docs/june.md"
    # Every reported vector rank is the chunk's own: the sharing is fusion's only.
    assert dict(hybrid) == dict(search(root, embedder, "vector"))
    assert dict(hybrid)["docs/june.md"] == 3

    # Without it, RRF reads the vector side's order of the two as a whole rank and the March report wins.
    assert search(root, embedder, "hybrid", near_duplicate_cosine=None)[0][0] == "docs/march.md"


def test_vector_mode_keeps_the_cosine_order_and_its_own_ranks(kb: tuple[Path, VectorTableEmbedder]) -> None:
    root, embedder = kb
    assert search(root, embedder, "vector")[:3] == [("docs/march.md", 1), ("docs/between.md", 2), ("docs/june.md", 3)]


def test_the_fusion_fit_scores_fixed_rrf_as_search_ranks(kb: tuple[Path, VectorTableEmbedder],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    root, embedder = kb
    questions = {"June net sales": "docs/june.md", "March net sales": "docs/march.md",
                 "Northwind quarter": "docs/june.md", "Northwind quarter ended": "docs/march.md",
                 "crane schedule": "docs/between.md", "quarter sales": "docs/june.md"}
    (root / "eval").mkdir()
    (root / "eval" / "questions.yaml").write_text("questions:\n" + "".join(
        f"  - id: q{i}\n    kind: lexical\n    query: \"{query}\"\n    expect: [{path}]\n"
        for i, (query, path) in enumerate(questions.items())), encoding="utf-8")
    assert main(["-C", str(root), "eval", "--fit-fusion", "--json"]) == 0
    fit: dict[str, Any] = json.loads(capsys.readouterr().out)
    searched = [ndcg(document_ranking([path for path, _ in search(root, embedder, "hybrid", query)]), [path], 10)
                for query, path in questions.items()]
    assert fit["fixed"]["ndcg@10"] == pytest.approx(sum(searched) / len(searched), abs=5e-5)  # printed to 4 places
    assert min(searched) < 1.0  # some question ranks its answer below first: the parity is not trivial


def matrix(vectors: dict[int, list[float]]) -> VectorMatrix:
    ids = sorted(vectors)
    return VectorMatrix(np.stack([unit(vectors[i]) for i in ids]), np.asarray(ids, dtype=np.int64),
                        np.zeros(len(ids), dtype=np.int32), ())


def test_each_position_names_its_near_duplicates_above_it_directly() -> None:
    rows = matrix({1: [1.0, 0.0, 0.0], 2: [0.0, 0.0, 1.0], 3: [0.96, 0.28, 0.0], 4: [0.84, 0.54, 0.0]})
    near = rows.vectors @ rows.vectors.T
    assert near[0, 2] >= NEAR_DUPLICATE_COSINE and near[2, 3] >= NEAR_DUPLICATE_COSINE > near[0, 3]
    hits = [(1, 0.80), (2, 0.70), (3, 0.60), (4, 0.50)]
    assert near_duplicates_above(hits, rows) == {2: [0], 3: [2]}  # a chain is two pairs, not a group


def test_only_the_first_positions_are_compared() -> None:
    n = SHARED_WINDOW + 2
    vectors = {i: [float(i == j) for j in range(n)] for i in range(1, n + 1)}
    vectors[n] = vectors[n - 1]  # the last two are the same vector, beyond the window
    hits = [(i, 0.9 - i * 1e-5) for i in range(1, n + 1)]
    assert near_duplicates_above(hits, matrix(vectors)) is None
    vectors[2] = vectors[1]
    assert near_duplicates_above(hits, matrix(vectors)) == {1: [0]}


def test_nothing_is_found_without_a_pair_rows_or_the_setting() -> None:
    rows = matrix({1: [1.0, 0.0], 2: [0.0, 1.0], 3: [1.0, 0.02]})
    assert near_duplicates_above([(1, 0.9), (2, 0.5)], rows) is None  # no near-duplicates
    assert near_duplicates_above([(1, 0.9), (3, 0.5)], rows, similarity=None) is None  # off
    assert near_duplicates_above([(1, 0.9), (3, 0.5)], None) is None  # nothing to compare
    assert near_duplicates_above([(1, 0.9), (3, 0.5)], rows) == {1: [0]}


VECTOR = [(1, 0.80), (2, 0.79), (3, 0.78), (4, 0.50)]  # positions 0-3; 3 is a near-duplicate of 1
NEAR = {2: [0]}


def order(keyword: list[tuple[int, float]], weights: FusionWeights = FIXED_RRF,
          vector: list[tuple[int, float]] = VECTOR, near: dict[int, list[int]] = NEAR) -> list[int]:
    return [c.chunk_id for c in reciprocal_rank_fusion(keyword, vector, 60, weights, near)]


def plain(keyword: list[tuple[int, float]], vector: list[tuple[int, float]] = VECTOR) -> list[int]:
    return [c.chunk_id for c in reciprocal_rank_fusion(keyword, vector, 60)]


def test_a_near_duplicate_the_keyword_side_ranks_higher_takes_the_vector_rank_above_it() -> None:
    assert plain([(3, 9.0), (1, 8.0)])[0] == 1 and order([(3, 9.0), (1, 8.0)])[0] == 3
    assert plain([(3, 9.0)])[:2] == order([(3, 9.0)])[:2] == [3, 1]  # the one above has no keyword rank
    both = reciprocal_rank_fusion([(3, 9.0), (1, 8.0)], VECTOR, 60, near_duplicates=NEAR)
    assert {c.chunk_id: c.vector_rank for c in both} == {1: 1, 2: 2, 3: 3, 4: 4}  # own ranks reported


def test_a_keyword_tie_makes_an_exact_tie_ordered_as_the_keyword_list_orders_it() -> None:
    vector = [(7, 0.81), (5, 0.80), (3, 0.79)]  # 3 (stored first) is a near-duplicate of 7
    keyword = [(3, 9.0), (7, 9.0)]  # equal BM25: the keyword list holds 3 first (storage order)
    assert plain(keyword, vector) == [7, 3, 5]  # the vector side's order would decide
    assert order(keyword, vector=vector, near={2: [0]}) == [3, 7, 5]  # as keyword search returns them


def test_no_chunk_moves_without_the_keyword_side_preferring_it() -> None:
    assert order([(1, 9.0), (3, 8.0)]) == plain([(1, 9.0), (3, 8.0)])
    assert order([(4, 9.0)]) == plain([(4, 9.0)])  # 3 is not keyword-ranked


def test_a_deferring_chunk_never_passes_one_that_both_lists_rank_at_least_as_high() -> None:
    vector = [(i, 0.80 - i / 100) for i in range(1, 10)]  # 9 (position 8) is a near-duplicate of 1
    near = {8: [0]}
    assert order([(9, 8.0)], vector=vector, near=near)[0] == 9  # nothing between stops it: 1's rank
    # 7 is above 9 in both lists: 9 is lifted to just below it, never past it.
    lifted = order([(7, 9.0), (9, 8.0)], vector=vector, near=near)
    assert lifted[:2] == [7, 9] and plain([(7, 9.0), (9, 8.0)], vector)[:2] == [7, 9]
    fused = {c.chunk_id: c.rrf for c in reciprocal_rank_fusion([(7, 9.0), (9, 8.0)], vector, 60, near_duplicates=near)}
    assert fused[9] == pytest.approx(1 / 62 + 1 / 68)  # the vector rank just below 7's (7), not 1's


def test_a_list_that_weighs_nothing_shares_nothing() -> None:
    keyword = [(3, 9.0), (1, 8.0)]
    vector_only = FusionWeights(0.0, 1.0)
    assert order(keyword, vector_only) == [c.chunk_id for c in reciprocal_rank_fusion(keyword, VECTOR, 60, vector_only)]
    assert order(keyword, vector_only)[:4] == [1, 2, 3, 4]
    assert [c.chunk_id for c in reciprocal_rank_fusion([], VECTOR, 60, near_duplicates=NEAR)] == [1, 2, 3, 4]


def test_the_fits_order_breaks_an_exact_tie_by_coverage_as_search_does() -> None:
    lists_type, score = fusion_fit._Lists, fusion_fit._score  # pyright: ignore[reportPrivateUsage] -- pinned helpers
    lists = lists_type(keyword=[(1, 5.0)], vector=[(2, 0.9)], paths={1: "docs/a.md", 2: "docs/b.md"},
                       expect=("docs/b.md",), coverage={1: 0.5, 2: 1.0})
    arm = fusion_fit.FusionArm(1.0, 1.0, 60)
    assert score(lists, arm, 10) == pytest.approx(1.0)  # equal fused scores: b holds more words
    uncovered = dataclasses.replace(lists, coverage={})
    assert score(uncovered, arm, 10) < 1.0  # without coverage, chunk id 1 (a) would lead


def test_a_row_missing_from_the_ranked_rows_has_no_near_duplicate_but_the_others_keep_theirs() -> None:
    rows = matrix({1: [1.0, 0.0], 2: [0.0, 1.0], 3: [1.0, 0.02]})
    assert near_duplicates_above([(1, 0.9), (9, 0.8), (3, 0.7)], rows) == {2: [0]}


def test_settings_share_by_the_near_duplicate_threshold() -> None:
    assert SearchSettings().near_duplicate_cosine == NEAR_DUPLICATE_COSINE


def test_the_one_pass_cap_equals_the_rule_as_stated() -> None:
    """fusion's `_deferred_rank` walks up once and stops early; the rule it implements, written plainly
    (every qualifying near-duplicate above, every chunk between), must give the same rank."""
    import random

    from pinakes.search import fusion

    def stated(keyword_rank: int, own: int, above: list[int], listed: list[Candidate]) -> int:
        best = own
        for upper in above:
            other = listed[upper]
            if other.bm25_rank is not None and keyword_rank > other.bm25_rank:
                continue
            floor = other.vector_rank or own
            for between in listed[upper + 1:]:
                if between.bm25_rank is not None and between.bm25_rank <= keyword_rank:
                    floor = max(floor, (between.vector_rank or own) + 1)
            best = min(best, floor)
        return best

    rng = random.Random(7)
    for _ in range(5000):
        listed: list[Candidate] = []
        for position in range(rng.randint(1, 12)):
            candidate = Candidate(position, bm25_rank=rng.choice([None, 1, 2, 3, 4, 5]))
            tied = listed and rng.random() < 0.2  # equal cosines share a competition rank
            candidate.vector_rank = listed[-1].vector_rank if tied else position + 1
            listed.append(candidate)
        above = sorted(rng.sample(range(len(listed)), rng.randint(1, len(listed))))
        keyword_rank, own = rng.randint(1, 5), len(listed) + 1
        deferred = fusion._deferred_rank  # pyright: ignore[reportPrivateUsage] -- the test pins the private helper
        assert deferred(keyword_rank, own, above, listed) == stated(keyword_rank, own, above, listed)
