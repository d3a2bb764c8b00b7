"""The accountant: the whole run priced before call 0, each call reserved before it is made.

The package docstring (`pinakes.budget`) is the caller's guide; this module is the arithmetic.
Three windows bound spending (spec §5): `per_operation_eur` (one invocation, all its calls),
`daily_eur` and `monthly_eur` (sequences of invocations, in `[budget] timezone`). A window admits a
total exactly equal to its cap. A reservation is the worst case — every input token the request
may carry and the full `max_tokens` of output — because the real cost is only known from the
response, and a ceiling that can be exceeded by the call it guards is not a ceiling. A response
reporting more than its reservation is an overrun (budget/overrun.py): recorded as reported, and no
paid call is reserved until it is resolved.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

from pinakes.budget.errors import (
    BlockedWindow,
    BudgetError,
    BudgetExceededError,
    BudgetOverrunError,
    BudgetRefusedError,
    LedgerDamagedError,
    SpendNotConfirmedError,
    StalePricesError,
    UnknownCallError,
    UnpricedModelError,
    UnrecordedOutcomeError,
)
from pinakes.budget.ledger import OPERATIONS, Kind, Ledger, LedgerRecord
from pinakes.budget.money import ceil_cents, eur_to_usd, format_eur, to_eur
from pinakes.budget.overrun import Overrun, open_overruns
from pinakes.budget.prices import ModelPrice, PriceTable, load_prices
from pinakes.budget.report import BudgetReport, build_report
from pinakes.budget.settings import BudgetSection
from pinakes.budget.windows import CallRecord, Tally, Totals, budget_timezone, month_key
from pinakes.errors import FilesystemError, PinakesError, UsageError
from pinakes.kb import KBPaths
from pinakes.wording import counted, noun_for

Clock = Callable[[], datetime]
Prompt = Callable[[str], bool]

_NO_FORCE = "--force never widens a cap"


@dataclass(frozen=True)
class CallShape:
    """One planned call at its worst case. `unit` groups calls into what `on_exceed = "partial"`
    admits whole or not at all (a document for the extractor, a question's rounds for --deep); it
    stays in memory and is never written to the ledger. None: the call is its own unit."""

    model: str
    max_input_tokens: int
    max_output_tokens: int
    unit: str | None = None

    def __post_init__(self) -> None:
        if self.max_input_tokens < 0 or self.max_output_tokens < 1:
            raise ValueError(f"a call's worst case needs token bounds >= 0 and >= 1, not {self}")


class Accountant:
    """Prices, reserves, reconciles and reports the paid calls of one KB's ledger."""

    def __init__(self, *, paths: KBPaths, budget: BudgetSection, prices: PriceTable | None,
                 clock: Clock, kb_id: str | None, can_spend: bool) -> None:
        self.paths = paths
        self.budget = budget
        self.prices = prices
        self.kb_id = kb_id
        self.tz = budget_timezone(budget.timezone)
        self.ledger = Ledger(paths.ledger)
        self._clock = clock
        self._can_spend = can_spend
        self._tally = Tally(self.tz)
        self.ledger.refresh()

    @classmethod
    def open(cls, kb_root: Path | str, budget: BudgetSection, *, kb_id: str | None = None,
             clock: Clock | None = None, prices: PriceTable | None = None) -> Accountant:
        """An accountant that may spend. Refuses a price table older than max_price_age_days and a
        ledger with a damaged committed line, before anything is planned."""
        table = prices if prices is not None else load_prices()
        accountant = cls(paths=KBPaths(Path(kb_root)), budget=budget, prices=table,
                         clock=clock or _utc_now, kb_id=kb_id, can_spend=True)
        accountant._refuse_stale_prices()
        accountant._refuse_damaged_ledger()
        return accountant

    @classmethod
    def for_report(cls, kb_root: Path | str, budget: BudgetSection, *, clock: Clock | None = None,
                   prices: PriceTable | None = None) -> Accountant:
        """A read-only accountant (report, resolve): no price-age or damage refusal; cannot plan."""
        table = prices
        if table is None:
            with contextlib.suppress(PinakesError):  # a report still works on a broken install
                table = load_prices()
        return cls(paths=KBPaths(Path(kb_root)), budget=budget, prices=table, clock=clock or _utc_now,
                   kb_id=None, can_spend=False)

    # -- the run ---------------------------------------------------------------------------------

    def plan(self, operation: str, calls: Sequence[CallShape], *, interactive: bool, force: bool = False,
             prompt: Prompt | None = None) -> Plan:
        """Check the whole run at its worst case before call 0 (see the package docstring)."""
        if not self._can_spend:
            raise RuntimeError("Accountant.for_report() cannot plan; use Accountant.open()")
        if operation not in OPERATIONS:
            raise ValueError(f"operation must be one of {OPERATIONS}, not {operation!r}")
        if not calls:
            raise ValueError("a plan needs at least one call")
        costs = [self._worst_case_eur(shape) for shape in calls]
        units = _units(calls)
        now = self._now()
        self.ledger.refresh()
        self._refuse_damaged_ledger()
        totals = self._totals()
        total = sum(costs, Decimal(0))
        blocked = self._blocked(totals, now, None, total)
        admitted_units, admitted_calls = len(units), len(calls)
        if blocked:
            admitted_units = 0
            if self.budget.on_exceed == "partial":
                admitted_units = self._longest_fitting_prefix(units, costs, totals, now)
            if admitted_units == 0:
                raise self._refusal(operation, total, len(calls), len(units), blocked, force)
            admitted_calls = sum(len(unit) for unit in units[:admitted_units])
        admitted = sum(costs[:admitted_calls], Decimal(0))
        plan = Plan(
            accountant=self, operation=operation, operation_id=_new_id(), calls=tuple(calls),
            worst_case_eur=admitted, worst_case_usd=sum(
                (self._worst_case_usd(shape) for shape in calls[:admitted_calls]), Decimal(0)),
            requested_eur=total, admitted_calls=admitted_calls, admitted_units=admitted_units,
            total_units=len(units), blocked=tuple(blocked),
        )
        self._confirm(plan, totals, now, interactive=interactive, prompt=prompt)
        return plan

    def report(self) -> BudgetReport:
        """What `pnk budget` shows: spend by day, month and operation, the windows, unknown outcomes."""
        self.ledger.refresh()
        return build_report(self.ledger, self.budget, self.prices, self._now())

    def resolve(self, call_id: str, actual_eur: Decimal) -> LedgerRecord:
        """Close an unknown outcome, or an overrun, at what the provider's console says it cost:
        appends a resolution record at the reservation's own rate; never edits a line."""
        if not actual_eur.is_finite() or actual_eur < 0 or actual_eur.is_signed():
            raise UsageError(f"--actual must be a non-negative amount in EUR, not {actual_eur}",
                             remedy="write the amount the provider billed, e.g. --actual 0.0312")
        with self.ledger.exclusive(consequence="nothing was resolved"):
            call = self.calls().get(call_id)
            if call is None or call.reservation is None:
                raise UnknownCallError(
                    f"no reservation with call_id {call_id} in the ledger", path=self.paths.ledger,
                    remedy="copy a call_id from the unknown outcomes or overruns `pnk budget` lists")
            if call.outcome is not None and not call.overran:
                raise UnknownCallError(
                    f"call {call_id} is already closed ({call.status} at {format_eur(call.eur)} on "
                    f"{call.outcome.ts.isoformat(timespec='seconds')}); a closed call is never reopened",
                    path=self.paths.ledger,
                    remedy="nothing to resolve: `pnk budget` lists the open ones (unknown outcomes and overruns)")
            reservation = call.reservation
            record = _outcome(reservation, "resolution", self._now(), 0, 0,
                              eur_to_usd(actual_eur, reservation.usd_per_eur))
            self.ledger.append(record)
        return record

    # -- calls -----------------------------------------------------------------------------------

    def reserve_call(self, plan: Plan, shape: CallShape) -> LedgerRecord:
        """Plan.call's step: append the worst case's reservation, or refuse it with the windows it breaches."""
        price = self._price(shape.model)
        assert self.prices is not None
        cost_usd = price.cost_usd(shape.max_input_tokens, shape.max_output_tokens)
        requested = to_eur(cost_usd, self.prices.usd_per_eur)
        with self.ledger.exclusive():
            self._refuse_damaged_ledger()
            totals = self._totals()
            now = self._now()
            blocked = self._blocked(totals, now, plan.operation_id, requested)
            if blocked:
                plan.stopped_by = tuple(blocked)
                names = ", ".join(window.window for window in blocked)
                raise BudgetExceededError(
                    f"the next call's worst case ({format_eur(requested)}) would breach {names}; the "
                    "call was not made:\n  " + ";\n  ".join(window.describe() for window in blocked),
                    blocked=blocked, path=self.paths.ledger,
                    remedy=f"raise the {noun_for(len(blocked), 'cap')} named, or resolve unknown outcomes "
                           f"(`pnk budget`); {_NO_FORCE}")
            record = LedgerRecord(
                kind="reservation", ts=now, operation=plan.operation, operation_id=plan.operation_id,
                call_id=_new_id(), model=shape.model, input_tokens=shape.max_input_tokens,
                output_tokens=shape.max_output_tokens, cost_usd=cost_usd, usd_per_eur=self.prices.usd_per_eur,
                prices_as_of=self.prices.as_of, rate_as_of=self.prices.rate_as_of, kb_id=self.kb_id,
            )
            self.ledger.append(record)
        return record

    def close_call(self, reservation: LedgerRecord, kind: Kind, input_tokens: int, output_tokens: int) -> LedgerRecord:
        """Call.reconcile's and Call.void's step: append the outcome that supersedes `reservation`."""
        if kind == "void":
            cost_usd = Decimal(0)
        else:
            cost_usd = self._price(reservation.model).cost_usd(input_tokens, output_tokens)
        assert self.prices is not None
        record = _outcome(reservation, kind, self._now(), input_tokens, output_tokens, cost_usd,
                          usd_per_eur=self.prices.usd_per_eur, prices_as_of=self.prices.as_of,
                          rate_as_of=self.prices.rate_as_of)
        try:
            with self.ledger.exclusive(consequence=""):
                self.ledger.append(record)
        except FilesystemError as exc:
            raise _unrecorded(reservation, record, exc) from None
        return record

    # -- checks ----------------------------------------------------------------------------------

    def _blocked(self, totals: Totals, now: datetime, operation_id: str | None,
                 requested: Decimal) -> list[BlockedWindow]:
        day = totals.day_of(now)
        windows = (
            ("per_operation_eur", "this operation", self.budget.per_operation_eur,
             totals.operation(operation_id) if operation_id else Decimal(0)),
            ("daily_eur", day.isoformat(), self.budget.daily_eur, totals.day(day)),
            ("monthly_eur", month_key(day), self.budget.monthly_eur, totals.month(day)),
        )
        return [BlockedWindow(name, period, cap, spent, requested, ceil_cents(spent + requested))
                for name, period, cap, spent in windows if spent + requested > cap]

    def _longest_fitting_prefix(self, units: list[list[int]], costs: list[Decimal], totals: Totals,
                                now: datetime) -> int:
        running, fitting = Decimal(0), 0
        for unit in units:
            running += sum((costs[i] for i in unit), Decimal(0))
            if self._blocked(totals, now, None, running):
                break
            fitting += 1
        return fitting

    def _refusal(self, operation: str, total: Decimal, calls: int, units: int,
                 blocked: list[BlockedWindow], force: bool) -> BudgetRefusedError:
        partial = ("" if self.budget.on_exceed == "partial" else
                   ' (on_exceed = "abort"; "partial" would admit the whole units that fit)')
        forced = f"; {_NO_FORCE}" if force else ""
        return BudgetRefusedError(
            f"refused before the first call: this {operation} run's worst case is {format_eur(total)} "
            f"({counted(calls, 'call')}, {counted(units, 'unit')}) and it would breach "
            f"{counted(len(blocked), 'window')}{partial}:\n  "
            + ";\n  ".join(window.describe() for window in blocked),
            blocked=blocked, path=self.paths.manifest,
            remedy="make every edit listed in pinakes.toml to admit the whole run, or run it on fewer "
                   f"documents; the worst case is a ceiling, usually far above the bill (docs/BUDGET.md){forced}",
        )

    def _confirm(self, plan: Plan, totals: Totals, now: datetime, *, interactive: bool,
                 prompt: Prompt | None) -> None:
        """The confirm_above_eur prompt, evaluated on its own: a run at a cap is allowed and asked."""
        threshold = self.budget.confirm_above_eur
        if plan.worst_case_eur <= threshold:
            return
        day = totals.day_of(now)
        question = (
            f"This {plan.operation} run may cost up to {format_eur(plan.worst_case_eur)} "
            f"({counted(plan.admitted_calls, 'paid call')}{plan.partial_note()}), above confirm_above_eur "
            f"({format_eur(threshold, 2)}). That is the worst case reserved; the bill is usually far "
            f"less. Today {format_eur(totals.day(day))} of {format_eur(self.budget.daily_eur, 2)}, this "
            f"month {format_eur(totals.month(day))} of {format_eur(self.budget.monthly_eur, 2)}. "
            "Continue? [y/N] "
        )
        if not interactive:
            raise SpendNotConfirmedError(
                f"this run's worst case ({format_eur(plan.worst_case_eur)}) is above confirm_above_eur "
                f"({format_eur(threshold, 2)}) and there is no terminal to confirm it on; nothing was spent",
                path=self.paths.manifest,
                remedy="run it from a terminal and answer the prompt, or raise [budget] confirm_above_eur "
                       f'to at least "{ceil_cents(plan.worst_case_eur)}" (a no-terminal run never assumes yes)')
        if not (prompt or _ask_on_terminal)(question):
            raise SpendNotConfirmedError("not confirmed; nothing was spent", remedy=None)
        plan.confirmed = True

    def _refuse_stale_prices(self) -> None:
        assert self.prices is not None
        today = self._now().astimezone(self.tz).date()
        age = self.prices.age_days(today)
        if age > self.budget.max_price_age_days:
            from pinakes.distribution import pip_upgrade

            raise StalePricesError(
                f"the price table is {age} days old (prices as of {self.prices.as_of}, EUR rate as of "
                f"{self.prices.rate_as_of}), past [budget] max_price_age_days = "
                f"{self.budget.max_price_age_days}: a paid run refuses rather than price with numbers "
                "that may no longer be true",
                remedy=f"upgrade Pinakes for a current price table ({pip_upgrade()}); or, having "
                       "checked today's prices yourself, raise max_price_age_days in pinakes.toml",
                path=self.paths.manifest,
            )

    def _refuse_damaged_ledger(self) -> None:
        if not self.ledger.damaged:
            return
        lines = [line.number for line in self.ledger.damaged]
        listed = "; ".join(line.describe() for line in self.ledger.damaged[:5])
        raise LedgerDamagedError(
            f"{counted(len(lines), 'line')} of the spending ledger cannot be trusted ({listed}); "
            f"{'its amount is' if len(lines) == 1 else 'their amounts are'} "
            "unknown, so no paid call is made until they are repaired",
            lines=lines, path=self.paths.ledger,
            remedy=f"restore the {noun_for(len(lines), 'line')} from a backup, or delete "
                   f"{'it' if len(lines) == 1 else 'them'} by hand if you accept that whatever "
                   f"{'it' if len(lines) == 1 else 'they'} recorded is no longer counted (Pinakes never edits the ledger)",
        )

    def _totals(self) -> Totals:
        """Every window's total over the ledger as last read, brought up to date with the records
        read since the last check (budget/windows.py `Tally`: not folded afresh each time).
        Refuses while an overrun is open: no paid call while a call's reported usage is above its
        reservation and unresolved: the caps hold only for usage the requests allowed, so one that
        did not is a person's to settle."""
        self._tally.catch_up(self.ledger.records, self.ledger.epoch)
        overruns = open_overruns(self._tally.overran())
        if overruns:
            raise BudgetOverrunError.of(overruns, self.paths.ledger)
        return self._tally.totals

    # -- helpers ---------------------------------------------------------------------------------

    def _price(self, model: str) -> ModelPrice:
        if self.prices is None:
            raise RuntimeError("no price table loaded")
        price = self.prices.price(model)
        if price is None:
            known = ", ".join(sorted(self.prices.models))
            raise UnpricedModelError(
                f"the price table (as of {self.prices.as_of}) has no price for model {model!r}; an "
                f"unpriced call cannot be reserved (priced: {known})",
                remedy="use a priced model, or upgrade Pinakes for a table that prices it")
        return price

    def _worst_case_usd(self, shape: CallShape) -> Decimal:
        return self._price(shape.model).cost_usd(shape.max_input_tokens, shape.max_output_tokens)

    def _worst_case_eur(self, shape: CallShape) -> Decimal:
        assert self.prices is not None
        return to_eur(self._worst_case_usd(shape), self.prices.usd_per_eur)

    def calls(self) -> dict[str, CallRecord]:
        """Every call in the ledger as last read, by call_id (kept up to date, not copied: read it)."""
        self._tally.catch_up(self.ledger.records, self.ledger.epoch)
        return self._tally.calls

    def _now(self) -> datetime:
        now = self._clock()
        return now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)


