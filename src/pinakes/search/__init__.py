"""Read-only retrieval: filters, BM25, vectors, fusion, rerank, confidence, citations.

`search()` (one call) and `Searcher` (held by long-lived callers) are the single entry point for
the CLI, the MCP server and eval. Importing this package does not import numpy or any model.
"""

from pinakes.search.core import MODES, Searcher, SearchSettings, search
from pinakes.search.filters import SearchFilters, make_filters
from pinakes.search.results import Passage, SearchResult, StageScores, SuggestedSearch

__all__ = [
    "MODES",
    "Passage",
    "SearchFilters",
    "SearchResult",
    "SearchSettings",
    "Searcher",
    "StageScores",
    "SuggestedSearch",
    "make_filters",
    "search",
]
