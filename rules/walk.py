"""walk: the doit adapter of the walk stage (the walk itself is `pinakes.sources.walk`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pinakes.rules import Scope, StageAdapter, never_uptodate, no_name, one_per_run
from pinakes.sources import walk as source_walk

if TYPE_CHECKING:
    from pinakes.pipeline.run import SyncContext


def run_walk(ctx: SyncContext, _scope: Scope) -> None:
    """Walk once per run; `pnk sync` may already have walked before deciding to start doit."""
    if ctx.walk is None:
        ctx.walk = source_walk.walk(ctx.paths.root, ctx.manifest.sources, source_walk.load_walk_cache(ctx.conn),
                                    racy_after=source_walk.racy_after_ns(ctx.conn))


ADAPTER = StageAdapter[Scope](
    key="walk", doc="walk the sources; hash only files whose (size, mtime_ns, ctime_ns, inode) changed",
    items=one_per_run, name=no_name, action=run_walk, uptodate=never_uptodate)  # it is what detects change