@dataclass(eq=False)
class Plan:
    """An admitted run: its operation_id, its worst case, and how much of it was admitted."""

    accountant: Accountant = field(repr=False)
    operation: str
    operation_id: str
    calls: tuple[CallShape, ...]
    worst_case_eur: Decimal  # of the admitted calls
    worst_case_usd: Decimal
    requested_eur: Decimal  # of every call asked for
    admitted_calls: int
    admitted_units: int
    total_units: int
    blocked: tuple[BlockedWindow, ...] = ()  # what cut a partial plan short
    confirmed: bool = False  # the confirm_above_eur prompt was shown and answered yes
    stopped_by: tuple[BlockedWindow, ...] = ()  # set when a call's reservation was refused
    call_ids: list[str] = field(default_factory=list[str])
    overruns: list[Overrun] = field(default_factory=list[Overrun])  # this run's calls that overran

    def overrun_error(self) -> BudgetOverrunError | None:
        """The error that stops this run after a call of it overran (None when none did)."""
        return BudgetOverrunError.of(self.overruns, self.accountant.paths.ledger) if self.overruns else None

    @property
    def partial(self) -> bool:
        return self.admitted_units < self.total_units

    def partial_note(self) -> str:
        if not self.partial:
            return ""
        return f"; {self.admitted_units} of {self.total_units} {noun_for(self.total_units, 'unit')} fit the caps"

    @contextlib.contextmanager
    def call(self, shape: CallShape, unit: str | None = None) -> Generator[Call]:
        """Reserve `shape`'s worst case (on disk before the block runs); yield the Call.

        `unit` is a label for this process only (e.g. "docs/a.pdf#slice-0"), never written. Raises
        BudgetExceededError, before the block, when the reservation would breach a cap."""
        record = self.accountant.reserve_call(self, shape)
        self.call_ids.append(record.call_id)
        yield Call(self, record, unit)
        # Left without reconcile() or void() (by an exception or not): nothing more is written, so
        # the reservation stays an unknown outcome at its reserved amount — as after a kill -9.

    def describe(self) -> str:
        """One line for a run's report."""
        text = (f"{self.operation} {self.operation_id}: worst case {format_eur(self.worst_case_eur)} for "
                f"{counted(self.admitted_calls, 'call')}")
        if self.partial:
            text += (f", {self.admitted_units} of {self.total_units} {noun_for(self.total_units, 'unit')} admitted "
                     "(on_exceed = partial; "
                     f"cut by {', '.join(window.window for window in self.blocked)})")
        return text

    def to_dict(self) -> dict[str, object]:
        return {
            "operation": self.operation, "operation_id": self.operation_id,
            "worst_case_eur": str(self.worst_case_eur), "worst_case_usd": str(self.worst_case_usd),
            "requested_eur": str(self.requested_eur), "admitted_calls": self.admitted_calls,
            "total_calls": len(self.calls), "admitted_units": self.admitted_units,
            "total_units": self.total_units, "partial": self.partial,
            "blocked": [window.to_dict() for window in self.blocked],
            "stopped_by": [window.to_dict() for window in self.stopped_by], "call_ids": list(self.call_ids),
            "overruns": [overrun.to_dict() for overrun in self.overruns],
        }


