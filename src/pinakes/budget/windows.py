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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, tzinfo
from decimal import Decimal

from pinakes.budget.ledger import CLOSING_KINDS, LedgerRecord

Status = str  # "unknown outcome" | "reconciled" | "overrun" | "void" | "resolved" | "outcome without reservation"
Share = tuple[date, str, Decimal]  # what one call counts for: its day, its operation_id, its amount
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
        _apply(calls.setdefault(record.call_id, CallRecord(record.call_id)), record)
    return calls


def _apply(call: CallRecord, record: LedgerRecord) -> None:
    """One record's effect on its call: the first reservation attributes it, the latest outcome
    supersedes whatever it counted at before."""
    if record.kind == "reservation":
        if call.reservation is None:  # a duplicate reservation line cannot move attribution
            call.reservation = record
    elif record.kind in CLOSING_KINDS:
        call.outcome = record


class Totals:
    """Window totals over a set of calls, in one time zone."""

    def __init__(self, calls: Iterable[CallRecord], tz: tzinfo) -> None:
        self.tz = tz
        self.by_day: dict[date, Decimal] = defaultdict(Decimal)
        self.by_month: dict[str, Decimal] = defaultdict(Decimal)
        self.by_operation: dict[str, Decimal] = defaultdict(Decimal)
        for call in calls:
            self.count(self.share(call))

    def share(self, call: CallRecord) -> Share:
        """What `call` counts for, and where."""
        return self.day_of(call.ts), call.first.operation_id, call.eur

    def count(self, share: Share, sign: int = 1) -> None:
        """Add a call's share to each window it falls in (`sign` -1: take it away again). Every
        amount is a micro-euro multiple, so adding and taking away is exact in any order."""
        day, operation_id, amount = share
        amount = amount if sign > 0 else -amount
        self.by_day[day] += amount
        self.by_month[month_key(day)] += amount
        self.by_operation[operation_id] += amount

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


class Tally:
    """`fold` and `Totals` kept up to date one record at a time: what the accountant checks before
    every plan and every reservation, at a cost that does not grow with the ledger (folding it
    afresh each time cost ~4 ms per 1,000 lines, twice per priced search: docs/perf/budget.md).

    It folds the records of one `Ledger` read in order (`catch_up`), exactly as `fold` would: a
    call's old contribution is taken away before the record that changes it is applied, and its
    new one added. A ledger read afresh (the file was replaced or truncated by hand: `Ledger.epoch`
    moved) is folded afresh."""

    def __init__(self, tz: tzinfo) -> None:
        self.tz = tz
        self._epoch = 0
        self._start_again()

    def _start_again(self) -> None:
        self.calls: dict[str, CallRecord] = {}
        self.totals = Totals((), self.tz)
        self._shares: dict[str, Share] = {}  # call_id -> what it counts for in `totals` now
        self._position: dict[str, int] = {}  # call_id -> where the call first appears
        self._overran: dict[str, int] = {}  # the overran calls' call_id -> position
        self._folded = 0  # records of the ledger's read folded so far

    def catch_up(self, records: Sequence[LedgerRecord], epoch: int) -> None:
        """Fold the records appended since the last call (all of them, when `epoch` moved): each
        call they touch has its share taken away once, its records applied, its new share added."""
        if epoch != self._epoch or len(records) < self._folded:
            self._start_again()
            self._epoch = epoch
        touched: dict[str, CallRecord] = {}
        for record in records[self._folded:]:
            call = touched.get(record.call_id)
            if call is None:
                call = self.calls.get(record.call_id)
                if call is None:
                    call = self.calls[record.call_id] = CallRecord(record.call_id)
                    self._position[record.call_id] = len(self._position)
                else:
                    self.totals.count(self._shares[record.call_id], -1)
                touched[record.call_id] = call
            _apply(call, record)
        self._folded = len(records)
        for call_id, call in touched.items():
            share = self._shares[call_id] = self.totals.share(call)
            self.totals.count(share)
            if call.overran:
                self._overran[call_id] = self._position[call_id]
            else:
                self._overran.pop(call_id, None)

    def overran(self) -> list[CallRecord]:
        """The calls whose reconciliation is above their reservation, in ledger order."""
        return [self.calls[call_id] for call_id in sorted(self._overran, key=self._overran.__getitem__)]
