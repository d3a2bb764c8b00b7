"""`pnk get DOCUMENT`: a document's text, exactly as the index was built from it (the reader behind MCP
`pinakes_get`); a character or page range of it with `--range` / `--pages`. Read-only."""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pinakes.cli.command import Command, CommandArgs, Subcommands
from pinakes.wording import counted

if TYPE_CHECKING:
    from pinakes.index.documents import DocumentRow, IndexedText, Selection

_RANGE = re.compile(r"(\d+)-(\d*)")
_PAGES = re.compile(r"(\d+)(?:-(\d*))?")


@dataclass(frozen=True, kw_only=True)
class GetArgs(CommandArgs):
    doc_id: str
    char_range: str | None
    pages: str | None
    json: bool


def register(subparsers: Subcommands, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "get", parents=[common], help="print a document's indexed text, or a range of it",
        description="Print the text of a document exactly as the index was built from it, so "
                    "a citation's offsets address it: a text source is read from disk and refused if it "
                    "changed since the last sync; a PDF is read from the extraction cache, never "
                    "re-extracted. The same reader as the MCP tool pinakes_get, without its size bound. "
                    "A document is named as pnk link names one: its ID (from `pnk list` or search results), "
                    "a pnk:// link, its path, or self:PATH.",
        epilog="examples: pnk get docs/guide.md · pnk get 01J9ZX7K3M4N5P6Q7R8S9T0VWX --range 120-480 · "
               "pnk get 01J9ZX7K3M4N5P6Q7R8S9T0VWX --pages 3-4",
    )
    parser.add_argument("doc_id", metavar="DOCUMENT",
                        help="a document of this KB: its ULID, pnk://self/ULID (or pnk://<kb-ulid>/ULID), its "
                             "path, or self:PATH")
    selection = parser.add_mutually_exclusive_group()
    selection.add_argument("--range", dest="char_range", metavar="START-END",
                           help="only characters START to END of the indexed text (END exclusive, as in a "
                                "citation `path:START-END`; `START-` reads to the end)")
    selection.add_argument("--pages", metavar="N-M",
                           help="only pages N to M of a PDF (1-based, inclusive, as in a citation "
                                "`path:pN-M`; `N` is one page, `N-` reads to the last)")
    parser.add_argument("--json", action="store_true",
                        help="print the document's fields and the selected text as JSON")
    parser.set_defaults(run=Command(GetArgs, run))


def run(args: GetArgs) -> int:
    from pinakes.index import schema
    from pinakes.index.documents import find_document, read_indexed_text
    from pinakes.kb import KBPaths, find_kb_root
    from pinakes.links.addresses import resolve_in_kb

    paths = KBPaths(find_kb_root(args.kb_dir))
    char_range = _parse_range(args.char_range) if args.char_range is not None else None
    page_range = _parse_pages(args.pages) if args.pages is not None else None
    doc_id = resolve_in_kb(paths.root, args.doc_id)
    conn = schema.open_reader(paths.index_db)
    try:
        document = find_document(conn, doc_id)
    finally:
        conn.close()
    indexed = read_indexed_text(paths, document)
    selection = _select(document, indexed, char_range, page_range)
    if args.json:
        print(json.dumps({"ok": True, **_payload(document, indexed, selection)}, indent=2, ensure_ascii=False))
    else:
        print(render(document, indexed, selection))
    return 0


def _parse_range(value: str) -> tuple[int, int | None]:
    from pinakes.errors import UsageError

    match = _RANGE.fullmatch(value.strip())
    start, end = (int(match.group(1)), int(match.group(2)) if match.group(2) else None) if match else (0, 0)
    if match is None or (end is not None and end <= start):
        raise UsageError(f"--range {value!r} is not START-END with END greater than START",
                         remedy="pass character offsets as a citation gives them, e.g. --range 120-480, "
                                "or --range 120- to read to the end")
    return start, end


def _parse_pages(value: str) -> tuple[int, int | None]:
    from pinakes.errors import UsageError

    match = _PAGES.fullmatch(value.strip())
    if match is None:
        first, last = 0, None
    elif match.group(2) is None:  # "N": one page
        first = last = int(match.group(1))
    else:
        first, last = int(match.group(1)), int(match.group(2)) if match.group(2) else None
    if first < 1 or (last is not None and last < first):
        raise UsageError(f"--pages {value!r} is not N, N-M or N- with 1 <= N <= M",
                         remedy="pass pages as a citation gives them, e.g. --pages 3 or --pages 3-4")
    return first, last


def _select(document: DocumentRow, indexed: IndexedText, char_range: tuple[int, int | None] | None,
            page_range: tuple[int, int | None] | None) -> Selection:
    from pinakes.errors import UsageError
    from pinakes.index.documents import select_chars, select_pages

    unbounded = sys.maxsize
    total = len(indexed.text)
    if page_range is not None:
        if indexed.pages is None:
            raise UsageError(f"--pages applies to paged documents (PDFs); {document.path} is {document.source_type}",
                             remedy="select characters instead: --range START-END")
        count = len(indexed.pages)
        if page_range[0] > count:
            raise UsageError(f"--pages starts at page {page_range[0]}, but {document.path} has {counted(count, 'page')}",
                             remedy=f"pass pages between 1 and {count}" if count else "leave out --pages")
        return select_pages(indexed, page_range[0], page_range[1], unbounded)
    if char_range is not None:
        if char_range[0] > total:
            raise UsageError(f"--range starts at character {char_range[0]}, past the end of {document.path} "
                             f"({total} characters)", remedy=f"pass a START of at most {total}")
        return select_chars(indexed, char_range[0], char_range[1], unbounded)
    return select_chars(indexed, None, None, unbounded)


def _citation(document: DocumentRow, selection: Selection) -> str:
    from pinakes.index.citations import citation

    return citation(document.path, selection.char_start, selection.char_end, selection.page_start,
                    selection.page_end)


def _payload(document: DocumentRow, indexed: IndexedText, selection: Selection) -> dict[str, object]:
    from pinakes.index.documents import selection_fields

    return {**selection_fields(document, indexed, selection), "text": selection.text}


def render(document: DocumentRow, indexed: IndexedText, selection: Selection) -> str:
    from pinakes.cli.cmd_search import locator_words
    from pinakes.display import printable

    locator = locator_words(selection.char_start, selection.char_end, selection.page_start, selection.page_end)
    if indexed.pages is not None and selection.page_start is not None:
        locator += f" of {len(indexed.pages)}"
    else:
        locator += f" of {len(indexed.text)}"
    # Everything below comes from the KB's files: escaped for the terminal.
    lines = [f"{printable(document.shown_title)} — {printable(_citation(document, selection))} · {locator}",
             " · ".join([document.id, document.source_type,
                         *(["tags: " + ", ".join(printable(tag) for tag in document.tags)] if document.tags else [])])]
    if indexed.stale_extraction:
        lines.append(f"stale extraction: {indexed.stale_extraction} (paid text, extracted by an older version; "
                     "still served)")
    lines.append("")
    lines.extend(_printable_line(line) for line in selection.text.split("\n"))
    return "\n".join(lines)


def _printable_line(line: str) -> str:
    """One line of document text for a terminal: escaped, but tabs kept and a CRLF's CR dropped."""
    from pinakes.display import printable

    return "\t".join(printable(part) for part in line.removesuffix("\r").split("\t"))
