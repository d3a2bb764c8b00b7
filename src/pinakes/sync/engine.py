"""`run_sync()`: the core API behind `pnk sync` and the git hooks.

    lock → open index (or a fresh one for --rebuild) → the declared pipeline (sync/loader.py: walk →
    pair │ per group of documents extract → chunk → embed+commit │ graph │ reverse-scan) → failures +
    meta → (rebuild: atomic install) → sweep the extraction cache

Every stage runs as its doit tasks, and each task's up-to-date check is what decides; an invocation
whose tasks are all up to date is not handed to doit. So a no-op sync never imports doit: the walk
task's check (the walk's stat pre-filter) finds no change, and the pair task's finds the index
settled for today's inputs (`pinakes.pipeline.settled`; without the mark, it pairs and finds the
plan empty), and so on down the declaration. When pairing has work, the driver prepares the run
before doit's first invocation: a rebuild's tombstones and paid rows, the paid run's plan, the mark
that the pipeline started.
"""

from __future__ import annotations

import contextlib
import sqlite3
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from pinakes.embed.base import Embedder
from pinakes.embed.registry import EXECUTORS, PROVIDERS
from pinakes.errors import ModelMismatchError, PinakesError, UsageError, filesystem_error
from pinakes.faults import faultpoint
from pinakes.index import schema
from pinakes.kb import KBPaths, find_kb_root
from pinakes.manifest import Manifest
from pinakes.pipeline.keys import build_keys
from pinakes.pipeline.report import SyncReport
from pinakes.pipeline.run import SyncContext, SyncOptions, run_executor
from pinakes.pipeline.settled import mark_settled, settled_cache_digest
from pinakes.sources import walk
from pinakes.sync.lock import LockBusy, SyncLock
from pinakes.sync.rebuild import discard, install_rebuild, open_previous, stopped_details
from pinakes.wording import counted

if TYPE_CHECKING:
    from pinakes.embed.connect import ConnectedEmbedder
    from pinakes.pipeline.backends import ExtractionBackend
    from pinakes.pipeline.paid_carry import CarryPlan
    from pinakes.pipeline.pair import Plan
    from pinakes.rules import PipelineRun


def run_sync(start: Path | str | None = None, options: SyncOptions | None = None, *,
             embedder: Embedder | None = None, progress_stream: TextIO | None = None) -> SyncReport:
    """Sync the KB containing `start`. Progress goes to `progress_stream` (default: stderr as it is
    now, before doit captures task output), unless `options.quiet`."""
    from pinakes.manifest import load_manifest

    options = options or SyncOptions()
    started = time.perf_counter()
    paths = KBPaths(find_kb_root(start))
    manifest = load_manifest(paths.manifest)
    _check_options(options)
    # Before the lock or the index exists: a refused sync must not leave an empty index behind, which
    # doctor would report as a sync that never completed (the walk checks again, for a root swapped since).
    walk.check_source_roots(paths.root, manifest.sources)
    if options.index_only:  # the one combination a paid backend cannot run under
        from pinakes.pipeline.backends import backend_for

        backend_for(manifest, options).check()
    mode = ("sidecars-only" if options.sidecars_only else "rebuild" if options.rebuild
            else "index-only" if options.index_only else "sync")
    report = SyncReport(str(paths.root), mode, source_exclude=manifest.sources.exclude)
    held: Embedder | None = None  # the run's own model, for the self-calibration after it
    if options.sidecars_only:
        from pinakes.sync.sidecars_only import run_sidecars_only

        run_sidecars_only(paths, manifest, options, report)
    else:
        try:
            with SyncLock(paths.lock, force_unlock=options.force_unlock) as lock:
                report.warnings.extend(lock.warnings)
                try:
                    held = _sync_locked(paths, manifest, options, report, embedder,
                                        progress_stream if progress_stream is not None else sys.stderr)
                except sqlite3.Error as exc:
                    raise _stopped(schema.index_error(paths.index_db, exc), report) from exc
                except OSError as exc:
                    raise _stopped(filesystem_error(exc.filename or paths.state_dir, exc, "sync the KB"),
                                   report) from exc
                except PinakesError as exc:
                    raise _stopped(exc, report) from None
        except LockBusy as busy:
            report.skipped_reason = f"another sync holds the lock ({busy.holder.describe()})"
        else:
            if not report.noop and manifest.retrieval.confidence is None:  # a no-op changes nothing it was made of
                from pinakes.calibration.on_sync import after_sync
                from pinakes.embed.connect import connects
                from pinakes.pipeline.run import run_executor

                stream = progress_stream if progress_stream is not None else sys.stderr
                after_sync(paths, manifest, report, embedder or held,
                           say=None if options.quiet else lambda line: print(line, file=stream, flush=True),
                           model_elsewhere=connects(run_executor(options, manifest)))
    report.wall_seconds = time.perf_counter() - started
    return report


