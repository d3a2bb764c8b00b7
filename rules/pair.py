"""pair: the doit adapter of the pair stage (the pairing itself is `pinakes.pipeline.pair`).

Pairing decides in the task's up-to-date check (the plan, made once: `PipelineRun.decided`) and
applies in its action; the task is up to date when the plan has nothing to apply, and then still
reports what the plan says (its notes, the sidecars with no document). The pairing module is
imported only by a sync that pairs: a settled index has no plan to make.
"""

from __future__ import annotations

from pinakes.rules import PipelineRun, Scope, StageAdapter, no_name, one_per_run


def run_pair(run: PipelineRun, _scope: Scope) -> None:
    from pinakes.pipeline import pair

    plan = run.decided()
    assert plan is not None  # a settled index has nothing to apply: the task is up to date
    run.failed |= pair.apply(run.ctx, plan, run.walked().found, run.indexed)


def _uptodate(run: PipelineRun, _scope: Scope) -> bool:
    run.unfinished()  # whether the last sync ended, read before this one marks its start (the graph asks)
    return not run.has_work()


def _report(run: PipelineRun, _scope: Scope) -> None:
    plan = run.decided()
    run.ctx.report.account_unpaired(run.walked().found.orphan_sidecars, plan.notes if plan is not None else ())


ADAPTER = StageAdapter[Scope](
    key="pair", doc="pair documents with sidecars and index rows: skip, re-embed, rename, adopt, mint, delete",
    items=one_per_run, name=no_name, action=run_pair, uptodate=_uptodate, on_uptodate=_report)
