"""graph: the doit adapter of the graph stage (the derivation is `pinakes.pipeline.graph`). The graph
is derived whenever the sync changes the indexed documents (or finishes a sync that stopped before
deriving it), and is up to date otherwise: updated for the documents this sync changed when nothing
else changed since it was last derived (`pipeline.graph_update`), in full otherwise."""

from __future__ import annotations

import time

from pinakes.faults import faultpoint
from pinakes.rules import PipelineRun, Scope, StageAdapter, no_name, one_per_run


def run_graph(run: PipelineRun, _scope: Scope) -> None:
    from pinakes.pipeline.graph import derive_graph  # a sync that changes nothing only asks `_uptodate`

    ctx = run.ctx
    faultpoint("sync.before-graph")
    started = time.perf_counter()
    ctx.report.graph_census = derive_graph(ctx.writer(), ctx.kb_id, changed=_changed(run))
    ctx.report.graph_seconds = time.perf_counter() - started


def _changed(run: PipelineRun) -> set[str] | None:
    """The documents whose chunks (or whose being active) this sync may have changed, when they are
    all that changed since the graph was last derived: not in a rebuild (a new index), nor after a
    sync that stopped before its end (what it committed is not known here). None: derive in full."""
    from pinakes.pipeline.plan_table import WorkTable

    plan = run.decided()
    if plan is None or run.ctx.rebuilding or run.unfinished():
        return None
    if isinstance(plan.work, WorkTable):
        # A first sync's: every active document is new, more than any update's share (graph_update's
        # UPDATE_SHARE), so the graph is derived in full; not a set of every ID first (~70 MB at 700k).
        return None
    return {item.doc_id for item in plan.work} | {doc.id for doc in plan.deletes}


def _uptodate(run: PipelineRun, _scope: Scope) -> bool:
    return not run.changed()


ADAPTER = StageAdapter[Scope](
    key="graph", doc="derive the structural graph (membership, sibling, parent-child, in-section, "
                     "co-located, shared-tag) over active documents",
    items=one_per_run, name=no_name, action=run_graph, uptodate=_uptodate, step="deriving the graph")
