"""The chunk stage's core: split one extracted document into passages.

Token counts come from the embedding model's own tokenizer, so a chunk is never longer than the
model can encode whole (spec §4.6); the chunker itself is `pinakes.chunking`. A document whose chunk
count makes its embedding slow is announced before the embedding starts, so a long pause on one
large file reads as work rather than a hang.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pinakes.errors import PinakesError
from pinakes.pipeline.types import Chunked, Extracted, Failed

if TYPE_CHECKING:
    from pinakes.embed.base import Embedder
    from pinakes.pipeline.run import SyncContext
    from pinakes.pipeline.token_counts import TokenCountStore

# A document with at least this many chunks is announced before it is embedded (about a minute of
# embedding on a 2-core CPU at the default model's measured rate).
SLOW_DOCUMENT_CHUNKS = 2000
# A document this long is announced before its chunking too, which alone takes tens of seconds
# (a 20 MB text: about 100 s of reading, chunking and token counting before any embedding).
SLOW_DOCUMENT_CHARS = 2_000_000


def chunk(ctx: SyncContext, document: Extracted) -> Chunked | Failed:
    """The document's passages; `Failed` when it failed (recorded, and the run goes on). Raises
    PinakesError for a configuration problem (e.g. max_tokens too large for the model), which stops
    the whole run."""
    from pinakes.chunking import chunk_text
    from pinakes.extract.source_types import chunked_as, markup_for
    from pinakes.extract.titles import document_title
    from pinakes.pipeline.context import CONTEXT_TOKENS

    item, extracted = document.work, document.text
    text_title = document_title(extracted.text, item.source_type, ctx.paths.root / item.path)

    ctx.progress.document(item.path, phase="chunking")
    chunking = ctx.manifest.chunking
    if len(extracted.text) >= SLOW_DOCUMENT_CHARS:
        ctx.progress.announce(f"{item.path}: {len(extracted.text) / 1e6:.1f} million characters to "
                              "chunk and count first; this document alone takes a while")
    try:
        embedder = ctx.get_embedder()
        # Room for the chunk's context ahead of it in the model's input (pipeline/context.py), left
        # only where there will be one: a document without context is chunked and embedded as before.
        reserve = CONTEXT_TOKENS if _has_context(ctx, document, text_title) else 0
        max_tokens = max(1, min(chunking.max_tokens, embedder.max_input_tokens - reserve))
        store = _remembered_counts(ctx, embedder, len(extracted.text))
        try:
            chunks = chunk_text(extracted.text, chunked_as(item.source_type), max_tokens=max_tokens,
                                overlap=min(chunking.overlap, max_tokens - 1), headings=chunking.headings,
                                count_tokens=embedder.count_tokens,
                                count_tokens_batch=store.count_batch if store else embedder.count_tokens_batch,
                                pages=extracted.pages,
                                markup=markup_for(item.path) if item.source_type == "text" else None,
                                additive=counts_add_up(embedder))
        finally:
            if store is not None:
                store.save()
    except PinakesError:
        raise
    except Exception as exc:
        ctx.report.fail(item.path, "chunk", f"{type(exc).__name__}: {exc}")
        return Failed(item)
    if len(chunks) >= SLOW_DOCUMENT_CHUNKS:
        ctx.progress.announce(f"{item.path}: {len(chunks):,} chunks to embed; this document alone "
                              "takes a while")
    return Chunked(item, extracted, tuple(chunks), text_title)


def counts_add_up(embedder: Embedder) -> bool:
    """Whether the embedder counts with a tokenizer whose configuration proves its counts add up over
    whitespace (`TokenCounter.additive_over_whitespace`): the chunker then sums its parts' counts
    for most chunks instead of counting them again (the same counts, a second pass saved)."""
    from pinakes.embed.tokens import TokenCounter

    counter = getattr(embedder, "token_counter", None)
    return isinstance(counter, TokenCounter) and counter.additive_over_whitespace


def _has_context(ctx: SyncContext, document: Extracted, text_title: str | None) -> bool:
    """Whether `item`'s chunks will carry a document context: a source with headings (Markdown, the
    document formats written as Markdown, reST, AsciiDoc) or a title, file-name words, running heads
    or front matter. A sidecar title is not read here; where it alone gives the context,
    `fit_context` cuts it to the room left."""
    from pinakes.extract.front_matter import document_front_matter
    from pinakes.extract.source_types import chunked_as, markup_for
    from pinakes.pipeline.context import document_context

    item, extracted = document.work, document.text
    if chunked_as(item.source_type) == "markdown" or (item.source_type == "text" and markup_for(item.path) is not None):
        return True
    declared = document_front_matter(extracted.text, item.source_type, ctx.paths.root / item.path)
    return bool(document_context(text_title, item.path, running_heads=extracted.running_heads,
                                 declared_words=declared.searchable_words()))


def _remembered_counts(ctx: SyncContext, embedder: Embedder, chars: int) -> TokenCountStore | None:
    """The store of counts from earlier syncs (pipeline/token_counts.py) for a document this large
    counted by a tokenizer known exactly; None: count everything."""
    from pinakes.embed.tokens import TokenCounter
    from pinakes.pipeline.token_counts import REMEMBERED_DOCUMENT_CHARS, TokenCountStore

    counter = getattr(embedder, "token_counter", None)
    if chars < REMEMBERED_DOCUMENT_CHARS or not isinstance(counter, TokenCounter):
        return None
    return TokenCountStore.open(ctx.paths.cache_dir, counter.fingerprint, embedder.count_tokens_batch)
