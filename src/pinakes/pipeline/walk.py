"""The walk stage's core: walk the source roots once per sync and keep the walk cache current.

The walk itself is `pinakes.sources.walk` (stat every file, hash only those whose stat moved). This
stage runs it against the index's walk cache and splits what it found the way doit's file checker
would: a file whose stat moved but whose content did not (touched, copied back, or stamped inside
the racy window of the last walk) is recorded at once, when the walk finds it, because recording it
tells no later stage anything; a file that is new, gone or changed is a change, recorded by the walk
task's action (`record`). The walk task is up to date exactly when there is no change, which with
the settled mark (`pipeline.settled`) is what makes a no-op sync a no-op without starting doit.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, NamedTuple

from pinakes.faults import faultpoint
from pinakes.index.schema import transaction
from pinakes.sources import walk as source_walk

if TYPE_CHECKING:
    from pinakes.pipeline.run import SyncContext
    from pinakes.sources.walk import FileState, WalkResult


class Walked(NamedTuple):
    """The walk of one sync: what it found, and which of its cache updates are changes (a NamedTuple:
    every sync, a no-op too, makes one)."""

    found: WalkResult
    started_ns: int  # when it started: the racy window of the next walk is measured from here
    changes: tuple[FileState, ...]  # new files, and files whose content changed, to record
    removals: tuple[str, ...]  # files the cache holds that are gone

    @property
    def changed(self) -> bool:
        return bool(self.changes or self.removals)

    @property
    def as_cached(self) -> bool:
        """Whether the walk found every file exactly as the walk cache recorded it, and no other."""
        found = self.found
        return not (found.hashed or found.cache_updates or found.cache_removals or found.unreadable)


def walk_sources(ctx: SyncContext) -> Walked:
    """Walk the KB's source roots against the index's walk cache, account for what is not a
    document in the report, and record the states that are no change (see the module docstring)."""
    started = time.perf_counter()
    started_ns = time.time_ns()
    cache = source_walk.load_walk_cache(ctx.conn)
    found = source_walk.walk(ctx.paths.root, ctx.manifest.sources, cache,
                             racy_after=source_walk.racy_after_ns(ctx.conn))
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
