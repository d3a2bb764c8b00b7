"""The evidence a confidence signal is made from (issue #25): cheap numbers about one search,
computed from what the Searcher already holds — the two retrievers' lists, the keyword plan, and the
index's per-chunk term counts — so they add no model call and no pass over the corpus.

Every feature is comparable across queries (a raw BM25 score is not: it grows with the number and
rarity of the query's words), and every one is 0 when its retriever found nothing:

  cosine          the vector list's best cosine
  cosine_margin   best cosine minus the second best: does one passage stand out?
  cosine_spread   best cosine minus the MARGIN_DEPTH-th best: does the top stand out from the field?
  keyword_share   the largest IDF-weighted share of the query's keywords one returned passage holds;
                  a word the index has never seen counts at the highest IDF and is held by no passage,
                  so a query about something absent cannot score high
  bm25_ratio      the keyword list's best BM25 over the query's own upper bound (each kept term at
                  its saturated weight, idf × (k1 + 1), unknown words at the highest idf)
  agreement       the share of the vector list's top AGREEMENT_DEPTH the keyword list's top
                  AGREEMENT_DEPTH also holds: two retrievers pointing at the same passages

Which of them the shipped signal combines, and with what weights, is the KB's own fit
([retrieval.confidence], eval/fitting.py); docs/QUALITY.md §"#25" records what each one bought.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Sequence

from pinakes.manifest.sections import FEATURES
from pinakes.search.bm25 import KeywordPlan

AGREEMENT_DEPTH = 10
MARGIN_DEPTH = 10
FTS5_K1 = 1.2  # the k1 FTS5's own bm25() uses, when no other is configured



def top_idf(chunk_count: int) -> float:
    """Lucene's IDF of a term no chunk holds: the most a term can weigh in this index."""
    return math.log(1.0 + (chunk_count + 0.5) / 0.5)


def vector_features(vector: Sequence[tuple[int, float]]) -> dict[str, float]:
    cosines = [score for _, score in vector]
    if not cosines:
        return {"cosine": 0.0, "cosine_margin": 0.0, "cosine_spread": 0.0}
    second = cosines[1] if len(cosines) > 1 else 0.0
    deep = cosines[min(MARGIN_DEPTH, len(cosines)) - 1] if len(cosines) > 1 else 0.0
    return {"cosine": cosines[0], "cosine_margin": cosines[0] - second, "cosine_spread": cosines[0] - deep}


def agreement(keyword: Sequence[tuple[int, float]], vector: Sequence[tuple[int, float]]) -> float:
    if not keyword or not vector:
        return 0.0
    top_vector = [chunk_id for chunk_id, _ in vector[:AGREEMENT_DEPTH]]
    top_keyword = {chunk_id for chunk_id, _ in keyword[:AGREEMENT_DEPTH]}
    return sum(1 for chunk_id in top_vector if chunk_id in top_keyword) / len(top_vector)


def query_weights(plan: KeywordPlan | None) -> tuple[dict[str, float], float]:
    """Each kept single-term keyword's IDF, and the weight of the words the index has never seen
    (each at the highest IDF). Phrase units (Han, kana, Hangul) are left out: `chunk_terms` counts
    single terms only."""
    if plan is None:
        return {}, 0.0
    weights = {unit.terms[0]: plan.idf(unit) for unit in plan.units if len(unit.terms) == 1}
    unknown = len(plan.unknown_words) * top_idf(plan.chunk_count)
    return weights, unknown


def keyword_features(conn: sqlite3.Connection, plan: KeywordPlan | None, keyword: Sequence[tuple[int, float]],
                     passage_chunk_ids: Sequence[int], k1: float | None) -> dict[str, float]:
    weights, unknown = query_weights(plan)
    total = sum(weights.values()) + unknown
    if total <= 0.0:
        return {"keyword_share": 0.0, "bm25_ratio": 0.0}
    held = _terms_held(conn, passage_chunk_ids, weights)
    share = max((sum(weights[term] for term in terms) for terms in held.values()), default=0.0) / total
    best = keyword[0][1] if keyword else 0.0
    ratio = best / (total * ((k1 if k1 is not None else FTS5_K1) + 1.0))
    return {"keyword_share": share, "bm25_ratio": ratio}


def _terms_held(conn: sqlite3.Connection, chunk_ids: Sequence[int], weights: dict[str, float]) -> dict[int, set[str]]:
    """Which of the query's terms each chunk holds, from the index's own term counts."""
    if not chunk_ids or not weights:
        return {}
    chunk_marks, term_marks = ", ".join("?" * len(chunk_ids)), ", ".join("?" * len(weights))
    held: dict[int, set[str]] = {}
    sql = f"SELECT chunk_id, term FROM chunk_terms WHERE chunk_id IN ({chunk_marks}) AND term IN ({term_marks})"
    for chunk_id, term in conn.execute(sql, [*chunk_ids, *weights]):
        held.setdefault(chunk_id, set()).add(term)
    return held


def search_features(conn: sqlite3.Connection, plan: KeywordPlan | None, keyword: Sequence[tuple[int, float]],
                    vector: Sequence[tuple[int, float]], passage_chunk_ids: Sequence[int],
                    k1: float | None) -> dict[str, float]:
    """Every feature of one search, rounded so an outcomes file stays stable byte for byte."""
    features = {**vector_features(vector),
                **keyword_features(conn, plan, keyword, passage_chunk_ids, k1),
                "agreement": agreement(keyword, vector)}
    return {name: round(features[name], 6) for name in FEATURES}
