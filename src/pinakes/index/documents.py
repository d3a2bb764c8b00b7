"""Documents as the index holds them: listed, found by ULID, and read back as the exact text their
chunks were built from. The one reader behind `pnk list`, `pnk get` and MCP `pinakes_get`
(`pinakes.serve.documents` adds only the server's boundary rules on top).

A document is named by its ULID and resolved through its index row, never by a path. What is read
back is the text the index describes (spec §4.7), or an error naming `pnk sync`, never anything else:

- a text source (markdown, text, code) is read from its KB-relative path, resolved with
  `os.path.realpath` and refused unless it lies inside the KB root, opened without following a
  final symlink, and returned only if its xxh3-128 hash still equals `documents.content_hash`; an
  edited file is refused rather than returned against offsets it no longer has;
- a PDF, and every other extracted format (HTML, EPUB, DOCX, ODT), is read from the extraction
  cache entry the index was built from
  (`content_hash`, `extraction_fingerprint`), never from a fresh extraction: a free one would
  return text the index does not contain, a paid one would spend money inside a read. A swept entry
  is an error naming `pnk sync`.

Ranges are selected in characters of that text (`select_chars`) or in pages (`select_pages`, paged
sources only), each bounded by a character limit and saying how to read on when it cut.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import cast

from pinakes.errors import EXIT_CONFIG, EXIT_DATA, PinakesError, StaleExtractionError, UsageError
from pinakes.extract.registry import EXTRACTORS
from pinakes.extract.titles import display_title
from pinakes.kb import KBPaths
from pinakes.lexical.filters import SearchFilters, document_tags, document_where
from pinakes.wording import counted

_DOCUMENT_COLUMNS = (
    "id, path, content_hash, source_type, title, metadata, extraction_backend, extraction_fingerprint"
)

# `pnk list` states, in the order a person should act on them.
STATES = ("missing", "failed", "modified", "indexed")


class UnknownDocumentError(PinakesError):
    """No active document in this index has the given ULID."""

    exit_code = EXIT_CONFIG


class DocumentChangedError(PinakesError):
    """The source file no longer matches what the index was built from."""

    exit_code = EXIT_DATA


class ExtractionUnavailableError(PinakesError):
    """The extraction a PDF was indexed from is no longer in the extraction cache."""

    exit_code = EXIT_DATA


class DocumentOutsideKBError(PinakesError):
    """An indexed path now resolves (through a symlink) outside the KB root: it is never read."""

    exit_code = EXIT_DATA


class UnusableIndexPathError(PinakesError):
    """An index row's path is absolute or has empty, `.` or `..` segments: a damaged row."""

    exit_code = EXIT_DATA


class RangeError(UsageError):
    """A requested range does not fit the document. `argument` names the bound at fault
    (`char_start`, `char_end`, `page_start`, `page_end`); `problem` says what is wrong with it."""

    def __init__(self, argument: str, problem: str, *, remedy: str):
        super().__init__(f"{argument} {problem}", remedy=remedy)
        self.argument = argument
        self.problem = problem


@dataclass(frozen=True)
class DocumentRow:
    id: str
    path: str
    content_hash: str
    source_type: str
    title: str | None  # as stored: the sidecar's, else the content's; None when neither gives one
    metadata: dict[str, object]
    extraction_backend: str | None
    extraction_fingerprint: str | None

    @property
    def tags(self) -> list[str]:
        return document_tags(self.metadata)

    @property
    def shown_title(self) -> str:
        """The title, else the file name: what a person or agent is shown."""
        return display_title(self.title, self.path)


@dataclass(frozen=True)
class IndexedText:
    """`indexed_text` of spec §4.6: what the chunk offsets of this document address."""

    text: str
    pages: tuple[tuple[int, int], ...] | None  # per-page (char_start, char_end); None: not paged
    stale_extraction: str | None  # the paid backend whose fingerprint moved on


@dataclass(frozen=True)
class DocumentSummary:
    """One row of `pnk list`."""

    id: str
    path: str
    title: str  # shown title: the stored one, else the file name
    source_type: str
    chunks: int
    state: str  # one of STATES
    tags: tuple[str, ...]
    mtime: float
    indexed_at: str
    failure: tuple[str, str] | None  # (stage, first line of the error) of the last sync, if it failed

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.id, "path": self.path, "title": self.title, "source_type": self.source_type,
            "chunks": self.chunks, "state": self.state, "tags": list(self.tags), "mtime": self.mtime,
            "indexed_at": self.indexed_at,
            "failure": {"stage": self.failure[0], "error": self.failure[1]} if self.failure else None,
        }


