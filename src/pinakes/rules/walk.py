"""walk: the doit task that walks the sources (the walk itself is `pinakes.sources.walk`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pinakes.sources import walk as source_walk

if TYPE_CHECKING:
    from pinakes.pipeline.run import SyncContext


def task_walk(ctx: SyncContext) -> dict[str, object]:
    """The doit task: walk the sources (always runs; it is what detects change)."""
    return {
        "basename": "walk",
        "doc": "walk the sources; hash only files whose (size, mtime_ns, ctime_ns, inode) changed",
        "actions": [(run_walk, [ctx])],
        "uptodate": [False],
        "verbosity": 0,
    }


def run_walk(ctx: SyncContext) -> bool:
    """Walk once per run; `pnk sync` may already have walked before deciding to start doit."""
    if ctx.walk is None:
        ctx.walk = source_walk.walk(ctx.paths.root, ctx.manifest.sources, source_walk.load_walk_cache(ctx.conn),
                                    racy_after=source_walk.racy_after_ns(ctx.conn))
    return True
