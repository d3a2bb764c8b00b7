"""`pinakes_get`: a document's text, served from exactly what the index was built from (spec §4.7).

A document is named by its ULID and resolved through the index row, never by a path. What comes
back is the text the index describes, or an error naming `pnk sync` — never anything else:

- a text source (markdown, text, code) is read from its KB-relative path, resolved with
  `os.path.realpath` and refused unless it lies inside the KB root, opened without following a
  final symlink, and served only if its xxh3-128 hash still equals `documents.content_hash`; an
  edited file is refused rather than served against offsets it no longer has;
- a PDF is served from the extraction cache entry the index was built from
  (`content_hash`, `extraction_fingerprint`), never from a fresh extraction: a free one would
  return text the index does not contain, a paid one would spend money inside a read-only call.
  A swept entry is an error naming `pnk sync`.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import xxhash

from pinakes.errors import EXIT_DATA, PinakesError, StaleExtractionError
from pinakes.extract.registry import EXTRACTORS
from pinakes.serve.boundary import NotServedError, refuse
from pinakes.serve.config import ServedKB

_DOCUMENT_COLUMNS = (
    "id, path, content_hash, source_type, title, metadata, extraction_backend, extraction_fingerprint"
)


class DocumentChangedError(PinakesError):
    """The source file no longer matches what the index was built from."""

    exit_code = EXIT_DATA


class ExtractionUnavailableError(PinakesError):
    """The extraction a PDF was indexed from is no longer in the extraction cache."""

    exit_code = EXIT_DATA


@dataclass(frozen=True)
class DocumentRow:
    id: str
    path: str
    content_hash: str
    source_type: str
    title: str | None
    metadata: dict[str, Any]
    extraction_backend: str | None
    extraction_fingerprint: str | None

    @property
    def tags(self) -> list[str]:
        tags = self.metadata.get("tags") or []
        tags = [tags] if isinstance(tags, str) else tags
        return [str(tag) for tag in tags] if isinstance(tags, list) else []


@dataclass(frozen=True)
class IndexedText:
    """`indexed_text` of spec §4.6: what the chunk offsets of this document address."""

    text: str
    pages: tuple[tuple[int, int], ...] | None  # per-page (char_start, char_end); None: not paged
    stale_extraction: str | None  # the paid backend whose fingerprint moved on


def find_document(conn: sqlite3.Connection, kb: ServedKB, doc_id: str) -> DocumentRow:
    row = conn.execute(
        f"SELECT {_DOCUMENT_COLUMNS} FROM documents WHERE id = ? AND state = 'active'", (doc_id,)
    ).fetchone()
    if row is None:
        raise NotServedError(
            f"no document {doc_id} in KB {kb.alias!r} (never indexed here, deleted, or in another KB)",
            remedy="use a doc_id from a pinakes_search result, and pass the `kb` that result came from",
        )
    try:
        metadata = json.loads(row[5]) if row[5] else {}
    except ValueError:
        metadata = {}
    return DocumentRow(row[0], row[1], row[2], row[3], row[4], metadata if isinstance(metadata, dict) else {},
                       row[6], row[7])


def read_indexed_text(kb: ServedKB, document: DocumentRow) -> IndexedText:
    if document.source_type == "pdf":
        return _from_extraction_cache(kb, document)
    return IndexedText(_from_source_file(kb, document), None, None)


def _from_source_file(kb: ServedKB, document: DocumentRow) -> str:
    from pinakes.extract.text import MAX_SOURCE_BYTES, decode_source

    real = _resolve_inside(kb, document.path)
    try:
        # O_NOFOLLOW: the final component is not swapped for a symlink after the check above;
        # O_NONBLOCK: a FIFO planted at the path cannot hang the server (it is refused below).
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise DocumentChangedError(
            f"{document.path} is indexed but no longer on disk", remedy="run `pnk sync` in the KB, then search again"
        ) from None
    except OSError as exc:
        raise DocumentChangedError(
            f"{document.path} cannot be opened ({exc.strerror or exc})",
            remedy="check the file, then run `pnk sync` in the KB",
        ) from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise DocumentChangedError(f"{document.path} is no longer a regular file",
                                       remedy="run `pnk sync` in the KB, then search again")
        if info.st_size > MAX_SOURCE_BYTES:
            raise DocumentChangedError(f"{document.path} grew past the text-source size limit since indexing",
                                       remedy="run `pnk sync` in the KB")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(MAX_SOURCE_BYTES + 1)
    finally:
        os.close(fd)
    if xxhash.xxh3_128(data).hexdigest() != document.content_hash:
        raise DocumentChangedError(
            f"{document.path} changed since it was indexed; the index no longer describes its text",
            remedy="run `pnk sync` in the KB, then search again",
        )
    return decode_source(data, Path(document.path))


def _resolve_inside(kb: ServedKB, relative: str) -> str:
    """The real path of an indexed KB-relative path, refused unless it lies inside the KB root."""
    parts = PurePosixPath(relative).parts
    if not parts or PurePosixPath(relative).is_absolute() or any(part in ("", ".", "..") for part in parts):
        raise refuse("doc_id", f"resolves to an index row with an unusable path ({relative!r})",
                     "run `pnk sync --rebuild` in the KB")
    root = str(kb.root)
    real = os.path.realpath(os.path.join(root, *parts))
    if os.path.commonpath([real, root]) != root:
        raise NotServedError(
            f"{relative} resolves outside the KB (through a symlink); it is not served",
            remedy="replace the symlink with the file itself, then run `pnk sync`",
        )
    return real


def _from_extraction_cache(kb: ServedKB, document: DocumentRow) -> IndexedText:
    from pinakes.extract.cache import ExtractCache

    backend, fingerprint = document.extraction_backend, document.extraction_fingerprint
    if not backend or not fingerprint:
        raise ExtractionUnavailableError(f"{document.path} has no recorded extraction in the index",
                                         remedy="run `pnk sync --rebuild` in the KB")
    stale = _stale_extraction(document, backend, fingerprint)
    try:
        entry = ExtractCache(kb.paths.extract_cache).get(document.content_hash, fingerprint)
    except ValueError:  # a key that cannot name a cache file: a damaged row
        entry = None
    if entry is None:
        raise ExtractionUnavailableError(
            f"the extraction {document.path} was indexed from is no longer in the extraction cache "
            "(swept or cleared); pinakes_get never re-extracts",
            remedy="run `pnk sync` in the KB to restore it",
        )
    return IndexedText(entry.extracted.text, entry.extracted.pages, stale)


def _stale_extraction(document: DocumentRow, backend: str, fingerprint: str) -> str | None:
    """Spec §4.4: a free extractor that moved on refuses (its text may be wrong, and re-extracting is
    free); a paid one is served and marked, because that text was paid for and is merely older."""
    spec = EXTRACTORS.get(backend)
    if spec is None or spec.fingerprint() == fingerprint:
        return None
    if spec.paid:
        return backend
    raise StaleExtractionError(
        f"{document.path} was extracted by an older version of {backend} and its text may be wrong",
        remedy="pnk sync",
    )


@dataclass(frozen=True)
class Selection:
    text: str  # what is returned (page ranges carry [page N] marker lines)
    char_start: int
    char_end: int
    page_start: int | None
    page_end: int | None
    cut: dict[str, object] | None  # how the character bound cut the request, if it did
    continue_with: dict[str, int] | None  # the arguments that read on from here


def select_chars(indexed: IndexedText, char_start: int | None, char_end: int | None, limit: int) -> Selection:
    total = len(indexed.text)
    start = char_start if char_start is not None else 0
    if start > total:
        raise refuse("char_start", f"is {start}, past the end of the document ({total} characters)",
                     f"pass a char_start below {total}")
    end = total if char_end is None else min(char_end, total)
    if end <= start and total > 0:
        raise refuse("char_end", f"({char_end}) must be greater than char_start ({start})",
                     "pass char_end > char_start, or leave it out to read to the end")
    cut = None
    continue_with = None
    if end - start > limit:
        cut = {"requested": {"char_start": start, "char_end": end}, "limit_chars": limit}
        end = start + limit
        continue_with = {"char_start": end}
    first, last = _pages_spanned(indexed.pages, start, end)
    return Selection(indexed.text[start:end], start, end, first, last, cut, continue_with)


def select_pages(indexed: IndexedText, page_start: int | None, page_end: int | None, limit: int) -> Selection:
    pages = indexed.pages
    assert pages is not None
    count = len(pages)
    first = page_start if page_start is not None else 1
    last = min(page_end, count) if page_end is not None else count
    if first > count:
        raise refuse("page_start", f"is {first}, but the document has {count} page(s)",
                     f"pass a page between 1 and {count}")
    if last < first:
        raise refuse("page_end", f"({page_end}) is before page_start ({first})", "pass page_end >= page_start")
    blocks: list[str] = []
    used = 0
    returned_last = first
    char_end = pages[first - 1][0]
    partial_at: int | None = None  # where the first page was cut, when it alone is over the bound
    for number in range(first, last + 1):
        span_start, span_end = pages[number - 1]
        marker = f"[page {number}]\n"
        separator = 1 if blocks else 0
        if used + separator + len(marker) + (span_end - span_start) > limit:
            if not blocks:
                partial_at = span_start + max(0, limit - len(marker))
                blocks.append(marker + indexed.text[span_start:partial_at])
                char_end = partial_at
            break
        blocks.append(marker + indexed.text[span_start:span_end])
        used += separator + len(marker) + (span_end - span_start)
        returned_last, char_end = number, span_end
    cut = None
    continue_with: dict[str, int] | None = None
    if partial_at is not None or returned_last < last:
        cut = {"requested": {"page_start": first, "page_end": last}, "limit_chars": limit}
        if partial_at is not None:
            continue_with = {"char_start": partial_at}
        else:
            continue_with = {"page_start": returned_last + 1, "page_end": last}
    return Selection("\n".join(blocks), pages[first - 1][0], char_end, first, returned_last, cut, continue_with)


def _pages_spanned(pages: tuple[tuple[int, int], ...] | None, start: int, end: int) -> tuple[int | None, int | None]:
    if not pages:
        return None, None
    touched = [number for number, (page_start, page_end) in enumerate(pages, start=1)
               if page_start < max(end, start + 1) and page_end > start]
    if not touched:
        return None, None
    return touched[0], touched[-1]