# -- finding and listing ----------------------------------------------------------------------------


def find_document(conn: sqlite3.Connection, doc_id: str) -> DocumentRow:
    """The active document with this ULID; `UnknownDocumentError` naming the ID when there is none."""
    row = conn.execute(
        f"SELECT {_DOCUMENT_COLUMNS} FROM documents WHERE id = ? AND state = 'active'", (doc_id,)
    ).fetchone()
    if row is None:
        raise UnknownDocumentError(
            f"no document {doc_id} in this KB's index (never indexed here, deleted, or in another KB)",
            remedy="run `pnk list` to see the documents and their IDs",
        )
    return DocumentRow(row[0], row[1], row[2], row[3], row[4], _metadata(row[5]), row[6], row[7])


def list_documents(conn: sqlite3.Connection, paths: KBPaths,
                   filters: SearchFilters | None = None) -> list[DocumentSummary]:
    """The active documents that pass `filters` (the same filters search applies), in path order.

    Each one's state compares the row with the last sync and the disk: `missing` (the file is gone),
    `failed` (the last sync failed on it; the index holds its previous version), `modified` (its
    size or mtime moved since the last sync), else `indexed`. Nothing is hashed: one stat per file.
    """
    where, params = document_where(filters or SearchFilters())
    rows = conn.execute(
        "SELECT d.id, d.path, d.title, d.source_type, d.metadata, d.mtime, d.indexed_at, "
        "(SELECT count(*) FROM chunks c WHERE c.doc_id = d.id), w.size, w.mtime_ns "
        f"FROM documents d LEFT JOIN walk_cache w ON w.path = d.path WHERE {where} ORDER BY d.path",
        params,
    ).fetchall()
    failures: dict[str, tuple[str, str]] = {}
    for path, stage, error in conn.execute("SELECT path, stage, error FROM failures ORDER BY id"):
        failures.setdefault(path, (stage, (error.splitlines() or [""])[0]))
    root = str(paths.root)
    documents: list[DocumentSummary] = []
    for doc_id, path, title, source_type, metadata, mtime, indexed_at, chunks, size, mtime_ns in rows:
        failure = failures.get(path)
        state = _state(os.path.join(root, *PurePosixPath(path).parts), size, mtime_ns, failure)
        documents.append(DocumentSummary(doc_id, path, display_title(title, path), source_type, int(chunks),
                                         state, tuple(document_tags(_metadata(metadata))), float(mtime),
                                         indexed_at, failure))
    return documents


def _state(file: str, size: int | None, mtime_ns: int | None, failure: tuple[str, str] | None) -> str:
    try:
        info = os.stat(file)
    except OSError:
        return "missing"
    if failure is not None:
        return "failed"
    if size is not None and (info.st_size != size or info.st_mtime_ns != mtime_ns):
        return "modified"
    return "indexed"


def _metadata(value: str | None) -> dict[str, object]:
    try:
        metadata: object = json.loads(value) if value else {}
    except ValueError:
        return {}
    return cast("dict[str, object]", metadata) if isinstance(metadata, dict) else {}  # JSON keys are strings


# -- reading the indexed text -----------------------------------------------------------------------


def read_indexed_text(paths: KBPaths, document: DocumentRow) -> IndexedText:
    """The text this document's chunk offsets address, exactly as the index was built from it."""
    if document.source_type not in EXTRACTORS["text"].source_types:  # an extraction: PDFs, images, the document formats
        return _from_extraction_cache(paths, document)
    return IndexedText(_from_source_file(paths, document), None, None)


def _from_source_file(paths: KBPaths, document: DocumentRow) -> str:
    import xxhash

    from pinakes.extract.text import MAX_SOURCE_BYTES, decode_source

    real = _resolve_inside(paths, document)
    try:
        # O_NOFOLLOW: the final component is not swapped for a symlink after the check above;
        # O_NONBLOCK: a FIFO planted at the path cannot hang the reader (it is refused below).
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


def _resolve_inside(paths: KBPaths, document: DocumentRow) -> str:
    """The real path of an indexed KB-relative path, refused unless it lies inside the KB root."""
    relative = document.path
    parts = PurePosixPath(relative).parts
    if not parts or PurePosixPath(relative).is_absolute() or any(part in ("", ".", "..") for part in parts):
        raise UnusableIndexPathError(f"document {document.id} has an unusable path in the index ({relative!r})",
                                     remedy="run `pnk sync --rebuild` in the KB")
    root = os.path.realpath(paths.root)
    real = os.path.realpath(os.path.join(root, *parts))
    if os.path.commonpath([real, root]) != root:
        raise DocumentOutsideKBError(
            f"{relative} resolves outside the KB (through a symlink); it is not read",
            remedy="replace the symlink with the file itself, then run `pnk sync`",
        )
    return real