def _stopped(error: PinakesError, report: SyncReport) -> PinakesError:
    """`error` stopped the sync: it carries what the run had done and which documents had failed."""
    if report.mode == "rebuild" and report.installed is None:  # nothing of it is kept
        error.details = [*stopped_details(report), *_failed_lines(report), *error.details]
    elif report.failures or report.indexed:
        done = [f"the sync stopped after indexing {counted(report.indexed, 'document')}; "
                f"{len(report.failures)} had failed:" if report.failures else
                f"the sync stopped after indexing {counted(report.indexed, 'document')} (they are kept)"]
        done += [f"  {f.path} [{f.stage}]: {f.error.splitlines()[0]}" for f in report.failures]
        error.details = done + error.details  # what the error itself says it left (e.g. paid text kept) stays
    return error


def _failed_lines(report: SyncReport) -> list[str]:
    if not report.failures:
        return []
    return [f"{len(report.failures)} had failed:",
            *(f"  {f.path} [{f.stage}]: {f.error.splitlines()[0]}" for f in report.failures)]


def _check_options(options: SyncOptions) -> None:
    from pinakes.extract.registry import PDF_BACKENDS

    if options.sidecars_only and (options.rebuild or options.index_only):
        raise UsageError("--sidecars-only cannot be combined with --rebuild or --index-only",
                         remedy="run them as separate commands")
    if options.sidecars_only and options.scan_links:
        # Reverse-scan rows are index rows and --sidecars-only never opens the index: honouring
        # both would make one flag silently do nothing (spec §6.3).
        raise UsageError("--sidecars-only cannot be combined with --scan-links (--sidecars-only never "
                         "opens the index, where inbound links are kept)",
                         remedy="run `pnk sync --scan-links` on its own")
    if options.stage and not options.sidecars_only:
        raise UsageError("--stage only applies to --sidecars-only", remedy="pnk sync --sidecars-only --stage")
    if options.extract_backend is not None and options.extract_backend not in PDF_BACKENDS:
        raise UsageError(f"unknown extraction backend {options.extract_backend!r}",
                         remedy=f"use one of: {', '.join(PDF_BACKENDS)}")


def _sync_locked(paths: KBPaths, manifest: Manifest, options: SyncOptions, report: SyncReport,
                 embedder: Embedder | None, progress_stream: TextIO) -> Embedder | None:
    """The sync under the lock: open the index (or a new one for a rebuild), run the declared
    pipeline, finish (install a rebuild, sweep the extraction cache). Returns the run's model when
    this process holds it (the self-calibration after the run asks it, rather than loading the
    weights a second time); None when the model ran on a cluster's workers."""
    from pinakes.pipeline.backends import backend_for
    from pinakes.rules import PipelineRun

    backend = backend_for(manifest, options)  # how documents become text, and the run's paid rows
    cluster = _cluster_first(paths, manifest, options) if embedder is None else None
    try:
        ctx, previous, carry = _open_index(paths, manifest, options, report, backend, embedder or cluster,
                                           progress_stream)
    except BaseException:
        if cluster is not None:
            cluster.close()
        raise
    run = PipelineRun(ctx, backend, previous=previous)
    try:
        _run_pipeline(run, carry)
    except BaseException:
        ctx.writer().close()
        if run.previous is not None:
            run.previous.close()
        if ctx.rebuilding:
            discard(paths.rebuild_db)
        raise
    finally:
        ctx.release_embedder()  # a cluster's workers end with the run that started them
    _finish(ctx)
    return None if ctx.connects else ctx.embedder


