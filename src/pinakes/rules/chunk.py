"""chunk: split each extracted document into passages (one doit task per document).

Token counts come from the embedding model's own tokenizer, so a chunk is never longer than the
model can encode whole (spec §4.6); the chunker itself is `pinakes.chunking`. A document whose chunk
count makes its embedding slow is announced before the embedding starts, so a long pause on one
large file reads as work rather than a hang.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from pinakes.errors import PinakesError
from pinakes.pipeline.keys import key_is_current
from pinakes.pipeline.pair import DocWork

if TYPE_CHECKING:
    from pinakes.pipeline.run import SyncContext

# A document with at least this many chunks is announced before it is embedded (about a minute of
# embedding on a 2-core CPU at the default model's measured rate).
SLOW_DOCUMENT_CHUNKS = 2000
# A document this long is announced before its chunking too, which alone takes tens of seconds
# (a 20 MB text: about 100 s of reading, chunking and token counting before any embedding).
SLOW_DOCUMENT_CHARS = 2_000_000


def tasks_chunk(ctx: SyncContext, group: list[DocWork]) -> Iterator[dict[str, object]]:
    for item in group:
        yield {
            "basename": "chunk",
            "name": item.doc_id,
            "doc": f"chunk {item.path}",
            "actions": [(run_chunk, [ctx, item])],
            "task_dep": [f"extract:{item.doc_id}"],
            "uptodate": [key_is_current(ctx.conn, item.doc_id, item.path, item.key)],
            "verbosity": 0,
        }


def run_chunk(ctx: SyncContext, item: DocWork) -> bool:
    if item.doc_id in ctx.failed or item.doc_id not in ctx.extracted:
        return True
    from pinakes.chunking import chunk_text
    from pinakes.extract.source_types import markup_for

    ctx.progress.document(item.path, phase="chunking")
    chunking = ctx.manifest.chunking
    extracted = ctx.extracted[item.doc_id]
    if len(extracted.text) >= SLOW_DOCUMENT_CHARS:
        ctx.progress.announce(f"{item.path}: {len(extracted.text) / 1e6:.1f} million characters to "
                              "chunk and count first; this document alone takes a while")
    try:
        embedder = ctx.get_embedder()
        chunks = chunk_text(extracted.text, item.source_type, max_tokens=chunking.max_tokens,
                            overlap=chunking.overlap, headings=chunking.headings,
                            count_tokens=embedder.count_tokens, pages=extracted.pages,
                            markup=markup_for(item.path) if item.source_type == "text" else None)
    except PinakesError as exc:
        ctx.fatal = exc  # a configuration problem (e.g. max_tokens too large) stops the whole run
        return False
    except Exception as exc:
        ctx.report.fail(item.path, "chunk", f"{type(exc).__name__}: {exc}")
        ctx.failed.add(item.doc_id)
        return True
    from pinakes.extract.titles import document_title

    item.text_title = document_title(extracted.text, item.source_type, ctx.paths.root / item.path)
    if len(chunks) >= SLOW_DOCUMENT_CHUNKS:
        ctx.progress.announce(f"{item.path}: {len(chunks):,} chunks to embed; this document alone "
                              "takes a while")
    ctx.chunks[item.doc_id] = chunks
    return True
