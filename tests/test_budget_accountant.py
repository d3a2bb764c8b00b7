"""The accountant's arithmetic and refusals (spec §5): Decimal exact at the cap, the whole run checked
before call 0 with every blocked window named, confirm_above_eur on its own, partial never part of a
unit, reservations on disk before the call, outcomes superseding them."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from pinakes.budget import (
    Accountant,
    BudgetExceededError,
    BudgetRefusedError,
    CallShape,
    SpendNotConfirmedError,
    StalePricesError,
    UnknownCallError,
    UnpricedModelError,
    load_prices,
    to_eur,
)
from pinakes.budget.ledger import Ledger
from pinakes.budget.money import quantise_usd
from pinakes.manifest import BudgetSection
from tests.budget_helpers import PRICES, TEST_MODEL, Clock, caps, eur_shape, open_accountant, spend


def ledger_bytes(kb: Path) -> bytes:
    path = kb / ".pinakes" / "ledger.jsonl"
    return path.read_bytes() if path.exists() else b""


def kinds(kb: Path) -> list[str]:
    ledger = Ledger(kb / ".pinakes" / "ledger.jsonl")
    ledger.refresh()
    return [record.kind for record in ledger.records]


# -- money --------------------------------------------------------------------------------------


def test_the_documented_worked_example_with_the_packaged_prices(tmp_path: Path) -> None:
    """docs/BUDGET.md: one claude-opus-5 slice reserved at 12,000 input + 8,000 output tokens."""
    prices = load_prices()
    opus = prices.price("claude-opus-5")
    assert opus is not None
    cost = opus.cost_usd(12_000, 8_000)
    assert cost == Decimal("0.260000")  # 12,000 x $5/M + 8,000 x $25/M
    assert to_eur(cost, Decimal("1.16")) == Decimal("0.224138")  # 0.2241379..., rounded up
    assert prices.usd_per_eur == Decimal("1.16")


def test_rounding_only_ever_goes_up() -> None:
    assert quantise_usd(Decimal("0.0000001")) == Decimal("0.000001")
    assert quantise_usd(Decimal("0.000001")) == Decimal("0.000001")  # already on the quantum: unchanged
    assert to_eur(Decimal("1"), Decimal("3")) == Decimal("0.333334")
    assert to_eur(Decimal("2.32"), Decimal("1.16")) == Decimal("2.000000")  # exact stays exact


def test_a_total_exactly_at_the_cap_is_admitted_and_one_micro_euro_more_is_not(tmp_path: Path) -> None:
    budget = caps(per_operation_eur="0.50", confirm_above_eur="0.50")
    accountant = open_accountant(tmp_path, budget)
    with pytest.raises(BudgetRefusedError):  # whole run: €0.500001 against a €0.50 cap
        accountant.plan("extract", [eur_shape("0.25"), eur_shape("0.250001")], interactive=False)
    plan = accountant.plan("extract", [eur_shape("0.25"), eur_shape("0.25")], interactive=False)
    assert plan.worst_case_eur == Decimal("0.50")
    for _ in range(2):
        with plan.call(eur_shape("0.25")):
            pass
    with pytest.raises(BudgetExceededError) as refused, plan.call(eur_shape("0.000001")):
        pytest.fail("a call one micro-euro over the cap must never run")
    assert [w.window for w in refused.value.blocked] == ["per_operation_eur"]
    assert refused.value.blocked[0].spent == Decimal("0.50")


def test_decimal_sums_are_exact_where_floats_are_not(tmp_path: Path) -> None:
    assert 0.1 + 0.1 + 0.1 > 0.3  # the float failure a Decimal cap must not have
    accountant = open_accountant(tmp_path, caps(per_operation_eur="0.30"))
    plan = accountant.plan("extract", [eur_shape("0.10")] * 3, interactive=False)
    for _ in range(3):
        with plan.call(eur_shape("0.10")):
            pass
    assert accountant.report().windows[0].spent == Decimal("0.30")


# -- the whole run, before call 0 ------------------------------------------------------------------


def test_a_whole_run_refusal_names_every_blocked_window_with_its_edit(tmp_path: Path) -> None:
    clock = Clock()
    spend(tmp_path, "1.00", clock)  # earlier today: counts in the daily and monthly windows
    clock.advance(hours=1)
    before = ledger_bytes(tmp_path)
    budget = caps(per_operation_eur="0.50", daily_eur="1.20", monthly_eur="1.30")
    accountant = open_accountant(tmp_path, budget, clock)
    with pytest.raises(BudgetRefusedError) as refused:
        accountant.plan("extract", [eur_shape("0.30", unit=f"d{i}") for i in range(2)], interactive=True,
                        prompt=lambda _q: pytest.fail("no prompt for a refused run"))
    blocked = {w.window: w for w in refused.value.blocked}
    assert list(blocked) == ["per_operation_eur", "daily_eur", "monthly_eur"]
    assert blocked["per_operation_eur"].edit == '[budget] per_operation_eur = "0.60"'
    assert blocked["daily_eur"].edit == '[budget] daily_eur = "1.60"'  # 1.00 spent + 0.60 run
    assert blocked["monthly_eur"].edit == '[budget] monthly_eur = "1.60"'
    message = refused.value.render()
    assert all(w.edit in message for w in blocked.values()) and "2026-12-01" in message
    assert ledger_bytes(tmp_path) == before  # refused at call 0: nothing reserved


def test_partial_admits_a_prefix_of_whole_units_never_part_of_one(tmp_path: Path) -> None:
    budget = caps(per_operation_eur="0.50", on_exceed="partial")
    shapes = [eur_shape("0.10", unit=f"docs/{name}.pdf") for name in "aabbcc"]  # 3 documents x 2 slices
    plan = open_accountant(tmp_path, budget).plan("extract", shapes, interactive=False)
    assert (plan.admitted_units, plan.admitted_calls, plan.partial) == (2, 4, True)
    assert plan.worst_case_eur == Decimal("0.40")  # 0.50 would fit half of c.pdf: never admitted
    assert [w.window for w in plan.blocked] == ["per_operation_eur"]


def test_partial_with_not_one_whole_unit_fitting_is_a_refusal(tmp_path: Path) -> None:
    budget = caps(per_operation_eur="0.15", on_exceed="partial")
    shapes = [eur_shape("0.10", unit="docs/a.pdf"), eur_shape("0.10", unit="docs/a.pdf")]
    with pytest.raises(BudgetRefusedError):
        open_accountant(tmp_path, budget).plan("extract", shapes, interactive=False)


def test_abort_refuses_what_partial_would_have_cut(tmp_path: Path) -> None:
    shapes = [eur_shape("0.10", unit=f"d{i}") for i in range(6)]
    with pytest.raises(BudgetRefusedError) as refused:
        open_accountant(tmp_path, caps(per_operation_eur="0.50")).plan("extract", shapes, interactive=False)
    assert '"partial" would admit' in refused.value.message


# -- confirm_above_eur, evaluated on its own ------------------------------------------------------------


def test_no_terminal_above_confirm_aborts_and_never_assumes_yes(tmp_path: Path) -> None:
    budget = caps(confirm_above_eur="0.10")
    with pytest.raises(SpendNotConfirmedError) as refused:
        open_accountant(tmp_path, budget).plan("extract", [eur_shape("0.11")], interactive=False)
    assert "no terminal" in refused.value.message and 'confirm_above_eur to at least "0.11"' in str(
        refused.value.remedy)
    assert ledger_bytes(tmp_path) == b""


def test_at_the_threshold_there_is_no_prompt(tmp_path: Path) -> None:
    plan = open_accountant(tmp_path, caps(confirm_above_eur="0.10")).plan(
        "extract", [eur_shape("0.10")], interactive=False)
    assert not plan.confirmed


def test_a_run_exactly_at_a_cap_is_allowed_and_still_asked_about(tmp_path: Path) -> None:
    questions: list[str] = []
    budget = caps(confirm_above_eur="0.10", per_operation_eur="0.50")
    plan = open_accountant(tmp_path, budget).plan(
        "extract", [eur_shape("0.50")], interactive=True, prompt=lambda q: questions.append(q) or True)
    assert plan.confirmed and len(questions) == 1 and "€0.5000" in questions[0]


def test_declining_the_prompt_spends_nothing(tmp_path: Path) -> None:
    with pytest.raises(SpendNotConfirmedError):
        open_accountant(tmp_path, caps(confirm_above_eur="0.10")).plan(
            "extract", [eur_shape("0.20")], interactive=True, prompt=lambda _q: False)
    assert ledger_bytes(tmp_path) == b""


def test_force_widens_no_cap_and_no_terminal_abort(tmp_path: Path) -> None:
    accountant = open_accountant(tmp_path, caps(per_operation_eur="0.10", confirm_above_eur="0.05"))
    with pytest.raises(BudgetRefusedError) as refused:
        accountant.plan("extract", [eur_shape("0.20")], interactive=False, force=True)
    assert "--force never widens a cap" in str(refused.value.remedy)
    with pytest.raises(SpendNotConfirmedError):
        accountant.plan("extract", [eur_shape("0.08")], interactive=False, force=True)


# -- prices ------------------------------------------------------------------------------------------


def test_stale_prices_are_refused_past_max_price_age_days(tmp_path: Path) -> None:
    budget = caps(max_price_age_days=90)
    at_limit = Clock(datetime(2027, 3, 1, 12, tzinfo=UTC))  # 2026-12-01 + 90 days
    assert open_accountant(tmp_path, budget, at_limit) is not None
    with pytest.raises(StalePricesError) as refused:
        open_accountant(tmp_path, budget, Clock(datetime(2027, 3, 2, 12, tzinfo=UTC)))
    assert "91 days old" in refused.value.message and "max_price_age_days" in str(refused.value.remedy)
    Accountant.for_report(tmp_path, budget, clock=Clock(datetime(2030, 1, 1, tzinfo=UTC)),
                          prices=PRICES).report()  # reading what was spent never refuses


def test_an_unpriced_model_is_refused_before_anything_is_reserved(tmp_path: Path) -> None:
    with pytest.raises(UnpricedModelError) as refused:
        open_accountant(tmp_path, caps()).plan("extract", [CallShape("claude-unknown", 10, 10)],
                                               interactive=False)
    assert TEST_MODEL in refused.value.message and ledger_bytes(tmp_path) == b""


# -- calls --------------------------------------------------------------------------------------------


def test_the_reservation_is_on_disk_before_the_call_runs(tmp_path: Path) -> None:
    accountant = open_accountant(tmp_path, caps())
    plan = accountant.plan("extract", [eur_shape("0.10")], interactive=False)
    with plan.call(eur_shape("0.10"), unit="docs/a.pdf#slice-0") as call:
        assert kinds(tmp_path) == ["reservation"]
        assert call.call_id.encode() in ledger_bytes(tmp_path)
        call.reconcile(input_tokens=1000, output_tokens=100)
    assert kinds(tmp_path) == ["reservation", "reconciliation"]
    assert accountant.report().windows[0].spent == Decimal("0.0011")  # superseded, not added


def test_void_closes_at_zero_and_an_exception_leaves_an_unknown_outcome(tmp_path: Path) -> None:
    accountant = open_accountant(tmp_path, caps())
    plan = accountant.plan("extract", [eur_shape("0.10"), eur_shape("0.20")], interactive=False)
    with plan.call(eur_shape("0.10")) as voided:
        voided.void("the request was never sent")
    with pytest.raises(TimeoutError), plan.call(eur_shape("0.20")) as timed_out:
        raise TimeoutError("the response never came")
    report = accountant.report()
    assert [(u.call_id, u.reserved_eur) for u in report.unknown] == [(timed_out.call_id, Decimal("0.20"))]
    assert report.windows[1].spent == Decimal("0.20")  # the void counts 0, the unknown its reservation
    assert report.windows[1].unknown == Decimal("0.20")


def test_a_call_is_refused_when_another_run_filled_the_window_meanwhile(tmp_path: Path) -> None:
    budget = caps(daily_eur="0.50")
    plan = open_accountant(tmp_path, budget).plan("extract", [eur_shape("0.30")], interactive=False)
    spend(tmp_path, "0.30")  # another process, after this plan was admitted
    before = ledger_bytes(tmp_path)
    with pytest.raises(BudgetExceededError) as refused, plan.call(eur_shape("0.30")):
        pytest.fail("the call must not run")
    assert [w.window for w in refused.value.blocked] == ["daily_eur"]
    assert plan.stopped_by == refused.value.blocked
    assert ledger_bytes(tmp_path) == before


def test_usage_above_the_reservation_is_recorded_as_billed(tmp_path: Path) -> None:
    accountant = open_accountant(tmp_path, caps())
    plan = accountant.plan("extract", [eur_shape("0.01")], interactive=False)
    with plan.call(eur_shape("0.01")) as call:
        assert call.reconcile(input_tokens=50_000, output_tokens=0) == Decimal("0.05")
    assert accountant.report().windows[1].spent == Decimal("0.05")


def test_a_pair_is_attributed_to_the_reservation_day_in_the_budget_timezone(tmp_path: Path) -> None:
    clock = Clock(datetime(2026, 12, 1, 22, 59, 58, tzinfo=UTC))  # 23:59:58 in Rome
    budget = BudgetSection(timezone="Europe/Rome", confirm_above_eur=Decimal(1))
    accountant = Accountant.open(tmp_path, budget, clock=clock, prices=PRICES)
    plan = accountant.plan("extract", [eur_shape("0.10")], interactive=False)
    with plan.call(eur_shape("0.10")) as call:
        clock.advance(seconds=5)  # 00:00:03 on 2 December in Rome
        call.reconcile(input_tokens=20_000, output_tokens=0)
    report = accountant.report()
    assert report.days == (("2026-12-01", Decimal("0.02")),)
    assert report.windows[1].period == "2026-12-02" and report.windows[1].spent == 0


def test_resolve_appends_a_resolution_and_never_edits(tmp_path: Path) -> None:
    call_id = spend(tmp_path, "0.40", reconcile=False)
    before = ledger_bytes(tmp_path)
    accountant = Accountant.for_report(tmp_path, caps(), prices=PRICES, clock=Clock())
    record = accountant.resolve(call_id, Decimal("0.0312"))
    after = ledger_bytes(tmp_path)
    assert after.startswith(before) and after.count(b"\n") == before.count(b"\n") + 1
    assert record.kind == "resolution" and record.eur() == Decimal("0.0312")
    report = accountant.report()
    assert report.unknown == () and report.windows[1].spent == Decimal("0.0312")
    with pytest.raises(UnknownCallError, match="already closed"):
        accountant.resolve(call_id, Decimal("0.01"))
    with pytest.raises(UnknownCallError, match="no reservation"):
        accountant.resolve("01J9ZX7K3M4N5P6Q7R8S9T0VWX", Decimal("0.01"))
