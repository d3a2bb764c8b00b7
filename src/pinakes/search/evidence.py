"""A search's confidence: the level from [retrieval.confidence] (search/confidence.py) over the
evidence features of the search (search/signals.py): the keyword plan, both retrievers' lists and
the returned chunks. Features need the vector list; a keyword-only search has none."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pinakes.search.confidence import Confidence, assess

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from pinakes.embed.base import Embedder
    from pinakes.search.bm25 import KeywordPlan
    from pinakes.search.generation import Generation
    from pinakes.search.rerank import Reranker
    from pinakes.search.results import Passage
    from pinakes.search.settings import SearchSettings
    from pinakes.search.vectors import VectorMatrix

Hits = list[tuple[int, float]]


def assessed(generation: Generation, settings: SearchSettings, passages: tuple[Passage, ...],
             reranker: Reranker | None, embedder: Embedder | None,
             evidence: tuple[KeywordPlan | None, Hits, Hits, list[int]],
             ranked: tuple[VectorMatrix | None, NDArray[np.float32] | None]) -> Confidence:
    """The search's confidence. `evidence`: its keyword plan, keyword and vector lists and returned
    chunk ids; `ranked`: the rows its vector side ranked and its query vector."""
    from pinakes.search import vector_tier
    from pinakes.search.signals import search_features

    plan, keyword, vector, chunk_ids = evidence
    features = None
    rerank_top = passages[0].scores.rerank if passages and reranker is not None else None
    if vector and passages:
        rows, query_vector = ranked
        assert rows is not None and query_vector is not None  # a vector list was made
        features = search_features(generation.conn, plan, keyword, vector, chunk_ids, settings.keyword.k1,
                                   vector_tier.with_row(generation, rows, chunk_ids[0]), query_vector, rerank_top)
    cosines = [p.scores.cosine for p in passages if p.scores.cosine is not None]
    return assess(
        passage_count=len(passages),
        rerank_top=rerank_top,
        best_cosine=max(cosines) if cosines else None,
        thresholds=settings.confidence,
        reranker_model=reranker.model if reranker is not None else None,
        embedding_model=embedder.identity.model if embedder is not None else None,
        features=features,
    )
