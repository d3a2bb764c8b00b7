"""The one read-only `search()` the CLI, the MCP server and eval call (spec §4.1).

    query
     └─ coherence         model (index meta vs embedder) and extraction (per-document fingerprints)
     └─ metadata filter   SQL WHERE over documents, applied before both retrievers
     └─ BM25 via FTS5     → candidates_per_source
     └─ vector (NumPy)    → candidates_per_source, positive cosines only
     └─ RRF (k = rrf_k)   → fusion_top_k
          (graph_channel = "expand": one hop from the fused top passages, a third list: search/graph.py)
     └─ cross-encoder     (optional) → final_k
     └─ cited passages, confidence, suggested next search

A `Searcher` holds what is worth keeping between queries — the reader connection, the float32
matrix, the embedder and the reranker — for one index generation. Every call compares
`schema.index_signature` with the generation it holds and reloads when a writer has committed or a
rebuild was installed, so a long-lived MCP server never answers from a stale matrix.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Generator
from concurrent import futures
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes.budget.errors import BudgetError
from pinakes.errors import (
    EmbeddingEndpointError,
    IndexMissingError,
    ModelUnavailableError,
    PinakesError,
    UsageError,
)
from pinakes.index import schema
from pinakes.kb import KBPaths
from pinakes.lexical.filters import SearchFilters, document_where
from pinakes.search import bm25
from pinakes.search.calibrated import KBConfidence
from pinakes.search.confidence import LOW, UNKNOWN
from pinakes.search.coverage import set_coverage
from pinakes.search.evidence import assessed
from pinakes.search.fusion import (
    Candidate,
    add_graph_list,
    cut_with_ties,
    order_fused,
    reciprocal_rank_fusion,
)
from pinakes.search.generation import Generation, Signature, open_generation
from pinakes.search.passages import hydrate, to_passage
from pinakes.search.preload import Loading, read_ahead_in_background
from pinakes.search.query import AnalyzedQuery, analyze
from pinakes.search.rerank import reranked_or_note, reranker_or_note
from pinakes.search.results import SearchResult
from pinakes.search.scripts import vectors_blind_to
from pinakes.search.settings import SearchSettings
from pinakes.search.shared_ranks import near_duplicates_above
from pinakes.search.suggest import suggest_next
from pinakes.search.twice import SharedWork, leaves_out_only

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from pinakes.embed.base import Embedder
    from pinakes.manifest import EmbeddingSection, Manifest
    from pinakes.search.bm25 import KeywordPlan
    from pinakes.search.rerank import Reranker
    from pinakes.search.vectors import VectorMatrix

MODES = ("hybrid", "bm25", "vector")
MAX_FINAL_K = 100  # a caller asking for more gets this many and a note saying so
# One query is one short input: a second runtime thread buys it little and, in hybrid search, takes
# the core the BM25 worker runs on (docs/perf/search.md: with one BLAS thread too, pinakes.search.threads,
# hybrid p50 at 100k chunks fell from 52-60 to 33-35 ms).
QUERY_MODEL_THREADS = 1
SNAPSHOT_RETRIES = 3

Hits = list[tuple[int, float]]  # (chunk_id, score) best first, as each retriever returns them


class Searcher:
    """Read-only retrieval over one KB's index. Thread-safe: calls are serialised."""

    def __init__(
        self,
        index_path: Path | str,
        settings: SearchSettings | None = None,
        *,
        embedder: Embedder | None = None,
        embedder_loader: Callable[[], Embedder] | None = None,
        reranker: Reranker | None = None,
        reranker_loader: Callable[[], Reranker] | None = None,
        embedding_section: EmbeddingSection | None = None,
    ):
        """`embedding_section` is the manifest's [embedding]: when given, every mode (bm25
        included) refuses an index built with another model, before any weights load."""
        self.index_path = Path(index_path)
        self.embedding_section = embedding_section
        self.settings = settings or SearchSettings()
        self._embedder = embedder
        self._embedder_loader = embedder_loader
        self._embedder_loading: Loading[Embedder] | None = None  # start_embedder's, until embedder() takes it
        self._reranker = reranker
        self._reranker_loader = reranker_loader
        self._generation: Generation | None = None
        self._lock = threading.Lock()
        self._worker: futures.ThreadPoolExecutor | None = None

    @classmethod
    def for_kb(cls, kb_root: Path | str, manifest: Manifest | None = None, *,
               offline: bool | None = None) -> Searcher:
        """A Searcher configured from the KB's pinakes.toml; models load on first need."""
        paths = KBPaths(Path(kb_root))
        if manifest is None:
            from pinakes.manifest import load_manifest

            manifest = load_manifest(paths.manifest)
        embedding, rerank = manifest.embedding, manifest.rerank

        def load_embedder() -> Embedder:
            from pinakes.embed import load_for_kb

            return load_for_kb(paths.root, manifest, offline=offline, threads=QUERY_MODEL_THREADS, for_search=True)

        def load_reranker() -> Reranker:
            from pinakes.search.rerank import load_reranker as load

            return load(rerank, offline=offline, kb_root=paths.root, budget=manifest.budget, kb_id=manifest.kb.id)

        return cls(
            paths.index_db,
            SearchSettings.from_retrieval(manifest.retrieval, KBConfidence.for_kb(paths, manifest.retrieval.confidence)),
            embedder_loader=load_embedder,
            reranker_loader=load_reranker,
            embedding_section=embedding,
        )

    def __enter__(self) -> Searcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            if self._worker is not None:
                self._worker.shutdown(wait=True)
                self._worker = None
            if self._generation is not None:
                self._generation.close()
                self._generation = None

    def keyword_worker(self) -> futures.ThreadPoolExecutor:
        """One worker thread, for the keyword retriever of a hybrid search."""
        if self._worker is None:
            self._worker = futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="pinakes-bm25")
        return self._worker

    # ----------------------------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        filters: SearchFilters | None = None,
        mode: str = "hybrid",
        rerank: bool | None = None,
        final_k: int | None = None,
    ) -> SearchResult:
        """Cited passages for `query`. `rerank=None` follows [retrieval] rerank; `final_k=None`
        follows [retrieval] final_k (clamped to MAX_FINAL_K, with a note)."""
        _check_asked(query, mode)
        filters = filters or SearchFilters()
        with self._lock, schema.index_faults(self.index_path):  # a damaged file: the error names --rebuild
            return _Run(self, query.strip(), filters, mode, rerank, final_k).execute()

    def search_twice(self, query: str, without: SearchFilters, *, mode: str = "hybrid") -> tuple[SearchResult, SearchResult]:
        """`search(query, mode=mode)` and `search(query, filters=without, mode=mode)`, where `without`
        only leaves documents out (self-calibration's two searches of a question): the same two
        results, in one snapshot, the work they share done once (search/twice.py)."""
        _check_asked(query, mode)
        if not leaves_out_only(without):
            return self.search(query, mode=mode), self.search(query, filters=without, mode=mode)
        shared = SharedWork(without)
        with self._lock, schema.index_faults(self.index_path), self.snapshot() as generation:
            first = _Run(self, query.strip(), SearchFilters(), mode, None, None, shared).run_in(generation)
            return first, _Run(self, query.strip(), without, mode, None, None, shared).run_in(generation)

    # ----------------------------------------------------------------------------------------

    @contextmanager
    def snapshot(self) -> Generator[Generation]:
        """A read transaction over a generation whose signature did not move while it began, so
        the SQL and the cached matrix describe the same committed state."""
        for _ in range(SNAPSHOT_RETRIES):
            before = schema.index_signature(self.index_path)
            generation = self._generation_for(before)
            conn = generation.conn
            conn.execute("BEGIN")
            try:
                conn.execute("SELECT count(*) FROM meta").fetchone()  # pins the snapshot
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            if schema.index_signature(self.index_path) == before:
                try:
                    yield generation
                finally:
                    conn.execute("ROLLBACK")
                return
            conn.execute("ROLLBACK")
        # A writer kept committing; answer from the freshest generation rather than never.
        generation = self._generation_for(schema.index_signature(self.index_path))
        generation.conn.execute("BEGIN")
        try:
            yield generation
        finally:
            generation.conn.execute("ROLLBACK")

    def _generation_for(self, signature: Signature) -> Generation:
        current = self._generation
        if current is not None and current.signature == signature:
            return current
        if current is not None:
            current.close()
            self._generation = None
        if signature[0] == (0, 0, 0):
            raise IndexMissingError("this KB has no index yet", remedy="run `pnk sync` in the KB",
                                    path=self.index_path)
        self._generation = open_generation(self.index_path, signature)
        return self._generation

    def start_embedder(self) -> None:
        """Begin loading the embedding model on a thread, when it is not loaded (search/preload.py)."""
        if self._embedder is None and self._embedder_loading is None and self._embedder_loader is not None:
            self._embedder_loading = Loading(self._embedder_loader)

    def embedder(self) -> Embedder:
        if self._embedder is None and self._embedder_loading is not None:  # its model, or its error raised here
            loading, self._embedder_loading = self._embedder_loading, None
            self._embedder = loading.result()
        if self._embedder is None:
            if self._embedder_loader is None:
                raise UsageError(
                    "vector search needs an embedding model and this Searcher has none",
                    remedy="pass embedder= or embedder_loader=, or search with mode='bm25'",
                )
            self._embedder = self._embedder_loader()
        return self._embedder

    def reranker(self) -> Reranker:
        if self._reranker is None:
            if self._reranker_loader is None:
                raise ModelUnavailableError(
                    "reranking is on but no reranker is configured for this search",
                    remedy="set `rerank = false` under [retrieval] in pinakes.toml, or pass --no-rerank",
                )
            self._reranker = self._reranker_loader()
        return self._reranker


