"""chunk: the doit adapter of the chunk stage, one task per document (the chunking is
`pinakes.pipeline.chunk`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pinakes.pipeline.chunk import chunk
from pinakes.rules import PipelineRun, StageAdapter, document_is_current, document_name, per_document

if TYPE_CHECKING:
    from pinakes.pipeline.types import DocWork


def run_chunk(run: PipelineRun, item: DocWork) -> None:
    extracted = run.extracted.get(item.doc_id)
    if extracted is not None:  # else it failed, or was kept as indexed
        run.keep(chunk(run.ctx, extracted, run.groups))


def _describe(item: DocWork) -> str:
    return f"chunk {item.path}"


ADAPTER = StageAdapter["DocWork"](
    key="chunk", doc="split each extracted document into passages, counted in model tokens",
    items=per_document, name=document_name, describe=_describe, action=run_chunk,
    uptodate=document_is_current)
