"""embed: the doit adapter of the embed stage, one task per group of documents, `embed:g00000`
(the embedding and the commits are `pinakes.pipeline.embed`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pinakes.pipeline.embed import embed_group
from pinakes.rules import Scope, StageAdapter, document_is_current, one_per_run
from pinakes.wording import counted

if TYPE_CHECKING:
    from pinakes.pipeline.run import SyncContext


def group_task_name(number: int) -> str:
    return f"g{number:05d}"


def _name(scope: Scope) -> str:
    return group_task_name(scope.group or 0)


def _describe(scope: Scope) -> str:
    first = scope.documents[0].path
    return f"embed and commit {counted(len(scope.documents), 'document')}: {first}" + (
        " …" if len(scope.documents) > 1 else "")


def run_embed(ctx: SyncContext, scope: Scope) -> None:
    embed_group(ctx, scope.documents)


def _uptodate(ctx: SyncContext, scope: Scope) -> bool:
    return all(document_is_current(ctx, item) for item in scope.documents)


ADAPTER = StageAdapter[Scope](
    key="embed", doc="embed one group's passages and commit each document in its own transaction",
    items=one_per_run, name=_name, describe=_describe, action=run_embed, uptodate=_uptodate)
