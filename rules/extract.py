"""extract: the doit adapter of the extract stage, one task per document (the extraction, through
the run's extraction backend, is `pinakes.pipeline.extract`).

Documents stream through in groups: a group's extraction waits for the previous group's vectors to
be committed, so only one group's text is ever held. A task is up to date when the index holds the
document at its path, built from its current build key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pinakes.pipeline import extract as core
from pinakes.rules import StageAdapter, document_is_current, document_name, per_document

if TYPE_CHECKING:
    from pinakes.pipeline.pair import DocWork
    from pinakes.pipeline.run import SyncContext


def run_extract(ctx: SyncContext, item: DocWork) -> bool:
    """A document's failure is recorded by the core and the run goes on; an error that ends the run
    is raised, and the adapters' guard turns it into the task failure that stops the sync."""
    core.extract(ctx, item)
    return True


def _extract(ctx: SyncContext, item: DocWork) -> None:
    run_extract(ctx, item)  # looked up when the task runs: a test may wrap it


def _describe(item: DocWork) -> str:
    return f"extract {item.path}"


ADAPTER = StageAdapter["DocWork"](
    key="extract", doc="turn each changed document into its indexed text", items=per_document,
    name=document_name, describe=_describe, action=_extract, uptodate=document_is_current)
