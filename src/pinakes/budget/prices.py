"""The versioned price table (`prices.toml`, package data) and what a call costs under it.

A reservation is priced from this table before the call it pays for, and a reconciliation from the
same table at the response's own usage; both record the table's `as_of` and the exchange rate's, so
a ledger line can still be read a year later (spec §5).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from pathlib import Path

from pinakes.budget.errors import PriceTableError
from pinakes.budget.money import quantise_usd, tokens_usd

SCHEMA = "pinakes.prices/1"
def _reinstall() -> str:
    from pinakes.distribution import pip_install

    return f"reinstall Pinakes ({pip_install(option='--force-reinstall')}); the table ships with it"


@dataclass(frozen=True)
class ModelPrice:
    """USD per million tokens; optionally a second tier for prompts above a length."""

    model: str
    input_usd_per_mtok: Decimal
    output_usd_per_mtok: Decimal
    long_prompt_above_input_tokens: int | None = None
    long_prompt_input_usd_per_mtok: Decimal | None = None
    long_prompt_output_usd_per_mtok: Decimal | None = None

    def cost_usd(self, input_tokens: int, output_tokens: int) -> Decimal:
        """What a call with this usage costs, rounded up to the micro-dollar (a record's cost_usd)."""
        if input_tokens < 0 or output_tokens < 0:
            raise ValueError(f"token counts cannot be negative ({input_tokens}, {output_tokens})")
        rate_in, rate_out = self.input_usd_per_mtok, self.output_usd_per_mtok
        threshold = self.long_prompt_above_input_tokens
        if threshold is not None and input_tokens > threshold:
            assert self.long_prompt_input_usd_per_mtok is not None
            assert self.long_prompt_output_usd_per_mtok is not None
            rate_in, rate_out = self.long_prompt_input_usd_per_mtok, self.long_prompt_output_usd_per_mtok
        return quantise_usd(tokens_usd(input_tokens, rate_in) + tokens_usd(output_tokens, rate_out))


@dataclass(frozen=True)
class PriceTable:
    as_of: date
    source: str
    usd_per_eur: Decimal  # USD for one EUR
    rate_as_of: date
    rate_source: str
    models: Mapping[str, ModelPrice]

    def price(self, model: str) -> ModelPrice | None:
        return self.models.get(model)

    def age_days(self, today: date) -> int:
        """Days since the older of the two `as_of` dates: either drifting makes the estimate stale."""
        return (today - min(self.as_of, self.rate_as_of)).days


def load_prices(path: Path | None = None) -> PriceTable:
    """The packaged price table (or the one at `path`, for tests and measurements)."""
    if path is None:
        return _packaged()
    return _parse(Path(path).read_bytes(), str(path))


@lru_cache(maxsize=1)
def _packaged() -> PriceTable:
    resource = Path(__file__).with_name("prices.toml")  # as the wheel installs it (package-data)
    try:
        data = resource.read_bytes()
    except OSError as exc:
        raise PriceTableError(f"the packaged price table is missing ({exc})", remedy=_reinstall()) from exc
    return _parse(data, "pinakes/budget/prices.toml")


def _parse(data: bytes, where: str) -> PriceTable:
    try:
        raw = tomllib.loads(data.decode("utf-8"))
        if raw.get("schema") != SCHEMA:
            raise ValueError(f"schema is {raw.get('schema')!r}, expected {SCHEMA!r}")
        exchange = raw["exchange"]
        models = {
            name: _model(name, entry) for name, entry in raw["models"].items()
        }
        return PriceTable(
            as_of=_date(raw["as_of"], "as_of"),
            source=str(raw["source"]),
            usd_per_eur=_positive(exchange["usd_per_eur"], "exchange.usd_per_eur"),
            rate_as_of=_date(exchange["as_of"], "exchange.as_of"),
            rate_source=str(exchange["source"]),
            models=models,
        )
    except (KeyError, TypeError, ValueError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        detail = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)
        raise PriceTableError(f"the price table is invalid: {detail}", remedy=_reinstall(), path=where) from exc


def _model(name: str, entry: dict[str, object]) -> ModelPrice:
    threshold = entry.get("long_prompt_above_input_tokens")
    if threshold is not None and (type(threshold) is not int or threshold < 1):
        raise ValueError(f"models.{name}.long_prompt_above_input_tokens must be a positive integer")
    long_in = entry.get("long_prompt_input_usd_per_mtok")
    long_out = entry.get("long_prompt_output_usd_per_mtok")
    if (threshold is None) != (long_in is None) or (threshold is None) != (long_out is None):
        raise ValueError(f"models.{name}: the long_prompt_* keys come together or not at all")
    return ModelPrice(
        model=name,
        input_usd_per_mtok=_positive(entry["input_usd_per_mtok"], f"models.{name}.input_usd_per_mtok"),
        output_usd_per_mtok=_positive(entry["output_usd_per_mtok"], f"models.{name}.output_usd_per_mtok"),
        long_prompt_above_input_tokens=threshold,
        long_prompt_input_usd_per_mtok=None if long_in is None else _positive(long_in, f"models.{name}"),
        long_prompt_output_usd_per_mtok=None if long_out is None else _positive(long_out, f"models.{name}"),
    )


def _positive(value: object, key: str) -> Decimal:
    # Strings only: a TOML float has already been through binary floating point.
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a quoted decimal string, not {value!r}")
    try:
        amount = Decimal(value)
    except InvalidOperation as exc:
        raise ValueError(f"{key} is not a decimal: {value!r}") from exc
    if not amount.is_finite() or amount <= 0:
        raise ValueError(f"{key} must be a positive amount, not {value!r}")
    return amount


def _date(value: object, key: str) -> date:
    if isinstance(value, date):
        return value
    raise ValueError(f"{key} must be a TOML date (YYYY-MM-DD), not {value!r}")
