"""`pinakes_get`'s reading, with the server's boundary rules (spec §4.7).

The reading itself — resolving a ULID through the index row, the realpath / no-follow / content-hash
checks on a text source, PDFs served only from the extraction cache entry the index was built from,
and range selection — is the core reader `pinakes.index.documents`, the same one `pnk get` uses.
What this module adds is how its refusals reach an agent: a document this KB does not hold, or one
that resolves outside it, is `NotServedError` naming the served KB; a range that does not fit is a
`ToolArgumentError` naming the tool argument at fault.
"""

from __future__ import annotations

import sqlite3

from pinakes.index import documents as core
from pinakes.index.documents import (
    DocumentChangedError,
    DocumentRow,
    ExtractionUnavailableError,
    IndexedText,
    Selection,
)
from pinakes.serve.boundary import NotServedError, refuse
from pinakes.serve.config import ServedKB

__all__ = [
    "DocumentChangedError",
    "DocumentRow",
    "ExtractionUnavailableError",
    "IndexedText",
    "Selection",
    "find_document",
    "read_indexed_text",
    "select_chars",
    "select_pages",
]


def find_document(conn: sqlite3.Connection, kb: ServedKB, doc_id: str) -> DocumentRow:
    try:
        return core.find_document(conn, doc_id)
    except core.UnknownDocumentError:
        raise NotServedError(
            f"no document {doc_id} in KB {kb.alias!r} (never indexed here, deleted, or in another KB)",
            remedy="use a doc_id from a pinakes_search result, and pass the `kb` that result came from",
        ) from None


def read_indexed_text(kb: ServedKB, document: DocumentRow) -> IndexedText:
    try:
        return core.read_indexed_text(kb.paths, document)
    except core.DocumentOutsideKBError as exc:
        raise NotServedError(f"{document.path} resolves outside the KB (through a symlink); it is not served",
                             remedy=exc.remedy) from None
    except core.UnusableIndexPathError as exc:
        raise refuse("doc_id", f"resolves to an index row with an unusable path ({document.path!r})",
                     exc.remedy or "run `pnk sync --rebuild` in the KB") from None


def select_chars(indexed: IndexedText, char_start: int | None, char_end: int | None, limit: int) -> Selection:
    try:
        return core.select_chars(indexed, char_start, char_end, limit)
    except core.RangeError as exc:
        raise refuse(exc.argument, exc.problem, exc.remedy or "") from None


def select_pages(indexed: IndexedText, page_start: int | None, page_end: int | None, limit: int) -> Selection:
    try:
        return core.select_pages(indexed, page_start, page_end, limit)
    except core.RangeError as exc:
        raise refuse(exc.argument, exc.problem, exc.remedy or "") from None
