"""Shared pieces of the budget tests: a price table with round numbers, a settable clock, caps."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from pinakes.budget import Accountant, CallShape, ModelPrice, PriceTable
from pinakes.manifest import BudgetSection

# $1 per million tokens each way at 1 USD/EUR: a call's worst case in EUR is its token count / 1e6.
TEST_MODEL = "test-model"
PRICES = PriceTable(
    as_of=date(2026, 12, 1), source="tests", usd_per_eur=Decimal("1"), rate_as_of=date(2026, 12, 1),
    rate_source="tests",
    models={TEST_MODEL: ModelPrice(TEST_MODEL, Decimal("1"), Decimal("1"))},
)
KB_ID = "01J9ZX7K3M4N5P6Q7R8S9T0VWX"


@dataclass
class Clock:
    now: datetime = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def caps(**values: str | int) -> BudgetSection:
    """A [budget] with generous defaults and the named caps replaced (amounts as strings)."""
    base = BudgetSection(confirm_above_eur=Decimal("100"), per_operation_eur=Decimal("100"),
                         daily_eur=Decimal("100"), monthly_eur=Decimal("100"))
    converted = {key: Decimal(value) if key.endswith("_eur") else value for key, value in values.items()}
    return replace(base, **converted)


def eur_shape(eur: str, unit: str | None = None) -> CallShape:
    """A call whose worst case is exactly `eur` under PRICES (all of it input tokens, one output)."""
    tokens = int(Decimal(eur) * 1_000_000)
    return CallShape(TEST_MODEL, max_input_tokens=tokens - 1, max_output_tokens=1, unit=unit)


def open_accountant(kb: Path, budget: BudgetSection, clock: Clock | None = None) -> Accountant:
    return Accountant.open(kb, budget, kb_id=KB_ID, clock=clock or Clock(), prices=PRICES)


def spend(kb: Path, eur: str, clock: Clock | None = None, *, reconcile: bool = True) -> str:
    """One call of `eur` worst case, reconciled at that worst case (or left an unknown outcome)."""
    accountant = open_accountant(kb, caps(), clock)
    shape = eur_shape(eur)
    plan = accountant.plan("extract", [shape], interactive=False)
    with plan.call(shape) as call:
        if reconcile:
            call.reconcile(input_tokens=shape.max_input_tokens, output_tokens=shape.max_output_tokens)
    return call.call_id


def set_budget(kb: Path, **values: str | int) -> None:
    """Set `[budget]` keys in a KB's manifest, replacing the template's own lines (a string is
    written quoted, as the manifest spells amounts; an int as a number)."""
    import re

    manifest = kb / "pinakes.toml"
    text = manifest.read_text(encoding="utf-8")
    for key, value in values.items():
        line = f'{key} = "{value}"' if isinstance(value, str) else f"{key} = {value}"
        text, count = re.subn(rf"(?m)^{key}\s*=.*$", line, text)
        if not count:
            text = text.replace("[budget]\n", f"[budget]\n{line}\n", 1) if "[budget]\n" in text \
                else text + f"\n[budget]\n{line}\n"
    manifest.write_text(text, encoding="utf-8")