class Call:
    """One reserved call; close it with `reconcile()` (it billed) or `void()` (it never billed)."""

    def __init__(self, plan: Plan, reservation: LedgerRecord, unit: str | None) -> None:
        self.plan = plan
        self.reservation = reservation
        self.unit = unit
        self.outcome: LedgerRecord | None = None
        self.overrun: Overrun | None = None  # set by reconcile() when the usage overran the reservation

    @property
    def call_id(self) -> str:
        return self.reservation.call_id

    @property
    def reserved_eur(self) -> Decimal:
        return self.reservation.eur()

    @property
    def reserved_usd(self) -> Decimal:
        return self.reservation.cost_usd

    def reconcile(self, *, input_tokens: int, output_tokens: int) -> Decimal:
        """Record what the response's usage says it cost (superseding the reservation); returns EUR.
        Usage above the reserved worst case is recorded as reported — a ledger never under-reports —
        and is an overrun (`self.overrun`, `plan.overruns`): the caller keeps what the call returned
        and makes no further call (every later reservation is refused until it is resolved)."""
        self._closing()
        self.outcome = self.plan.accountant.close_call(self.reservation, "reconciliation", input_tokens, output_tokens)
        self.overrun = Overrun.of(CallRecord(self.call_id, self.reservation, self.outcome))
        if self.overrun is not None:
            self.plan.overruns.append(self.overrun)
        return self.outcome.eur()

    def void(self, reason: str) -> None:
        """Close the reservation at zero: the request never billed (never sent, or refused before
        processing). `reason` is for the caller's own report; it is not written to the ledger."""
        del reason
        self._closing()
        self.outcome = self.plan.accountant.close_call(self.reservation, "void", 0, 0)

    def _closing(self) -> None:
        if self.outcome is not None:
            raise BudgetError(f"call {self.call_id} is already closed ({self.outcome.kind})")


