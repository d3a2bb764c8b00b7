"""Read-only retrieval: filters, BM25, vectors, fusion, rerank, confidence, citations.

`search()` (one call) and `Searcher` (held by long-lived callers) are the single entry point for
the CLI, the MCP server and eval. Importing this package does not import numpy or any model, and
its names load on first use: the sync's writer reads two small modules of this package (the CJK
shadow text, the tokenizer's term counts) on every no-op sync, which must not pay for the searcher.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pinakes.lexical.filters import SearchFilters, make_filters
    from pinakes.search.core import MODES, Searcher, SearchSettings, search
    from pinakes.search.results import Passage, SearchResult, StageScores, SuggestedSearch

_HOMES = {
    "MODES": "core", "Searcher": "core", "SearchSettings": "core", "search": "core",
    "SearchFilters": "filters", "make_filters": "filters",
    "Passage": "results", "SearchResult": "results", "StageScores": "results", "SuggestedSearch": "results",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"pinakes.search.{home}"), name)
    globals()[name] = value
    return value


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
