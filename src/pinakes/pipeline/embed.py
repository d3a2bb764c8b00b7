"""The embed stage's core: vectors for one group's chunks, then one transaction per document.

The model is the cost of a sync, so a group's chunks are embedded together across its documents,
longest first, in calls of a few model batches (the embedder caps each batch by padded tokens, which
bounds its memory; sorting across the group keeps the padding down). The keys stay per
document: each document's row, chunks, vectors and key are committed together in its own
transaction, so the index never half-describes a document and a crash loses at most the group in
flight. A document larger than one embedding slice streams: its chunks are embedded slice by slice
and written inside its still-open transaction, so one huge file never holds all its vectors at once
and shows progress throughout.
"""

from __future__ import annotations

import json
import sqlite3
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import numpy as np

from pinakes.chunking import Chunk
from pinakes.embed.base import DispatchAhead
from pinakes.embed.batching import calls_of_whole_batches
from pinakes.embed.deferred import DeferredEmbedder
from pinakes.embed.remote_identity import model_meta
from pinakes.embed.tokens import known_or_counted
from pinakes.errors import PinakesError
from pinakes.extract.front_matter import document_front_matter
from pinakes.extract.registry import EXTRACTORS
from pinakes.faults import faultpoint
from pinakes.index.chunk_rows import ChunkRow, heading_json, insert_chunks
from pinakes.index.schema import index_error, transaction, write_meta
from pinakes.index.vector_rows import row_faults
from pinakes.lexical.scripts import shadow
from pinakes.links.store import write_links
from pinakes.links.text_edges import write_text_links
from pinakes.links.text_links import parse_text_links
from pinakes.pipeline.chunk import counts_add_up
from pinakes.pipeline.context import document_context, embedding_input, fitted_contexts
from pinakes.pipeline.types import Chunked, DocWork, Embedded
from pinakes.pipeline.vector_reuse import ReusePlan, VectorReuse, open_reuse

if TYPE_CHECKING:
    from pinakes.pipeline.report import SyncReport
    from pinakes.pipeline.run import SyncContext
    from pinakes.sidecar.model import Sidecar

# Chunks embedded per call for a document that streams, and the most chunks one cross-document call
# takes: a few model batches, so progress moves every few seconds even on a slow CPU (at 256 the
# measured gaps reached 35-65 s) while each call still fills the model's batches.
EMBED_SLICE_CHUNKS = 64

# The rows of a document's previous version that its new version keeps, while it is written.
_KEPT = "temp.pnk_kept_chunks"

_Move = tuple[int, int, int, int]  # a kept row's (ordinal, char_start, char_end, id)

VectorSource = Callable[[Sequence[Chunk], Sequence[int]], np.ndarray]  # (chunks, their positions in the document) -> rows


@dataclass
class EmbedRun:
    """What the embed stage carries from one group of a run to the next: the content-addressed
    lookups (made on first use, pipeline/vector_reuse.py) and whether the index records the model's
    identity yet (written with the first vectors)."""

    reuse: VectorReuse | None = None
    model_recorded: bool = False

    def lookups(self, ctx: SyncContext) -> VectorReuse:
        if self.reuse is None:
            self.reuse = open_reuse(ctx)
        return self.reuse

    def close(self, report: SyncReport) -> None:
        """The old index a rebuild read vectors from is closed before the new one replaces it."""
        if self.reuse is not None:
            self.reuse.close()
            if note := self.reuse.unreadable_note():
                report.notes.append(note)


@dataclass
class _Done:
    """A group's documents as they are committed or fail."""

    written: list[DocWork] = field(default_factory=list[DocWork])
    failed: list[DocWork] = field(default_factory=list[DocWork])

    def add(self, document: Chunked, kept: int | None) -> None:
        (self.failed if kept is None else self.written).append(document.work)


