"""From ledger records to what each window has spent (spec §5, "How a reservation and its outcome
aggregate").

A reservation and its outcome are one call, attributed to the reservation's timestamp in
`[budget] timezone`: a call reserved at 23:59:58 and reconciled at 00:00:03 belongs wholly to the
first day, and attribution never moves afterwards. The outcome supersedes the reserved amount
rather than adding to it; a reservation with no outcome is an *unknown outcome* and counts at its
reserved amount; a void closes it at zero. An outcome whose reservation is missing (a hand-edited
ledger) counts at its own amount and timestamp, since dropping it could only under-count. A
reconciliation above its reservation (an *overrun*, budget/overrun.py) counts at what it reports.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, tzinfo
from decimal import Decimal

from pinakes.budget.ledger import CLOSING_KINDS, LedgerRecord

Status = str  # "unknown outcome" | "reconciled" | "overrun" | "void" | "resolved" | "outcome without reservation"
_STATUS = {"reconciliation": "reconciled", "void": "void", "resolution": "resolved"}


def budget_timezone(name: str) -> tzinfo:
    """The zone windows are counted in; "UTC" needs no tz database."""
    if name == "UTC":
        return UTC
    from zoneinfo import ZoneInfo

    return ZoneInfo(name)


@dataclass
class CallRecord:
    """One call: its reservation and the outcome that supersedes it, if any."""

    call_id: str
    reservation: LedgerRecord | None = None
    outcome: LedgerRecord | None = None  # the latest closing record

    @property
    def first(self) -> LedgerRecord:
        record = self.reservation or self.outcome
        assert record is not None
        return record

    @property
    def ts(self) -> datetime:
        return self.first.ts

    @property
    def status(self) -> Status:
        if self.outcome is None:
            return "unknown outcome"
        if self.reservation is None:
            return "outcome without reservation"
        return "overrun" if self.overran else _STATUS[self.outcome.kind]

    @property
    def overran(self) -> bool:
        """Reconciled above its reservation: more input or output tokens than the request allowed,
        or more money than was reserved (an overrun until a resolution supersedes it)."""
        reservation, outcome = self.reservation, self.outcome
        if reservation is None or outcome is None or outcome.kind != "reconciliation":
            return False
        if outcome.input_tokens > reservation.input_tokens or outcome.output_tokens > reservation.output_tokens:
            return True
        if outcome.usd_per_eur == reservation.usd_per_eur:  # one rate: EUR follows USD, no division needed
            return outcome.cost_usd > reservation.cost_usd
        return outcome.eur() > reservation.eur()

    @property
    def reserved_eur(self) -> Decimal:
        return self.reservation.eur() if self.reservation is not None else Decimal(0)

    @property
    def eur(self) -> Decimal:
        """What the call counts for in every window it falls in."""
        if self.outcome is not None:
            return Decimal(0) if self.outcome.kind == "void" else self.outcome.eur()
        return self.reserved_eur


def fold(records: Iterable[LedgerRecord]) -> dict[str, CallRecord]:
    """Every call in the ledger by call_id, in the order calls first appear."""
    calls: dict[str, CallRecord] = {}
    for record in records:
        call = calls.setdefault(record.call_id, CallRecord(record.call_id))
        if record.kind == "reservation":
            if call.reservation is None:  # a duplicate reservation line cannot move attribution
                call.reservation = record
        elif record.kind in CLOSING_KINDS:
            call.outcome = record
    return calls


class Totals:
    """Window totals over a set of calls, in one time zone."""

    def __init__(self, calls: Iterable[CallRecord], tz: tzinfo) -> None:
        self.tz = tz
        self.by_day: dict[date, Decimal] = defaultdict(Decimal)
        self.by_month: dict[str, Decimal] = defaultdict(Decimal)
        self.by_operation: dict[str, Decimal] = defaultdict(Decimal)
        for call in calls:
            amount = call.eur
            day = self.day_of(call.ts)
            self.by_day[day] += amount
            self.by_month[month_key(day)] += amount
            self.by_operation[call.first.operation_id] += amount

    def day_of(self, moment: datetime) -> date:
        return moment.astimezone(self.tz).date()

    def day(self, day: date) -> Decimal:
        return self.by_day.get(day, Decimal(0))

    def month(self, day: date) -> Decimal:
        return self.by_month.get(month_key(day), Decimal(0))

    def operation(self, operation_id: str) -> Decimal:
        return self.by_operation.get(operation_id, Decimal(0))


def month_key(day: date) -> str:
    return f"{day.year:04d}-{day.month:02d}"
