"""graph: the doit adapter of the graph stage (the derivation is `pinakes.pipeline.graph`)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from pinakes.faults import faultpoint
from pinakes.pipeline.graph import derive_graph
from pinakes.rules import Scope, StageAdapter, never_uptodate, no_name, one_per_run

if TYPE_CHECKING:
    from pinakes.pipeline.run import SyncContext


def run_graph(ctx: SyncContext, _scope: Scope) -> None:
    if ctx.read_only:
        return
    faultpoint("sync.before-graph")
    started = time.perf_counter()
    ctx.report.graph_census = derive_graph(ctx.writer(), ctx.kb_id)
    ctx.report.graph_seconds = time.perf_counter() - started


ADAPTER = StageAdapter[Scope](
    key="graph", doc="derive the structural graph (membership, sibling, parent-child, in-section, "
                     "co-located, shared-tag) over active documents",
    items=one_per_run, name=no_name, action=run_graph, uptodate=never_uptodate)
