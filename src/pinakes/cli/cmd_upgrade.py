"""`pnk upgrade [--apply]`: the template diff between the version the KB records and the installed one."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from pinakes.cli.command import Command, CommandArgs, Subcommands


@dataclass(frozen=True, kw_only=True)
class UpgradeArgs(CommandArgs):
    apply: bool
    yes: bool
    json: bool


def register(subparsers: Subcommands, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "upgrade", parents=[common], help="show the template diff since the KB's recorded version",
        description="Compare the template version the KB records ([kb] template) with the installed one, "
                    "both rendered from the archive of released versions, and print each changed key as a "
                    "hunk against pinakes.toml. Changes nothing. A key you tuned that the template did not "
                    "change never appears; one the template changed too is reported as not applying. "
                    "--apply writes the printed change only if every hunk applies, after a backup.",
    )
    parser.add_argument("--apply", action="store_true",
                        help="write the printed change (refused whole if any hunk does not apply)")
    parser.add_argument("--yes", action="store_true",
                        help="with --apply: confirm moving budget caps without asking")
    parser.add_argument("--json", action="store_true", help="print the diff (and what was applied) as JSON")
    parser.set_defaults(run=Command(UpgradeArgs, run))


def run(args: UpgradeArgs) -> int:
    from pinakes.errors import UsageError
    from pinakes.upgrade import apply_upgrade, plan_upgrade
    from pinakes.upgrade.apply import cannot_compare_error
    from pinakes.upgrade.report import render_plan

    if args.yes and not args.apply:
        raise UsageError("--yes only applies with --apply", remedy="run `pnk upgrade --apply --yes`")
    plan = plan_upgrade(args.kb_dir)
    if plan.status == "cannot-compare":  # no diff is no report: exit 69 with the remedy (docs/CLI.md)
        raise cannot_compare_error(plan)
    if not args.json:
        print(render_plan(plan))  # the whole change, before anything is written
    if not args.apply:
        if args.json:
            _print_json(plan.to_dict())
        return 0
    confirmed = args.yes or not plan.budget_moves or _ask_budget(args.json)
    applied = apply_upgrade(plan, budget_confirmed=confirmed)
    if args.json:
        _print_json({**plan.to_dict(), "applied": applied.backup is not None,
                     "backup": str(applied.backup) if applied.backup else None, "records": applied.recorded})
    elif applied.backup is not None:
        print(f"applied: {applied.path} now records {applied.recorded} (the previous file is {applied.backup})")
    return 0


def _ask_budget(quiet: bool) -> bool:
    """A terminal answers y to move the caps; anything else (no terminal, --json) is a refusal."""
    if quiet or not sys.stdin.isatty():
        return False
    try:
        answer = input("move the budget caps listed above? [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def _print_json(data: dict[str, object]) -> None:
    import json

    print(json.dumps(data, indent=2, ensure_ascii=False, default=str))
