"""Running the golden set: sync if needed, then every question through the same `Searcher` the CLI
and the MCP server use, configured from the same manifest (spec §7).

  - a question is answered when a passage from one of its expected documents is in the top k;
    `hit_rank` is the rank of the first such passage;
  - a filter question searches with its filters;
  - a multi-hop question runs each hop's own query and is answered only when every hop is; its
    `hit_rank` is the worst hop's, and its confidence is the weakest hop's (an agent following the
    chain stops at the first hop it abstains on);
  - a no-answer question is right when it abstains (confidence low).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes import __version__
from pinakes.eval.golden import GoldenSet, Question
from pinakes.eval.outcomes import Outcome, OutcomesFile
from pinakes.kb import KBPaths
from pinakes.manifest.sections import TOP_SCORE

if TYPE_CHECKING:
    from pinakes.embed.base import Embedder
    from pinakes.lexical.filters import SearchFilters
    from pinakes.manifest import ConfidenceSection, Manifest
    from pinakes.pipeline.report import SyncReport
    from pinakes.search.core import Searcher
    from pinakes.search.rerank import Reranker
    from pinakes.search.results import Passage, SearchResult

SEARCH_MODE = "hybrid"  # what `pnk search` and pinakes_search run by default
_LEVEL_ORDER = {"low": 0, "unknown": 1, "medium": 2, "high": 3}


@dataclass(frozen=True)
class SyncOutcome:
    """What syncing before an eval did, as lines worth printing."""

    warnings: tuple[str, ...]
    report: SyncReport | None


def sync_before_eval(kb_root: Path, *, embedder: Embedder | None = None) -> SyncOutcome:
    """Bring the index up to date without writing into the source tree (a no-op when nothing
    changed). Failures and notes are reported, not fatal: a document that did not make it into the
    index shows up as the questions it can no longer answer."""
    from pinakes.sync import SyncOptions
    from pinakes.sync.engine import run_sync

    report = run_sync(kb_root, SyncOptions(index_only=True, quiet=True), embedder=embedder)
    warnings: list[str] = []
    if report.skipped_reason:
        warnings.append(f"sync skipped ({report.skipped_reason}); evaluating the index as it is")
    for failure in report.failures:
        warnings.append(f"sync failed for {failure.path} [{failure.stage}]: {failure.error}")
    # An index-only sync mints no sidecars, so a new document stays unindexed; its note says so.
    warnings.extend(f"sync: {note}" for note in report.notes)
    return SyncOutcome(tuple(warnings), report)


def open_searcher(kb_root: Path, manifest: Manifest, *, embedder: Embedder | None = None) -> Searcher:
    """The Searcher `pnk search` would use; `embedder` replaces the manifest's model (tests)."""
    from pinakes.search.core import Searcher, SearchSettings

    if embedder is None:
        return Searcher.for_kb(kb_root, manifest)

    def load_reranker() -> Reranker:
        from pinakes.search.rerank import load_reranker as load

        return load(manifest.rerank, offline=None, kb_root=Path(kb_root), budget=manifest.budget, kb_id=manifest.kb.id)

    from pinakes.search.calibrated import KBConfidence

    paths = KBPaths(Path(kb_root))
    return Searcher(
        paths.index_db,
        SearchSettings.from_retrieval(manifest.retrieval, KBConfidence.for_kb(paths, manifest.retrieval.confidence)),
        embedder=embedder,
        reranker_loader=load_reranker,
        embedding_section=manifest.embedding,
    )


def run_header(kb_root: Path, manifest: Manifest, golden: GoldenSet) -> dict[str, object]:
    """Names everything that produced a set of outcomes: models (embedding identity from the index's
    meta, so it says what the vectors actually are), chunking and retrieval settings, and the
    golden set."""
    retrieval = manifest.retrieval
    thresholds = retrieval.confidence
    golden_rel = _relative(golden.path, kb_root)
    return {
        "kb": {"name": manifest.kb.name, "id": manifest.kb.id},
        "golden_set": {"path": golden_rel, "questions": len(golden), "sha256": golden.sha256},
        "embedding": index_embedding(kb_root),
        "chunking": {"strategy": manifest.chunking.strategy, "max_tokens": manifest.chunking.max_tokens,
                     "overlap": manifest.chunking.overlap, "headings": manifest.chunking.headings},
        "reranker": ({"provider": manifest.rerank.provider, "model": manifest.rerank.model,
                      "revision": manifest.rerank.revision} if retrieval.rerank else None),
        "retrieval": {
            "mode": SEARCH_MODE,
            "candidates_per_source": retrieval.candidates_per_source,
            "fusion_top_k": retrieval.fusion_top_k,
            "final_k": max(1, retrieval.final_k),
            "rrf_k": retrieval.rrf_k,
            "rerank": retrieval.rerank,
            "confidence": confidence_header(thresholds),
        },
        "pinakes": __version__,
    }


