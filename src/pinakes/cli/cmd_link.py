"""`pnk link A B --rel REL`: author a link from A to B by writing A's sidecar; `pnk link --add-kb
ALIAS DIR`: connect another KB (a thin layer over `pinakes.links.authoring`)."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

from pinakes.cli.command import Command, CommandArgs, Subcommands

USAGE = ("%(prog)s [-C DIR] [--json] SOURCE TARGET --rel REL\n"
         "       %(prog)s [-C DIR] [--json] --add-kb ALIAS DIR")


@dataclass(frozen=True, kw_only=True)
class LinkArgs(CommandArgs):
    source: str | None
    target: str | None
    rel: str | None
    add_kb: list[str] | None  # [ALIAS, DIR]
    json: bool


def register(subparsers: Subcommands, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "link", parents=[common], help="link one document to another (writes only the source's sidecar)",
        # Two forms, each with what it requires: argparse's own usage would show --rel as optional,
        # which it is only in the --add-kb form (issue #40).
        usage=USAGE,
        description="Add a link from SOURCE (a document of this KB) to TARGET (in this KB or a connected "
                    "one) to SOURCE's sidecar, as pnk://<kb-ulid>/<doc-ulid>: aliases are resolved to ULIDs "
                    "first, TARGET must exist, and no file of TARGET's KB is written (it learns of the link "
                    "by its own reverse scan). A document is a path, a document ULID of this KB, ALIAS:PATH "
                    "or ALIAS:ULID for a [[links.kb]] KB (self: for this one), or a pnk:// URI. With "
                    "--add-kb ALIAS DIR, append a [[links.kb]] for the KB at DIR to this KB's pinakes.toml.",
        epilog="examples: pnk link docs/loans/outgoing.md partner:docs/loans/borrowing.md --rel "
               "partner-procedure · pnk link --add-kb partner ../partner-kb",
    )
    parser.add_argument("source", metavar="SOURCE", nargs="?", help="the document that links (in this KB)")
    parser.add_argument("target", metavar="TARGET", nargs="?", help="the document linked to")
    parser.add_argument("--rel", metavar="REL",
                        help="the relation, e.g. cites, extends, see-also (required with SOURCE and TARGET)")
    parser.add_argument("--add-kb", nargs=2, metavar=("ALIAS", "DIR"),
                        help="connect the KB at DIR under ALIAS (appends a [[links.kb]] to pinakes.toml)")
    parser.add_argument("--json", action="store_true", help="print what was done as JSON")
    parser.set_defaults(run=Command(LinkArgs, run))


def run(args: LinkArgs) -> int:
    from pinakes.display import printable
    from pinakes.errors import UsageError
    from pinakes.links import authoring

    start = args.kb_dir
    if args.add_kb is not None:
        if args.source is not None or args.rel is not None:
            raise UsageError("--add-kb takes no SOURCE, TARGET or --rel", remedy="run it on its own")
        added = authoring.add_kb(start, args.add_kb[0], args.add_kb[1])
        if args.json:
            print(json.dumps({"ok": True, "added_kb": added.to_dict()}, indent=2))
        else:
            print(f"connected {printable(added.alias)} -> {added.kb_id} ({printable(added.name)}) at "
                  f"{printable(added.path)}; its links into this KB are scanned on the next `pnk sync`")
        return 0
    if args.source is None or args.target is None or args.rel is None:
        raise UsageError("pnk link needs SOURCE, TARGET and --rel (or --add-kb ALIAS DIR)",
                         remedy="e.g. pnk link docs/a.md partner:docs/b.md --rel cites")
    change = authoring.link(start, args.source, args.target, args.rel)
    if args.json:
        print(json.dumps({"ok": True, **change.to_dict()}, indent=2, ensure_ascii=False))
        return 0
    if change.changed:
        print(f"linked {printable(change.source.path or change.source.doc_id)} -> "
              f"pnk://{change.target.kb_id}/{change.target.doc_id} ({printable(change.rels[0])}); wrote "
              f"{printable(change.sidecar)}")
    for note in change.notes:
        print(f"note: {printable(note)}")
    return 0
