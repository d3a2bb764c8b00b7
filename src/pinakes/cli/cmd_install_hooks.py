"""`pnk install-hooks`: install the pre-commit, post-commit and post-merge hooks."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

from pinakes.cli.command import Command, CommandArgs, Subcommands


@dataclass(frozen=True, kw_only=True)
class InstallHooksArgs(CommandArgs):
    json: bool


def register(subparsers: Subcommands, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "install-hooks", parents=[common], help="install the git hooks that keep the index fresh",
        description="pre-commit mints sidecars for staged new documents; post-commit and post-merge "
                    "update the index. Idempotent (re-running upgrades older hooks in place); an existing "
                    "hook is kept as <hook>.local and run first. Hooks force the free extractor "
                    "(--extract=pypdfium2). They find the KB from the repository they run in and pnk from "
                    "the environment (PATH, then this interpreter, then python3), so a moved KB, a new "
                    "virtualenv or a fresh clone keeps working. Without a pnk they print one line and let "
                    "the commit through; `git config pinakes.strictHooks true` makes pre-commit block.",
    )
    parser.add_argument("--json", action="store_true", help="print what was installed as JSON")
    parser.set_defaults(run=Command(InstallHooksArgs, run))


def run(args: InstallHooksArgs) -> int:
    from pinakes.hooks import FREE_EXTRACTOR_NOTE, install_hooks
    from pinakes.kb import find_kb_root

    installed = install_hooks(find_kb_root(args.kb_dir))
    if args.json:
        print(json.dumps([{"hook": h.name, "path": str(h.path), "upgraded": h.upgraded,
                           "preserved": str(h.preserved) if h.preserved else None} for h in installed],
                         indent=2))
        return 0
    for hook in installed:
        kept = f" (your hook is kept as {hook.preserved.name} and runs first)" if hook.preserved else ""
        verb = "upgraded" if hook.upgraded else "installed"
        print(f"{verb} {hook.path}{kept}")
    print(FREE_EXTRACTOR_NOTE.lstrip("# "))
    return 0
