"""`pnk doit list|info ...`: doit's own view of this KB's sync pipeline (read-only)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from pinakes.cli.command import Command, CommandArgs, Subcommands
from pinakes.errors import UsageError

ALLOWED = ("list", "info", "help")


@dataclass(frozen=True, kw_only=True)
class DoitArgs(CommandArgs):
    doit_args: list[str]


def register(subparsers: Subcommands, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "doit", parents=[common], help="inspect the sync DAG with doit's list/info",
        description="Run doit's introspection commands over this KB's sync pipeline, e.g. "
                    "`pnk doit list --all --status` or `pnk doit info embed:g00000`. Nothing is "
                    "changed; `pnk sync` runs the pipeline.",
    )
    parser.add_argument("doit_args", nargs=argparse.REMAINDER, help="doit command and its arguments")
    parser.set_defaults(run=Command(DoitArgs, run))


def run(args: DoitArgs) -> int:
    from pinakes.kb import find_kb_root

    argv = list(args.doit_args) or ["list"]
    if argv[0] not in ALLOWED:
        raise UsageError(f"`pnk doit {argv[0]}` is not allowed: only {', '.join(ALLOWED)} (read-only)",
                         remedy="run the pipeline with `pnk sync`")
    from doit.cmd_base import ModuleTaskLoader
    from doit.doit_cmd import DoitMain

    from pinakes.sync.loader import inspection_namespace

    namespace = inspection_namespace(find_kb_root(args.kb_dir))
    return int(DoitMain(ModuleTaskLoader(namespace), config_filenames=()).run(argv) or 0)
