"""What a search returns: cited passages, a confidence signal, and what to try next.

The same objects reach the CLI, the MCP server and the eval harness, so every field a surface
needs — page range beside the rendered citation, the stale-extraction marker — lives here once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from pinakes.display import heading_trail
from pinakes.search.confidence import Confidence


def shown_headings(stored: object) -> tuple[str, ...] | None:
    """A chunk's stored heading path (a JSON array) as every surface shows it: bounded per heading
    and in depth (`display.heading_trail`), so one 100 kB heading line cannot flood a terminal, a
    `--json` answer or an agent's context; None when the chunk has none."""
    if not isinstance(stored, list):
        return None
    return heading_trail([str(part) for part in cast("list[object]", stored)])


@dataclass(frozen=True)
class StageScores:
    """Each stage's evidence for one passage; None where the stage did not see it."""

    bm25_rank: int | None = None
    bm25_score: float | None = None  # FTS5 bm25(), negated: higher is better
    vector_rank: int | None = None
    cosine: float | None = None
    rrf: float | None = None
    rerank: float | None = None  # cross-encoder sigmoid(logit)
    coverage: float | None = None  # share of the query's keywords present (a tiebreak only)
    graph_rank: int | None = None  # rank in the graph channel's list ([retrieval] graph_channel = "expand")

    def to_dict(self) -> dict[str, object]:
        return {
            "bm25_rank": self.bm25_rank,
            "bm25_score": self.bm25_score,
            "vector_rank": self.vector_rank,
            "cosine": self.cosine,
            "rrf": self.rrf,
            "rerank": self.rerank,
            "coverage": self.coverage,
            "graph_rank": self.graph_rank,
        }


@dataclass(frozen=True)
class Passage:
    text: str
    citation: str
    path: str
    doc_id: str
    title: str | None
    tags: tuple[str, ...]
    heading_path: tuple[str, ...] | None
    page_start: int | None
    page_end: int | None
    char_start: int
    char_end: int
    ordinal: int
    source_type: str
    scores: StageScores
    stale_extraction: str | None = None  # the paid backend whose fingerprint moved on

    def to_dict(self) -> dict[str, object]:
        return {
            "text": self.text,
            "citation": self.citation,
            "path": self.path,
            "doc_id": self.doc_id,
            "title": self.title,
            "tags": list(self.tags),
            "heading_path": list(self.heading_path) if self.heading_path is not None else None,
            "page_start": self.page_start,
            "page_end": self.page_end,
            "char_start": self.char_start,
            "char_end": self.char_end,
            "ordinal": self.ordinal,
            "source_type": self.source_type,
            "scores": self.scores.to_dict(),
            "stale_extraction": self.stale_extraction,
        }


@dataclass(frozen=True)
class SuggestedSearch:
    """A next search for the caller to consider; following it is the caller's decision."""

    query: str
    reason: str
    mode: str = "hybrid"
    filters: dict[str, object] | None = None  # None: the same filters as this search

    def to_dict(self) -> dict[str, object]:
        return {"query": self.query, "reason": self.reason, "mode": self.mode, "filters": self.filters}


@dataclass(frozen=True)
class SearchResult:
    query: str
    passages: tuple[Passage, ...]
    confidence: Confidence
    suggested_next: SuggestedSearch | None
    notes: tuple[str, ...]
    timings: dict[str, float] = field(default_factory=dict[str, float])  # milliseconds per stage
    mode: str = "hybrid"
    reranked: bool = False

    def to_dict(self) -> dict[str, object]:
        return {
            "query": self.query,
            "mode": self.mode,
            "reranked": self.reranked,
            "passages": [passage.to_dict() for passage in self.passages],
            "confidence": self.confidence.to_dict(),
            "suggested_next": self.suggested_next.to_dict() if self.suggested_next else None,
            "notes": list(self.notes),
            "timings_ms": dict(self.timings),
        }
