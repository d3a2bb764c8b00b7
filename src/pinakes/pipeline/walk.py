"""The walk stage's core: walk the source roots once per sync and keep the walk cache current.

The walk itself is `pinakes.sources.walk` (stat every file, hash only those whose stat moved). This
stage runs it against the index's walk cache and splits what it found the way doit's file checker
would: a file whose stat moved but whose content did not (touched, copied back, or stamped inside
the racy window of the last walk) is recorded at once, when the walk finds it, because recording it
tells no later stage anything; a file that is new, gone or changed is a change, recorded by the walk
task's action (`record`). The walk task is up to date exactly when there is no change, which with
the settled mark (`pipeline.settled`) is what makes a no-op sync a no-op without starting doit.

The first sync of an index that has never held a document defers hashing its new documents: with no
indexed document, no content can be a rename of one, so pairing needs no hash, and each document is
hashed with its group (`hash_deferred`, just before its sidecar is minted) instead of all before the
first chunk. A deferred document is recorded in the walk cache when it is hashed; one a killed sync
never reached is not in the cache, and the next walk hashes it. A document with a sidecar (a cloned
KB) is paired by it and hashed at once; PDFs and images are never deferred (paid extraction is
planned, and OCR estimated, by content before the run starts).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple

from pinakes.extract.source_types import SOURCE_TYPES
from pinakes.faults import faultpoint
from pinakes.index.schema import transaction
from pinakes.sources import walk as source_walk

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pinakes.pipeline.run import SyncContext
    from pinakes.pipeline.types import DocWork
    from pinakes.sources.walk import FileState, WalkResult

# The source types whose hashing a first sync defers: all but those planned by content before the
# run (paid PDF extraction, the OCR estimate of images).
DEFERRABLE_TYPES = frozenset(SOURCE_TYPES) - {"pdf", "image"}


class Walked(NamedTuple):
    """The walk of one sync: what it found, and which of its cache updates are changes (a NamedTuple:
    every sync, a no-op too, makes one)."""

    found: WalkResult
    started_ns: int  # when it started: the racy window of the next walk is measured from here
    changes: tuple[FileState, ...]  # new files, and files whose content changed, to record
    removals: tuple[str, ...]  # files the cache holds that are gone

    @property
    def changed(self) -> bool:
        return bool(self.changes or self.removals or self.found.deferred)

    @property
    def as_cached(self) -> bool:
        """Whether the walk found every file exactly as the walk cache recorded it, and no other."""
        found = self.found
        return not (found.hashed or found.cache_updates or found.cache_removals or found.unreadable
                    or found.deferred)


def walk_sources(ctx: SyncContext) -> Walked:
    """Walk the KB's source roots against the index's walk cache, account for what is not a
    document in the report, and record the states that are no change (see the module docstring).
    When the index is settled, the cache is loaded only if the walk does not find it as it is
    (`sources.walk.walk_settled`; pipeline/settled.py)."""
    started = time.perf_counter()
    started_ns = time.time_ns()
    conn = ctx.conn
    racy_after = source_walk.racy_after_ns(conn)
    defer = DEFERRABLE_TYPES if _first_sync(ctx) else ()
    expected = _settled_cache_digest(ctx)
    if expected:
        found, loaded = source_walk.walk_settled(ctx.paths.root, ctx.manifest.sources, expected,
                                                 lambda: source_walk.load_walk_cache(conn),
                                                 racy_after=racy_after, defer=defer)
        cache = loaded if loaded is not None else {}
    else:
        cache = source_walk.load_walk_cache(conn)
        found = source_walk.walk(ctx.paths.root, ctx.manifest.sources, cache, racy_after=racy_after, defer=defer)
    if found.deferred:
        _hash_paired_by_sidecar(ctx, found)
    ctx.report.files_hashed = found.hashed
    ctx.report.account_walk(found.skipped, found.unreadable)
    unchanged: list[FileState] = []
    changes: list[FileState] = []
    for state in found.cache_updates:
        cached = cache.get(state.path)
        (unchanged if cached is not None and cached.content_hash == state.content_hash else changes).append(state)
    walked = Walked(found, started_ns, tuple(changes), tuple(found.cache_removals))
    if unchanged and not ctx.read_only:
        _save(ctx, unchanged, (), started_ns)
    ctx.report.timings["walk"] = time.perf_counter() - started
    return walked


def _settled_cache_digest(ctx: SyncContext) -> str | None:
    """The walk cache's stat digest the settled mark carries, when the index is settled for this
    sync's inputs and the sync would trust the mark (not a rebuild, not --force)."""
    from pinakes.pipeline.settled import settled_cache_digest, settled_digest

    if ctx.conn is None or ctx.rebuilding or ctx.options.force:
        return None
    return settled_cache_digest(ctx.conn, settled_digest(ctx.paths.manifest, ctx.keys))


