"""What `pnk budget` shows: spend by day, month and operation; each window with the rate and the
price date behind its total; unknown outcomes and overruns first, because each one needs a person:
an unknown outcome holds headroom at its reserved amount, and an overrun (a call that reported usage
above its reservation) stops every paid call, until it is resolved (spec §5, "Visibility")."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, tzinfo
from decimal import Decimal

from pinakes.budget.ledger import DamagedLine, Ledger
from pinakes.budget.money import format_eur
from pinakes.budget.overrun import Overrun, open_overruns
from pinakes.budget.prices import PriceTable
from pinakes.budget.settings import BudgetSection
from pinakes.budget.windows import CallRecord, Totals, budget_timezone, fold, month_key
from pinakes.wording import counted

SHOWN_DAYS = 14
SHOWN_OPERATIONS = 10


@dataclass(frozen=True)
class WindowStatus:
    window: str
    period: str
    cap: Decimal
    spent: Decimal
    unknown: Decimal  # of `spent`, what unknown outcomes hold at their reserved amount
    rates: tuple[str, ...]  # the rate and price dates behind the total

    @property
    def remaining(self) -> Decimal:
        return max(self.cap - self.spent, Decimal(0))

    def to_dict(self) -> dict[str, object]:
        return {"window": self.window, "period": self.period, "cap_eur": str(self.cap),
                "spent_eur": str(self.spent), "remaining_eur": str(self.remaining),
                "unknown_outcome_eur": str(self.unknown), "rates": list(self.rates)}


@dataclass(frozen=True)
class OperationSpend:
    operation_id: str
    operation: str
    started: datetime
    calls: int
    eur: Decimal
    unknown: int
    models: tuple[tuple[str, int], ...] = ()  # (model, calls made to it), as its ledger lines record

    def to_dict(self) -> dict[str, object]:
        return {"operation_id": self.operation_id, "operation": self.operation,
                "started": self.started.isoformat(), "calls": self.calls, "eur": str(self.eur),
                "unknown_outcomes": self.unknown,
                "models": [{"model": model, "calls": calls} for model, calls in self.models]}

    def describe_models(self) -> str:
        return ", ".join(model if len(self.models) == 1 else f"{model} x{calls}" for model, calls in self.models)


@dataclass(frozen=True)
class UnknownOutcome:
    call_id: str
    operation_id: str
    operation: str
    model: str
    reserved_at: datetime
    reserved_eur: Decimal

    def to_dict(self) -> dict[str, object]:
        return {"call_id": self.call_id, "operation_id": self.operation_id, "operation": self.operation,
                "model": self.model, "reserved_at": self.reserved_at.isoformat(),
                "reserved_eur": str(self.reserved_eur)}


@dataclass(frozen=True)
class PriceInfo:
    as_of: str
    usd_per_eur: str
    rate_as_of: str
    age_days: int
    max_age_days: int

    @property
    def stale(self) -> bool:
        return self.age_days > self.max_age_days

    def to_dict(self) -> dict[str, object]:
        return {"as_of": self.as_of, "usd_per_eur": self.usd_per_eur, "rate_as_of": self.rate_as_of,
                "age_days": self.age_days, "max_price_age_days": self.max_age_days, "stale": self.stale}


@dataclass(frozen=True)
class BudgetReport:
    ledger: str
    timezone: str
    generated_at: datetime
    windows: tuple[WindowStatus, ...]
    days: tuple[tuple[str, Decimal], ...]  # newest first
    months: tuple[tuple[str, Decimal], ...]
    operations: tuple[OperationSpend, ...]  # newest first
    unknown: tuple[UnknownOutcome, ...]
    overruns: tuple[Overrun, ...]
    damaged: tuple[DamagedLine, ...]
    torn_tail: DamagedLine | None
    prices: PriceInfo | None
    call_eur: dict[str, Decimal]

    def cost_of_calls(self, call_ids: Iterable[str]) -> Decimal:
        """What these calls count for (an extraction-cache entry's `call_ids`): 0 for ids not found."""
        return sum((self.call_eur.get(call_id, Decimal(0)) for call_id in call_ids), Decimal(0))

    @property
    def unknown_eur(self) -> Decimal:
        return sum((u.reserved_eur for u in self.unknown), Decimal(0))

    def to_dict(self) -> dict[str, object]:
        return {
            "ledger": self.ledger, "timezone": self.timezone, "generated_at": self.generated_at.isoformat(),
            "unknown_outcomes": [u.to_dict() for u in self.unknown],
            "unknown_outcome_eur": str(self.unknown_eur),
            "overruns": [o.to_dict() for o in self.overruns],
            "damaged_lines": [{"line": d.number, "reason": d.reason} for d in self.damaged],
            "torn_tail": None if self.torn_tail is None else {"line": self.torn_tail.number,
                                                              "reason": self.torn_tail.reason},
            "windows": [w.to_dict() for w in self.windows],
            "by_day": [{"day": day, "eur": str(eur)} for day, eur in self.days],
            "by_month": [{"month": month, "eur": str(eur)} for month, eur in self.months],
            "by_operation": [op.to_dict() for op in self.operations],
            "prices": None if self.prices is None else self.prices.to_dict(),
        }

    def render_text(self) -> str:
        lines = [f"Spending ledger: {self.ledger} (days and months in {self.timezone})"]
        if self.damaged:
            lines.append(f"DAMAGED LINES: {counted(len(self.damaged), 'line')} "
                         f"{'fails its' if len(self.damaged) == 1 else 'fail their'} check and "
                         f"{'is' if len(self.damaged) == 1 else 'are'} not counted; "
                         "no paid call runs until they are repaired:")
            lines += [f"  {d.describe()}" for d in self.damaged]
        if self.torn_tail is not None:
            lines.append(f"note: {self.torn_tail.describe()}")
        if self.unknown:
            lines.append(f"UNKNOWN OUTCOMES: {counted(len(self.unknown), 'call')} counted at "
                         f"{'its' if len(self.unknown) == 1 else 'their'} reserved amount, "
                         f"{format_eur(self.unknown_eur)} in all (a timeout may or may not have billed):")
            for u in self.unknown:
                lines.append(f"  {u.call_id}  {u.operation} {u.model}  reserved {format_eur(u.reserved_eur)} at "
                             f"{u.reserved_at.isoformat(timespec='seconds')}")
            lines.append("  close each with what the provider billed: pnk budget --resolve CALL_ID --actual EUR")
        if self.overruns:
            lines.append(f"OVERRUNS: {counted(len(self.overruns), 'call')} reported usage above "
                         f"{'its' if len(self.overruns) == 1 else 'their'} reservation, counted as reported; "
                         "no paid call runs until each is resolved:")
            for o in self.overruns:
                beyond = "; ".join(o.beyond_request) or "usage priced above its reservation"
                lines.append(f"  {o.call_id}  {o.operation} {o.model}  reserved {format_eur(o.reserved_eur)} at "
                             f"{o.reserved_at.isoformat(timespec='seconds')}, recorded {format_eur(o.billed_eur)}: {beyond}")
            lines.append("  close each with what the provider's console shows it billed: "
                         "pnk budget --resolve CALL_ID --actual EUR")
        lines.append("Windows:")
        for w in self.windows:
            unknown = f", {format_eur(w.unknown)} of it unknown outcomes" if w.unknown else ""
            rates = f"; priced at {', '.join(w.rates)}" if w.rates else ""
            lines.append(f"  {w.window:<17} {w.period:<28} {format_eur(w.spent)} of {format_eur(w.cap, 2)} "
                         f"({format_eur(w.remaining, headroom=True)} left{unknown}){rates}")
        if not self.operations:
            lines.append("No paid calls recorded.")
        else:
            lines.append("By day:")
            lines += [f"  {day}  {format_eur(eur)}" for day, eur in self.days[:SHOWN_DAYS]]
            if len(self.days) > SHOWN_DAYS:
                lines.append(f"  (+{len(self.days) - SHOWN_DAYS} earlier days: --json lists every one)")
            lines.append("By month:")
            lines += [f"  {month}  {format_eur(eur)}" for month, eur in self.months]
            lines.append("By operation:")
            for op in self.operations[:SHOWN_OPERATIONS]:
                unknown = f", {counted(op.unknown, 'unknown outcome')}" if op.unknown else ""
                lines.append(f"  {op.operation_id}  {op.operation:<7} {op.started.isoformat(timespec='seconds')}  "
                             f"{counted(op.calls, 'call')}  {format_eur(op.eur)}  {op.describe_models()}{unknown}")
            if len(self.operations) > SHOWN_OPERATIONS:
                lines.append(f"  (+{len(self.operations) - SHOWN_OPERATIONS} earlier: --json lists every one)")
        if self.prices is not None:
            stale = (" - STALE: paid runs refuse until the table is updated" if self.prices.stale else "")
            lines.append(f"Prices: as of {self.prices.as_of} ({counted(self.prices.age_days, 'day')} old; paid runs refuse "
                         f"past {self.prices.max_age_days}), {self.prices.usd_per_eur} USD/EUR as of "
                         f"{self.prices.rate_as_of}{stale}")
        return "\n".join(lines)


def build_report(ledger: Ledger, budget: BudgetSection, prices: PriceTable | None, now: datetime) -> BudgetReport:
    """The report of the ledger as last read, its windows those of `budget`, at `now`; `prices` (None
    when the table cannot be read) says how old the price table is."""
    tz = budget_timezone(budget.timezone)
    calls = fold(ledger.records)
    totals = Totals(calls.values(), tz)
    today = totals.day_of(now)
    local = now.astimezone(tz)

    def window(name: str, period: str, cap: Decimal, members: list[CallRecord]) -> WindowStatus:
        spent = sum((c.eur for c in members), Decimal(0))
        unknown = sum((c.eur for c in members if c.status == "unknown outcome"), Decimal(0))
        return WindowStatus(name, period, cap, spent, unknown, _rates(members))

    in_day = [c for c in calls.values() if totals.day_of(c.ts) == today]
    in_month = [c for c in calls.values() if month_key(totals.day_of(c.ts)) == month_key(today)]
    operations = _operations(calls.values(), tz)
    latest = operations[0] if operations else None
    latest_calls = [c for c in calls.values() if latest and c.first.operation_id == latest.operation_id]
    windows = (
        window("per_operation_eur", f"latest operation {latest.operation_id}" if latest else "no operation yet",
               budget.per_operation_eur, latest_calls),
        window("daily_eur", today.isoformat(), budget.daily_eur, in_day),
        window("monthly_eur", month_key(today), budget.monthly_eur, in_month),
    )
    unknown = tuple(
        UnknownOutcome(c.call_id, c.first.operation_id, c.first.operation, c.first.model,
                       c.ts.astimezone(tz), c.eur)
        for c in calls.values() if c.status == "unknown outcome")
    price_info = None
    if prices is not None:
        price_info = PriceInfo(prices.as_of.isoformat(), str(prices.usd_per_eur), prices.rate_as_of.isoformat(),
                               prices.age_days(local.date()), budget.max_price_age_days)
    return BudgetReport(
        ledger=str(ledger.path), timezone=budget.timezone, generated_at=local,
        windows=windows,
        days=tuple((day.isoformat(), eur) for day, eur in sorted(totals.by_day.items(), reverse=True)),
        months=tuple(sorted(totals.by_month.items(), reverse=True)),
        operations=operations, unknown=unknown, overruns=open_overruns(calls.values()),
        damaged=tuple(ledger.damaged), torn_tail=ledger.torn_tail,
        prices=price_info, call_eur={call_id: c.eur for call_id, c in calls.items()},
    )


def _operations(calls: Iterable[CallRecord], tz: tzinfo) -> tuple[OperationSpend, ...]:
    grouped: dict[str, list[CallRecord]] = {}
    for call in calls:
        grouped.setdefault(call.first.operation_id, []).append(call)
    spends = [
        OperationSpend(
            operation_id=op_id, operation=members[0].first.operation,
            started=min(c.ts for c in members).astimezone(tz),
            calls=len(members), eur=sum((c.eur for c in members), Decimal(0)),
            unknown=sum(1 for c in members if c.status == "unknown outcome"),
            models=tuple(sorted(Counter(c.first.model for c in members).items())),
        )
        for op_id, members in grouped.items()
    ]
    return tuple(sorted(spends, key=lambda op: op.started, reverse=True))


def _rates(calls: Iterable[CallRecord]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for call in calls:
        for record in (call.reservation, call.outcome):
            if record is not None and record.kind != "void":
                seen[f"{record.usd_per_eur} USD/EUR (rate as of {record.rate_as_of}, prices as of "
                     f"{record.prices_as_of})"] = None
    return tuple(seen)
