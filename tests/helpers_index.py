"""Build small indexes directly through `pinakes.index.schema`, without a sync.

Search tests and the development-corpus benchmarks need indexes whose every row they control: exact
chunk spans, pages, tags, mtimes, extraction columns, hand-placed vectors. This helper writes those
rows the way the sync's writer does (one `schema.transaction`, chunks_fts kept by the triggers).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pinakes.embed.base import ModelIdentity, identity_meta
from pinakes.index import schema
from pinakes.index.terms import record_term_frequencies
from tests.fakes import FakeEmbedder

EmbedFn = Callable[[list[str]], Any]  # texts -> (n, dim) float32 unit rows


@dataclass
class ChunkSpec:
    text: str
    char_start: int
    char_end: int
    heading_path: Sequence[str] | None = None
    page_start: int | None = None
    page_end: int | None = None
    vector: Sequence[float] | None = None  # None: embed `text` with the index's embedder


@dataclass
class DocSpec:
    path: str
    text: str = ""
    source_type: str = "markdown"
    title: str | None = None
    tags: Sequence[str] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    mtime: float = 1_780_000_000.0
    state: str = "active"
    extraction_backend: str | None = None
    extraction_fingerprint: str | None = None
    doc_id: str | None = None
    chunks: list[ChunkSpec] | None = None  # None: paragraph_chunks(text)


def paragraph_chunks(text: str, max_chars: int = 1000) -> list[ChunkSpec]:
    """Blank-line paragraphs packed up to `max_chars` (a longer paragraph is split at line
    breaks, then at spaces); spans are exact: chunk.text == text[char_start:char_end]."""
    pieces: list[tuple[int, int]] = []
    for paragraph in re.finditer(r"\S(?:.*?\S)?(?=\n[ \t]*\n|\s*\Z)", text, re.S):
        pieces.extend(_split_long(text, paragraph.start(), paragraph.end(), max_chars))
    chunks: list[ChunkSpec] = []
    start = end = -1
    for piece_start, piece_end in pieces:
        if start < 0:
            start, end = piece_start, piece_end
        elif piece_end - start <= max_chars:
            end = piece_end
        else:
            chunks.append(ChunkSpec(text[start:end], start, end))
            start, end = piece_start, piece_end
    if start >= 0:
        chunks.append(ChunkSpec(text[start:end], start, end))
    return chunks


def _split_long(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    if end - start <= max_chars:
        return [(start, end)]
    pieces: list[tuple[int, int]] = []
    while end - start > max_chars:
        window = text[start : start + max_chars]
        cut = max(window.rfind("\n"), window.rfind(" "))
        cut = cut if cut > 0 else max_chars
        piece_end = start + cut
        while piece_end > start and text[piece_end - 1].isspace():
            piece_end -= 1
        pieces.append((start, piece_end))
        start += cut
        while start < end and text[start].isspace():
            start += 1
    if start < end:
        pieces.append((start, end))
    return pieces


def new_doc_id(path: str) -> str:
    """A stable ULID-shaped id per path, so failures name the same document on every run."""
    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    digest = int.from_bytes(hashlib.sha256(path.encode()).digest()[:17], "big")
    chars = []
    for _ in range(26):
        digest, index = divmod(digest, 32)
        chars.append(alphabet[index])
    return "01" + "".join(chars)[:24]


def write_documents(conn, docs: Iterable[DocSpec], embed: EmbedFn | None = None) -> dict[str, str]:
    """Insert documents, chunks and (when `embed` is given or vectors are placed) embeddings.

    Call inside `schema.transaction(conn)`. Returns {path: doc_id}.
    """
    ids: dict[str, str] = {}
    pending: list[tuple[int, str]] = []
    counted: list[tuple[int, str]] = []
    for doc in docs:
        doc_id = doc.doc_id or new_doc_id(doc.path)
        ids[doc.path] = doc_id
        metadata = dict(doc.metadata)
        if doc.tags:
            metadata["tags"] = list(doc.tags)
        if doc.title is not None:
            metadata.setdefault("title", doc.title)
        conn.execute(
            "INSERT INTO documents (id, path, content_hash, mtime, source_type, title, metadata, state, "
            "extraction_backend, extraction_fingerprint, indexed_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '2026-08-01T00:00:00Z')",
            (doc_id, doc.path, hashlib.sha256(doc.text.encode()).hexdigest()[:32], doc.mtime,
             doc.source_type, doc.title, json.dumps(metadata), doc.state, doc.extraction_backend,
             doc.extraction_fingerprint),
        )
        chunks = doc.chunks if doc.chunks is not None else paragraph_chunks(doc.text)
        for ordinal, chunk in enumerate(chunks):
            cursor = conn.execute(
                "INSERT INTO chunks (doc_id, ordinal, text, char_start, char_end, token_count, "
                "heading_path, page_start, page_end) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (doc_id, ordinal, chunk.text, chunk.char_start, chunk.char_end, len(chunk.text.split()),
                 json.dumps(list(chunk.heading_path)) if chunk.heading_path is not None else None,
                 chunk.page_start, chunk.page_end),
            )
            chunk_id = int(cursor.lastrowid or 0)
            counted.append((chunk_id, chunk.text))
            if chunk.vector is not None:
                _store_vector(conn, chunk_id, np.asarray(chunk.vector, dtype=np.float32))
            elif embed is not None:
                pending.append((chunk_id, chunk.text))
    record_term_frequencies(conn, counted)
    if pending and embed is not None:
        vectors = np.asarray(embed([text for _, text in pending]), dtype=np.float32)
        for (chunk_id, _), vector in zip(pending, vectors, strict=True):
            _store_vector(conn, chunk_id, vector)
    return ids


def _store_vector(conn, chunk_id: int, vector: np.ndarray) -> None:
    conn.execute("INSERT INTO embeddings (chunk_id, vector) VALUES (?, ?)",
                 (chunk_id, np.ascontiguousarray(vector, dtype=np.float32).tobytes()))


def build_index(
    path: Path,
    docs: Iterable[DocSpec],
    *,
    embed: EmbedFn | None = None,
    meta: Mapping[str, object] | None = None,
) -> Path:
    """A fresh index at `path` holding `docs`; `meta` is written into the meta table."""
    conn = schema.open_writer(path)
    try:
        with schema.transaction(conn):
            write_documents(conn, docs, embed)
            if meta:
                schema.write_meta(conn, dict(meta))
    finally:
        conn.close()
    return path


# --------------------------------------------------------------------------------------------
# The tests' deterministic embedder (tests/fakes.py), narrowed for small search indexes.


def fake_identity(dim: int = 64, model: str = "hash-bow") -> ModelIdentity:
    return ModelIdentity(provider="fake", model=model, revision="1", weights_sha256="0" * 64, dim=dim)


class HashEmbedder(FakeEmbedder):
    """FakeEmbedder (hashed bag of words: texts sharing no word have cosine 0) at 64 dimensions
    under its own identity, plus the meta rows an index built by it carries."""

    def __init__(self, dim: int = 64, identity: ModelIdentity | None = None):
        super().__init__(dim=dim)
        self.identity = identity or fake_identity(dim)

    def meta(self) -> dict[str, str]:
        return identity_meta(self.identity)


# --------------------------------------------------------------------------------------------
# A small KB every search test can reason about: five topics that share no content words.

DAY = 86_400.0
JAN_10_2026 = 1_768_003_200.0  # 2026-01-10T00:00:00Z


KAFKA_TEXT = (
    "# Kafka\n\nKafka replication keeps copies of each partition on several brokers.\n\n"
    "The min.insync.replicas setting protects against data loss when a broker fails."
)


def span_chunk(text: str, piece: str, **fields: Any) -> ChunkSpec:
    start = text.index(piece)
    return ChunkSpec(piece, start, start + len(piece), **fields)


def search_corpus() -> list[DocSpec]:
    from pinakes.extract.registry import current_fingerprint

    return [
        DocSpec(
            "docs/kafka.md", KAFKA_TEXT, tags=["streaming", "ops"], title="Kafka", mtime=JAN_10_2026,
            chunks=[
                span_chunk(KAFKA_TEXT, "# Kafka\n\nKafka replication keeps copies of each partition on "
                           "several brokers.", heading_path=["Kafka"]),
                span_chunk(KAFKA_TEXT, "The min.insync.replicas setting protects against data loss when a "
                           "broker fails.", heading_path=["Kafka", "Durability"]),
            ],
        ),
        DocSpec(
            "docs/postgres.md",
            "PostgreSQL vacuum reclaims storage occupied by dead tuples; autovacuum runs in the background.",
            tags=["database", "ops"], title="Postgres", mtime=JAN_10_2026 + 50 * DAY,
        ),
        DocSpec(
            "notes/garden.txt",
            "Tomatoes need full sun and regular watering. Prune the suckers for larger fruit.",
            source_type="text", tags=["home"], mtime=JAN_10_2026 - 200 * DAY,
        ),
        DocSpec(
            "src/retry.py",
            "def retry(call, attempts=3):\n    # exponential backoff for flaky network calls\n    return call()",
            source_type="code", mtime=JAN_10_2026 + 10 * DAY,
        ),
        DocSpec(
            "reports/annual.pdf", source_type="pdf", title="Annual report", tags=["finance"],
            mtime=JAN_10_2026 + 20 * DAY, extraction_backend="pypdfium2",
            extraction_fingerprint=current_fingerprint("pypdfium2"),
            chunks=[
                ChunkSpec("Revenue grew strongly in the third quarter.", 0, 43, page_start=2, page_end=2),
                ChunkSpec("Cloud hosting costs for the brokers rose across the quarter boundary.",
                          44, 113, page_start=3, page_end=4),
            ],
        ),
        DocSpec(
            "docs/legacy.md", "Kafka legacy zookeeper notes, deleted long ago.", state="deleted",
            tags=["streaming"], mtime=JAN_10_2026,
        ),
    ]


def build_search_index(path: Path, embedder: HashEmbedder | None = None,
                       docs: list[DocSpec] | None = None) -> Path:
    embedder = embedder or HashEmbedder()
    return build_index(path, docs if docs is not None else search_corpus(),
                       embed=embedder.embed_documents, meta=embedder.meta())
