"""graph: the doit task that derives the structural graph (the derivation is `pinakes.pipeline.graph`)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from pinakes.faults import faultpoint
from pinakes.pipeline.graph import derive_graph

if TYPE_CHECKING:
    from pinakes.pipeline.run import SyncContext


def task_graph(ctx: SyncContext) -> dict[str, object]:
    return {
        "basename": "graph",
        "doc": "derive the structural graph (membership, sibling, parent-child, in-section, "
               "co-located, shared-tag) over active documents",
        "actions": [(run_graph, [ctx])],
        "task_dep": ["pair", "embed"],
        "uptodate": [False],
        "verbosity": 0,
    }


def run_graph(ctx: SyncContext) -> bool:
    if ctx.read_only:
        return True
    faultpoint("sync.before-graph")
    started = time.perf_counter()
    census = derive_graph(ctx.writer(), ctx.kb_id)
    ctx.report.graph_census = census
    ctx.report.graph_seconds = time.perf_counter() - started
    return True