def _first_sync(ctx: SyncContext) -> bool:
    """Whether this sync writes an index that has never held a document (not a rebuild: that pairs
    against the index it replaces), so no document on disk can continue an indexed one."""
    conn = ctx.conn
    return not (ctx.read_only or ctx.rebuilding or conn is None) and \
        conn.execute("SELECT 1 FROM documents LIMIT 1").fetchone() is None


def _hash_paired_by_sidecar(ctx: SyncContext, found: WalkResult) -> None:
    """Hash now the deferred documents that have a sidecar: pairing keys them from their content."""
    if not found.sidecars:
        return  # none has a sidecar: each is hashed with its group
    root = ctx.paths.root
    left: list[str] = []
    docs, source_types = found.docs, found.source_types
    # A walk that found sidecars keeps its documents in dicts (sources/walk.py): never columns here.
    assert isinstance(docs, dict) and isinstance(source_types, dict)
    for path in found.deferred:
        if path not in found.sidecars:
            left.append(path)
            continue
        try:
            state = docs[path]._replace(content_hash=source_walk.hash_file(root / path))
        except OSError as exc:  # as the walk does with a file it cannot read: held, failed
            found.unreadable[path] = exc.strerror or type(exc).__name__
            del docs[path], source_types[path], found.sidecars[path]
            continue
        docs[path] = state
        found.cache_updates.append(state)
        found.hashed += 1
    found.deferred = left


def hash_deferred(ctx: SyncContext, items: Sequence[DocWork]) -> tuple[list[DocWork], list[FileState], set[str]]:
    """`items` with each deferred document (hash "") hashed: (the items carrying their states, the
    states to record in the walk cache, the doc_ids that could not be read, recorded as failed). The
    state is the walk's stat with the hash read now: a write since the walk moved the stat, or falls
    in the next walk's racy window, so the next walk hashes the file again."""
    from pinakes.pipeline.context import context_naming  # a no-op sync defers nothing

    root = ctx.paths.root
    hashed: list[FileState] = []
    unreadable: set[str] = set()
    out: list[DocWork] = []
    for item in items:
        if item.file.content_hash:
            out.append(item)
            continue
        try:
            state = item.file._replace(content_hash=source_walk.hash_file(root / item.path))
        except OSError as exc:
            ctx.report.fail(item.path, "read", f"cannot read the file ({exc.strerror or type(exc).__name__}); "
                                               "the next sync tries again")
            unreadable.add(item.doc_id)
            out.append(item)
            continue
        hashed.append(state)
        naming = context_naming(item.sidecar.title if item.sidecar else None, item.path)
        out.append(replace(item, file=state, key=ctx.keys.key(state.content_hash, item.source_type, naming)))
    ctx.report.files_hashed += len(hashed)
    return out, hashed, unreadable


def record(ctx: SyncContext, walked: Walked) -> None:
    """Record the walk's changes in the walk cache (the walk task's action)."""
    if walked.changed:
        _save(ctx, list(walked.changes), walked.removals, walked.started_ns)
    faultpoint("sync.after-walk")


def _save(ctx: SyncContext, states: list[FileState], removals: tuple[str, ...], started_ns: int) -> None:
    conn = ctx.writer()
    with transaction(conn):
        source_walk.save_walk_cache(
            conn, source_walk.WalkResult(cache_updates=states, cache_removals=list(removals)), started_ns)