def _units(calls: Sequence[CallShape]) -> list[list[int]]:
    """Consecutive calls sharing a unit, as lists of call indexes."""
    units: list[list[int]] = []
    previous: str | None = None
    for index, shape in enumerate(calls):
        if units and shape.unit is not None and shape.unit == previous:
            units[-1].append(index)
        else:
            units.append([index])
        previous = shape.unit
    return units


def _outcome(reservation: LedgerRecord, kind: Kind, now: datetime, input_tokens: int, output_tokens: int,
             cost_usd: Decimal, *, usd_per_eur: Decimal | None = None, prices_as_of: date | None = None,
             rate_as_of: date | None = None) -> LedgerRecord:
    return LedgerRecord(
        kind=kind,
        ts=now, operation=reservation.operation, operation_id=reservation.operation_id,
        call_id=reservation.call_id, model=reservation.model, input_tokens=input_tokens,
        output_tokens=output_tokens, cost_usd=cost_usd,
        usd_per_eur=usd_per_eur if usd_per_eur is not None else reservation.usd_per_eur,
        prices_as_of=prices_as_of or reservation.prices_as_of,
        rate_as_of=rate_as_of or reservation.rate_as_of, kb_id=reservation.kb_id,
    )


def _unrecorded(reservation: LedgerRecord, record: LedgerRecord, exc: FilesystemError) -> UnrecordedOutcomeError:
    """The error for an outcome the ledger would not take: the call WAS made, and says how to close it."""
    call_id, actual = reservation.call_id, record.eur()
    if record.kind == "void":
        made = f"call {call_id} billed nothing"
    else:
        made = f"call {call_id} was made and billed {format_eur(actual)} by its usage"
    return UnrecordedOutcomeError(
        f"{made}, but {exc.message}: until it is resolved the call counts as an unknown outcome at its "
        f"reserved {format_eur(reservation.eur())}",
        call_id=call_id, actual_eur=actual, path=exc.path,
        remedy=f"{exc.remedy}; then record what it cost: `pnk budget --resolve {call_id} --actual {actual}`")


def _ask_on_terminal(question: str) -> bool:
    print(question, end="", file=sys.stderr, flush=True)
    try:
        answer = input()
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def _new_id() -> str:
    from pinakes.ids import new_ulid

    return new_ulid()


def _utc_now() -> datetime:
    return datetime.now(UTC)

