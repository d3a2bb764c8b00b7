"""`pnk adopt SIDECAR DOCUMENT`: keep a moved document's old ID (the move sync could only suspect)."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

from pinakes.cli.command import Command, CommandArgs, Subcommands


@dataclass(frozen=True, kw_only=True)
class AdoptArgs(CommandArgs):
    sidecar: str
    document: str
    json: bool


def register(subparsers: Subcommands, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "adopt", parents=[common], help="give a moved document back its old ID (its left-behind sidecar)",
        description="Move SIDECAR, left behind by a document that was moved without it, beside "
                    "DOCUMENT, replacing the sidecar sync minted for it. The next `pnk sync` continues "
                    "the old ID at DOCUMENT's path, so links to it keep working. Sync prints the exact "
                    "command when it sees a likely pair; it never decides on its own.",
    )
    parser.add_argument("sidecar", metavar="SIDECAR", help="the orphaned sidecar, e.g. docs/plan.md.pnk.yaml")
    parser.add_argument("document", metavar="DOCUMENT", help="the document as it is now named")
    parser.add_argument("--json", action="store_true", help="print what was done as JSON")
    parser.set_defaults(run=Command(AdoptArgs, run))


def run(args: AdoptArgs) -> int:
    from dataclasses import asdict

    from pinakes.display import printable
    from pinakes.pipeline.adopt import adopt_sidecar

    adopted = adopt_sidecar(args.kb_dir, args.sidecar, args.document)
    if args.json:
        print(json.dumps(asdict(adopted), indent=2))
        return 0
    print(f"{printable(adopted.document)} now carries {adopted.doc_id} ({printable(adopted.sidecar)})")
    if adopted.replaced_id:
        print(f"  replaced its sidecar with ID {adopted.replaced_id}, which retires on the next sync")
    print("next: pnk sync")
    return 0
