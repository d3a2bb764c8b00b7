"""A document's chunks as a pure function of what its build key holds (issue #45).

`chunk_document` is the chunk stage's work on one document: its text, path, type and own title, the
run's `ChunkSettings` and the model's tokenizer decide every chunk, so the sync's writer
(pipeline/chunk.py) and the chunk-ahead worker (pipeline/chunk_worker.py) make the same chunks of
the same text. It imports nothing of the run (no SyncContext), so a worker process can load it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from pinakes.chunking import Chunk
    from pinakes.extract.types import ExtractedText


class ChunkSettings(NamedTuple):
    """Everything of the run that decides a document's chunks besides its text, path and type: the
    manifest's [chunking], the model's input limit and whether its token counts add up. All of it is
    in every document's build key, so chunks made from the same text under the same settings are the
    same wherever they are made (a worker process: pipeline/chunk_ahead.py)."""

    max_tokens: int
    overlap: int
    headings: str
    max_input_tokens: int
    additive: bool


def chunk_document(extracted: ExtractedText, source_type: str, path: str, absolute: Path, text_title: str | None,
                   settings: ChunkSettings, count_tokens: Callable[[str], int],
                   count_tokens_batch: Callable[[Sequence[str]], list[int]]) -> list[Chunk]:
    """A document's chunks: a pure function of its text, path, type and title (`document_title` of
    the same text) under `settings`, counted by the model's tokenizer (`count_tokens*`)."""
    from pinakes.chunking import chunk_text
    from pinakes.extract.source_types import chunked_as, markup_for
    from pinakes.pipeline.context import CONTEXT_TOKENS

    # Room for the chunk's context ahead of it in the model's input (pipeline/context.py), left
    # only where there will be one: a document without context is chunked and embedded as before.
    reserve = CONTEXT_TOKENS if has_context(extracted, source_type, path, absolute, text_title) else 0
    max_tokens = max(1, min(settings.max_tokens, settings.max_input_tokens - reserve))
    return chunk_text(extracted.text, chunked_as(source_type), max_tokens=max_tokens,
                      overlap=min(settings.overlap, max_tokens - 1), headings=settings.headings,
                      count_tokens=count_tokens, count_tokens_batch=count_tokens_batch, pages=extracted.pages,
                      markup=markup_for(path) if source_type == "text" else None, additive=settings.additive)


def has_context(extracted: ExtractedText, source_type: str, path: str, absolute: Path,
                 text_title: str | None) -> bool:
    """Whether the document's chunks will carry a document context: a source with headings (Markdown,
    the document formats written as Markdown, reST, AsciiDoc) or a title, file-name words, running
    heads or front matter. A sidecar title is not read here; where it alone gives the context,
    `fit_context` cuts it to the room left."""
    from pinakes.extract.front_matter import document_front_matter
    from pinakes.extract.source_types import chunked_as, markup_for
    from pinakes.pipeline.context import document_context

    if chunked_as(source_type) == "markdown" or (source_type == "text" and markup_for(path) is not None):
        return True
    declared = document_front_matter(extracted.text, source_type, absolute)
    return bool(document_context(text_title, path, running_heads=extracted.running_heads,
                                 declared_words=declared.searchable_words()))
