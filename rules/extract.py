"""extract: the doit adapter of the extract stage, one task per document (the extraction, through
the run's extraction backend, is `pinakes.pipeline.extract`).

Documents stream through in groups: a group's extraction waits for the previous group's vectors to
be committed, so only one group's text is ever held. A task is up to date when the index holds the
document at its path, built from its current build key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pinakes.pipeline import extract as core
from pinakes.rules import PipelineRun, StageAdapter, document_is_current, document_name, per_document

if TYPE_CHECKING:
    from pinakes.pipeline.types import DocWork


def run_extract(run: PipelineRun, item: DocWork) -> None:
    """A document's failure is recorded by the core and the run goes on; an error that ends the run
    is raised, and the adapters' guard turns it into the task failure that stops the sync."""
    if item.doc_id not in run.failed:  # its sidecar could not be written: nothing more is done on it
        run.keep(core.extract(run.ctx, item, run.backend.extract))


def _extract(run: PipelineRun, item: DocWork) -> None:
    run_extract(run, item)  # looked up when the task runs: a test may wrap it


def _describe(item: DocWork) -> str:
    return f"extract {item.path}"


ADAPTER = StageAdapter["DocWork"](
    key="extract", doc="turn each changed document into its indexed text", items=per_document,
    name=document_name, describe=_describe, action=_extract, uptodate=document_is_current)
