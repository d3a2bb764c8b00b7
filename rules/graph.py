"""graph: the doit adapter of the graph stage (the derivation is `pinakes.pipeline.graph`). The graph
is derived in full whenever the sync changes the indexed documents (or finishes a sync that stopped
before deriving it), and is up to date otherwise."""

from __future__ import annotations

import time

from pinakes.faults import faultpoint
from pinakes.rules import PipelineRun, Scope, StageAdapter, no_name, one_per_run


def run_graph(run: PipelineRun, _scope: Scope) -> None:
    from pinakes.pipeline.graph import derive_graph  # a sync that changes nothing only asks `_uptodate`

    ctx = run.ctx
    faultpoint("sync.before-graph")
    started = time.perf_counter()
    ctx.report.graph_census = derive_graph(ctx.writer(), ctx.kb_id)
    ctx.report.graph_seconds = time.perf_counter() - started


def _uptodate(run: PipelineRun, _scope: Scope) -> bool:
    return not run.changed()


ADAPTER = StageAdapter[Scope](
    key="graph", doc="derive the structural graph (membership, sibling, parent-child, in-section, "
                     "co-located, shared-tag) over active documents",
    items=one_per_run, name=no_name, action=run_graph, uptodate=_uptodate, step="deriving the graph")
