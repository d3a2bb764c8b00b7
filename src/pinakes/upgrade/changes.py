"""What a template changed between two versions, key by key: the diff of two renderings for the same
KB, both generated from the archive, neither of them the user's file (spec §6.1).

Both renderings take the KB's own name, id and embedding provider, so a value the user tuned that
the template renders cancels out, and a literal the user edited never enters either side: only what
the template itself changed is left. Comments are not keys and never make a change; `[kb] template`
is the version reference itself, moved by the upgrade rather than reported as a change.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pinakes.manifest.lines import layout
from pinakes.manifest.table import TomlValue

ChangeKind = Literal["changed", "added", "removed"]
TEMPLATE_KEY = ("kb", "template")
# The [budget] keys that are spending caps: a change to one is printed under its own heading and
# --apply asks before writing it (spec §2.1, "one consequence is money").
BUDGET_CAPS = ("confirm_above_eur", "per_operation_eur", "daily_eur", "monthly_eur")


@dataclass(frozen=True)
class TemplateChange:
    section: str
    key: str
    kind: ChangeKind
    old: object  # the recorded version's value (None when it did not set the key)
    new: object  # the installed version's value (None when it no longer sets the key)
    new_value_text: str | None  # the value as the installed template writes it
    new_lines: tuple[str, ...]  # the installed template's line(s) for the key, as an added key is inserted

    @property
    def label(self) -> str:
        return f"[{self.section}] {self.key}"

    @property
    def budget_cap(self) -> bool:
        return self.section == "budget" and self.key in BUDGET_CAPS


def flatten(data: Mapping[str, TomlValue], section: str = "") -> dict[tuple[str, str], object]:
    """{(section, key): value} for every scalar or array key; arrays of tables are left out (no
    template renders one, and an upgrade never addresses them)."""
    flat: dict[tuple[str, str], object] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{section}.{key}" if section else key))
        elif isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
            continue
        else:
            flat[section, key] = value
    return flat


def same(a: object, b: object) -> bool:
    """Equal as TOML values: 8 and 8.0 differ, as do 1 and true."""
    return repr(a) == repr(b)


def template_changes(old_rendering: str, new_rendering: str) -> list[TemplateChange]:
    """Every key whose value differs between the two renderings, in the installed file's order."""
    old = flatten(tomllib.loads(old_rendering))
    new = flatten(tomllib.loads(new_rendering))
    new_layout = layout(new_rendering)
    changes: list[TemplateChange] = []
    for address in [*new, *(a for a in old if a not in new)]:
        if address == TEMPLATE_KEY or (address in old and address in new and same(old[address], new[address])):
            continue
        span = new_layout.keys.get(address)
        if address in new and span is None:  # a template must be written so each key can be placed
            raise ValueError(f"the template renders [{address[0]}] {address[1]} in a shape that cannot be placed")
        kind: ChangeKind = "added" if address not in old else "removed" if address not in new else "changed"
        new_lines = tuple(new_layout.lines[span.start:span.end]) if span else ()
        changes.append(TemplateChange(address[0], address[1], kind, old.get(address), new.get(address),
                                      span.value if span else None, new_lines))
    return changes
