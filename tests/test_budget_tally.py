"""The accountant's window totals are kept up to date one record at a time (budget/windows.py
`Tally`), not folded afresh from the whole ledger before every plan and every reservation: a priced
search (a plan and a reservation per request) costs the same on a ledger of 20,000 lines as on an
empty one, and the totals it checks are exactly what folding the whole ledger gives, whatever was
appended, by whom, in whatever steps, and after the file was replaced by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pinakes.budget import BudgetExceededError, BudgetOverrunError, CallShape
from pinakes.budget.ledger import Kind, Ledger, LedgerRecord
from pinakes.budget.overrun import open_overruns
from pinakes.budget.windows import Tally, Totals, fold
from tests.budget_helpers import KB_ID, PRICES, TEST_MODEL, Clock, caps, open_accountant

START = datetime(2026, 11, 30, 22, 0, tzinfo=UTC)  # across a day's and a month's end in Paris


def record(kind: Kind, call: int, *, minutes: int, tokens: int = 1000, cost: str = "0.001001") -> LedgerRecord:
    return LedgerRecord(
        kind=kind,
        ts=START + timedelta(minutes=minutes), operation="rerank", operation_id=f"op{call // 3:06d}",
        call_id=f"call{call:06d}", model=TEST_MODEL, input_tokens=tokens, output_tokens=1,
        cost_usd=Decimal(cost), usd_per_eur=Decimal("1.16"), prices_as_of=PRICES.as_of,
        rate_as_of=PRICES.rate_as_of, kb_id=KB_ID)


def write_ledger(kb: Path, calls: int) -> Path:
    """`calls` priced requests, each a reservation and its reconciliation: 2 x `calls` lines."""
    path = kb / ".pinakes" / "ledger.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [line for n in range(calls) for line in (
        record("reservation", n, minutes=n).encode(),
        record("reconciliation", n, minutes=n, tokens=900, cost="0.000900").encode())]
    path.write_bytes(b"".join(lines))
    return path


def amounts_priced(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts every time a record's amount in EUR is worked out (what folding a call costs)."""
    seen = [0]
    original = LedgerRecord.eur

    def counted(self: LedgerRecord) -> Decimal:
        seen[0] += 1
        return original(self)

    monkeypatch.setattr(LedgerRecord, "eur", counted)
    return seen


