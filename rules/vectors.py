"""vectors: the doit adapter of the vectors stage (the core is `pinakes.pipeline.vector_file`). The
approximate vector file follows the index's active vectors: the step runs whenever the sync changes
the indexed documents (or finishes a sync that stopped before it), and when the file is not what
the last step recorded (deleted, replaced, or never built by this version); otherwise it is up to
date."""

from __future__ import annotations

from pinakes.rules import PipelineRun, Scope, StageAdapter, no_name, one_per_run


def run_vectors(run: PipelineRun, _scope: Scope) -> None:
    from pinakes.pipeline.vector_file import refresh  # a sync that changes nothing only asks `_uptodate`

    refresh(run.ctx)


def _uptodate(run: PipelineRun, _scope: Scope) -> bool:
    if run.changed():
        return False
    from pinakes.pipeline.vector_file import is_current

    ctx = run.ctx
    return is_current(ctx.conn, ctx.paths.state_dir, ctx.manifest.retrieval.vector_tier)


ADAPTER = StageAdapter[Scope](
    key="vectors", doc="keep the approximate vector file beside the index (KBs of 100k+ chunks)",
    items=one_per_run, name=no_name, action=run_vectors, uptodate=_uptodate, step="updating the vector file")