def embed_group(ctx: SyncContext, run: EmbedRun, documents: Sequence[Chunked]) -> Embedded:
    """Embed one group's chunks and commit each document in its own transaction. Raises
    PinakesError when the model cannot be loaded or refuses its configuration (the run stops); a
    document that fails alone is recorded and the run goes on."""
    done = _Done()
    ready: list[Chunked] = []
    for document in documents:
        found = _with_sidecar(ctx, document)
        if found is None:
            done.failed.append(document.work)
        else:
            ready.append(found)
    small = [document for document in ready if len(document.chunks) <= EMBED_SLICE_CHUNKS]
    large = [document for document in ready if len(document.chunks) > EMBED_SLICE_CHUNKS]
    embedder = ctx.get_embedder()
    if isinstance(embedder, DispatchAhead):
        _embed_ahead(ctx, run, embedder, small, done)
    elif small:
        # All of the group's small documents in one pass: the model then sees their chunks
        # sorted by length across the whole group (compute_vectors), not within 64-chunk runs of
        # consecutive documents, which padded 13-59% more tokens on the development corpora.
        _embed_small_batch(ctx, run, small, done)
    for document in large:
        _write_streaming(ctx, run, document, done)
    return Embedded(tuple(done.written), tuple(done.failed))


def _cross_document_batches(documents: list[Chunked]) -> Iterator[list[Chunked]]:
    """Consecutive documents whose chunks add up to at most EMBED_SLICE_CHUNKS (one call each, sent
    ahead to a cluster's workers)."""
    batch: list[Chunked] = []
    count = 0
    for item in documents:
        size = len(item.chunks)
        if batch and count + size > EMBED_SLICE_CHUNKS:
            yield batch
            batch, count = [], 0
        batch.append(item)
        count += size
    if batch:
        yield batch


def embedding_text_of(chunk: Chunk, context: str) -> str:
    """The text the model embeds for a chunk (the one place that decides it): its context, already
    fitted beside it in the model's input (`_fitted_contexts`), then its text."""
    return embedding_input(context, chunk.text)


def _fitted_contexts(ctx: SyncContext, document: Chunked) -> tuple[list[str], dict[str, int]]:
    """Each of the document's chunks' context (pipeline/context.py), fitted beside the chunk within
    the model's input, and the token counts of the document's distinct contexts before fitting."""
    item, extracted = document.work, document.text
    title = _sidecar(document).title or document.text_title
    made = ctx.chunk_ahead.contexts(item.doc_id, document.chunks, title) if ctx.chunk_ahead else None
    if made is not None:  # fitted by the chunk-ahead worker from these very chunks and title
        return made
    front_matter = document_front_matter(extracted.text, item.source_type, ctx.paths.root / item.path)
    context = document_context(title, item.path,
                               running_heads=extracted.running_heads,
                               declared_words=front_matter.searchable_words())
    embedder = ctx.get_embedder()
    return fitted_contexts(context, document.chunks, embedder.max_input_tokens, count_tokens=embedder.count_tokens,
                           count_tokens_batch=embedder.count_tokens_batch, additive=counts_add_up(embedder))


def vectors_of(ctx: SyncContext, run: EmbedRun, texts: Sequence[str],
               known_counts: Mapping[str, int] | None = None) -> np.ndarray:
    """One unit-length float32 row per text, in order (the one place the embed stage asks for
    vectors): a stored vector of the same (model, text) where the index has one, the model's for
    the rest (pipeline/vector_reuse.py). The report and the progress count the model's work.
    `known_counts` holds the token counts of some of the texts, known without counting them."""
    shown = 0

    def advanced(count: int) -> None:
        nonlocal shown
        shown += count
        ctx.progress.advance(chunks=count)

    vectors, embedded = run.lookups(ctx).vectors(
        texts, lambda misses: compute_vectors(ctx, misses, advanced, known_counts))
    _count_vectors(ctx, run, len(texts), embedded, shown)
    return vectors


def _count_vectors(ctx: SyncContext, run: EmbedRun, total: int, embedded: int, shown: int = 0) -> None:
    """Add a call's vectors to the report, and to the progress those of them `shown` is not yet."""
    ctx.report.chunks_embedded += embedded
    ctx.report.chunks_reused += total - embedded
    ctx.report.vectors_rejected = len(run.lookups(ctx).rejected)
    ctx.progress.advance(chunks=embedded - shown, reused=total - embedded)


