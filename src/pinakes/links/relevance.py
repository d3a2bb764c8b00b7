"""`pnk links --query` / `pinakes_links` `query`: a document's neighbours ranked by a query with the
search pipeline itself (`Searcher.search`, hybrid, the KB's own [retrieval] settings, reranker
included when it is on), restricted to those documents: one scorer for search and links, never a
second one. Bounded: one search per traversal, over at most the neighbours listed (max_rows),
returning at most `MAX_FINAL_K` passages; a neighbour is ranked by its best passage."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pinakes.links.traverse import QueryRanking
    from pinakes.search.core import Searcher


def by_query(searcher: Searcher, query: str) -> QueryRanking:
    """A QueryRanking that ranks this KB's documents by `query` through `searcher`."""
    from pinakes.links.traverse import QueryRanking

    def rank(doc_ids: list[str]) -> dict[str, tuple[int, float]]:
        from pinakes.lexical.filters import SearchFilters
        from pinakes.search.core import MAX_FINAL_K

        result = searcher.search(query, filters=SearchFilters(doc_ids=tuple(doc_ids)), mode="hybrid",
                                 final_k=MAX_FINAL_K)
        ranks: dict[str, tuple[int, float]] = {}
        for passage in result.passages:  # best first: the first passage of a document is its rank
            if passage.doc_id not in ranks:
                score = passage.scores.rerank if passage.scores.rerank is not None else passage.scores.rrf
                ranks[passage.doc_id] = (len(ranks) + 1, float(score or 0.0))
        return ranks

    return QueryRanking(query, rank)
