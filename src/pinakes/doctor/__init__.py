"""`pnk doctor`: probes that each print OK / WARN / FAIL with a remedy.

Each capability owns one module of checks (`checks_<area>.py`) exposing `checks(ctx) -> Iterable[Check]`.
A check never imports a paid client and never loads a model it only has to locate.

`CHECK_MODULES` is the contract: every area it lists has a module. `run_checks` is what makes doctor
safe to run on a broken installation: a listed module that does not import (missing from the install,
or raising on import), or a `checks()` that raises part-way, is reported as a FAIL naming the area and
the error — never skipped, never a crash of doctor itself. Areas other than the
environment only run when there is a KB, so their checks may rely on `ctx.kb_root` being set.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Status = Literal["OK", "WARN", "FAIL"]

# Order is report order.
CHECK_MODULES = ("env", "manifest", "model", "index", "sync", "pdf", "formats", "paid", "budget", "links")
# Areas that need no KB: the only ones run outside one.
ENVIRONMENT_AREAS = frozenset({"env"})


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
    cache: dict[str, object] = field(default_factory=dict[str, object])
    verify: bool = False  # re-hash every document (`pnk doctor --verify`), not a sample


def run_checks(ctx: DoctorContext) -> Iterator[Check]:
    for area in CHECK_MODULES:
        if ctx.kb_root is None and area not in ENVIRONMENT_AREAS:
            continue
        module_name = f"{__name__}.checks_{area}"
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:
            yield crashed_check(area, "could not be loaded", exc)
            continue
        area_checks: Callable[[DoctorContext], Iterable[Check]] = module.checks  # the area's contract
        yield from _guarded(area, area_checks, ctx)


def _guarded(
    area: str, checks: Callable[[DoctorContext], Iterable[Check]], ctx: DoctorContext
) -> Iterator[Check]:
    """The area's checks, stopping at the first exception, which becomes one FAIL."""
    try:
        yield from checks(ctx)
    except Exception as exc:
        yield crashed_check(area, "raised an error", exc)


def crashed_check(area: str, what: str, exc: Exception) -> Check:
    """The FAIL that stands in for checks that could not run."""
    from pinakes.errors import PinakesError
    from pinakes.index.schema import damage_error

    exc = damage_error(exc) or exc  # a damaged index is the index's fault, repaired by a rebuild
    if isinstance(exc, PinakesError):  # a user-fixable problem the checks ran into: say it as such
        where = f"{exc.path}: " if exc.path is not None else ""
        return Check(area, "FAIL", f"{where}{exc.message}", exc.remedy)
    return Check(
        area, "FAIL", f"the {area} checks {what}: {type(exc).__name__}: {exc}",
        remedy="this is a Pinakes bug: please report it with the output of `pnk doctor --json`",
    )