def compute_vectors(ctx: SyncContext, texts: Sequence[str], advanced: Callable[[int], None] | None = None,
                    known_counts: Mapping[str, int] | None = None) -> np.ndarray:
    """Run the model over `texts` (where the embed stage's executor is chosen). More than
    EMBED_SLICE_CHUNKS texts go longest first across all of them, in calls of at most that many made
    of the model's own batches over the whole set (`calls_of_whole_batches`), so every model batch
    is the one a single sorted pass over the whole set would make, while `advanced`
    hears of each call's rows as it finishes (progress moves every few seconds). A text's count in
    `known_counts` is taken as it is (the same number the tokenizer gives: `_batch_texts`)."""
    embedder = ctx.get_embedder()
    batch_size = ctx.manifest.embedding.batch_size

    def embedded(some: Sequence[str]) -> np.ndarray:
        if isinstance(embedder, DispatchAhead):  # a cluster's driver plans its batches with them
            return embedder.collect(embedder.embed_documents_async(some, batch_size=batch_size,
                                                                   known_counts=known_counts))
        return embedder.embed_documents(some, batch_size=batch_size)

    if len(texts) <= EMBED_SLICE_CHUNKS:
        return embedded(texts)
    counts = known_or_counted(embedder.count_tokens_batch, texts, known_counts or {})
    # The packaged model comes deferred (embed/deferred.py); its weights load for these texts now
    # anyway, and the loaded model is what says how it plans its batches.
    planner = embedder.loaded() if isinstance(embedder, DeferredEmbedder) else embedder
    rows: np.ndarray | None = None
    for positions in calls_of_whole_batches(planner, counts, batch_size, EMBED_SLICE_CHUNKS):
        vectors = embedded([texts[position] for position in positions])
        if rows is None:
            rows = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
        rows[positions] = vectors
        if advanced is not None:
            advanced(len(positions))
    assert rows is not None  # more than EMBED_SLICE_CHUNKS texts: at least one call ran
    return rows


def _batch_texts(ctx: SyncContext, batch: list[Chunked]) -> tuple[dict[str, list[str]], list[str], dict[str, int]]:
    """The batch's chunks' contexts, by doc_id, the texts to embed, and the token counts of those
    known without counting (`_texts_of`)."""
    additive = counts_add_up(ctx.get_embedder())
    contexts: dict[str, list[str]] = {}
    texts: list[str] = []
    known: dict[str, int] = {}
    for document in batch:
        contexts[document.work.doc_id], document_texts, document_known = _texts_of(ctx, document, additive)
        texts.extend(document_texts)
        known.update(document_known)
    return contexts, texts, known


def _texts_of(ctx: SyncContext, document: Chunked, additive: bool) -> tuple[list[str], list[str], dict[str, int]]:
    """A document's chunk contexts, the texts the model embeds for its chunks, and the token counts
    of those known without counting: where the tokenizer's counts add up over whitespace
    (`additive`, `counts_add_up`), a text is its context, a blank line and the chunk, so its count
    is the context's (counted once per document) plus the chunk's (the chunker's); a context the
    model's limit cut is not known, and is counted."""
    fitted, context_counts = _fitted_contexts(ctx, document)
    texts: list[str] = []
    known: dict[str, int] = {}
    for chunk, context in zip(document.chunks, fitted, strict=True):
        text = embedding_text_of(chunk, context)
        texts.append(text)
        if additive and (not context or context in context_counts):
            known[text] = chunk.token_count + (context_counts[context] if context else 0)
    return fitted, texts, known


def _embed_small_batch(ctx: SyncContext, run: EmbedRun, batch: list[Chunked], done: _Done) -> None:
    contexts, texts, known_counts = _batch_texts(ctx, batch)
    ctx.progress.document(batch[0].work.path, phase="embedding", others=len(batch) - 1)
    try:
        vectors = vectors_of(ctx, run, texts, known_counts)
    except PinakesError:
        raise
    except Exception as exc:  # one bad batch must not end the run: retry document by document
        _retry_per_document(ctx, run, batch, exc, done)
        return
    _write_batch(ctx, run, batch, contexts, vectors, done)


@dataclass
class _Submitted:
    """A cross-document batch whose misses were sent to the model and are not written yet."""

    batch: list[Chunked]
    contexts: dict[str, list[str]]
    plan: ReusePlan
    call: object | None  # None: every vector was found stored


