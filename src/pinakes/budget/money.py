"""Money arithmetic: Decimal only, rounded in one direction (up), at two fixed places.

A cap compared against a float is not a cap (spec §5): 0.05 has no binary representation, so the
ceiling enforced would differ from the one configured by an amount nobody can explain. Every amount
here is a `decimal.Decimal`, and rounding happens in exactly two places, both upwards, because
under-counting is the one direction a budget may never be wrong in:

- `quantise_usd`: a record's `cost_usd`, once, when the record is written (the micro-dollar);
- `to_eur`: a record's EUR value, derived from that record alone (`cost_usd / usd_per_eur`, to the
  micro-euro), so every window total is an exact sum of six-decimal numbers and a total equal to a
  cap is admitted while one micro-euro more is not.
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, localcontext

MONEY_QUANTUM = Decimal("0.000001")
# What a user may type as an amount (a manifest cap, `--actual`): ASCII digits, at most one point,
# no sign, exponent, separator or other script's digits, and no more places than the ledger keeps.
# Twelve integer digits (under a trillion euros) keep every sum far inside the 40-digit context.
_AMOUNT = re.compile(r"(?P<whole>[0-9]{1,12})(?:\.(?P<places>[0-9]{1,6}))?", re.ASCII)
AMOUNT_EXAMPLE = "0.0312"


class AmountError(ValueError):
    """A typed amount is not one `parse_amount` accepts; the message says which rule it broke."""


def parse_amount(text: str) -> Decimal:
    """The one reader of an amount of money a user typed (manifest caps, `pnk budget --actual`):
    plain ASCII decimal notation, non-negative, finite, at most six places (the ledger's micro-euro).
    Raises AmountError naming the rule broken, never decimal's own exceptions."""
    candidate = text.strip()
    if _AMOUNT.fullmatch(candidate):
        return Decimal(candidate)
    if not candidate:
        reason = "it is empty"
    elif candidate[0] in "+-":
        reason = "it must be >= 0, written without a sign"
    elif candidate.lower() in ("nan", "snan", "inf", "infinity"):
        reason = "it must be a finite amount"
    elif not candidate.isascii():
        reason = "only the ASCII digits 0-9 and one '.' are accepted"
    elif re.fullmatch(r"[0-9]+\.[0-9]{7,}", candidate):
        reason = f"the ledger keeps at most six decimal places (the micro-euro, {MONEY_QUANTUM})"
    elif re.fullmatch(r"[0-9]{13,}(\.[0-9]*)?", candidate):
        reason = "it is too large (at most twelve digits before the point)"
    else:
        reason = "write plain decimal notation: digits and at most one '.', no exponent, sign or separator"
    raise AmountError(f"{text!r} is not an amount in EUR: {reason}")
_CENT = Decimal("0.01")
_PER_MILLION = Decimal(1_000_000)


def quantise_usd(amount: Decimal) -> Decimal:
    """`amount` rounded up to the micro-dollar: the form a record's cost_usd is written in."""
    return _ceil(amount, MONEY_QUANTUM)


def to_eur(cost_usd: Decimal, usd_per_eur: Decimal) -> Decimal:
    """The EUR value of `cost_usd` at `usd_per_eur` (USD for one EUR), rounded up to the micro-euro."""
    if usd_per_eur <= 0:
        raise ValueError(f"usd_per_eur must be positive, not {usd_per_eur}")
    with localcontext() as ctx:
        ctx.prec = 40  # far beyond any amount's digits: the division is exact to the quantum
        return _ceil(cost_usd / usd_per_eur, MONEY_QUANTUM)


def eur_to_usd(amount_eur: Decimal, usd_per_eur: Decimal) -> Decimal:
    """USD for `amount_eur` at `usd_per_eur`, rounded up to the micro-dollar (a resolution's cost)."""
    return quantise_usd(amount_eur * usd_per_eur)


def tokens_usd(tokens: int, usd_per_million: Decimal) -> Decimal:
    """The exact (unquantised) USD price of `tokens` at a per-million-token price."""
    return Decimal(tokens) * usd_per_million / _PER_MILLION


def ceil_cents(amount: Decimal) -> Decimal:
    """`amount` rounded up to the cent: the value a suggested manifest edit writes."""
    return _ceil(amount, _CENT)


def format_eur(amount: Decimal, places: int = 4, *, headroom: bool = False) -> str:
    """`€1.2346`, `€0.146756`, `€0.50`: the one way an amount of money is shown, anywhere.

    Exact to the micro-euro (the ledger's quantum, and the most places a cap may have): at least
    `places` decimals, and every further one the amount has, so two amounts a message compares
    compare as shown (a cap of "0.1467" is never shown as €0.15 beside a worst case of €0.146756).
    A spend is rounded up to the micro-euro, so a displayed total is never below the one enforced;
    headroom (what is left under a cap) is rounded down, for the same reason."""
    with localcontext() as ctx:
        ctx.prec = 40
        exact = amount.quantize(MONEY_QUANTUM, rounding=ROUND_FLOOR if headroom else ROUND_CEILING)
    whole, _, fraction = f"{exact:f}".partition(".")
    fraction = fraction.rstrip("0").ljust(places, "0")
    return f"€{whole}.{fraction}" if fraction else f"€{whole}"


def _ceil(amount: Decimal, quantum: Decimal) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = 40
        return amount.quantize(quantum, rounding=ROUND_CEILING)
