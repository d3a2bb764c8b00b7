"""`BudgetSection`: the `[budget]` table as values, with its defaults.

It lives in the budget package because the accountant is what reads it; the manifest, a layer
above, validates the table and builds one (manifest/readers.py), and a `Manifest` holds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal


@dataclass(frozen=True)
class BudgetSection:
    """Money is Decimal end to end: a cap compared against a float is not a cap (spec §5)."""

    confirm_above_eur: Decimal = Decimal("0.50")
    per_operation_eur: Decimal = Decimal("2.00")
    daily_eur: Decimal = Decimal("5.00")
    monthly_eur: Decimal = Decimal("20.00")
    timezone: str = "UTC"
    on_exceed: str = "abort"
    max_price_age_days: int = 90