def _embed_ahead(ctx: SyncContext, run: EmbedRun, embedder: DispatchAhead, documents: list[Chunked],
                 done: _Done) -> None:
    """The group's cross-document batches on an embedder that takes calls ahead (a Ray cluster):
    up to `embedder.calls_ahead` batches are sent before the oldest is written, so the workers
    embed while this process writes; batches are still written in order, each document in its own
    transaction. A text an earlier unwritten batch of the group was sent is not sent again (it is
    read back from the index once that batch is written). Whatever stops the group cancels the
    calls not yet written."""
    reuse = run.lookups(ctx)
    pending: deque[_Submitted] = deque()
    sent: set[bytes] = set()
    try:
        for batch in _cross_document_batches(documents):
            contexts, texts, known_counts = _batch_texts(ctx, batch)
            ctx.progress.document(batch[0].work.path, phase="embedding", others=len(batch) - 1)
            plan = reuse.plan(texts, sent)
            sent.update(plan.misses)
            call = (embedder.embed_documents_async(list(plan.misses.values()),
                                                   batch_size=ctx.manifest.embedding.batch_size,
                                                   known_counts=known_counts)
                    if plan.misses else None)
            pending.append(_Submitted(batch, contexts, plan, call))
            if len(pending) >= embedder.calls_ahead:
                _write_submitted(ctx, run, embedder, pending.popleft(), done)
        while pending:
            _write_submitted(ctx, run, embedder, pending.popleft(), done)
    except BaseException:  # Ctrl-C, a lost cluster, a broken index: nothing more is computed
        embedder.cancel()
        raise


def _write_submitted(ctx: SyncContext, run: EmbedRun, embedder: DispatchAhead, submitted: _Submitted,
                     done: _Done) -> None:
    reuse = run.lookups(ctx)
    try:
        computed = (embedder.collect(submitted.call) if submitted.call is not None
                    else np.empty((0, reuse.dim), dtype=np.float32))
        vectors, embedded = reuse.assemble(submitted.plan, computed, lambda misses: compute_vectors(ctx, misses))
    except PinakesError:
        raise
    except Exception as exc:  # one bad batch must not end the run: retry document by document
        _retry_per_document(ctx, run, submitted.batch, exc, done)
        return
    _count_vectors(ctx, run, len(submitted.plan.keys), embedded)
    _write_batch(ctx, run, submitted.batch, submitted.contexts, vectors, done)


def _retry_per_document(ctx: SyncContext, run: EmbedRun, batch: list[Chunked], exc: Exception, done: _Done) -> None:
    ctx.report.notes.append(f"a batch failed to embed ({type(exc).__name__}); retried per document")
    for document in batch:
        _write_streaming(ctx, run, document, done)


def _write_batch(ctx: SyncContext, run: EmbedRun, batch: list[Chunked], contexts: dict[str, list[str]],
                 vectors: np.ndarray, done: _Done) -> None:
    """Each document of a cross-document batch in its own transaction, its rows cut from `vectors`."""
    offset = 0
    for document in batch:
        count = len(document.chunks)
        rows = vectors[offset:offset + count]
        offset += count
        ctx.progress.document(document.work.path, phase="writing")
        done.add(document, write_document(ctx, run, document, contexts[document.work.doc_id],
                                          lambda _chunks, positions, rows=rows: rows[list(positions)]))


def _write_streaming(ctx: SyncContext, run: EmbedRun, document: Chunked, done: _Done) -> None:
    ctx.progress.embedding(document.work.path, size=document.work.file.size, chunks=len(document.chunks))
    contexts, texts, known = _texts_of(ctx, document, counts_add_up(ctx.get_embedder()))
    kept = write_document(ctx, run, document, contexts, lambda _chunks, positions: vectors_of(
        ctx, run, [texts[position] for position in positions], known))
    done.add(document, kept)
    if kept:  # never looked up (their vectors stay where they are), yet reused all the same
        _count_vectors(ctx, run, kept, 0)


def _with_sidecar(ctx: SyncContext, document: Chunked) -> Chunked | None:
    """The document with its sidecar parsed: a changed document whose sidecar did not change was
    paired without parsing it, and its metadata is needed now, for the row written beside the new
    chunks. None when it cannot be read (recorded: the document failed)."""
    if document.work.sidecar is not None:
        return document
    from pinakes.sidecar import read_sidecar, sidecar_path_for

    item = document.work
    try:
        sidecar = read_sidecar(sidecar_path_for(ctx.paths.root / item.path), kb_id=ctx.kb_id)
    except PinakesError as exc:
        ctx.report.fail(item.path, "sidecar", exc.render())
        return None
    return replace(document, work=item.with_sidecar(sidecar))


def _sidecar(document: Chunked) -> Sidecar:
    sidecar = document.work.sidecar
    assert sidecar is not None  # parsed before the group is embedded (_with_sidecar)
    return sidecar


