"""embed: the doit adapter of the embed stage, one task per group of documents, `embed:g00000`
(the embedding and the commits are `pinakes.pipeline.embed`)."""

from __future__ import annotations

from pinakes.pipeline.embed import embed_group
from pinakes.rules import PipelineRun, Scope, StageAdapter, document_is_current, one_per_run
from pinakes.wording import counted


def group_task_name(number: int) -> str:
    return f"g{number:05d}"


def _name(scope: Scope) -> str:
    return group_task_name(scope.group or 0)


def _describe(scope: Scope) -> str:
    first = scope.documents[0].path
    return f"embed and commit {counted(len(scope.documents), 'document')}: {first}" + (
        " …" if len(scope.documents) > 1 else "")


def run_embed(run: PipelineRun, scope: Scope) -> None:
    chunked = [run.chunked[item.doc_id] for item in scope.documents if item.doc_id in run.chunked]
    try:
        embedded = embed_group(run.ctx, run.embed_state(), chunked)
        run.failed.update(item.doc_id for item in embedded.failed)
    finally:
        for item in scope.documents:  # nothing more is done on a failed document: its work counts as done
            if item.doc_id in run.failed:
                run.ctx.progress.advance(documents=1, bytes_done=item.file.size)
        run.release(scope.documents)  # whatever happened, this group's text is no longer needed


def _uptodate(run: PipelineRun, scope: Scope) -> bool:
    return all(document_is_current(run, item) for item in scope.documents)


ADAPTER = StageAdapter[Scope](
    key="embed", doc="embed one group's passages and commit each document in its own transaction",
    items=one_per_run, name=_name, describe=_describe, action=run_embed, uptodate=_uptodate)
