"""pair: the doit adapter of the pair stage (the pairing itself is `pinakes.pipeline.pair`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pinakes.pipeline import pair
from pinakes.rules import Scope, StageAdapter, never_uptodate, no_name, one_per_run

if TYPE_CHECKING:
    from pinakes.pipeline.run import SyncContext


def run_pair(ctx: SyncContext, _scope: Scope) -> None:
    plan = pair.compute_plan(ctx)
    if plan.collisions:
        raise pair.collision_error(plan)
    pair.apply(ctx, plan)


ADAPTER = StageAdapter[Scope](
    key="pair", doc="pair documents with sidecars and index rows: skip, re-embed, rename, adopt, mint, delete",
    items=one_per_run, name=no_name, action=run_pair, uptodate=never_uptodate)
