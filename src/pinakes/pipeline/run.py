"""What one sync run shares across all of its stages, and only that: `SyncContext`.

It holds what is run-wide: the options, the KB's paths, manifest and build keys, the index
connection, the report every stage adds to, the progress display, and the model (loaded once, on
first use). What passes from one stage to the next is not here: each stage's core takes typed
inputs and returns typed outputs (`pipeline.types`), and the doit glue (`pinakes.rules`) holds them
between tasks. Per-document keys live in the index (`documents.build_key`), committed in the same
transaction as the chunks and vectors they describe, so a crash never leaves a key claiming work
that was not stored.
"""

from __future__ import annotations

import functools
import gc
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes.errors import PinakesError

if TYPE_CHECKING:  # annotations only: `pnk sync` imports this module on every (mostly no-op) run

    from pinakes.embed.base import Embedder
    from pinakes.embed.connect import ConnectedEmbedder
    from pinakes.kb import KBPaths
    from pinakes.manifest import Manifest
    from pinakes.pipeline.chunk_ahead import ChunkAhead
    from pinakes.pipeline.keys import BuildKeys
    from pinakes.pipeline.progress import SyncProgress
    from pinakes.pipeline.report import SyncReport


@dataclass(frozen=True)
class SyncOptions:
    rebuild: bool = False
    index_only: bool = False  # never write into the source tree (post-commit / post-merge hooks)
    sidecars_only: bool = False  # never open the index (pre-commit hook)
    stage: bool = False  # with sidecars_only: only staged documents, and `git add` what was written
    quiet: bool = False
    force_unlock: bool = False
    offline: bool | None = None
    extract_backend: str | None = None  # --extract: overrides [extraction] backend for this run
    # --force (spec §6.3): pay for a PDF whose free text layer is healthy; with an explicit free
    # --extract, replace a paid extraction. Never widens a cap or any other refusal.
    force: bool = False
    api_key_file: Path | None = None  # --api-key-file: the paid backend's key, instead of the environment
    scan_links: bool = False  # --scan-links: read every connected KB now, ignoring the freshness window
    executor: str | None = None  # --executor: where the model runs (overrides [embedding] executor)
    ray_address: str | None = None  # --ray-address: the Ray cluster (overrides [embedding] ray_address)
    no_reuse: bool = False  # --no-reuse: embed every chunk, reusing no stored vector (pipeline/vector_reuse.py)


@dataclass
class SyncContext:
    """One sync run's shared, run-wide state (see the module docstring)."""

    paths: KBPaths
    manifest: Manifest
    options: SyncOptions
    report: SyncReport
    keys: BuildKeys
    progress: SyncProgress
    conn: sqlite3.Connection | None = None  # the writer connection (a reader when only inspecting)
    read_only: bool = False  # `pnk doit list/info`, `pnk status`: compute the plan, change nothing
    rebuilding: bool = False  # `conn` is a new, empty index that replaces the live one when done
    embedder: Embedder | None = None  # injected (tests) or loaded on first use
    chunk_ahead: ChunkAhead | None = None  # a worker chunking the next documents (pipeline/chunk_ahead.py)

    @property
    def kb_id(self) -> str:
        return self.manifest.kb.id

    @property
    def index_path(self) -> Path:
        """The index file this run writes (a rebuild writes the new one beside the live one)."""
        return self.paths.rebuild_db if self.rebuilding else self.paths.index_db

    def writer(self) -> sqlite3.Connection:
        """The writer connection; only steps that run (never an inspection) ask for it."""
        if self.conn is None or self.read_only:
            raise RuntimeError("this sync context has no writer connection")
        return self.conn

    def get_embedder(self) -> Embedder:
        if self.embedder is None and self.connects:
            self.embedder = self._connected_embedder()
        if self.embedder is None:
            from pinakes import embed
            from pinakes.embed import check_max_tokens
            from pinakes.embed.deferred import embedder_for

            # The packaged model's weights wait for the first vector no stored one can stand for.
            self.embedder = embedder_for(self.manifest.embedding, offline=self.options.offline,
                                         load=embed.load_embedder)
            try:
                check_max_tokens(self.manifest.chunking.max_tokens, self.embedder)
            except PinakesError as exc:
                exc.path = self.paths.manifest
                raise
        return self.embedder

    @property
    def executor(self) -> str:
        """Where the model runs this run: a name of the executor registry (embed/registry.py)."""
        return run_executor(self.options, self.manifest)

    @property
    def connects(self) -> bool:
        """Whether this run's executor holds the model away from this process (embed/connect.py)."""
        from pinakes.embed.connect import connects

        return connects(self.executor)

    def connect_cluster(self) -> None:
        """On a run whose executor connects (a Ray cluster), before the pipeline writes anything: it
        answers, its workers start and agree on the model (every refusal of the run comes from here),
        and progress shows them."""
        if not self.connects:
            return
        if self.embedder is None:
            self.embedder = cluster_embedder(self.paths, self.manifest, self.options, rebuilding=self.rebuilding)
        watch = getattr(self.embedder, "watch_workers", None)
        if callable(watch):
            watch(self.progress.workers_alive)

    def _connected_embedder(self) -> Embedder:
        """The model on the executor's workers; this process loads only its tokenizer."""
        return cluster_embedder(self.paths, self.manifest, self.options, rebuilding=self.rebuilding,
                                on_workers=self.progress.workers_alive)

    def release_chunk_ahead(self) -> None:
        """End the run's chunk-ahead worker, and let go of the plan's documents it keeps (its list
        of every DocWork: ~0.4 KB a document with their file states, ~0.3 GB in a 700k first sync)."""
        if self.chunk_ahead is not None:
            self.chunk_ahead.close()
            self.chunk_ahead = None

    def release_embedder(self) -> None:
        """End what the run's model holds beyond this process (a cluster's workers; the identity stays
        readable for the index's meta rows) and the run's chunk-ahead worker."""
        self.release_chunk_ahead()
        close = getattr(self.embedder, "close", None)
        if callable(close):
            close()