def _cluster_first(paths: KBPaths, manifest: Manifest, options: SyncOptions) -> ConnectedEmbedder | None:
    """A run that creates an index (a first sync, a rebuild) on an executor that connects (a Ray
    cluster) connects to it first, so an unreachable cluster or a worker's refusal leaves no index
    file behind. None on a local run, and for any other run, which connects once its plan has work
    (a no-op never contacts the cluster)."""
    from pinakes.embed.connect import connects
    from pinakes.pipeline.run import cluster_embedder

    creates_index = options.rebuild or not paths.index_db.exists()
    if not creates_index or not connects(run_executor(options, manifest)) or manifest.embedding.remote is not None:
        return None  # (a remote provider on a cluster is refused by _open_index)
    return cluster_embedder(paths, manifest, options, rebuilding=options.rebuild)


def _open_index(paths: KBPaths, manifest: Manifest, options: SyncOptions, report: SyncReport,
                backend: ExtractionBackend, embedder: Embedder | None,
                progress_stream: TextIO) -> tuple[SyncContext, sqlite3.Connection | None, CarryPlan | None]:
    """The run's context over the index it writes: the live one, or a new one beside it for a
    rebuild (asked for, or forced by a changed embedding model), with the index a rebuild replaces
    (read-only, for pairing) and what it must carry from there."""
    from pinakes.pipeline.progress import SyncProgress

    rebuild = options.rebuild
    executor = run_executor(options, manifest)
    if (options.executor or options.ray_address) and EXECUTORS[executor].refuses(PROVIDERS[manifest.embedding.provider]):
        # The manifest refuses this pair; the flags must not be silently ignored either.
        raise UsageError(f'--executor {executor} runs a local model on a cluster, but [embedding] provider = '
                         f'"{manifest.embedding.provider}" already embeds on its server ({paths.manifest})',
                         remedy=f"drop --executor {executor} / --ray-address")
    if embedder is None and manifest.embedding.remote is not None:
        # Before anything is written: an endpoint that is down stops the sync here, and the probe
        # fingerprints the model behind it (embed/provider_openai.py).
        embedder = _probe_remote_model(paths, manifest)
    if not rebuild and paths.index_db.exists():
        conn = schema.open_writer(paths.index_db)
        swapped = _remote_model_swapped(conn, embedder) if manifest.embedding.remote is not None else None
        if swapped or index_model_changed(conn, manifest):
            conn.close()
            report.notes.append(f"{swapped or 'the embedding model changed since the index was built'}: "
                                "rebuilding the whole index (vectors from two models cannot be mixed)")
            report.mode = "rebuild"
            rebuild = True
    previous: sqlite3.Connection | None = None
    carry: CarryPlan | None = None
    if rebuild:
        # Pairing reads the index being replaced, so a rebuild keeps every identity a plain sync
        # would keep (a rename without its sidecar included); the walk re-hashes every file rather
        # than trusting the old walk cache.
        previous = open_previous(paths.index_db, report)
        # Read before the new database exists: the paid extractions it must not lose (spec §6.4).
        carry = backend.before_rebuild(previous)
        discard(paths.rebuild_db)
        conn = schema.create_index(paths.rebuild_db)
        faultpoint("sync.rebuild-created")
    else:
        if paths.rebuild_db.exists():  # we hold the lock, so no rebuild is running: an interrupted one
            discard(paths.rebuild_db)
            report.notes.append(f"removed {paths.rebuild_db.name} left by an interrupted rebuild (the live "
                                "index was never touched)")
        conn = schema.open_writer(paths.index_db) if paths.index_db.exists() else \
            schema.create_index(paths.index_db)
    ctx = SyncContext(paths=paths, manifest=manifest, options=options, report=report, conn=conn,
                      keys=build_keys(manifest, options.extract_backend), embedder=embedder,
                      progress=SyncProgress.for_stream(progress_stream, quiet=options.quiet),
                      rebuilding=rebuild)
    return ctx, previous, carry


