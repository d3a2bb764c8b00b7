"""pair: the doit task that pairs documents with sidecars and index rows (the pairing itself is
`pinakes.pipeline.pair`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pinakes.pipeline import pair

if TYPE_CHECKING:
    from pinakes.pipeline.run import SyncContext


def task_pair(ctx: SyncContext) -> dict[str, object]:
    return {
        "basename": "pair",
        "doc": "pair documents with sidecars and index rows: skip, re-embed, rename, adopt, mint, delete",
        "actions": [(run_pair, [ctx])],
        "task_dep": ["walk"],
        "uptodate": [False],
        "verbosity": 0,
    }


def run_pair(ctx: SyncContext) -> bool:
    plan = pair.compute_plan(ctx)
    if plan.collisions:
        ctx.fatal = pair.collision_error(plan)
        return False
    pair.apply(ctx, plan)
    return True
