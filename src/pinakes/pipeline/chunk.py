"""The chunk stage's core: split one extracted document into passages.

Token counts come from the embedding model's own tokenizer, so a chunk is never longer than the
model can encode whole (spec §4.6); the chunker itself is `pinakes.chunking`. A document whose chunk
count makes its embedding slow is announced before the embedding starts, so a long pause on one
large file reads as work rather than a hang.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pinakes.errors import PinakesError
from pinakes.pipeline.chunk_document import ChunkSettings, chunk_document
from pinakes.pipeline.types import Chunked, Extracted, Failed

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pinakes.embed.base import Embedder
    from pinakes.manifest.sections import ChunkingSection
    from pinakes.pipeline.chunk_ahead import ChunkAhead
    from pinakes.pipeline.run import SyncContext
    from pinakes.pipeline.token_counts import TokenCountStore
    from pinakes.pipeline.types import DocWork

# A document with at least this many chunks is announced before it is embedded (about a minute of
# embedding on a 2-core CPU at the default model's measured rate).
SLOW_DOCUMENT_CHUNKS = 2000
# A document this long is announced before its chunking too, which alone takes tens of seconds
# (a 20 MB text: about 100 s of reading, chunking and token counting before any embedding).
SLOW_DOCUMENT_CHARS = 2_000_000


def chunk(ctx: SyncContext, document: Extracted, plan: Sequence[Sequence[DocWork]] = ()) -> Chunked | Failed:
    """The document's passages; `Failed` when it failed (recorded, and the run goes on). Raises
    PinakesError for a configuration problem (e.g. max_tokens too large for the model), which stops
    the whole run. Where the run's chunk-ahead worker (pipeline/chunk_ahead.py) already chunked this
    very text, its result is taken; it is the same `chunk_document` over the same inputs. `plan`: the
    run's groups of documents, in order, which the worker is started on at the first call."""
    from pinakes.extract.titles import document_title

    item, extracted = document.work, document.text
    ahead = ctx.chunk_ahead
    if ahead is None and plan:
        ahead = ctx.chunk_ahead = _started_ahead(ctx, plan, item)
    if ahead is not None:
        done = ahead.take(item, extracted.text)
        if done is not None:
            return _announced(ctx, Chunked(item, extracted, done.chunks, done.text_title))
    text_title = document_title(extracted.text, item.source_type, ctx.paths.root / item.path)

    ctx.progress.document(item.path, phase="chunking")
    if len(extracted.text) >= SLOW_DOCUMENT_CHARS:
        ctx.progress.announce(f"{item.path}: {len(extracted.text) / 1e6:.1f} million characters to "
                              "chunk and count first; this document alone takes a while")
    try:
        embedder = ctx.get_embedder()
        store = _remembered_counts(ctx, embedder, len(extracted.text))
        try:
            chunks = chunk_document(extracted, item.source_type, item.path, ctx.paths.root / item.path,
                                    text_title, chunk_settings(ctx.manifest.chunking, embedder),
                                    embedder.count_tokens,
                                    store.count_batch if store else embedder.count_tokens_batch)
        finally:
            if store is not None:
                store.save()
    except PinakesError:
        raise
    except Exception as exc:
        ctx.report.fail(item.path, "chunk", f"{type(exc).__name__}: {exc}")
        return Failed(item)
    return _announced(ctx, Chunked(item, extracted, tuple(chunks), text_title))


def _started_ahead(ctx: SyncContext, plan: Sequence[Sequence[DocWork]], at: DocWork) -> ChunkAhead:
    """The run's chunk-ahead worker over `plan`, the driver now at `at` (one that hands out nothing
    where none runs)."""
    from pinakes.pipeline import chunk_ahead

    if ctx.read_only:
        return chunk_ahead.ChunkAhead(None, ())
    embedder = ctx.get_embedder()
    # A text of SLOW_DOCUMENT_CHARS or more stays the driver's: it is announced before its chunking,
    # and an answer that large would be held ahead in memory.
    return chunk_ahead.start(plan, at, root=ctx.paths.root, embedder=embedder,
                             settings=chunk_settings(ctx.manifest.chunking, embedder),
                             smaller_than=SLOW_DOCUMENT_CHARS, cache_dir=ctx.paths.cache_dir)


def _announced(ctx: SyncContext, chunked: Chunked) -> Chunked:
    if len(chunked.chunks) >= SLOW_DOCUMENT_CHUNKS:
        ctx.progress.announce(f"{chunked.work.path}: {len(chunked.chunks):,} chunks to embed; this document "
                              "alone takes a while")
    return chunked


def chunk_settings(chunking: ChunkingSection, embedder: Embedder) -> ChunkSettings:
    """The run's `ChunkSettings`: the manifest's [chunking] and the model's input limit and counting."""
    return ChunkSettings(chunking.max_tokens, chunking.overlap, chunking.headings, embedder.max_input_tokens,
                         counts_add_up(embedder))


def counts_add_up(embedder: Embedder) -> bool:
    """Whether the embedder counts with a tokenizer whose configuration proves its counts add up over
    whitespace (`TokenCounter.additive_over_whitespace`): the chunker then sums its parts' counts
    for most chunks instead of counting them again (the same counts, a second pass saved)."""
    from pinakes.embed.tokens import TokenCounter

    counter = getattr(embedder, "token_counter", None)
    return isinstance(counter, TokenCounter) and counter.additive_over_whitespace


def _remembered_counts(ctx: SyncContext, embedder: Embedder, chars: int) -> TokenCountStore | None:
    """The store of counts from earlier syncs (pipeline/token_counts.py) for a document this large
    counted by a tokenizer known exactly; None: count everything."""
    from pinakes.embed.tokens import TokenCounter
    from pinakes.pipeline.token_counts import REMEMBERED_DOCUMENT_CHARS, TokenCountStore

    counter = getattr(embedder, "token_counter", None)
    if chars < REMEMBERED_DOCUMENT_CHARS or not isinstance(counter, TokenCounter):
        return None
    return TokenCountStore.open(ctx.paths.cache_dir, counter.fingerprint, embedder.count_tokens_batch)
