"""`pnk status [--json]`: what a sync would do now, and when the index was last built; writes nothing."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

from pinakes.cli.command import Command, CommandArgs, Subcommands


@dataclass(frozen=True, kw_only=True)
class StatusArgs(CommandArgs):
    json: bool


def register(subparsers: Subcommands, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "status", parents=[common], help="what `pnk sync` would do now (writes nothing)",
        description="Walk the sources and pair them against the index exactly as `pnk sync` would, "
                    "without writing anything: new, changed, moved and deleted documents (a deletion "
                    "that is likely a move without its sidecar with the `pnk adopt` command that "
                    "keeps its ID), sidecars to mint, documents that would fail or failed last time, skipped paths with "
                    "their reasons, when the index was last built, and the vector tier with the approximate vector "
                    "file's state (none, current, or stale, damaged, missing with the remedy; from its footer, not a "
                    "checksum of every byte: `pnk doctor` reads them). With a remote embedding model it "
                    "asks the endpoint for its probe (one small request, as a sync's start does) to say "
                    "whether the model behind the same name was swapped. Exits 0.",
    )
    parser.add_argument("--json", action="store_true", help="print the status as JSON (every path)")
    parser.set_defaults(run=Command(StatusArgs, run))


def run(args: StatusArgs) -> int:
    from pinakes.sync.status import kb_status

    status = kb_status(args.kb_dir)
    if args.json:
        print(json.dumps(status.to_dict(), indent=2))
    else:
        print(status.render_text())
    return 0