def test_a_priced_search_folds_only_what_was_appended_not_the_whole_ledger(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_ledger(tmp_path, 10_000)  # 20,000 lines
    accountant = open_accountant(tmp_path, caps(daily_eur="1000", monthly_eur="100000"), Clock())
    shape = CallShape(TEST_MODEL, max_input_tokens=1000, max_output_tokens=1)
    plan = accountant.plan("extract", [shape], interactive=False)  # the process's first look: the whole ledger
    seen = amounts_priced(monkeypatch)
    for _ in range(3):  # three searches: a plan, a reservation and a reconciliation each
        plan = accountant.plan("extract", [shape], interactive=False)
        with plan.call(shape) as call:
            call.reconcile(input_tokens=900, output_tokens=1)
    # Each search priced its own two new records and its plan's worst case, never the 20,000 lines.
    assert seen[0] < 30, f"{seen[0]} amounts worked out for three searches"


def test_the_totals_checked_are_those_of_the_whole_ledger_and_a_cap_still_holds(tmp_path: Path) -> None:
    write_ledger(tmp_path, 2_000)
    clock = Clock(START + timedelta(days=2))
    ledger = Ledger(tmp_path / ".pinakes" / "ledger.jsonl")
    ledger.refresh()
    month = Totals(fold(ledger.records).values(), UTC).month(clock.now.date())
    shape = CallShape(TEST_MODEL, max_input_tokens=1000, max_output_tokens=1)  # €0.000863 at 1.16 USD/EUR
    budget = caps(monthly_eur=str(month + Decimal("0.0015")), daily_eur="1000")
    accountant = open_accountant(tmp_path, budget, clock)
    plan = accountant.plan("extract", [shape], interactive=False)
    with plan.call(shape) as call:  # fits: the month had €0.0015 left for a call of €0.001001
        call.reconcile(input_tokens=1000, output_tokens=1)
    with pytest.raises(BudgetExceededError, match="monthly_eur"), plan.call(shape):
        pytest.fail("a reservation past the monthly cap must never be made")


def test_another_process_appending_is_seen_and_an_overrun_it_records_stops_the_next_call(tmp_path: Path) -> None:
    budget = caps()
    first, second = open_accountant(tmp_path, budget), open_accountant(tmp_path, budget)
    shape = CallShape(TEST_MODEL, max_input_tokens=1000, max_output_tokens=1)
    plan = first.plan("extract", [shape], interactive=False)
    other = second.plan("extract", [shape], interactive=False)
    with other.call(shape) as call:
        call.reconcile(input_tokens=50_000, output_tokens=1)  # far beyond its reservation: an overrun
    with pytest.raises(BudgetOverrunError), plan.call(shape):
        pytest.fail("no paid call while an overrun is open")
    second.resolve(call.call_id, Decimal("0.01"))
    with plan.call(shape) as again:  # resolved: spending goes on, and the resolution counts
        again.reconcile(input_tokens=10, output_tokens=1)
    assert first.calls()[call.call_id].status == "resolved"


def test_a_ledger_replaced_by_hand_is_folded_afresh(tmp_path: Path) -> None:
    path = write_ledger(tmp_path, 50)
    accountant = open_accountant(tmp_path, caps(), Clock(START + timedelta(days=2)))
    shape = CallShape(TEST_MODEL, max_input_tokens=1000, max_output_tokens=1)
    accountant.plan("extract", [shape], interactive=False)
    assert len(accountant.calls()) == 50
    write_ledger(tmp_path, 3)  # a shorter file in its place
    accountant.plan("extract", [shape], interactive=False)
    assert sorted(accountant.calls()) == [f"call{n:06d}" for n in range(3)]
    assert path.exists()


KINDS: tuple[Kind, ...] = ("reservation", "reconciliation", "void", "resolution")


@st.composite
def ledgers(draw: st.DrawFn) -> list[LedgerRecord]:
    """Records of a few calls, in any order a ledger can hold them: outcomes before their
    reservation, duplicates, overruns, resolutions, across a day's and a month's end."""
    count = draw(st.integers(1, 40))
    records: list[LedgerRecord] = []
    for _ in range(count):
        call = draw(st.integers(0, 8))
        kind = draw(st.sampled_from(KINDS))
        tokens = draw(st.sampled_from((10, 1000, 5000)))
        records.append(record(kind, call, minutes=draw(st.integers(0, 240)), tokens=tokens,
                              cost=str(Decimal(tokens) / 1_000_000 + Decimal("0.000001"))))
    return records


@settings(max_examples=200, deadline=None)
@given(ledgers(), st.lists(st.integers(1, 40), max_size=6), st.sampled_from(("UTC", "Europe/Paris")))
def test_folding_in_steps_equals_folding_the_whole_ledger(
        records: list[LedgerRecord], steps: list[int], zone: str) -> None:
    tz = UTC if zone == "UTC" else ZoneInfo(zone)
    tally, seen = Tally(tz), 0
    for step in [*steps, len(records)]:
        seen = min(len(records), seen + step)
        tally.catch_up(records[:seen], 0)
        whole = fold(records[:seen])
        expected = Totals(whole.values(), tz)
        assert {k: v for k, v in tally.totals.by_day.items() if v} == {k: v for k, v in expected.by_day.items() if v}
        assert {k: v for k, v in tally.totals.by_month.items() if v} == \
            {k: v for k, v in expected.by_month.items() if v}
        assert {k: v for k, v in tally.totals.by_operation.items() if v} == \
            {k: v for k, v in expected.by_operation.items() if v}
        assert open_overruns(tally.overran()) == open_overruns(whole.values())
        assert list(tally.calls) == list(whole)