def _check_asked(query: str, mode: str) -> None:
    # Typed as str, checked as anything: MCP and eval pass values parsed from JSON.
    if not isinstance(query, str) or not query.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
        raise UsageError("the query is empty", remedy='pass the words to search for: pnk search "..."')
    if mode not in MODES:
        raise UsageError(f"unknown search mode {mode!r}", remedy=f"use one of: {', '.join(MODES)}")


class _Run:
    """One search call: the pipeline's stages in order, with their timings and notes. `shared`: the
    work it shares with the other search of the same query (search/twice.py), the unfiltered first."""

    def __init__(self, searcher: Searcher, query: str, filters: SearchFilters, mode: str,
                 rerank: bool | None, final_k: int | None, shared: SharedWork | None = None):
        self.searcher = searcher
        self.shared = shared
        self.settings = searcher.settings
        self.query = query
        self.filters = filters
        self.mode = mode  # downgraded to "bm25" when a remote embedding endpoint cannot answer
        self.asked_mode = mode  # what the caller asked: a downgraded search never suggests its own mode back
        self.rerank = self.settings.rerank if rerank is None else rerank
        self.analyzed: AnalyzedQuery | None = None
        self.query_vector: NDArray[np.float32] | None = None
        self.mask: NDArray[np.bool_] | None = None
        self.ranked_rows: VectorMatrix | None = None  # what the vector side ranks (search/vector_tier.py)
        self.notes: list[str] = []
        self.timings: dict[str, float] = {}
        self.final_k = self._final_k(final_k)
        self.fusion_top_k = max(self.settings.fusion_top_k, self.final_k)
        self.candidates_per_source = max(self.settings.candidates_per_source, self.fusion_top_k)
        self._clock = time.perf_counter()

    def _final_k(self, requested: int | None) -> int:
        if requested is None:
            return max(1, self.settings.final_k)
        # Checked beyond its type: MCP passes k parsed from JSON, where true is an int.
        if (isinstance(requested, bool) or not isinstance(requested, int)  # pyright: ignore[reportUnnecessaryIsInstance]
                or requested < 1):
            raise UsageError(f"the number of results must be a positive integer, got {requested!r}",
                             remedy="pass -k 8")
        if requested > MAX_FINAL_K:
            self.notes.append(f"asked for {requested} passages; returning at most {MAX_FINAL_K}")
            return MAX_FINAL_K
        return requested

    def _lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.timings[stage] = round((now - self._clock) * 1000.0, 3)
        self._clock = now

    def execute(self) -> SearchResult:
        with self.searcher.snapshot() as generation:
            return self.run_in(generation)

    def run_in(self, generation: Generation) -> SearchResult:
        """The search over `generation`, a snapshot the caller holds."""
        started = time.perf_counter()
        searcher = self.searcher
        stale = self._check_index_coherence(generation)
        self._lap("coherence")
        # Models load after the cheap checks, so a mismatched index refuses before any weights load.
        reranker = reranker_or_note(searcher.reranker, self.notes) if self.rerank else None
        plan, keyword, vector, embedder = self._models_and_retrievers(generation)
        embedder = embedder if self.mode != "bm25" else None  # the endpoint failed mid-query
        vector = self._unless_blind(vector, embedder)
        near = near_duplicates_above(vector, self.ranked_rows, self.settings.near_duplicate_cosine) if keyword else None
        ranked = reciprocal_rank_fusion(keyword, vector, self.settings.rrf_k, self.settings.fusion_weights, near)
        if self.settings.graph_channel == "expand" and vector:
            ranked = self._expand(generation, ranked)
        pool = cut_with_ties(ranked, self.fusion_top_k)
        chunk_ids = [candidate.chunk_id for candidate in pool]
        rows = self.shared.hydrated(generation.conn, chunk_ids) if self.shared else hydrate(generation.conn, chunk_ids)
        pool = [candidate for candidate in pool if candidate.chunk_id in rows]
        set_coverage(generation.conn, pool, rows, self._analyzed(generation).units, generation.tokenizer,
                     self.shared.present if self.shared is not None else None)
        fused = order_fused(pool)[: self.fusion_top_k]
        self._lap("fusion")
        final = fused
        if reranker is not None and fused:  # an HTTP reranker that fails leaves fused order and a note
            texts = [rows[c.chunk_id]["text"] for c in fused]
            reranked = reranked_or_note(reranker, self.query, fused, texts, self.notes)
            final, reranker = (reranked, reranker) if reranked is not None else (fused, None)
            self._lap("rerank")
        final = final[: self.final_k]
        passages = tuple(to_passage(candidate, rows[candidate.chunk_id], stale) for candidate in final)
        confidence = assessed(generation, self.settings, passages, reranker, embedder,
                              (plan, keyword, vector, [c.chunk_id for c in final]), (self.ranked_rows, self.query_vector))
        suggestion = None
        if confidence.level in (LOW, UNKNOWN) and self.settings.suggest:
            suggestion = suggest_next(
                self.query, plan=plan, filters=self.filters, mode=self.asked_mode,
                passage_texts=[passage.text for passage in passages],
                document_frequencies=generation.document_frequencies, tokenizer=generation.tokenizer,
            )
        self._lap("finish")
        if plan is not None:
            self.notes.extend(plan.notes)
        if not self.rerank:
            self.notes.append("rerank off: passages are in fused order")
        if stale:
            affected = sorted({p.path for p in passages if p.stale_extraction})
            if affected:
                self.notes.append(
                    "stale paid extraction (still served; re-extract when convenient): " + ", ".join(affected)
                )
        self.timings["total"] = round((time.perf_counter() - started) * 1000.0, 3)
        return SearchResult(
            query=self.query, passages=passages, confidence=confidence, suggested_next=suggestion,
            notes=tuple(self.notes), timings=self.timings, mode=self.mode, reranked=reranker is not None,
        )

    # -- stages ---------------------------------------------------------------------------------

    def _check_index_coherence(self, generation: Generation) -> dict[str, str]:
        """Refuse a manifest/index model mismatch or a free extractor's stale text; return the
        documents whose paid extraction is stale (served, and marked)."""
        from pinakes.embed.coherence import check_extraction_coherence, check_manifest_coherence

        section = self.searcher.embedding_section
        try:
            if section is not None and not generation.manifest_checked:
                check_manifest_coherence(generation.meta, section)
                generation.manifest_checked = True
            if generation.stale_paid is None:
                generation.stale_paid = dict(check_extraction_coherence(generation.conn))
            return generation.stale_paid
        except PinakesError as exc:
            exc.path = exc.path or self.searcher.index_path
            raise

    def _embedder_or_keywords(self) -> Embedder | None:
        """The embedding model; None (and the search downgraded to keywords, said in a note) when a
        remote embedding endpoint cannot answer: an agent gets keyword results, not a traceback."""
        try:
            return self.searcher.embedder()
        except EmbeddingEndpointError as exc:
            self._downgrade(exc.message)
        except BudgetError as exc:
            self._downgrade(f"the budget admits no embedding request now ({exc.message})")
        return None

    def _downgrade(self, why: str) -> None:
        self.notes.append(f"keyword results only (mode bm25, asked for {self.mode}): {' '.join(why.split())}")  # whole: never cut
        self.mode = "bm25"

    def _check_model_coherence(self, generation: Generation, embedder: Embedder) -> Embedder | None:
        from pinakes.embed.coherence import check_model_coherence, remote_model_swap

        if why_not := remote_model_swap(generation.meta, embedder):  # a remote model swapped or unreachable
            self._downgrade(why_not)
            return None
        if generation.model_checked_for != embedder.identity:
            try:
                check_model_coherence(generation.meta, embedder.identity)
            except PinakesError as exc:
                exc.path = exc.path or self.searcher.index_path
                raise
            generation.model_checked_for = embedder.identity
        return embedder

    def _models_and_retrievers(self, generation: Generation
                               ) -> tuple[KeywordPlan | None, Hits, Hits, Embedder | None]:
        """The embedding model, then both retrievers. What needs no model starts first and runs
        while it loads (`_start_early`); the model is checked against the index before use."""
        scope = self._scope(generation)
        job = self._start_early(generation, scope)
        try:
            embedder = self._embedder_or_keywords() if self.mode in ("hybrid", "vector") else None
            self._lap("load_models")
            if embedder is not None:
                embedder = self._check_model_coherence(generation, embedder)
            mask = self.mask = self._prepare_vectors(generation, embedder) if embedder is not None else None
            self._lap("filters")
            plan, keyword, vector = self._retrieve(generation, scope, embedder, mask, job)
        finally:
            if job is not None:  # the worker holds the connection until it is done, whatever failed here
                futures.wait([job])
        return plan, keyword, vector, embedder

    def _start_early(self, generation: Generation, scope: tuple[str, list[object]] | None
                     ) -> futures.Future[tuple[KeywordPlan, Hits]] | None:
        """The model's load on a thread, the vector file read ahead on a generation's first search,
        and in hybrid mode the keyword side on its worker (search/preload.py): a cold search's
        seconds overlap instead of adding up. The keyword job, when started, is returned."""
        if self.mode not in ("hybrid", "vector"):
            return None
        from pinakes.vectors.fileformat import vector_file_path

        self.searcher.start_embedder()
        if not generation.tier_decided and self.settings.vector_tier != "numpy":
            read_ahead_in_background(vector_file_path(self.searcher.index_path.parent))
        if self.mode != "hybrid":
            return None
        if self.shared is not None and self.shared.keyword is not None:  # made by the first search: no thread
            made: futures.Future[tuple[KeywordPlan, Hits]] = futures.Future()
            made.set_result(self.shared.keyword)
            return made
        return self.searcher.keyword_worker().submit(self._keyword, generation, scope)

    def _scope(self, generation: Generation, filters: SearchFilters | None = None) -> tuple[str, list[object]] | None:
        """The chunk-id subquery the filters (this search's) allow, or None when every indexed chunk is."""
        filters = filters or self.filters
        if not filters.active and not generation.has_inactive_chunks:
            return None
        where, params = document_where(filters, "d")
        return f"SELECT c.id FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE {where}", params

    def _retrieve(self, generation: Generation, scope: tuple[str, list[object]] | None,
                  embedder: Embedder | None, mask: NDArray[np.bool_] | None,
                  job: futures.Future[tuple[KeywordPlan, Hits]] | None = None) -> tuple[KeywordPlan | None, Hits, Hits]:
        """Both retrievers; in hybrid mode concurrently (spec §4.1 "parallel"): SQLite, the model
        runtime and NumPy all release the GIL, so BM25 overlaps the model's load, the query
        embedding and the vector search. `job` is the keyword side when `_start_early` began it;
        the vector side's reads share its connection, which SQLite serialises."""
        if self.mode == "bm25":
            plan, keyword = job.result() if job is not None else self._keyword(generation, scope)
            self._lap("bm25")
            return plan, keyword, []
        if self.mode == "vector" or embedder is None:
            try:
                return None, [], self._vector(embedder, generation, mask)
            except (EmbeddingEndpointError, BudgetError) as exc:
                self._downgrade(exc.message)
                return self._retrieve(generation, scope, None, None, job)
        job = job or self.searcher.keyword_worker().submit(self._keyword, generation, scope)
        try:
            vector = self._vector(embedder, generation, mask)
        except (EmbeddingEndpointError, BudgetError) as exc:
            self._downgrade(exc.message)
            vector = []
        finally:
            # Even when the vector side failed: the worker holds the connection until it is done.
            futures.wait([job])
        plan, keyword = job.result()
        self._lap("bm25_wait")
        return plan, keyword, vector

    def _unless_blind(self, vector: list[tuple[int, float]], embedder: Embedder | None) -> list[tuple[int, float]]:
        """Hybrid fusion leaves out the vector list of a model that cannot read the query's script
        (an English-only model and a query mostly in Han, kana or Hangul: search/scripts.py), so
        hybrid is never below keyword search there. `--mode vector` still answers with it."""
        if self.mode != "hybrid" or embedder is None or not vectors_blind_to(self.query, embedder.identity.model):
            return vector
        self.notes.append(f"the embedding model {embedder.identity.model} does not read Chinese, Japanese or "
                          "Korean text; its results were left out of this search")
        return []

    def _expand(self, generation: Generation, ranked: list[Candidate]) -> list[Candidate]:
        """The graph channel: the fused top passages' one-hop neighbours as a third list."""
        from pinakes.search import graph, vector_tier

        assert self.query_vector is not None
        view, allowed = vector_tier.graph_rows(generation, self.searcher.index_path, self.filters, self.mask)
        seeds = [candidate.chunk_id for candidate in ranked[: graph.SEEDS]]
        neighbours = graph.expand(generation.conn, view, self.query_vector, seeds,
                                  self.settings.adjacent_k, edges=graph.EDGES, allowed=allowed)
        self._lap("graph")
        return add_graph_list(ranked, [(n.chunk_id, n.cosine) for n in neighbours], self.settings.rrf_k,
                              graph.GRAPH_WEIGHT)

    def _keyword(self, generation: Generation, scope: tuple[str, list[object]] | None) -> tuple[KeywordPlan, Hits]:
        started = time.perf_counter()
        shared, conn = self.shared, generation.conn
        if shared is not None and shared.keyword is not None:  # the second search's, made by the first
            return shared.keyword
        analyzed = self._analyzed(generation)
        plan = bm25.plan_keywords(conn, analyzed, self.settings.keyword, generation.chunk_count,
                                  generation.document_frequencies)
        if shared is not None:  # the first search makes both lists
            without = self._scope(generation, shared.without)
            assert without is not None
            hits, other = bm25.bm25_search_twice(conn, plan, self.candidates_per_source, scope, without,
                                                 shared.left_out(conn), self.settings.keyword)
            shared.keyword = (plan, other)
        else:
            hits = bm25.bm25_search(conn, plan, self.candidates_per_source, scope_sql=scope[0] if scope else None,
                                    scope_params=scope[1] if scope else None, options=self.settings.keyword)
        self.timings["bm25_ms"] = round((time.perf_counter() - started) * 1000.0, 3)
        return plan, hits

    def _prepare_vectors(self, generation: Generation, embedder: Embedder) -> NDArray[np.bool_] | None:
        """The vector tier and the filter's rows (search/vector_tier.py): before the retrievers run
        side by side, the vector side's only uses of the connection but the file's exact rows."""
        from pinakes.search import vector_tier

        self.ranked_rows, mask, lap = vector_tier.prepare(generation, self.searcher.index_path, embedder.identity,
                                                          self.settings, self.filters, self.notes)
        if lap is not None:
            self._lap(lap)
        return mask

    def _vector(self, embedder: Embedder | None, generation: Generation,
                mask: NDArray[np.bool_] | None) -> Hits:
        from pinakes.search import vector_tier, vectors

        assert embedder is not None
        query_vector = self.query_vector = self.shared.query_vector_of(embedder, self.query) if self.shared \
            else vectors.usable_query_vector(embedder, self.query)
        self._lap("embed_query")
        if self.ranked_rows is None:  # the vector file answers (the candidates' rows are kept)
            hits, self.ranked_rows = vector_tier.approximate(generation, query_vector, self.candidates_per_source,
                                                                     self.filters)
        else:
            hits = vectors.vector_search(self.ranked_rows, query_vector, self.candidates_per_source, mask)
        self._lap("vectors")
        return hits

    def _analyzed(self, generation: Generation) -> AnalyzedQuery:
        if self.analyzed is None:
            self.analyzed = self.shared.analysis(self.query, generation.tokenizer) if self.shared \
                else analyze(self.query, generation.tokenizer)
        return self.analyzed


def search(
    kb_root: Path | str,
    query: str,
    *,
    manifest: Manifest | None = None,
    filters: SearchFilters | None = None,
    mode: str = "hybrid",
    rerank: bool | None = None,
    final_k: int | None = None,
    offline: bool | None = None,
) -> SearchResult:
    """One search over the KB at `kb_root`. Long-lived callers (the MCP server, eval) hold a
    `Searcher` instead, so the matrix and the models load once."""
    with Searcher.for_kb(kb_root, manifest, offline=offline) as searcher:
        return searcher.search(query, filters=filters, mode=mode, rerank=rerank, final_k=final_k)


__all__ = ["MODES", "SearchSettings", "Searcher", "search"]