def _run_pipeline(run: PipelineRun, carry: CarryPlan | None) -> None:
    """The declared pipeline (sync/loader.py), started (`_start`) before doit's first invocation when
    pairing has work, then what records its end."""
    from pinakes.sync.loader import run_pipeline, write_dodo_shim

    ctx, report = run.ctx, run.ctx.report
    started_at: list[float] = []

    def start() -> None:
        if not started_at and run.has_work():
            starting = time.perf_counter()
            _start(run, carry)  # a refusal here (a paid run's budget) stops the sync before any task ran
            started_at.append(starting)

    try:
        outcome = run_pipeline(run, before_doit=start)
    except BaseException as exc:
        if started_at:
            _stop(run, stopped=exc)
        raise
    if not started_at:  # no document to process: the sync finished without the pipeline
        _check_outcome(outcome.code, outcome.output)
        _finish_without_pipeline(run, outcome.ran > 0)
        return
    _stop(run)
    report.timings["pipeline"] = time.perf_counter() - started_at[0]
    _check_outcome(outcome.code, outcome.output)
    conn = ctx.writer()
    _record_failures(conn, report)
    _record_meta(conn, ctx, ctx.rebuilding)
    _settle(conn, report, ctx.options, run.settled_digest)
    with contextlib.suppress(OSError):  # a convenience for plain `doit`; never worth failing a sync
        write_dodo_shim(ctx.paths)


def _start(run: PipelineRun, carry: CarryPlan | None) -> None:
    """Before the pipeline's first write: a rebuild keeps its tombstones, the backend clears what
    `--force` reached and copies a rebuild's paid rows, a paid run is checked whole, the index records
    that a pipeline started (doctor tells an interrupted sync from a finished one), progress starts."""
    ctx, plan = run.ctx, run.decided()
    assert plan is not None
    conn = ctx.writer()
    ctx.connect_cluster()  # before the first sidecar or index row: a refusal leaves nothing
    if run.previous is not None:  # read by pairing, and for the tombstones: no longer needed
        _carry_tombstones(run.previous, conn, plan)
        run.previous.close()
        run.previous = None
    run.backend.after_pair(ctx, plan, carry)
    run.backend.prepare(ctx, plan)  # a paid run is checked whole, before anything is written or called
    with schema.transaction(conn):
        schema.write_meta(conn, {"sync_started_at": _now()})
        schema.unsettle(conn)
    from pinakes.pipeline.plan_table import content_hashes_of_type, total_size

    ctx.progress.start(len(plan.work), total_size(plan.work))
    from pinakes.extract.ocr import images_to_read  # a large OCR run is estimated before it starts

    ctx.progress.ocr_run(images_to_read(content_hashes_of_type(plan.work, "image"), ctx.paths.extract_cache))


def _stop(run: PipelineRun, stopped: BaseException | None = None) -> None:
    """After a started pipeline, also when it raised (`stopped`): progress ends, the old index a
    rebuild read vectors from is closed, and the backend says what the paid rows did (a store fault
    of the paid text is raised, or joins `stopped`'s details)."""
    ctx = run.ctx
    ctx.progress.close()
    if run.embedding is not None:
        run.embedding.close(ctx.report)
    run.backend.finish(ctx, stopped=stopped)


def _check_outcome(code: int, output: str) -> None:
    if code != 0:
        raise PinakesError(f"the sync pipeline stopped (doit exit {code}): "
                           f"{(output.strip().splitlines() or ['no output'])[-1]}",
                           remedy="run `pnk sync` again; what was committed is kept. If it recurs, "
                                  "report it with this message")


