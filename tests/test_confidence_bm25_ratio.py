"""`bm25_ratio` (search/signals.py) divides the keyword list's best score by a bound made of the
IDFs the keyword side scores with: BM25F's field IDF (issue #46), which counts a document's context
once rather than once per chunk and so exceeds the row IDF for a word only in a document's context.
A bound from the row IDF let the ratio pass 1 on such a query; checked on a KB built by the sync."""

from __future__ import annotations

from pathlib import Path

import pytest

from pinakes.index import schema
from pinakes.search import bm25
from pinakes.search.core import Searcher, SearchSettings
from pinakes.search.generation import open_generation
from pinakes.search.query import analyze
from tests.fakes import HashEmbedder
from tests.kb_helpers import build_kb
from tests.test_keyword_bm25f import corpus

QUERY = "wombat burrow"  # "wombat": in every chunk's context of the manual (its title), once in a note's text


def test_bm25_ratio_is_the_best_score_over_the_bm25f_bound_and_stays_in_0_1(tmp_path: Path) -> None:
    index = build_kb(tmp_path / "kb", corpus(), HashEmbedder(), max_tokens=40, overlap=0)
    generation = open_generation(index, schema.index_signature(index))
    try:
        plan = bm25.plan_keywords(generation.conn, analyze(QUERY, generation.tokenizer), bm25.KeywordOptions(),
                                  generation.chunk_count, generation.document_frequencies)
    finally:
        generation.conn.close()
    field_weights = plan.field_idf("wombat") + plan.field_idf("burrow")
    row_weights = sum(plan.idf(unit) for unit in plan.units)
    assert field_weights > row_weights  # the context-only rows make "wombat" rarer under BM25F
    with Searcher(index, SearchSettings(rerank=False, final_k=20), embedder=HashEmbedder()) as searcher:
        result = searcher.search(QUERY)
    features = result.confidence.features
    assert features is not None
    best = max(p.scores.bm25_score for p in result.passages if p.scores.bm25_score is not None)
    assert features["bm25_ratio"] == pytest.approx(best / (field_weights * (2.5 + 1.0)), abs=1e-5)
    assert 0.0 < features["bm25_ratio"] <= 1.0
    # the row-IDF bound overstated the ratio by the IDFs' quotient
    assert best / (row_weights * 3.5) > features["bm25_ratio"] + 0.01
