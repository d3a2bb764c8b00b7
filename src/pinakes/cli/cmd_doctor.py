"""`pnk doctor [--json]`: check the environment and the KB, one OK / WARN / FAIL line per check."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes.errors import EXIT_FAILURE

if TYPE_CHECKING:
    from pinakes.doctor import Check

NAME_WIDTH = 24


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "doctor", parents=[common], help="check the environment and the KB, with remedies",
        description="Check the environment (Python, SQLite with FTS5, installed extras) and, inside a "
                    "KB, the KB itself. Each check prints OK, WARN or FAIL, with a remedy when it is "
                    "not OK. Exits 1 when any check FAILs. Outside a KB only the environment is checked.",
    )
    parser.add_argument("--json", action="store_true", help="print the checks as JSON")
    parser.add_argument("--verify", action="store_true",
                        help="re-hash every document and compare it with the index (default: a sample)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pinakes.doctor import DoctorContext, run_checks

    kb_check, kb_root = locate_kb(getattr(args, "kb_dir", None))
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
