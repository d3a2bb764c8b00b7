"""The evidence a confidence signal is made from (issue #25): cheap numbers about one search,
computed from what the Searcher already holds — the two retrievers' lists, the keyword plan, the
index's per-chunk term counts and the candidates' vectors — so they add no model call and no pass
over the corpus.

Every feature is comparable across queries (a raw BM25 score is not: it grows with the number and
rarity of the query's words), and every one is 0 when its retriever found nothing:

  cosine          the vector list's best cosine
  cosine_margin   best cosine minus the second best: does one passage stand out?
  cosine_spread   best cosine minus the MARGIN_DEPTH-th best: does the top stand out from the field?
  keyword_share   the largest IDF-weighted share of the query's keywords one returned passage holds;
                  a word the index has never seen counts at the highest IDF and is held by no passage,
                  so a query about something absent cannot score high
  bm25_ratio      the keyword list's best BM25 over the query's own upper bound (each kept term at
                  its saturated weight under the IDF the keyword side ranks by, BM25F's field IDF ×
                  (k1 + 1), unknown words at the highest idf), so it lies in [0, 1]
  agreement       the share of the vector list's top AGREEMENT_DEPTH the keyword list's top
                  AGREEMENT_DEPTH also holds: two retrievers pointing at the same passages
  crowding        how crowded the top passage's neighbourhood is: its mean cosine with its
                  CROWDING_DEPTH nearest passages among the vector list's candidates. A passage near
                  everything (an overview, a hub) is where an unanswerable in-domain question lands
  csls            the top passage's cosine corrected for crowding at both ends (cross-domain
                  similarity local scaling, Lample et al. 2018): 2 cos(q, d) - r_q - crowding, r_q
                  the mean of the query's CROWDING_DEPTH best cosines
  related_share   the IDF-weighted share of the query's keywords the top passage holds, a keyword
                  counting as held when the passage holds it or a word WordNet relates to it
                  (lexical/relations.py): a paraphrase's "mittens" is held by a passage on gloves.
                  Words the index has never seen weigh the highest IDF, as in keyword_share, and
                  count when a relative is held
  rerank          only when the search was reranked: the top passage's rerank score (the reader's
                  judgement of the pair, which no similarity feature gives: issue #41); a fit that
                  chooses it has no signal for a search whose reranker did not run

Which of them the shipped signal combines, and with what weights, is the KB's own fit
([retrieval.confidence], eval/fitting.py); docs/QUALITY.md §"#25" records what each one bought.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from pinakes.lexical.relations import WordRelations, packaged
from pinakes.manifest.sections import FEATURES, RERANK_FEATURE
from pinakes.search.bm25 import KeywordPlan

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from pinakes.search.vectors import VectorMatrix

AGREEMENT_DEPTH = 10
MARGIN_DEPTH = 10
CROWDING_DEPTH = 10
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


def scored_weights(plan: KeywordPlan | None) -> float:
    """The sum of the IDFs the keyword side scores the query's kept single terms by (BM25F's field
    IDF, `KeywordPlan.field_idf`, which may exceed the row IDF `query_weights` holds: a word only in
    documents' context counts each document once, not once per chunk), plus the unknown words at
    the highest IDF. Times k1 + 1 it bounds the best keyword score."""
    if plan is None:
        return 0.0
    scored = sum(plan.field_idf(unit.terms[0]) for unit in plan.units if len(unit.terms) == 1)
    return scored + len(plan.unknown_words) * top_idf(plan.chunk_count)


def keyword_features(conn: sqlite3.Connection, asked: tuple[dict[str, float], float],
                     keyword: Sequence[tuple[int, float]], passage_chunk_ids: Sequence[int],
                     k1: float | None, bound_weights: float | None = None) -> dict[str, float]:
    """`asked` is `query_weights(plan)`: the query's keywords and their weights; `bound_weights` is
    `scored_weights(plan)` (None: the row IDFs of `asked`, for a plan without field frequencies)."""
    weights, unknown = asked
    total = sum(weights.values()) + unknown
    if total <= 0.0:
        return {"keyword_share": 0.0, "bm25_ratio": 0.0}
    held = _terms_held(conn, passage_chunk_ids, weights)
    share = max((sum(weights[term] for term in terms) for terms in held.values()), default=0.0) / total
    best = keyword[0][1] if keyword else 0.0
    bound = max(total, bound_weights or 0.0)
    ratio = best / (bound * ((k1 if k1 is not None else FTS5_K1) + 1.0))
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


def related_share(conn: sqlite3.Connection, plan: KeywordPlan | None, top_chunk_id: int,
                  relations: WordRelations, asked: tuple[dict[str, float], float]) -> float:
    """`asked` is `query_weights(plan)`; the plan adds the words the index never saw, as typed."""
    weights, unknown = asked
    total = sum(weights.values()) + unknown
    if plan is None or total <= 0.0:
        return 0.0
    rows = conn.execute("SELECT term FROM chunk_terms WHERE chunk_id = ? AND frequency > 0", (top_chunk_id,))
    passage = {term for (term,) in rows}
    unseen = top_idf(plan.chunk_count)
    keywords = [(unit, weights[unit.terms[0]]) for unit in plan.units if len(unit.terms) == 1]
    keywords += [(unit, unseen) for unit in plan.unknown_units if len(unit.terms) == 1]
    held = sum(weight for unit, weight in keywords
               if unit.terms[0] in passage or not relations.relatives(unit.word).isdisjoint(passage))
    return held / total


def crowding_features(matrix: VectorMatrix, query: NDArray[np.float32], vector: Sequence[tuple[int, float]],
                      top_chunk_id: int) -> dict[str, float]:
    """`crowding` and `csls` of the top passage, from the rows the vector retriever already ranked:
    the passage's neighbourhood is measured among the query's candidates, never by a pass over the
    KB (at 100k chunks that pass costs ~16 ms a search; the candidates' is a few dozen dot products)."""
    rows = _rows_of(matrix, [top_chunk_id, *(chunk_id for chunk_id, _ in vector if chunk_id != top_chunk_id)])
    if not vector or rows.shape[0] < 2 or int(matrix.chunk_ids[rows[0]]) != top_chunk_id:
        return {"crowding": 0.0, "csls": 0.0}
    top = matrix.vectors[rows[0]]
    near = matrix.vectors[rows[1:]] @ top
    depth = min(CROWDING_DEPTH, near.shape[0])
    crowding = float(np.partition(near, near.shape[0] - depth)[-depth:].mean())
    query_crowding = sum(score for _, score in vector[:CROWDING_DEPTH]) / min(CROWDING_DEPTH, len(vector))
    cosine = float(top @ np.asarray(query, dtype=np.float32).reshape(-1))
    return {"crowding": crowding, "csls": 2.0 * cosine - query_crowding - crowding}


def _rows_of(matrix: VectorMatrix, chunk_ids: Sequence[int]) -> NDArray[np.intp]:
    """The matrix rows of `chunk_ids`, in their order (ids the matrix lacks are left out)."""
    wanted = np.asarray(chunk_ids, dtype=np.int64)
    rows = np.searchsorted(matrix.chunk_ids, wanted)
    inside = rows < matrix.chunk_ids.shape[0]
    rows, wanted = rows[inside], wanted[inside]
    return rows[matrix.chunk_ids[rows] == wanted]


def search_features(conn: sqlite3.Connection, plan: KeywordPlan | None, keyword: Sequence[tuple[int, float]],
                    vector: Sequence[tuple[int, float]], passage_chunk_ids: Sequence[int],
                    k1: float | None, matrix: VectorMatrix, query: NDArray[np.float32],
                    rerank_top: float | None = None) -> dict[str, float]:
    """Every feature of one search, rounded so an outcomes file stays stable byte for byte; `rerank`
    only when `rerank_top` (the reranked top passage's score) is given."""
    asked = query_weights(plan)
    features = {**vector_features(vector),
                **keyword_features(conn, asked, keyword, passage_chunk_ids, k1, scored_weights(plan)),
                "agreement": agreement(keyword, vector),
                **crowding_features(matrix, query, vector, passage_chunk_ids[0]),
                "related_share": related_share(conn, plan, passage_chunk_ids[0], packaged(), asked)}
    if rerank_top is not None:
        features[RERANK_FEATURE] = rerank_top
    return {name: round(features[name], 6) for name in (*FEATURES, RERANK_FEATURE) if name in features}
