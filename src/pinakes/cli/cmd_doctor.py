"""`pnk doctor [--json]`: check the environment and the KB, one OK / WARN / FAIL line per check.

`pnk doctor --prune [--yes]` is the one command that deletes sidecars (spec §6.4): it lists the
orphaned ones (`pinakes.doctor.prune` decides which), then deletes exactly those after a yes — asked
on a terminal, `--yes` otherwise, never assumed."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes.cli.command import Command, CommandArgs, Subcommands
from pinakes.errors import EXIT_FAILURE
from pinakes.wording import counted

if TYPE_CHECKING:
    from pinakes.doctor import Check
    from pinakes.doctor.prune import PruneOutcome, PrunePlan

NAME_WIDTH = 24


@dataclass(frozen=True, kw_only=True)
class DoctorArgs(CommandArgs):
    json: bool
    verify: bool
    prune: bool
    yes: bool


def register(subparsers: Subcommands, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "doctor", parents=[common], help="check the environment and the KB, with remedies",
        description="Check the environment (Python, SQLite with FTS5, installed extras) and, inside a "
                    "KB, the KB itself. Each check prints OK, WARN or FAIL, with a remedy when it is "
                    "not OK. Exits 1 when any check FAILs. Outside a KB only the environment is checked. "
                    "--prune instead lists the sidecars whose document is gone and deletes them once "
                    "confirmed: sync never deletes a sidecar.",
    )
    parser.add_argument("--json", action="store_true", help="print the checks (with --prune: the list and what was deleted) as JSON")
    parser.add_argument("--verify", action="store_true",
                        help="re-hash every document and compare it with the index (default: a sample)")
    parser.add_argument("--prune", action="store_true",
                        help="instead of the checks: list the orphaned sidecars (document gone, ID not "
                             "active in the index) and delete them after a yes. The index keeps their "
                             "soft-deleted rows; with no sidecar left, no sync can revive those IDs")
    parser.add_argument("--yes", action="store_true",
                        help="with --prune: delete without asking (needed without a terminal, and with --json)")
    parser.set_defaults(run=Command(DoctorArgs, run))


def run(args: DoctorArgs) -> int:
    from pinakes.doctor import DoctorContext, run_checks
    from pinakes.errors import UsageError

    if args.prune and args.verify:
        raise UsageError("--prune and --verify are separate runs", remedy="run `pnk doctor --prune` on its own")
    if args.yes and not args.prune:
        raise UsageError("--yes only applies with --prune", remedy="run `pnk doctor --prune --yes`")
    if args.prune:
        return run_prune(args)
    kb_check, kb_root = locate_kb(args.kb_dir)
    results = [kb_check]
    if args.json:
        results.extend(run_checks(DoctorContext(kb_root, verify=args.verify)))
        print_json(results, kb_root)
    else:
        print_line(kb_check)
        for check in run_checks(DoctorContext(kb_root, verify=args.verify)):
            print_line(check)  # line by line: a slow check should not hide the ones before it
            results.append(check)
        counts = Counter(check.status for check in results)
        print(f"doctor: {counts['OK']} OK, {counts['WARN']} WARN, {counts['FAIL']} FAIL")
    return EXIT_FAILURE if any(check.status == "FAIL" for check in results) else 0


def locate_kb(kb_dir: str | None) -> tuple[Check, Path | None]:
    """The KB line, and the root to check. No KB is a FAIL only when -C named one explicitly."""
    from pinakes.doctor import Check
    from pinakes.errors import KBNotFoundError
    from pinakes.kb import find_kb_root

    try:
        root = find_kb_root(kb_dir)
    except KBNotFoundError as exc:
        status = "FAIL" if kb_dir is not None else "WARN"
        return Check("kb", status, f"{exc.message}; only the environment was checked", exc.remedy), None
    return Check("kb", "OK", str(root)), root


def print_line(check: Check) -> None:
    from pinakes.display import printable

    print(f"{check.status:<5} {check.name:<{NAME_WIDTH}} {printable(check.detail)}", flush=True)
    if check.remedy and check.status != "OK":
        print(f"{'':<5} {'':<{NAME_WIDTH}} remedy: {printable(check.remedy)}", flush=True)


def print_json(results: list[Check], kb_root: Path | None) -> None:
    import json
    from dataclasses import asdict

    counts = Counter(check.status for check in results)
    print(json.dumps({
        "ok": counts["FAIL"] == 0,
        "kb_root": str(kb_root) if kb_root is not None else None,
        "checks": [asdict(check) for check in results],
        "summary": {status: counts[status] for status in ("OK", "WARN", "FAIL")},
    }, indent=2))


def run_prune(args: DoctorArgs) -> int:
    """List the orphaned sidecars, then delete exactly those after an explicit yes (spec §6.4)."""
    from pinakes.doctor.prune import delete_orphans, find_orphans
    from pinakes.errors import PinakesError, UsageError
    from pinakes.kb import find_kb_root

    plan = find_orphans(find_kb_root(args.kb_dir))
    if not args.json:
        print_prune_plan(plan)
    if not plan.orphans:
        if args.json:
            print_prune_json(plan, None)
        return 0
    count = len(plan.orphans)
    try:
        if not args.yes:
            if args.json:
                raise UsageError(f"{counted(count, 'orphaned sidecar')} listed and not deleted: --json never asks",
                                 remedy="add --yes to delete them")
            if not sys.stdin.isatty():
                raise UsageError(f"{counted(count, 'orphaned sidecar')} listed and not deleted: there is no "
                                 "terminal to confirm on", remedy="add --yes to delete them non-interactively")
            if not ask_yes(f"delete {counted(count, 'sidecar')}? [y/N] "):
                raise UsageError("nothing was deleted", remedy="answer y to delete the sidecars listed")
        outcome = delete_orphans(plan.root, plan.orphans)
    except PinakesError as exc:
        if args.json:  # one document on stdout: the list, and the error's keys beside it
            print_prune_json(plan, None, error=exc)
            return exc.exit_code
        raise
    if args.json:
        print_prune_json(plan, outcome)
    else:
        print_prune_outcome(outcome)
    return 0 if outcome.ok else EXIT_FAILURE


def ask_yes(prompt: str) -> bool:
    try:
        return input(prompt).strip().lower() in ("y", "yes")
    except EOFError:
        return False


def print_prune_plan(plan: PrunePlan) -> None:
    from pinakes.display import printable

    if plan.orphans:
        print(f"{counted(len(plan.orphans), 'orphaned sidecar')}: the document is gone and the index holds the ID "
              "as active nowhere")
        for orphan in plan.orphans:
            state = (f"soft-deleted since {orphan.deleted_since}" if orphan.index_state == "deleted"
                     else "never indexed")
            print(f"  {printable(orphan.sidecar)}  {orphan.doc_id}  {state}")
    else:
        print("nothing to prune: no orphaned sidecars")
    if plan.kept:
        print(f"kept {counted(len(plan.kept), 'sidecar')} with no document indexed beside "
              f"{'it' if len(plan.kept) == 1 else 'them'}:")
        for kept in plan.kept:
            print(f"  {printable(kept.sidecar)}: {printable(kept.reason)}")


def print_prune_outcome(outcome: PruneOutcome) -> None:
    from pinakes.display import printable

    for warning in outcome.warnings:
        print(f"warning: {printable(warning)}", file=sys.stderr)
    for path in outcome.deleted:
        print(f"deleted {printable(path)}")
    for kept in outcome.skipped:
        print(f"not deleted {printable(kept.sidecar)}: {printable(kept.reason)}")
    for path, error in outcome.failed:
        print(f"failed to delete {printable(path)}: {printable(error)}", file=sys.stderr)
    print(f"pruned {counted(len(outcome.deleted), 'sidecar')}; their IDs stay soft-deleted in the index"
          + (f"; {len(outcome.failed)} could not be deleted" if outcome.failed else ""))


def print_prune_json(plan: PrunePlan, outcome: PruneOutcome | None, *, error: Exception | None = None) -> None:
    import json
    from dataclasses import asdict

    from pinakes.errors import PinakesError

    data: dict[str, object] = {
        "ok": error is None and (outcome is None or outcome.ok),
        "kb_root": str(plan.root),
        "orphans": [asdict(orphan) for orphan in plan.orphans],
        "kept": [asdict(kept) for kept in plan.kept],
        "deleted": outcome.deleted if outcome else [],
        "skipped": [asdict(kept) for kept in outcome.skipped] if outcome else [],
        "failed": [{"sidecar": path, "error": why} for path, why in outcome.failed] if outcome else [],
        "warnings": outcome.warnings if outcome else [],
    }
    if isinstance(error, PinakesError):
        data.update(error.to_dict())
    print(json.dumps(data, indent=2, ensure_ascii=False))