# The executor `--ray-address` implies when no --executor is given: the flag names a Ray cluster.
RAY_ADDRESS_EXECUTOR = "ray"


def run_executor(options: SyncOptions, manifest: Manifest) -> str:
    """Where a run's model runs: --executor, else Ray when --ray-address names a cluster, else the
    manifest's [embedding] executor."""
    return options.executor or (RAY_ADDRESS_EXECUTOR if options.ray_address else manifest.embedding.executor)


def cluster_embedder(paths: KBPaths, manifest: Manifest, options: SyncOptions, *, rebuilding: bool,
                     on_workers: Callable[[int], None] | None = None) -> ConnectedEmbedder:
    """The model on the run's executor's workers (embed/connect.py), its input limit checked against
    the chunker's; this process loads only the tokenizer."""
    from pinakes.embed import check_max_tokens
    from pinakes.embed.connect import ConnectRequest, connect

    embedder = connect(run_executor(options, manifest), ConnectRequest(
        manifest.embedding, address=options.ray_address, offline=options.offline, rebuilding=rebuilding,
        on_workers=on_workers))
    try:
        check_max_tokens(manifest.chunking.max_tokens, embedder)
    except PinakesError as exc:
        embedder.close()
        exc.path = paths.manifest
        raise
    return embedder


# Below this many documents a run's freed state is a few MB (~0.75 KB a file: rules.PipelineRun
# .release_documents), and the full collection costs more than it returns: ~40 ms each with the
# model loaded, ~0.13 s of a 300-page first sync's CPU over three calls (docs/perf/sync.md, coldcpu).
FREED_MEMORY_MIN_DOCUMENTS = 10_000


def return_freed_memory(documents: int) -> None:
    """`collect_and_trim` when the KB holds `documents` >= FREED_MEMORY_MIN_DOCUMENTS (below, there
    is little to hand back). Called after each stage past the release of the documents
    (sync/loader.py) and before the self-calibration (calibration/on_sync.py)."""
    if documents >= FREED_MEMORY_MIN_DOCUMENTS:
        collect_and_trim()


def collect_and_trim() -> None:
    """Free what the run let go of and hand the heap's free pages back to the OS: the cycles among
    released objects first (a full collection: the automatic ones may not reach the oldest
    generation before the next stage allocates), then glibc's free pages (it keeps them otherwise,
    and the RSS of the stages after the release would still count them); the trim is a no-op where
    there is no glibc."""
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], object] | None:
    """glibc's malloc_trim, looked up once (finding the library runs `ldconfig`); None without it."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        return getattr(libc, "malloc_trim", None)
    except OSError:
        return None
