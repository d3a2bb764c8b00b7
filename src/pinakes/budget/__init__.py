"""The budget accountant (spec §5): what a paid call may cost, decided before the call is made.

Exactly two things may spend (spec §1): claude-vision extraction (`operation="extract"`) and
`pnk ask --deep` (`operation="ask"`). Both spend through this package, and nothing here imports a
paid client or touches the network: it prices, reserves, reconciles and reports.

How a caller spends
-------------------

::

    from pinakes.budget import Accountant, CallShape, BudgetRefusedError, BudgetExceededError

    acct = Accountant.open(kb_root, manifest.budget, kb_id=manifest.kb.id)
    #   loads the packaged price table (prices.toml) and .pinakes/ledger.jsonl; raises
    #   StalePricesError past [budget] max_price_age_days and LedgerDamagedError when a committed
    #   ledger line fails its CRC: both before anything is planned.

    shapes = [CallShape("claude-opus-5", max_input_tokens=12_000, max_output_tokens=8_000,
                        unit="docs/a.pdf") for _slice in slices_of_a] + [...]
    plan = acct.plan(operation="extract", calls=shapes, interactive=sys.stdin.isatty(), force=args.force)
    #   The whole run is priced at its worst case before call 0. Raises:
    #   - UnpricedModelError for a model the table has no price for;
    #   - BudgetRefusedError naming *every* blocked window (per_operation_eur, daily_eur,
    #     monthly_eur) with the exact `[budget]` edit that would admit the run (`err.blocked`);
    #     under `on_exceed = "partial"` only when not even the first whole unit fits;
    #   - SpendNotConfirmedError when the worst case is above confirm_above_eur and the user
    #     declined, or there is no terminal to ask on (never an implicit yes; `force` changes
    #     nothing here, nor any cap: a flag that can widen a hard cap is not a hard cap).
    #   Under `on_exceed = "partial"` it returns a plan admitting the longest prefix of whole units
    #   that fits (`plan.admitted_units`, `plan.admitted_calls`; `plan.partial` is True and
    #   `plan.blocked` names what cut it). Never part of a unit: a document is all or nothing.

    for shape in shapes[: plan.admitted_calls]:
        try:
            with plan.call(shape, unit="docs/a.pdf#slice-0") as call:
                # The reservation record (worst case) is on disk before this line runs, appended
                # under an exclusive lock after re-reading the ledger, so two processes sharing one
                # ledger never exceed a cap together. BudgetExceededError (raised by `with`) means
                # the call was never made.
                resp = client.messages.create(..., max_tokens=shape.max_output_tokens)
                call.reconcile(input_tokens=resp.usage.input_tokens,
                               output_tokens=resp.usage.output_tokens)   # supersedes the reservation
                # Usage above the reservation is recorded as reported and is an overrun
                # (`call.overrun`, `plan.overruns`, budget/overrun.py): keep what the call returned
                # and make no further call. Every later reservation, by this run or any other on the
                # ledger, raises BudgetOverrunError (a BudgetExceededError) until
                # `pnk budget --resolve CALL_ID --actual EUR` closes it; `plan.overrun_error()` is
                # that error, for a run that stops itself.
                # or: call.void("the request was never sent")          # closes it at zero
        except BudgetExceededError:
            break   # abort: the run is a failure; partial: keep whole documents already done
        # Leaving the block by an exception (a timeout that may have billed) without reconcile or
        # void records nothing more: the reservation stays an *unknown outcome*, counted at its
        # reserved amount until `pnk budget --resolve CALL_ID --actual EUR`. kill -9 does the same.
        # A reconcile or void the ledger will not take (unwritable, disk full) raises
        # UnrecordedOutcomeError: the call WAS made, the error names it and the amount to resolve it
        # at, and the caller keeps what the call returned and makes no further call.

    call.call_id        # the join key an extraction-cache entry stores (`call_ids`)
    plan.operation_id   # one invocation: the unit per_operation_eur bounds

    acct.report()                      # what `pnk budget` prints (BudgetReport: .to_dict(), .render_text())
    acct.resolve(call_id, Decimal("0.03"))   # closes an unknown outcome or an overrun; never edits a line

`Accountant.for_report(kb_root, budget)` opens the ledger without the price-age refusal, for the
read-only callers (`pnk budget`, `pnk doctor`, `--clear-cache=paid` pricing entries by call_id
with `BudgetReport.cost_of_calls(call_ids)`); it cannot plan.

Money is Decimal end to end. A record's `cost_usd` is quantised once, when it is written: rounded
up to the micro-dollar. Its EUR value is derived at read time from the record alone — `cost_usd`
divided by the record's own `usd_per_eur`, rounded up to the micro-euro (`money.to_eur`) — so every
sum is exact and no rounding ever moves an amount down. A cap admits a total exactly equal to it.

The ledger never holds query text, document content, paths or unit labels: timestamp,
operation_id, call_id, record kind, operation kind, model, token counts, cost_usd, usd_per_eur, the
two `as_of` dates and the KB id — nothing more (docs/BUDGET.md has the format).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pinakes.budget.errors import (
    BlockedWindow,
    BudgetCapError,
    BudgetError,
    BudgetExceededError,
    BudgetOverrunError,
    BudgetRefusedError,
    LedgerDamagedError,
    PriceTableError,
    SpendNotConfirmedError,
    StalePricesError,
    UnknownCallError,
    UnpricedModelError,
    UnrecordedOutcomeError,
)
from pinakes.budget.money import MONEY_QUANTUM, to_eur
from pinakes.budget.prices import ModelPrice, PriceTable, load_prices

if TYPE_CHECKING:
    from pinakes.budget.accountant import Accountant, Call, CallShape, Plan
    from pinakes.budget.report import BudgetReport


# Every sync reads the price table (the manifest's models are priced at load) but only a paid run
# opens the ledger: the accountant and the report load on first use (~13 ms a no-op sync saves).
def __getattr__(name: str) -> object:
    if name in ("Accountant", "Call", "CallShape", "Plan"):
        from pinakes.budget import accountant

        value = getattr(accountant, name)
    elif name == "BudgetReport":
        from pinakes.budget import report

        value = report.BudgetReport
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


__all__ = [
    "MONEY_QUANTUM",
    "Accountant",
    "BlockedWindow",
    "BudgetCapError",
    "BudgetError",
    "BudgetExceededError",
    "BudgetOverrunError",
    "BudgetRefusedError",
    "BudgetReport",
    "Call",
    "CallShape",
    "LedgerDamagedError",
    "ModelPrice",
    "Plan",
    "PriceTable",
    "PriceTableError",
    "SpendNotConfirmedError",
    "StalePricesError",
    "UnknownCallError",
    "UnpricedModelError",
    "UnrecordedOutcomeError",
    "load_prices",
    "to_eur",
]
