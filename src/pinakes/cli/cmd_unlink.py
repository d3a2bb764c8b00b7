"""`pnk unlink A B [--rel REL]`: remove A's links to B from A's sidecar (`pinakes.links.authoring`)."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

from pinakes.cli.command import Command, CommandArgs, Subcommands


@dataclass(frozen=True, kw_only=True)
class UnlinkArgs(CommandArgs):
    source: str
    target: str
    rel: str | None
    json: bool


def register(subparsers: Subcommands, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "unlink", parents=[common], help="remove a link (writes only the source's sidecar)",
        description="Remove SOURCE's links to TARGET from SOURCE's sidecar: every relation, or only --rel. "
                    "Documents are named as for `pnk link`; TARGET need not exist any more (a link to a "
                    "document that is gone is what one unlinks). Refused when SOURCE holds no such link.",
    )
    parser.add_argument("source", metavar="SOURCE", help="the document that links (in this KB)")
    parser.add_argument("target", metavar="TARGET", help="the document linked to")
    parser.add_argument("--rel", metavar="REL", help="remove only the link with this relation")
    parser.add_argument("--json", action="store_true", help="print what was done as JSON")
    parser.set_defaults(run=Command(UnlinkArgs, run))


def run(args: UnlinkArgs) -> int:
    from pinakes.display import printable
    from pinakes.links import authoring

    change = authoring.unlink(args.kb_dir, args.source, args.target, args.rel)
    if args.json:
        print(json.dumps({"ok": True, **change.to_dict()}, indent=2, ensure_ascii=False))
    else:
        print(f"unlinked {printable(change.source.path or change.source.doc_id)} -> "
              f"pnk://{change.target.kb_id}/{change.target.doc_id} ({printable(', '.join(change.rels))}); wrote "
              f"{printable(change.sidecar)}")
    return 0