def _finish(ctx: SyncContext) -> None:
    """After the stages: a rebuild's new index replaces the live one; a clean run sweeps the cache."""
    conn, paths = ctx.writer(), ctx.paths
    if ctx.rebuilding:
        conn.close()  # the install checkpoints the new index on a connection of its own
        faultpoint("sync.before-swap")
        install_rebuild(paths.rebuild_db, paths.index_db, ctx.report)
        faultpoint("sync.after-swap")
    else:
        conn.close()
    if ctx.report.ok:
        _sweep_cache(paths, ctx.report)


def _finish_without_pipeline(run: PipelineRun, ran: bool) -> None:
    """The end of a sync that had no document to process. What it found to do was done by the
    stages whose tasks were due (`ran`): the walk cache recorded, or what an earlier sync that
    started its pipeline and never recorded its end (killed, or stopped past its last commit: in the
    graph, in the reverse scan) left undone; this one then records the completion, so doctor stops
    reporting an interrupted sync. Otherwise the index file is left untouched, as a no-op sync
    leaves it."""
    ctx = run.ctx
    conn = ctx.writer()
    _record_failures(conn, ctx.report)  # clears failures a previous run left, if fixed since
    if run.decided() is not None or not settled_cache_digest(conn, run.settled_digest):
        _settle(conn, ctx.report, ctx.options, run.settled_digest)  # the second: a mark without its cache digest
    if ran and run.unfinished():
        _record_completion(conn)


def _record_completion(conn: sqlite3.Connection, values: dict[str, object] | None = None) -> None:
    """`last_sync_at` now, and no pending start left for doctor to read as an interrupted sync."""
    with schema.transaction(conn):
        schema.write_meta(conn, {"last_sync_at": _now(), **(values or {})})
        conn.execute("DELETE FROM meta WHERE key = 'sync_started_at'")


def index_model_changed(conn: sqlite3.Connection, manifest: Manifest) -> bool:
    """Whether the index's recorded model (its identity meta rows) disagrees with the manifest."""
    from pinakes.embed.coherence import check_manifest_coherence

    try:
        check_manifest_coherence(schema.read_meta(conn), manifest.embedding)
    except ModelMismatchError:
        return conn.execute("SELECT 1 FROM documents LIMIT 1").fetchone() is not None
    return False


def _probe_remote_model(paths: KBPaths, manifest: Manifest) -> Embedder:
    from pinakes.embed import check_max_tokens, load_for_kb

    embedder = load_for_kb(paths.root, manifest)
    try:
        check_max_tokens(manifest.chunking.max_tokens, embedder)
    except PinakesError as exc:
        exc.path = paths.manifest
        raise
    _adopt_recorded_identity(paths.index_db, embedder)
    return embedder


