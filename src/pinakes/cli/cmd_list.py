"""`pnk list`: the indexed documents, with their IDs, filtered as `pnk search` filters; read-only."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pinakes.cli.command import Command, Subcommands
from pinakes.cli.filter_args import FilterArgs, add_filter_arguments
from pinakes.wording import counted

if TYPE_CHECKING:
    from pinakes.index.documents import DocumentSummary


@dataclass(frozen=True, kw_only=True)
class ListArgs(FilterArgs):
    json: bool


def register(subparsers: Subcommands, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "list", parents=[common], help="list the indexed documents with their IDs (writes nothing)",
        description="List the documents in the index, in path order: ID (what `pnk get` and links take), "
                    "source type, chunk count, state, path and title (the sidecar's title, else the "
                    "document's own, else its file name). State: `indexed`; `modified` (its size or mtime "
                    "moved since the last sync); `failed` (the last sync failed on it: the index holds its "
                    "previous version); `missing` (gone from disk). `pnk status` says what a sync would do. "
                    "The filters are `pnk search`'s.",
        epilog="example: pnk list --tag design --type markdown --json",
    )
    add_filter_arguments(parser)
    parser.add_argument("--json", action="store_true",
                        help="print the documents as JSON (id, path, title, source_type, chunks, state, tags, "
                             "mtime, indexed_at, failure)")
    parser.set_defaults(run=Command(ListArgs, run))


def run(args: ListArgs) -> int:
    from pinakes.index import schema
    from pinakes.index.documents import list_documents
    from pinakes.kb import KBPaths, find_kb_root

    filters = args.filters()
    paths = KBPaths(find_kb_root(args.kb_dir))
    conn = schema.open_reader(paths.index_db)
    try:
        conn.execute("BEGIN")  # one snapshot: the rows and the failures of the same sync
        documents = list_documents(conn, paths, filters)
    finally:
        conn.close()
    if args.json:
        print(json.dumps({"ok": True, "count": len(documents), "chunks": sum(d.chunks for d in documents),
                          "documents": [document.to_dict() for document in documents]},
                         indent=2, ensure_ascii=False))
    else:
        print(render(documents, filtered=filters.active))
    return 0


def render(documents: list[DocumentSummary], *, filtered: bool) -> str:
    from pinakes.display import printable

    if not documents:
        return "No documents matched the filters." if filtered else \
            "No documents indexed. Run `pnk sync` to index the KB's sources."
    type_width = max(4, *(len(document.source_type) for document in documents))
    chunk_width = max(6, *(len(str(document.chunks)) for document in documents))
    state_width = max(5, *(len(document.state) for document in documents))
    lines = [f"{'ID':<26}  {'TYPE':<{type_width}}  {'CHUNKS':>{chunk_width}}  {'STATE':<{state_width}}  PATH — TITLE"]
    for document in documents:
        # Paths and titles come from the KB's files: escaped for the terminal.
        line = (f"{document.id:<26}  {document.source_type:<{type_width}}  {document.chunks:>{chunk_width}}  "
                f"{document.state:<{state_width}}  {printable(document.path)} — {printable(document.title)}")
        if document.failure is not None:
            stage, error = document.failure
            line += f"  (last sync failed at {stage}: {printable(error)})"
        lines.append(line)
    chunks = sum(document.chunks for document in documents)
    lines.append(f"{counted(len(documents), 'document')}, {counted(chunks, 'chunk')}")
    attention = [state for state in ("missing", "failed", "modified")
                 if any(document.state == state for document in documents)]
    if attention:
        lines.append(f"{' / '.join(attention)}: run `pnk status` to see what `pnk sync` would do")
    return "\n".join(lines)
