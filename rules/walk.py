"""walk: the doit adapter of the walk stage (the walk is `pinakes.pipeline.walk`, over
`pinakes.sources.walk`).

The walk runs once per sync, as this task's up-to-date check: deciding whether anything changed is
the walk (stat every file, hash only what moved), as doit's own file checker stats and hashes a
task's file dependencies. The task is up to date when the walk found no change; that check, with
pairing's settled mark, is the no-op fast path: a sync whose every task is up to date never starts
doit. Its action records the changes in the walk cache.
"""

from __future__ import annotations

from pinakes.pipeline import walk as core
from pinakes.rules import PipelineRun, Scope, StageAdapter, no_name, one_per_run


def run_walk(run: PipelineRun, _scope: Scope) -> None:
    core.record(run.ctx, run.walked())


def _uptodate(run: PipelineRun, _scope: Scope) -> bool:
    return not run.walked().changed


ADAPTER = StageAdapter[Scope](
    key="walk", doc="walk the sources; hash only files whose (size, mtime_ns, ctime_ns, inode) changed",
    items=one_per_run, name=no_name, action=run_walk, uptodate=_uptodate)