def _keep_unchanged_rows(conn: sqlite3.Connection, doc_id: str, chunks: Sequence[Chunk],
                         contexts: Sequence[str], reuse: VectorReuse) -> tuple[list[int | None], list[bytes], list[_Move]]:
    """Per new chunk, the id of a row of the document's previous version it can keep (else None)
    and its vector's content key; and the kept rows whose position changed. Deletes every other
    previous row, after handing its vector to the lookups (`keep_previous_version`), and parks the
    kept rows that move at negative ordinals (the caller writes their new ordinal and offsets once
    the new rows are in); a kept row already at its place is not written at all.

    An edit of one paragraph leaves most of a large document's chunks as they were, only shifted:
    a row is kept when everything stored with it but its position matches (text, shadow text,
    context, heading path, pages, token count) and its vector's content key is this model's for the
    same embedded text, so its FTS entry, term counts and vector are exactly what writing it again
    would produce, without the cost (FTS and term counts are most of writing a row) and without a
    lookup. Nothing is kept under `--no-reuse`, which asks for every vector again."""
    keys = reuse.keys([embedding_text_of(chunk, context) for chunk, context in zip(chunks, contexts, strict=True)])
    if not reuse.enabled:
        conn.execute("DELETE FROM chunks WHERE doc_id = ?", (doc_id,))
        return [None] * len(chunks), keys, []
    rows = conn.execute(
        "SELECT c.id, c.ordinal, c.char_start, c.char_end, c.text, c.fts_text, c.context, c.heading_path, "
        "c.page_start, c.page_end, c.token_count, e.text_key, e.vector, e.checksum FROM chunks c "
        "JOIN embeddings e ON e.chunk_id = c.id WHERE c.doc_id = ? AND e.text_key IS NOT NULL", (doc_id,)).fetchall()
    if not rows:  # no row to keep (a new document): nothing to compare, park or hand to the lookups
        conn.execute("DELETE FROM chunks WHERE doc_id = ?", (doc_id,))
        reuse.forget_previous_version()
        return [None] * len(chunks), keys, []
    previous: dict[tuple[object, ...], list[tuple[int, _Move]]] = {}
    # A row whose vector fails its check is not kept: its text is looked up, and embedded again.
    faults = row_faults([(vector, key, checksum) for *_row, key, vector, checksum in rows], reuse.dim)
    for (chunk_id, ordinal, start, end, *fields, _vector, _checksum), fault in zip(rows, faults, strict=True):
        if fault is None:
            previous.setdefault(tuple(fields), []).append((int(chunk_id), (ordinal, start, end, int(chunk_id))))
    kept: list[int | None] = []
    moves: list[_Move] = []
    for chunk, context, key in zip(chunks, contexts, keys, strict=True):
        same = previous.get((chunk.text, shadow(chunk.text), context or None, heading_json(chunk.heading_path),
                             chunk.page_start,
                             chunk.page_end, chunk.token_count, key))
        if not same:
            kept.append(None)
            continue
        chunk_id, was = same.pop()
        kept.append(chunk_id)
        place = (chunk.ordinal, chunk.char_start, chunk.char_end, chunk_id)
        if place != was:
            moves.append(place)
    conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {_KEPT.split('.')[1]} (id INTEGER PRIMARY KEY)")
    conn.execute(f"DELETE FROM {_KEPT}")
    conn.executemany(f"INSERT INTO {_KEPT} (id) VALUES (?)", [(chunk_id,) for chunk_id in kept if chunk_id is not None])
    # A row about to go may still hold the vector of a new chunk (the same text at other pages, or
    # a streamed slice asking after the delete): the lookups keep it until the next document.
    reuse.keep_previous_version(doc_id, except_in=_KEPT)
    conn.execute(f"DELETE FROM chunks WHERE doc_id = ? AND id NOT IN (SELECT id FROM {_KEPT})", (doc_id,))
    # Out of the way of the new rows' ordinals (unique per document) until they are in.
    conn.executemany("UPDATE chunks SET ordinal = -1 - ordinal WHERE id = ?", [(move[3],) for move in moves])
    return kept, keys, moves


def _row(chunk: Chunk, context: str) -> ChunkRow:
    return ChunkRow(chunk.ordinal, chunk.text, chunk.char_start, chunk.char_end, chunk.token_count,
                    chunk.heading_path, chunk.page_start, chunk.page_end, context)


