"""The returned chunks read from the index in one query, and each made a cited `Passage`."""

from __future__ import annotations

import functools
import json
import sqlite3
from typing import TypedDict, cast

from pinakes.extract.titles import display_title
from pinakes.index.citations import citation
from pinakes.lexical.filters import document_tags
from pinakes.search.fusion import Candidate
from pinakes.search.results import Passage, StageScores, shown_headings


class ChunkRow(TypedDict):
    """One returned chunk and its document, as `hydrate` selects them."""

    id: int
    doc_id: str
    ordinal: int
    text: str
    char_start: int
    char_end: int
    heading_path: str | None  # JSON array
    page_start: int | None
    page_end: int | None
    path: str
    title: str | None
    metadata: str | None  # JSON object
    source_type: str


def hydrate(conn: sqlite3.Connection, chunk_ids: list[int]) -> dict[int, ChunkRow]:
    """The rows of `chunk_ids` with their documents', in one query; a chunk gone from the index has none."""
    if not chunk_ids:
        return {}
    marks = ", ".join("?" * len(chunk_ids))
    cursor = conn.execute(
        "SELECT c.id, c.doc_id, c.ordinal, c.text, c.char_start, c.char_end, c.heading_path, "
        "c.page_start, c.page_end, d.path, d.title, d.metadata, d.source_type "
        f"FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.id IN ({marks})",
        chunk_ids,
    )
    names: list[str] = [column[0] for column in cursor.description]
    rows: dict[int, ChunkRow] = {}
    for row in cursor:
        rows[row[0]] = cast(ChunkRow, dict(zip(names, row, strict=True)))
    return rows


def _json(value: str | None) -> object:
    """The JSON text a column holds; None when it holds none or none that parses."""
    if not value:
        return None
    try:
        return json.loads(value)
    except ValueError:
        return None


def to_passage(candidate: Candidate, row: ChunkRow, stale: dict[str, str]) -> Passage:
    title, tags = _document_shown(row["title"], row["metadata"], row["path"])
    return Passage(
        text=row["text"],
        citation=citation(row["path"], row["char_start"], row["char_end"], row["page_start"], row["page_end"]),
        path=row["path"],
        doc_id=row["doc_id"],
        title=title,
        tags=tags,
        heading_path=_headings_shown(row["heading_path"]),
        page_start=row["page_start"],
        page_end=row["page_end"],
        char_start=row["char_start"],
        char_end=row["char_end"],
        ordinal=row["ordinal"],
        source_type=row["source_type"],
        scores=StageScores(
            bm25_rank=candidate.bm25_rank,
            bm25_score=_round(candidate.bm25_score),
            vector_rank=candidate.vector_rank,
            cosine=_round(candidate.cosine),
            rrf=_round(candidate.rrf),
            rerank=_round(candidate.rerank),
            coverage=candidate.coverage,
            graph_rank=candidate.graph_rank,
        ),
        stale_extraction=stale.get(row["doc_id"]),
    )


# What a passage shows of its stored JSON is a pure function of the stored text, and the same
# documents' and chunks' texts come back search after search (a self-calibration's 3,200 passages
# are ~500 chunks of 300 documents; decoding them was ~15 us of a passage's ~20: #45). The answers
# are immutable (strings and tuples); the caches hold at most SHOWN_CACHE texts each, and only texts
# of at most SHOWN_CACHE_CHARS: a cache keeps its keys alive, and a long-running server meeting
# documents of huge metadata would otherwise hold ~1,000 of them (100 kB each: ~100 MB).
SHOWN_CACHE = 1024
SHOWN_CACHE_CHARS = 4096


def _document_shown(stored_title: str | None, metadata: str | None, path: str) -> tuple[str, tuple[str, ...]]:
    """A document's shown title (its own, its metadata's, else its file name) and its tags."""
    if len(metadata or "") + len(stored_title or "") + len(path) <= SHOWN_CACHE_CHARS:
        return _document_shown_cached(stored_title, metadata, path)
    return _decoded_document(stored_title, metadata, path)


def _decoded_document(stored_title: str | None, metadata: str | None, path: str) -> tuple[str, tuple[str, ...]]:
    parsed = _json(metadata)
    fields = cast("dict[str, object]", parsed) if isinstance(parsed, dict) else {}  # JSON keys are strings
    declared = fields.get("title")
    title = stored_title or (declared if isinstance(declared, str) else None)
    # The file name when the document declares none; the tags are the sidecar's and the front matter's.
    return display_title(title, path), tuple(document_tags(fields))


_document_shown_cached = functools.lru_cache(maxsize=SHOWN_CACHE)(_decoded_document)


def _headings_shown(heading_path: str | None) -> tuple[str, ...] | None:
    if len(heading_path or "") <= SHOWN_CACHE_CHARS:
        return _headings_shown_cached(heading_path)
    return _decoded_headings(heading_path)


def _decoded_headings(heading_path: str | None) -> tuple[str, ...] | None:
    return shown_headings(_json(heading_path))


_headings_shown_cached = functools.lru_cache(maxsize=SHOWN_CACHE)(_decoded_headings)


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 6)
