"""`pnk doctor`: probes that each print OK / WARN / FAIL with a remedy.

Each capability owns one module of checks (`checks_<area>.py`) exposing `checks(ctx) -> Iterable[Check]`.
A check never imports a paid client and never loads a model it only has to locate.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Status = Literal["OK", "WARN", "FAIL"]

# Order is report order.
CHECK_MODULES = ("env", "manifest", "model", "index", "sync")


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    remedy: str | None = None


@dataclass
class DoctorContext:
    """What the checks share: the KB root when there is one (doctor also runs outside a KB)."""

    kb_root: Path | None
    cache: dict[str, object] = field(default_factory=dict)


def run_checks(ctx: DoctorContext) -> Iterator[Check]:
    for area in CHECK_MODULES:
        try:
            module = importlib.import_module(f"pinakes.doctor.checks_{area}")
        except ModuleNotFoundError:
            continue
        checks: Iterable[Check] = module.checks(ctx)
        yield from checks