def write_document(ctx: SyncContext, run: EmbedRun, document: Chunked, contexts: Sequence[str],
                   vectors_for: VectorSource) -> int | None:
    """Everything the index says about one document, in one transaction; the number of its
    previous version's rows kept as they were (None when it failed: recorded, and rolled back).

    `contexts` holds each chunk's context (`_fitted_contexts`), stored beside it in `chunks.context`:
    the keyword side's second field, never part of the chunk's text, span or citation.

    `vectors_for(chunks, positions)` gives the vectors of some of the document's chunks (a slice of
    those whose rows are not kept); a failure there rolls the whole document back and records it
    as failed.
    """
    item, chunks, extracted = document.work, document.chunks, document.text
    sidecar = _sidecar(document)
    conn = ctx.writer()
    # The extraction columns pin which characters the offsets address; only an extracted source (a
    # PDF, a document format) has them, a text source's offsets address the file itself.
    spec = EXTRACTORS.get(extracted.backend)
    extracted_by = (extracted.backend, extracted.fingerprint) if (spec.cached if spec else extracted.pages is not None) \
        else (None, None)
    ahead = ctx.chunk_ahead
    tags = ahead.front_matter_tags(item.doc_id, chunks) if ahead else None
    if tags is None:
        tags = document_front_matter(extracted.text, item.source_type, ctx.paths.root / item.path).tags
    now = datetime.now(UTC).isoformat(timespec="seconds")
    try:
        with transaction(conn):
            conn.execute(
                "INSERT INTO documents (id, path, content_hash, sidecar_hash, mtime, source_type, title, "
                "metadata, state, extraction_backend, extraction_fingerprint, build_key, indexed_at, "
                "pages_without_text) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'active', ?, ?, ?, ?, ?) "
                "ON CONFLICT (id) DO UPDATE SET path = excluded.path, content_hash = excluded.content_hash, "
                "sidecar_hash = excluded.sidecar_hash, mtime = excluded.mtime, "
                "source_type = excluded.source_type, title = excluded.title, metadata = excluded.metadata, "
                "state = 'active', extraction_backend = excluded.extraction_backend, "
                "extraction_fingerprint = excluded.extraction_fingerprint, build_key = excluded.build_key, "
                "indexed_at = excluded.indexed_at, pages_without_text = excluded.pages_without_text",
                (item.doc_id, item.path, item.file.content_hash, item.sidecar_hash, item.file.mtime,
                 item.source_type, sidecar.title or document.text_title,
                 sidecar.metadata_json(front_matter_tags=tags), *extracted_by,
                 item.key, now,
                 json.dumps(list(extracted.pages_without_text)) if extracted.pages_without_text else None),
            )
            reuse = run.lookups(ctx)
            kept, keys, moves = _keep_unchanged_rows(conn, item.doc_id, chunks, contexts, reuse)
            fresh = [position for position, kept_id in enumerate(kept) if kept_id is None]
            counted = ahead.counted(item.doc_id, chunks, contexts) if ahead else None
            for start in range(0, len(fresh), EMBED_SLICE_CHUNKS):
                positions = fresh[start:start + EMBED_SLICE_CHUNKS]
                vectors = vectors_for([chunks[position] for position in positions], positions)
                insert_chunks(conn, item.doc_id, [_row(chunks[position], contexts[position]) for position in positions],
                              vectors, [keys[position] for position in positions],
                              [counted[position] for position in positions] if counted is not None else None)
            conn.executemany("UPDATE chunks SET ordinal = ?, char_start = ?, char_end = ? WHERE id = ?", moves)
            write_links(conn, ctx.kb_id, item.doc_id, sidecar.links)
            links = ahead.text_links(item.doc_id, chunks) if ahead else None
            write_text_links(conn, item.doc_id, parse_text_links(extracted.text, item.source_type)
                             if links is None else links)
            if not run.model_recorded:
                # With the first vectors, not at the end of the run: an interrupted sync leaves an
                # index that still says which model its vectors came from.
                write_meta(conn, model_meta(ctx.get_embedder()))
            faultpoint("sync.mid-document-write")
    except PinakesError:
        raise
    except sqlite3.Error as exc:  # the index, not this document: the run cannot go on
        raise index_error(ctx.index_path, exc) from exc
    except Exception as exc:
        ctx.report.fail(item.path, "embed", f"{type(exc).__name__}: {exc}")
        return None
    run.model_recorded = True
    faultpoint("sync.after-document-write")
    {"added": ctx.report.added, "changed": ctx.report.changed,
     "rekeyed": ctx.report.reembedded}[item.reason].append(item.path)
    ctx.progress.advance(documents=1, bytes_done=item.file.size)
    return sum(kept_id is not None for kept_id in kept)
