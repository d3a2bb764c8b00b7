"""The [retrieval] widths and switches one `Searcher` runs every query with (spec §4.1)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pinakes.manifest.sections import RetrievalSection
from pinakes.search import bm25
from pinakes.search.calibrated import KBConfidence
from pinakes.search.confidence import Thresholds
from pinakes.search.fusion import FIXED_RRF, FusionWeights
from pinakes.search.shared_ranks import NEAR_DUPLICATE_COSINE

# The [retrieval] defaults live in the manifest's section (one home); SearchSettings takes them from it.
_RETRIEVAL = RetrievalSection()


@dataclass(frozen=True)
class SearchSettings:
    """The [retrieval] widths and switches a search runs with (defaults: spec §4.1)."""

    candidates_per_source: int = _RETRIEVAL.candidates_per_source
    fusion_top_k: int = _RETRIEVAL.fusion_top_k
    final_k: int = _RETRIEVAL.final_k
    rrf_k: int = _RETRIEVAL.rrf_k
    rerank: bool = _RETRIEVAL.rerank
    confidence: Thresholds | KBConfidence | None = _RETRIEVAL.confidence
    keyword: bm25.KeywordOptions = field(default_factory=bm25.KeywordOptions)
    graph_channel: str = _RETRIEVAL.graph_channel
    adjacent_k: int = _RETRIEVAL.adjacent_k
    vector_tier: str = _RETRIEVAL.vector_tier
    fusion_weights: FusionWeights = FIXED_RRF  # [retrieval.fusion]'s weights; its rrf_k is in rrf_k
    # Near-duplicates defer to the keyword side in hybrid fusion (search/shared_ranks.py); None: off (a bench's arm).
    near_duplicate_cosine: float | None = NEAR_DUPLICATE_COSINE
    # A search whose confidence is low or unknown suggests what to try next; self-calibration reads
    # only the evidence, and on an uncalibrated KB every one of its searches would build one.
    suggest: bool = True
    # Many searches in a process whose memory is bounded (self-calibration): the vector file's pages
    # are handed back piece by piece after each search (vectors/approximate.py `release_pages`).
    release_vector_pages: bool = False

    @classmethod
    def from_retrieval(cls, retrieval: RetrievalSection, confidence: KBConfidence | None = None) -> SearchSettings:
        """From the manifest's [retrieval] section (`confidence`: the KB's sources, search/calibrated.py)."""
        return cls(
            candidates_per_source=retrieval.candidates_per_source,
            fusion_top_k=retrieval.fusion_top_k,
            final_k=retrieval.final_k,
            rrf_k=retrieval.fusion.rrf_k if retrieval.fusion is not None else retrieval.rrf_k,
            rerank=retrieval.rerank,
            confidence=confidence or retrieval.confidence,
            graph_channel=retrieval.graph_channel,
            adjacent_k=retrieval.adjacent_k,
            vector_tier=retrieval.vector_tier,
            fusion_weights=FIXED_RRF if retrieval.fusion is None else FusionWeights(
                retrieval.fusion.keyword_weight, retrieval.fusion.vector_weight),
        )
