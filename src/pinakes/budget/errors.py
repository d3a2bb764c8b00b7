"""The budget's errors: each names what was refused, why, and the exact remedy.

They live beside the accountant rather than in `pinakes.errors` because they carry its records (the
blocked windows, the damaged ledger lines) and only this package raises them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from pinakes.budget.money import format_eur
from pinakes.budget.overrun import RESOLVE, Overrun
from pinakes.errors import EXIT_CONFIG, EXIT_DATA, EXIT_FAILURE, EXIT_IO, EXIT_UNAVAILABLE, PinakesError
from pinakes.wording import counted

# The three caps, in the order they are named (spec §5).
WINDOWS = ("per_operation_eur", "daily_eur", "monthly_eur")


@dataclass(frozen=True)
class BlockedWindow:
    """One cap a run (or a call) would breach, and the manifest edit that would admit it."""

    window: str  # "per_operation_eur" | "daily_eur" | "monthly_eur"
    period: str  # "this operation", "2026-12-01", "2026-12"
    cap: Decimal
    spent: Decimal  # already counted in the window (reconciled, reserved and unknown outcomes)
    requested: Decimal  # what the run or call would add, at its worst case
    needed: Decimal  # the smallest cap, in cents, that admits it

    @property
    def edit(self) -> str:
        return f'[budget] {self.window} = "{self.needed}"'

    def describe(self) -> str:
        spent = f"{format_eur(self.spent)} already counted + " if self.spent else ""
        return (f"{self.window} ({self.period}): {spent}{format_eur(self.requested)} worst case "
                f"> cap {format_eur(self.cap, 2)}; admit it with {self.edit} (was \"{self.cap}\")")

    def to_dict(self) -> dict[str, str]:
        return {"window": self.window, "period": self.period, "cap_eur": str(self.cap),
                "spent_eur": str(self.spent), "requested_eur": str(self.requested),
                "needed_eur": str(self.needed), "edit": self.edit}


class BudgetError(PinakesError):
    """A paid call was refused by the budget, or the budget's own files cannot be trusted."""


class PriceTableError(BudgetError):
    """The packaged price table (prices.toml) cannot be read: a broken installation."""

    exit_code = EXIT_DATA


class StalePricesError(BudgetError):
    """The price table is older than `[budget] max_price_age_days`: estimation refuses rather than guess."""

    exit_code = EXIT_UNAVAILABLE


class UnpricedModelError(BudgetError):
    """A paid call names a model the price table has no price for."""

    exit_code = EXIT_UNAVAILABLE


class BudgetCapError(BudgetError):
    """Spending the caps refuse; `blocked` names every window it would breach, with the edit that admits it."""

    def __init__(self, message: str, *, blocked: Sequence[BlockedWindow], remedy: str,
                 path: Path | str | None = None):
        super().__init__(message, remedy=remedy, path=path)
        self.blocked = tuple(blocked)

    def to_dict(self) -> dict[str, object]:
        return {**super().to_dict(), "blocked": [window.to_dict() for window in self.blocked]}


class BudgetRefusedError(BudgetCapError):
    """The whole run was refused before its first call; `blocked` names every window it would breach."""


class BudgetExceededError(BudgetCapError):
    """The next call's reservation would breach a cap: it was never made."""

    # A window's cap stops a run where it is reached (on_exceed = "partial" keeps the whole units
    # done); an open overrun (BudgetOverrunError) stops every run, whatever on_exceed says.
    stops_every_run = False


class BudgetOverrunError(BudgetExceededError):
    """A call reported usage above its reservation and no resolution has closed it: no paid call is
    made until one does (budget/overrun.py). `answer`: what a run that stopped after that call kept
    (a `pnk ask --deep` DeepResult), paid for, so never discarded."""

    exit_code = EXIT_DATA
    stops_every_run = True

    def __init__(self, message: str, *, overruns: Sequence[Overrun], remedy: str, path: Path | str | None = None):
        super().__init__(message, blocked=(), remedy=remedy, path=path)
        self.overruns = tuple(overruns)
        self.answer: object | None = None

    @classmethod
    def of(cls, overruns: Sequence[Overrun], ledger: Path | str | None = None) -> BudgetOverrunError:
        """The refusal every paid call meets while `overruns` are open: what each reported, and the
        command that closes it."""
        if len(overruns) == 1:
            overrun = overruns[0]
            message = (f"{overrun.describe()}; no paid call is made until it is resolved "
                       f"(`{overrun.resolve_command}`)")
            remedy = (f"look the call up on your provider's usage page and record what it billed: "
                      f"`{overrun.resolve_command}` (`--actual {overrun.billed_eur}` accepts the amount it "
                      "reported, which it counts at until then)")
        else:
            message = (f"{counted(len(overruns), 'call')} reported usage above their reservations; no paid call "
                       "is made until each is resolved:\n  "
                       + ";\n  ".join(overrun.describe() for overrun in overruns))
            remedy = ("look each call up on your provider's usage page and record what it billed: "
                      f"`{RESOLVE.format(call_id='CALL_ID')}` for each call `pnk budget` lists under OVERRUNS")
        return cls(message, overruns=overruns, remedy=remedy, path=ledger)

    @property
    def call_id(self) -> str:
        """The first open overrun's call (the one a single-call message names)."""
        return self.overruns[0].call_id

    def to_dict(self) -> dict[str, object]:
        return {**super().to_dict(), "call_id": self.call_id,
                "overruns": [overrun.to_dict() for overrun in self.overruns]}


class SpendNotConfirmedError(BudgetError):
    """The worst case is above `confirm_above_eur` and nobody said yes (declined, or no terminal)."""

    exit_code = EXIT_FAILURE


class LedgerDamagedError(BudgetError):
    """A committed ledger line fails its CRC or does not parse: it is never summed, so nothing spends."""

    exit_code = EXIT_DATA

    def __init__(self, message: str, *, lines: Sequence[int], remedy: str, path: Path | str | None = None):
        super().__init__(message, remedy=remedy, path=path)
        self.lines = tuple(lines)


class UnknownCallError(BudgetError):
    """`pnk budget --resolve` named a call_id the ledger holds no open call for (an unknown outcome or an overrun)."""

    exit_code = EXIT_CONFIG


class UnrecordedOutcomeError(BudgetError):
    """A call was made, but its outcome (a reconciliation or a void) could not be written to the
    ledger: the reservation stays an unknown outcome until `pnk budget --resolve`. Whatever the call
    returned is still the caller's to keep (`answer`: the PaidAnswer `pinakes.paid.paid_call` sets,
    which `pnk ask --deep` replaces with the DeepResult holding it): it was paid for. A stop, never
    a per-document failure: no further call can be reserved on that ledger."""

    exit_code = EXIT_IO

    def __init__(self, message: str, *, call_id: str, actual_eur: Decimal, remedy: str,
                 path: Path | str | None = None):
        super().__init__(message, remedy=remedy, path=path)
        self.call_id = call_id
        self.actual_eur = actual_eur  # what the response's usage says it cost (0 for a void)
        self.answer: object | None = None

    def to_dict(self) -> dict[str, object]:
        return {**super().to_dict(), "call_id": self.call_id, "actual_eur": str(self.actual_eur)}
