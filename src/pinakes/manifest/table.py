"""The strict reader: typed getters over one TOML table that record a problem and return a
placeholder, so one pass reports everything. Placeholders never escape: any problem means no
Manifest is returned.

Reading a key is what declares it known, so `finish` can report every key nothing asked for as
unknown (with a did-you-mean) instead of silently ignoring a typo.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from datetime import date, datetime, time
from decimal import Decimal
from typing import TypeAlias

from pinakes.manifest.problems import Problems
from pinakes.manifest.sections import SECTION_KEYS

# A value as tomllib parses it.
TomlValue: TypeAlias = "str | int | float | bool | datetime | date | time | list[TomlValue] | dict[str, TomlValue]"

_TOML_TYPE_NAMES: tuple[tuple[type, str], ...] = (
    (bool, "a boolean"), (str, "a string"), (int, "an integer"), (float, "a float"),
    (list, "an array"), (dict, "a table"), (datetime, "a date-time"), (date, "a date"),
    (time, "a time"),
)


def toml_type(value: object) -> str:
    for kind, label in _TOML_TYPE_NAMES:
        if isinstance(value, kind):
            return label
    return type(value).__name__


class _Invalid:
    """The value was present but wrong (already reported)."""


_INVALID = _Invalid()


class Table:
    """One TOML table being read. Reading a key declares it known; `finish` reports the rest."""

    def __init__(self, data: Mapping[str, TomlValue], section: str, key: str, problems: Problems):
        self._data = data
        self._section = section  # the SECTION_KEYS entry (`links.kb`, never `links.kb[0]`)
        self.key = key  # the dotted prefix errors name (`links.kb[0]`)
        self._problems = problems
        self.failed: set[str] = set()

    def dotted(self, name: str) -> str:
        return f"{self.key}.{name}"

    def fail(self, name: str, problem: str, remedy: str) -> None:
        self.failed.add(name)
        self._problems.add(self.dotted(name), problem, remedy)

    def ok(self, *names: str) -> bool:
        """Whether every named key read cleanly (cross-key checks skip values already reported)."""
        return not self.failed.intersection(names)

    def checked_value(self, name: str, expected: tuple[type, ...], expected_label: str, example: str,
             *, required: bool = False) -> TomlValue | _Invalid | None:
        """The value if present and of the expected type, None if absent, _INVALID after reporting."""
        assert name in SECTION_KEYS[self._section], f"undeclared key {self._section}.{name}"
        if name not in self._data:
            return None
        value = self._data[name]
        # bool is an int in Python and never a valid integer in a manifest.
        is_bool_for_number = isinstance(value, bool) and bool not in expected
        if is_bool_for_number or not isinstance(value, expected):
            self.fail(name, f"must be {expected_label}, got {toml_type(value)} ({value!r})",
                      f"write it as {expected_label}, e.g. {name} = {example}")
            return _INVALID
        if isinstance(value, str) and not value.strip():
            self.fail(name, "is an empty string (an empty value is an error, not a request for "
                            "the default)",
                      f"give a value, e.g. {name} = {example}" if required
                      else f"delete the line to use the default, or give a value, e.g. {name} = {example}")
            return _INVALID
        return value

    def missing(self, name: str, example: str) -> None:
        """Report a required key that is absent."""
        self.fail(name, "is required", f"add it, e.g. {name} = {example}")

    # -- scalars --------------------------------------------------------------------------

    def required_string(self, name: str, example: str) -> str:
        value = self.checked_value(name, (str,), "a string", example, required=True)
        if value is None:
            self.missing(name, example)
        return value if isinstance(value, str) else ""

    def optional_string(self, name: str, example: str) -> str | None:
        value = self.checked_value(name, (str,), "a string", example)
        return value if isinstance(value, str) else None

    def choice(self, name: str, default: str | None, allowed: Sequence[str],
               unbuilt: Sequence[str] = ()) -> str:
        """A string from `allowed`. `unbuilt` names values the spec defines but this build lacks."""
        example = f'"{allowed[0]}"'
        value = self.checked_value(name, (str,), "a string", example, required=default is None)
        if value is None:
            if default is None:
                self.missing(name, example)
                return allowed[0]
            return default
        if not isinstance(value, str):
            return default or allowed[0]
        if value in allowed:
            return value
        built = ", ".join(f'"{option}"' for option in allowed)
        if value in unbuilt:
            self.fail(name, f'"{value}" is not built in this Pinakes (built: {built})',
                      f"set {name} = {example} or delete the line")
        else:
            suggestion = difflib.get_close_matches(value, [*allowed, *unbuilt], n=1)
            hint = f'; did you mean "{suggestion[0]}"?' if suggestion else ""
            self.fail(name, f'"{value}" is not one of {built}{hint}', f"set {name} to one of {built}")
        return default or allowed[0]

    def integer(self, name: str, default: int | None, minimum: int) -> int:
        example = str(default if default is not None else max(minimum, 1))
        value = self.checked_value(name, (int,), "an integer", example)
        if value is None:
            if default is None:
                self.missing(name, example)
                return minimum
            return default
        if not isinstance(value, int):
            return default if default is not None else minimum
        if value < minimum:
            self.fail(name, f"must be >= {minimum}, got {value}", f"set {name} to {minimum} or more")
            return default if default is not None else minimum
        return value

    def has(self, name: str) -> bool:
        """Whether the table sets `name` (declared known, like any read)."""
        assert name in SECTION_KEYS[self._section], f"undeclared key {self._section}.{name}"
        return name in self._data

    def raw_value(self, name: str) -> TomlValue | None:
        """The value as written (None when absent), for a cross-key decision; its own reader still
        checks and reports it."""
        return self._data.get(name)

    def boolean(self, name: str, default: bool) -> bool:
        value = self.checked_value(name, (bool,), "a boolean", str(default).lower())
        return value if isinstance(value, bool) else default

    def required_float(self, name: str, example: str) -> float:
        value = self.checked_value(name, (int, float), "a number", example)
        if value is None:
            self.missing(name, example)
            return 0.0
        if not isinstance(value, (int, float)):
            return 0.0
        if not math.isfinite(value):
            self.fail(name, f"must be a finite number, got {value}", f"set {name} to a real threshold")
            return 0.0
        return float(value)

    def money(self, name: str, default: Decimal, unit: str = "EUR") -> Decimal:
        """An amount (EUR unless `unit` says otherwise) as Decimal, from a TOML string or number via
        its text (`parse_amount`, the one reader of a typed amount): never float arithmetic."""
        from pinakes.budget.money import AmountError, parse_amount

        example = f'"{default}"'
        value = self.checked_value(name, (str, int, float), f"an amount in {unit}", example)
        if value is None or isinstance(value, _Invalid):
            return default
        try:
            return parse_amount(str(value))
        except AmountError as exc:
            self.fail(name, str(exc), f"write a plain decimal amount, e.g. {name} = {example}")
            return default

    def string_list(self, name: str, default: tuple[str, ...] | None, example: str) -> tuple[str, ...]:
        value = self.checked_value(name, (list,), "an array of strings", example)
        if value is None:
            if default is None:
                self.missing(name, example)
                return ()
            return default
        if not isinstance(value, list):
            return default or ()
        items: list[str] = []
        for index, item in enumerate(value):
            if not isinstance(item, str):
                self.fail(name, f"item {index} must be a string, got {toml_type(item)} ({item!r})",
                          f"write every item as a quoted string, e.g. {name} = {example}")
            elif not item.strip():
                self.fail(name, f"item {index} is an empty string", "remove it or give a value")
            else:
                items.append(item)
        return tuple(items)

    # -- nesting --------------------------------------------------------------------------

    def table(self, name: str) -> Table | None:
        value = self.checked_value(name, (dict,), "a table", "{ ... }")
        if not isinstance(value, dict):
            return None
        return Table(value, f"{self._section}.{name}", self.dotted(name), self._problems)

    def array_of_tables(self, name: str, header: str) -> list[Table]:
        value = self.checked_value(name, (list,), f"an array of tables ({header})", f"(one {header} per item)")
        if not isinstance(value, list):
            return []
        tables: list[Table] = []
        for index, item in enumerate(value):
            if isinstance(item, dict):
                tables.append(Table(item, f"{self._section}.{name}", f"{self.dotted(name)}[{index}]",
                                     self._problems))
            else:
                self.fail(name, f"item {index} must be a table ({header}), got {toml_type(item)}",
                          f"write each item as its own {header} block")
        return tables

    def finish(self) -> None:
        """Report every key nothing asked for, with a did-you-mean against the declared keys."""
        known = SECTION_KEYS[self._section]
        for name in self._data:
            if name not in known:
                self._problems.add(self.dotted(name), *_unknown(name, known, f"[{self._section}]"))


def _unknown(name: str, known: Sequence[str], where: str) -> tuple[str, str]:
    close = difflib.get_close_matches(name, known, n=1)
    if close:
        return f"unknown key; did you mean `{close[0]}`?", f"rename it to `{close[0]}`"
    return ("unknown key",
            f"remove it ({where} accepts: {', '.join(known)}); if a newer Pinakes wrote this "
            "manifest, upgrade Pinakes")