def _from_extraction_cache(paths: KBPaths, document: DocumentRow) -> IndexedText:
    from pinakes.extract.cache import ExtractCache

    backend, fingerprint = document.extraction_backend, document.extraction_fingerprint
    if not backend or not fingerprint:
        raise ExtractionUnavailableError(f"{document.path} has no recorded extraction in the index",
                                         remedy="run `pnk sync --rebuild` in the KB")
    stale = _stale_extraction(document, backend, fingerprint)
    try:
        entry = ExtractCache(paths.extract_cache).get(document.content_hash, fingerprint)
    except ValueError:  # a key that cannot name a cache file: a damaged row
        entry = None
    if entry is None:
        raise ExtractionUnavailableError(
            f"the extraction {document.path} was indexed from is no longer in the extraction cache "
            "(swept or cleared); reading a document never re-extracts it",
            remedy="run `pnk sync` in the KB to restore it",
        )
    return IndexedText(entry.extracted.text, entry.extracted.pages, stale)


def _stale_extraction(document: DocumentRow, backend: str, fingerprint: str) -> str | None:
    """Spec §4.4: a free extractor that moved on refuses (its text may be wrong, and re-extracting is
    free); a paid one is served and marked, because that text was paid for and is merely older."""
    spec = EXTRACTORS.get(backend)
    if spec is None or spec.is_current(fingerprint):
        return None
    if spec.paid:
        return backend
    raise StaleExtractionError(
        f"{document.path} was extracted by an older version of {backend} and its text may be wrong",
        remedy="pnk sync",
    )


# -- selecting a range ------------------------------------------------------------------------------


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
    """Characters `[char_start, char_end)` (defaults: the whole text; an end past it is clamped),
    at most `limit` of them."""
    total = len(indexed.text)
    start = char_start if char_start is not None else 0
    if start > total:
        raise RangeError("char_start", f"is {start}, past the end of the document ({total} characters)",
                         remedy=f"pass a char_start below {total}")
    end = total if char_end is None else min(char_end, total)
    if end <= start and total > 0:
        raise RangeError("char_end", f"({char_end}) must be greater than char_start ({start})",
                         remedy="pass char_end > char_start, or leave it out to read to the end")
    cut: dict[str, object] | None = None
    continue_with = None
    if end - start > limit:
        cut = {"requested": {"char_start": start, "char_end": end}, "limit_chars": limit}
        end = start + limit
        continue_with = {"char_start": end}
    first, last = _pages_spanned(indexed.pages, start, end)
    return Selection(indexed.text[start:end], start, end, first, last, cut, continue_with)


def select_pages(indexed: IndexedText, page_start: int | None, page_end: int | None, limit: int) -> Selection:
    """Pages `page_start..page_end` (1-based, inclusive; an end past the last page is clamped) of a
    paged source, each led by a `[page N]` line, as many whole pages as fit in `limit` characters."""
    pages = indexed.pages
    if pages is None:
        raise RangeError("page_start", "applies to paged documents (PDFs) only",
                         remedy="select characters instead")
    count = len(pages)
    first = page_start if page_start is not None else 1
    last = min(page_end, count) if page_end is not None else count
    if first > count:
        raise RangeError("page_start", f"is {first}, but the document has {counted(count, 'page')}",
                         remedy=f"pass a page between 1 and {count}")
    if last < first:
        raise RangeError("page_end", f"({page_end}) is before page_start ({first})",
                         remedy="pass page_end >= page_start")
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
    cut: dict[str, object] | None = None
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


def selection_fields(document: DocumentRow, indexed: IndexedText, selection: Selection) -> dict[str, object]:
    """What `pnk get --json` and `pinakes_get` both say about a selection of a document (each adds
    its own: the CLI the text, the MCP tool its KB, evidence envelope and bounds)."""
    from pinakes.index.citations import citation

    return {
        "doc_id": document.id,
        "path": document.path,
        "title": document.shown_title,  # its title, else its file name
        "source_type": document.source_type,
        "tags": document.tags,
        "citation": citation(document.path, selection.char_start, selection.char_end,
                             selection.page_start, selection.page_end),
        "char_start": selection.char_start,
        "char_end": selection.char_end,
        "total_chars": len(indexed.text),
        "page_start": selection.page_start,
        "page_end": selection.page_end,
        "page_count": len(indexed.pages) if indexed.pages is not None else None,
        "stale_extraction": indexed.stale_extraction,
    }
