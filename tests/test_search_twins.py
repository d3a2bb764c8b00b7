"""Near-duplicate chunks share one rank in the vector list hybrid fusion reads (search/twins.py).

Two quarterly reports differ in one word, the month; the vector side ranks them with a chunk of
another document between them, by cosine differences no wider than the model's noise. The keyword
side separates them by that one word. The vectors are placed by hand (tests/fakes.py
`VectorTableEmbedder`) and the KB is built by the product's sync.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pinakes.cli import main
from pinakes.search.core import Searcher, SearchSettings
from pinakes.search.fusion import reciprocal_rank_fusion
from pinakes.search.twins import NEAR_DUPLICATE_COSINE, shared_ranks
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
    BETWEEN: [0.79, 0.0, 0.0, 0.613],  # 0.790, not a twin of either report
    JUNE: [0.76, 0.6, 0.1, 0.0],  # 0.781, a twin of MARCH (0.994)
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
    substitute_embedder(monkeypatch, lambda section, *args, **kwargs: embedder)
    root = tmp_path / "kb"
    build_kb(root, searchable({name: text + "\n" for name, text in FILES.items()}), embedder)
    assert sorted(embedder.embedded_chunks) == sorted(PLACED)  # every chunk got its placed vector
    return root, embedder


def test_the_placed_vectors_are_what_the_test_says() -> None:
    q, march, between, june = (unit(v) for v in (QUERY_VECTOR, PLACED[MARCH], PLACED[BETWEEN], PLACED[JUNE]))
    assert float(q @ march) > float(q @ between) > float(q @ june)
    assert float(march @ june) >= NEAR_DUPLICATE_COSINE > max(float(march @ between), float(june @ between))


def search(root: Path, embedder: VectorTableEmbedder, mode: str, twin_similarity: float | None
           = NEAR_DUPLICATE_COSINE) -> list[tuple[str, int | None]]:
    settings = SearchSettings(rerank=False, final_k=10, twin_similarity=twin_similarity)
    with Searcher(root / ".pinakes" / "index.db", settings, embedder=embedder) as searcher:
        result = searcher.search(QUESTION, mode=mode)
    return [(passage.path, passage.scores.vector_rank) for passage in result.passages]


def test_the_keyword_side_decides_between_twins_the_vector_side_cannot_tell_apart(
        kb: tuple[Path, VectorTableEmbedder]) -> None:
    root, embedder = kb
    keyword = [path for path, _ in search(root, embedder, "bm25")]
    assert keyword[:2] == ["docs/june.md", "docs/march.md"]

    hybrid = search(root, embedder, "hybrid")
    assert hybrid[0] == ("docs/june.md", 1)  # the twin's rank, not its own third place
    assert dict(hybrid)["docs/march.md"] == 1 and dict(hybrid)["docs/between.md"] == 2

    # Without the shared rank, RRF reads the noise as a full rank and the March report wins.
    assert search(root, embedder, "hybrid", twin_similarity=None)[0] == ("docs/march.md", 1)


def test_vector_mode_keeps_the_cosine_order_and_its_own_ranks(kb: tuple[Path, VectorTableEmbedder]) -> None:
    root, embedder = kb
    assert search(root, embedder, "vector")[:3] == [("docs/march.md", 1), ("docs/between.md", 2), ("docs/june.md", 3)]


def test_the_fusion_fit_scores_fixed_rrf_as_search_fuses(kb: tuple[Path, VectorTableEmbedder],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    root, _ = kb
    (root / "eval").mkdir()
    (root / "eval" / "questions.yaml").write_text(
        "questions:\n  - id: q-june\n    kind: lexical\n"
        f'    query: "{QUESTION}"\n    expect: [docs/june.md]\n', encoding="utf-8")
    assert main(["-C", str(root), "eval", "--fit-fusion", "--json"]) == 0
    fit: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert fit["fixed"]["ndcg@10"] == pytest.approx(1.0)  # June first, as `pnk search` ranks it


def matrix(vectors: dict[int, list[float]]) -> VectorMatrix:
    ids = sorted(vectors)
    return VectorMatrix(np.stack([unit(vectors[i]) for i in ids]), np.asarray(ids, dtype=np.int64),
                        np.zeros(len(ids), dtype=np.int32), ())


def test_twins_take_the_best_rank_among_them_and_equal_cosines_still_share_theirs() -> None:
    rows = matrix({1: [1.0, 0.0, 0.0], 2: [0.0, 1.0, 0.0], 3: [0.0, 0.0, 1.0], 4: [1.0, 0.01, 0.0],
                   5: [0.0, 1.0, 0.02]})
    hits = [(1, 0.9), (2, 0.8), (3, 0.8), (4, 0.7), (5, 0.6)]
    assert shared_ranks(hits, rows) == [1, 2, 2, 1, 2]
    fused = reciprocal_rank_fusion([], hits, 60, vector_ranks=shared_ranks(hits, rows))
    assert {c.chunk_id: c.vector_rank for c in fused} == {1: 1, 2: 2, 3: 2, 4: 1, 5: 2}


def test_a_chain_of_twins_is_one_group() -> None:
    rows = matrix({1: [1.0, 0.0, 0.0], 2: [0.0, 0.0, 1.0], 3: [0.96, 0.28, 0.0], 4: [0.84, 0.54, 0.0]})
    near = rows.vectors @ rows.vectors.T
    assert near[0, 2] >= NEAR_DUPLICATE_COSINE and near[2, 3] >= NEAR_DUPLICATE_COSINE > near[0, 3]
    assert shared_ranks([(1, 0.9), (2, 0.8), (3, 0.7), (4, 0.6)], rows) == [1, 2, 1, 1]


def test_nothing_is_shared_without_twins_rows_or_the_setting() -> None:
    rows = matrix({1: [1.0, 0.0], 2: [0.0, 1.0], 3: [1.0, 0.02]})
    assert shared_ranks([(1, 0.9), (2, 0.5)], rows) is None  # no twins
    assert shared_ranks([(1, 0.9), (3, 0.8)], rows, similarity=None) is None  # off
    assert shared_ranks([(1, 0.9), (3, 0.8)], None) is None  # nothing to compare
    assert shared_ranks([(1, 0.9), (7, 0.8)], rows) is None  # a row the list names is missing
    assert shared_ranks([(1, 0.9), (3, 0.8)], rows) == [1, 1]


def test_settings_default_to_the_shared_threshold() -> None:
    assert SearchSettings().twin_similarity == NEAR_DUPLICATE_COSINE
    assert dataclasses.replace(SearchSettings(), twin_similarity=None).twin_similarity is None
