"""embed: vectors for the changed documents' chunks, then one transaction per document.

The model is the cost of a sync, so chunks are embedded in batches that cross documents; the keys
stay per document, because each document's rows, chunks, vectors and key are committed together in
its own transaction. The index never half-describes a document, and a crash loses at most the batch
in flight.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from pinakes.errors import PinakesError
from pinakes.faults import faultpoint
from pinakes.index.schema import transaction

from .keys import key_is_current
from .pair import write_links

# A batch task covers about this much source text (bytes), so a batch holds a few hundred chunks:
# large enough to keep the model busy, small enough that a crash loses little.
BATCH_SOURCE_BYTES = 256 * 1024
BATCH_MAX_DOCS = 256


def batches(work: list[Any]) -> list[list[Any]]:
    groups: list[list[Any]] = []
    current: list[Any] = []
    size = 0
    for item in work:
        current.append(item)
        size += item.file.size
        if size >= BATCH_SOURCE_BYTES or len(current) >= BATCH_MAX_DOCS:
            groups.append(current)
            current, size = [], 0
    if current:
        groups.append(current)
    return groups


def tasks_embed(ctx: Any) -> Iterator[dict[str, Any]]:
    for number, batch in enumerate(batches(ctx.plan.work)):
        yield {
            "basename": "embed",
            "name": f"b{number:05d}",
            "doc": f"embed {len(batch)} document(s): {batch[0].path}" + (" …" if len(batch) > 1 else ""),
            "actions": [(run_embed, [ctx, batch])],
            "task_dep": [f"chunk:{item.doc_id}" for item in batch],
            "uptodate": [all(key_is_current(ctx, item) for item in batch)],
            "verbosity": 0,
        }


def run_embed(ctx: Any, batch: list[Any]) -> bool:
    ready = [item for item in batch if item.doc_id not in ctx.failed and item.doc_id in ctx.chunks]
    if not ready:
        return True
    texts = [chunk.text for item in ready for chunk in ctx.chunks[item.doc_id]]
    try:
        embedder = ctx.get_embedder()
        vectors = embedder.embed_documents(texts, batch_size=ctx.manifest.embedding.batch_size) \
            if texts else None
    except PinakesError as exc:
        ctx.fatal = exc
        return False
    except Exception as exc:  # one bad batch must not end the run: retry document by document
        ctx.report.notes.append(f"a batch failed to embed ({type(exc).__name__}); retried per document")
        for item in ready:
            _embed_alone(ctx, item)
        return True
    offset = 0
    for item in ready:
        if item.sidecar is None and not _load_sidecar(ctx, item):
            offset += len(ctx.chunks.pop(item.doc_id))
            continue
        count = len(ctx.chunks[item.doc_id])
        doc_vectors = vectors[offset:offset + count] if vectors is not None else None
        offset += count
        write_document(ctx, item, doc_vectors)
    return True


def _load_sidecar(ctx: Any, item: Any) -> bool:
    """A changed document whose sidecar did not change was paired without parsing it; its metadata
    is needed now, for the row written beside the new chunks."""
    from pinakes.sidecar import read_sidecar, sidecar_path_for

    try:
        item.sidecar = read_sidecar(sidecar_path_for(ctx.paths.root / item.path), kb_id=ctx.kb_id)
    except PinakesError as exc:
        ctx.report.fail(item.path, "sidecar", exc.render())
        ctx.failed.add(item.doc_id)
        return False
    item.sidecar_hash = item.sidecar.raw_hash
    return True


def _embed_alone(ctx: Any, item: Any) -> None:
    texts = [chunk.text for chunk in ctx.chunks[item.doc_id]]
    try:
        vectors = ctx.get_embedder().embed_documents(texts) if texts else None
    except Exception as exc:
        ctx.report.fail(item.path, "embed", f"{type(exc).__name__}: {exc}")
        ctx.failed.add(item.doc_id)
        return
    if item.sidecar is None and not _load_sidecar(ctx, item):
        return
    write_document(ctx, item, vectors)


def write_document(ctx: Any, item: Any, vectors: Any) -> None:
    """Everything the index says about one document, in one transaction."""
    import numpy as np

    conn: sqlite3.Connection = ctx.conn
    chunks = ctx.chunks.pop(item.doc_id)
    extracted = ctx.extracted.pop(item.doc_id)
    sidecar = item.sidecar
    # The extraction columns pin which characters the offsets address; only an extracted (paged)
    # source has them, a text source's offsets address the file itself.
    extracted_by = (extracted.backend, extracted.fingerprint) if extracted.pages is not None else (None, None)
    now = datetime.now(UTC).isoformat(timespec="seconds")
    with transaction(conn):
        conn.execute(
            "INSERT INTO documents (id, path, content_hash, sidecar_hash, mtime, source_type, title, "
            "metadata, state, extraction_backend, extraction_fingerprint, build_key, indexed_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'active', ?, ?, ?, ?) "
            "ON CONFLICT (id) DO UPDATE SET path = excluded.path, content_hash = excluded.content_hash, "
            "sidecar_hash = excluded.sidecar_hash, mtime = excluded.mtime, "
            "source_type = excluded.source_type, title = excluded.title, metadata = excluded.metadata, "
            "state = 'active', extraction_backend = excluded.extraction_backend, "
            "extraction_fingerprint = excluded.extraction_fingerprint, build_key = excluded.build_key, "
            "indexed_at = excluded.indexed_at",
            (item.doc_id, item.path, item.file.content_hash, item.sidecar_hash, item.file.mtime,
             item.source_type, getattr(sidecar, "title", None),
             sidecar.metadata_json() if sidecar is not None else "{}",
             *extracted_by, item.key, now),
        )
        conn.execute("DELETE FROM chunks WHERE doc_id = ?", (item.doc_id,))
        for position, chunk in enumerate(chunks):
            heading = json.dumps(list(chunk.heading_path), ensure_ascii=False) if chunk.heading_path else None
            cursor = conn.execute(
                "INSERT INTO chunks (doc_id, ordinal, text, char_start, char_end, token_count, "
                "heading_path, page_start, page_end) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (item.doc_id, chunk.ordinal, chunk.text, chunk.char_start, chunk.char_end,
                 chunk.token_count, heading, chunk.page_start, chunk.page_end),
            )
            vector = np.ascontiguousarray(vectors[position], dtype=np.float32)
            conn.execute("INSERT INTO embeddings (chunk_id, vector) VALUES (?, ?)",
                         (cursor.lastrowid, vector.tobytes()))
        write_links(conn, ctx.kb_id, item.doc_id, sidecar)
        faultpoint("sync.mid-document-write")
    faultpoint("sync.after-document-write")
    ctx.report.chunks_embedded += len(chunks)
    {"added": ctx.report.added, "changed": ctx.report.changed,
     "rekeyed": ctx.report.reembedded}[item.reason].append(item.path)
    ctx.progress(f"indexed {len(ctx.report.added) + len(ctx.report.changed) + len(ctx.report.reembedded)}"
                 f"/{len(ctx.plan.work)} documents, {ctx.report.chunks_embedded} chunks")