def confidence_header(thresholds: ConfidenceSection | None) -> dict[str, object] | None:
    """The [retrieval.confidence] block a run compared against, model parameters included (two
    fits with the same thresholds and other weights are different configurations)."""
    if thresholds is None:
        return None
    header: dict[str, object] = {"high": thresholds.high, "low": thresholds.low, "fitted_for": thresholds.fitted_for}
    if thresholds.signal != TOP_SCORE:
        header.update(signal=thresholds.signal, features=list(thresholds.features), weights=list(thresholds.weights),
                      bias=thresholds.bias)
    return header


def index_embedding(kb_root: Path) -> dict[str, object]:
    """The embedding identity the index records in its meta (what its vectors were built with)."""
    from pinakes.index import schema

    conn = schema.open_reader(KBPaths(Path(kb_root)).index_db)
    try:
        meta = schema.read_meta(conn)
    finally:
        conn.close()
    dim = meta.get("embedding_dim")
    return {
        "provider": meta.get("embedding_provider"),
        "model": meta.get("embedding_model"),
        "revision": meta.get("embedding_revision"),
        "sha256": meta.get("embedding_sha256"),
        "dim": int(dim) if dim and dim.isdigit() else None,
    }


def run_questions(searcher: Searcher, questions: Iterable[Question]) -> list[Outcome]:
    return [answer(searcher, question) for question in questions]


def answer(searcher: Searcher, question: Question) -> Outcome:
    filters = question.search_filters() if question.filters else None
    if question.hops:
        hops = [_search(searcher, hop.query, filters) for hop in question.hops]
        ranks = tuple(first_relevant_rank(result.passages, hop.expect)
                      for result, hop in zip(hops, question.hops, strict=True))
        complete = all(rank is not None for rank in ranks)
        level, signal = weakest_confidence(hops)
        return Outcome(
            question.id, question.kind, complete,
            max(rank for rank in ranks if rank is not None) if complete else None,
            level, signal,
            sum(_relevant_count(result.passages, hop.expect) for result, hop in zip(hops, question.hops, strict=True)),
            sum(len(result.passages) for result in hops),
            ranks,
            hop_features=tuple(dict(result.confidence.features) if result.confidence.features is not None else None
                               for result in hops),
        )
    result = _search(searcher, question.query, filters)
    confidence = result.confidence
    features = dict(confidence.features) if confidence.features is not None else None
    if not question.answerable:
        return Outcome(question.id, question.kind, None, None, confidence.level, confidence.signal,
                       features=features)
    rank = first_relevant_rank(result.passages, question.expect)
    return Outcome(question.id, question.kind, rank is not None, rank, confidence.level, confidence.signal,
                   _relevant_count(result.passages, question.expect), len(result.passages), features=features)


def weakest_confidence(results: Sequence[SearchResult]) -> tuple[str, float | None]:
    """The weakest level among several searches, and the lowest signal (None if any had none).
    Levels are monotone in the signal under one set of thresholds, so the two agree."""
    levels = [result.confidence.level for result in results]
    signals = [result.confidence.signal for result in results]
    level = min(levels, key=lambda name: _LEVEL_ORDER.get(name, 1))
    signal = None if any(value is None for value in signals) else min(v for v in signals if v is not None)
    return level, signal


def first_relevant_rank(passages: Sequence[Passage], expect: Sequence[str]) -> int | None:
    wanted = set(expect)
    for rank, passage in enumerate(passages, start=1):
        if passage.path in wanted:
            return rank
    return None


def _relevant_count(passages: Sequence[Passage], expect: Sequence[str]) -> int:
    wanted = set(expect)
    return sum(1 for passage in passages if passage.path in wanted)


def _search(searcher: Searcher, query: str, filters: SearchFilters | None) -> SearchResult:
    return searcher.search(query, filters=filters, mode=SEARCH_MODE)


def outcomes_for(kb_root: Path, manifest: Manifest, golden: GoldenSet, *, embedder: Embedder | None = None) -> OutcomesFile:
    """Every golden question through the KB's Searcher, under the run's header."""
    with open_searcher(kb_root, manifest, embedder=embedder) as searcher:
        rows = run_questions(searcher, golden.questions)
    return OutcomesFile(run_header(kb_root, manifest, golden), tuple(rows))


def _relative(path: Path, root: Path) -> str:
    try:
        return Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return str(path)
