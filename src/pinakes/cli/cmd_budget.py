"""`pnk budget [--json] [--resolve CALL_ID --actual EUR]`: what the paid paths have spent, and
closing a call whose outcome is unknown or that overran its reservation (by appending to the ledger,
never editing it)."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING

from pinakes.cli.command import Command, CommandArgs, Subcommands

if TYPE_CHECKING:
    from pinakes.budget import Accountant


@dataclass(frozen=True, kw_only=True)
class BudgetArgs(CommandArgs):
    json: bool
    resolve: str | None
    actual: str | None


def register(subparsers: Subcommands, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "budget", parents=[common], help="what the paid paths have spent, by day, month and operation",
        description="Read .pinakes/ledger.jsonl and show spend by day, month and operation, each "
                    "[budget] window with its total, cap, and the exchange rate and price date behind "
                    "it, every unknown outcome (a reserved call with no recorded result, counted "
                    "at its reserved amount) and every overrun (a call whose answer reported usage above "
                    "its reservation, counted as reported; no paid call runs until it is resolved). "
                    "Writes nothing, except with --resolve. Exits 0; 1 when a ledger line fails its check.",
    )
    parser.add_argument("--json", action="store_true", help="print the report (every day and operation) as JSON")
    parser.add_argument("--resolve", metavar="CALL_ID",
                        help="close an unknown outcome or an overrun at what the provider billed (needs "
                             "--actual); appends a resolution record, never edits a line")
    parser.add_argument("--actual", metavar="EUR", help="with --resolve: the amount billed for that call, in EUR")
    parser.set_defaults(run=Command(BudgetArgs, run))


def run(args: BudgetArgs) -> int:
    from pinakes.budget import Accountant
    from pinakes.errors import EXIT_FAILURE, UsageError
    from pinakes.kb import find_kb_root
    from pinakes.manifest import load_manifest

    if (args.resolve is None) != (args.actual is None):
        raise UsageError("--resolve and --actual go together",
                         remedy="pnk budget --resolve CALL_ID --actual EUR (the call_ids are in `pnk budget`)")
    root = find_kb_root(args.kb_dir)
    manifest = load_manifest(root / "pinakes.toml")
    accountant = Accountant.for_report(root, manifest.budget)
    if args.resolve is not None and args.actual is not None:  # both or neither, checked above
        return _resolve(accountant, args.resolve, _amount(args.actual), as_json=args.json)
    report = accountant.report()
    if args.json:
        print(json.dumps({"ok": not report.damaged, **report.to_dict()}, indent=2))
    else:
        from pinakes.display import printable

        print("\n".join(printable(line) for line in report.render_text().splitlines()))
    return EXIT_FAILURE if report.damaged else 0


def _resolve(accountant: Accountant, call_id: str, actual: Decimal, *, as_json: bool) -> int:
    from pinakes.budget.money import format_eur

    record = accountant.resolve(call_id, actual)
    if as_json:
        print(json.dumps({"ok": True, "call_id": record.call_id, "actual_eur": str(record.eur()),
                          "cost_usd": str(record.cost_usd), "usd_per_eur": str(record.usd_per_eur)}, indent=2))
    else:
        print(f"resolved {record.call_id} at {format_eur(record.eur())} ({record.cost_usd} USD at "
              f"{record.usd_per_eur} USD/EUR); appended to {accountant.paths.ledger}")
    return 0


def _amount(text: str) -> Decimal:
    from pinakes.budget.money import AMOUNT_EXAMPLE, AmountError, parse_amount
    from pinakes.errors import UsageError

    try:
        return parse_amount(text)
    except AmountError as exc:
        raise UsageError(f"--actual {exc}", remedy=f"write a plain decimal in EUR, e.g. --actual {AMOUNT_EXAMPLE}") from None