def _adopt_recorded_identity(index_db: Path, embedder: Embedder) -> None:
    """The live index's fingerprint taken as the remote model's when its probe still answers as
    recorded (embed/remote_identity.py): before anything reads the identity, so a plain sync keeps
    every content key and a `--rebuild` reuses the old index's vectors, however the server's float
    noise moved the probe. A swapped model is left as it answered (`_remote_model_swapped` says so)."""
    from pinakes.embed.coherence import fingerprint_change

    if not index_db.exists():
        return
    try:
        conn = sqlite3.connect(f"{index_db.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)
        try:
            meta = schema.read_meta(conn)
        finally:
            conn.close()
    except sqlite3.Error:
        return  # an index that cannot be read: the sync's own checks say so
    fingerprint_change(meta, embedder)


def _remote_model_swapped(conn: sqlite3.Connection, embedder: Embedder | None) -> str | None:
    """Why the index's vectors no longer match the remote model (its probe moved), or None. An
    index from before probe vectors were recorded gets them here, once, when its fingerprint holds."""
    from pinakes.embed.coherence import fingerprint_change
    from pinakes.embed.remote_identity import probe_meta

    if embedder is None or conn.execute("SELECT 1 FROM documents LIMIT 1").fetchone() is None:
        return None
    meta = schema.read_meta(conn)
    swapped = fingerprint_change(meta, embedder)
    recorded = probe_meta(embedder)
    if swapped is None and any(meta.get(key) != value for key, value in recorded.items()):
        with schema.transaction(conn):
            schema.write_meta(conn, recorded)
    return swapped


def _settle(conn: sqlite3.Connection, report: SyncReport, options: SyncOptions, digest: str) -> None:
    """Mark the index settled when this run left nothing for the next one to pair again."""
    if options.index_only or report.failures:
        return  # documents may still need their sidecars or a retry: keep deciding
    if settled_cache_digest(conn, digest) or conn.execute("SELECT 1 FROM failures LIMIT 1").fetchone():
        return  # already marked (a no-op leaves the index file untouched), or failures are pending; a
        # mark an earlier version wrote (no cache digest) is written again, once
    faultpoint("sync.before-settle")  # killed here: the walk cache and index are written, no mark
    with schema.transaction(conn):
        mark_settled(conn, digest)


def _record_failures(conn: sqlite3.Connection, report: SyncReport) -> None:
    if not report.failures and conn.execute("SELECT 1 FROM failures LIMIT 1").fetchone() is None:
        return  # nothing to record or clear: a no-op sync leaves the index file untouched
    now = datetime.now(UTC).isoformat(timespec="seconds")
    with schema.transaction(conn):
        conn.execute("DELETE FROM failures")
        conn.executemany("INSERT INTO failures (path, stage, error, at) VALUES (?, ?, ?, ?)",
                         [(f.path, f.stage, f.error, now) for f in report.failures])


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _record_meta(conn: sqlite3.Connection, ctx: SyncContext, rebuild: bool) -> None:
    from pinakes.ids import new_ulid

    now = _now()
    values: dict[str, object] = {"last_sync_at": now, "vector_tier": "numpy", "chunking": ctx.keys.chunking}
    meta = schema.read_meta(conn)
    if rebuild or "build_id" not in meta:
        values["build_id"] = new_ulid()
        values["built_at"] = now
    if ctx.embedder is not None:
        from pinakes.embed.remote_identity import model_meta

        values.update(model_meta(ctx.embedder))
    _record_completion(conn, values)


def _carry_tombstones(previous: sqlite3.Connection, conn: sqlite3.Connection, plan: Plan) -> None:
    """Soft-deleted documents keep their rows across a rebuild: a deleted row is the identity the
    next sync's pairing revives or renames from."""
    living = {item.doc_id for item in plan.work} | {doc_id for doc_id, _path in plan.refresh}
    deleted = {doc.id for doc in plan.deletes}
    rows = [row for row in previous.execute(
        "SELECT id, path, content_hash, sidecar_hash, mtime, source_type, title, metadata, "
        "extraction_backend, extraction_fingerprint, indexed_at, state FROM documents")
        if row[0] not in living and (row[-1] == "deleted" or row[0] in deleted)]
    if not rows:
        return
    with schema.transaction(conn):
        conn.executemany(
            "INSERT INTO documents (id, path, content_hash, sidecar_hash, mtime, source_type, title, "
            "metadata, extraction_backend, extraction_fingerprint, indexed_at, state) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'deleted') ON CONFLICT (id) DO NOTHING",
            [row[:-1] for row in rows])


def _sweep_cache(paths: KBPaths, report: SyncReport) -> None:
    """After a fully successful sync, drop free extraction-cache entries no active document uses."""
    if not paths.extract_cache.is_dir():
        return
    from pinakes.extract.cache import ExtractCache

    conn = schema.open_reader(paths.index_db)
    try:
        active = {row[0] for row in conn.execute(
            "SELECT content_hash FROM documents WHERE state = 'active'")}
    finally:
        conn.close()
    paid_orphans = ExtractCache(paths.extract_cache).sweep(active).paid_orphans
    if paid_orphans:
        report.notes.append(f"{counted(len(paid_orphans), 'paid extraction')} in the cache "
                            f"{'belongs' if len(paid_orphans) == 1 else 'belong'} to no active "
                            "document; kept (never deleted automatically)")
