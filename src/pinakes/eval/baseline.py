"""The committed baseline and the regression gate (spec §7).

The gate fails on a drop beyond a small absolute tolerance in any class, not only in aggregate: an
aggregate hides a change that lifts one kind of question and pays for it out of another. Question
counts are compared exactly, per class, because a golden set that lost its hard questions improves
every rate. A rate that was a number and became null is a regression too (something stopped being
measured); one that was null and became a number is not.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pinakes.errors import OutcomesError
from pinakes.eval.outcomes import read_json_object, write_json_object
from pinakes.eval.scoreboard import HIGHER_IS_BETTER, METRICS, ClassScores, Rate, Scoreboard, render_rate
from pinakes.jsontypes import is_object

BASELINE_FORMAT = "pinakes-eval-baseline/1"
BASELINE_RELPATH = "eval/baseline.json"
DEFAULT_TOLERANCE = 0.02


@dataclass(frozen=True)
class Baseline:
    header: Mapping[str, object]  # the run header it was written from (eval/outcomes.py)
    scoreboard: Scoreboard
    path: Path | None = None

    def to_dict(self) -> dict[str, object]:
        return {"format": BASELINE_FORMAT, "header": self.header, "scoreboard": self.scoreboard.to_dict()}


@dataclass(frozen=True)
class Regression:
    class_name: str
    metric: str  # a METRICS name, or "questions"
    before: str
    after: str
    why: str

    def render(self) -> str:
        return f"{self.metric} [{self.class_name}]: {self.before} -> {self.after} ({self.why})"

    def to_dict(self) -> dict[str, str]:
        return {"class": self.class_name, "metric": self.metric, "before": self.before, "after": self.after,
                "why": self.why}


def write_baseline(path: Path, baseline: Baseline) -> None:
    write_json_object(path, baseline.to_dict())


def read_baseline(path: Path) -> Baseline:
    path = Path(path)
    data = read_json_object(path, "a baseline")
    if data.get("format") != BASELINE_FORMAT:
        raise OutcomesError(f"not a baseline (format {data.get('format')!r}, expected {BASELINE_FORMAT!r})",
                            remedy="regenerate it with `pnk eval --update-baseline`", path=path)
    try:
        scoreboard = data["scoreboard"]
        if not is_object(scoreboard):
            raise TypeError(f"expected an object, got {scoreboard!r}")
        board = Scoreboard.from_dict(scoreboard)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise OutcomesError(f"the baseline's scoreboard is malformed ({exc!r})",
                            remedy="regenerate it with `pnk eval --update-baseline`", path=path) from None
    header = data.get("header")
    return Baseline(header if is_object(header) else {}, board, path)


def compare(baseline: Scoreboard, current: Scoreboard, tolerance: float = DEFAULT_TOLERANCE) -> list[Regression]:
    """Every way `current` is worse than `baseline`, class by class."""
    regressions: list[Regression] = []
    names = list(baseline.classes) + [name for name in current.classes if name not in baseline.classes]
    empty = ClassScores(0, {}, 0)
    for name in names:
        before = baseline.classes.get(name, empty)
        after = current.classes.get(name, empty)
        if before.questions != after.questions:
            regressions.append(Regression(
                name, "questions", str(before.questions), str(after.questions),
                "the question count is gated exactly; if the golden set changed on purpose, run "
                "`pnk eval --update-baseline`"))
        for metric in METRICS:
            old = before.metrics.get(metric)
            new = after.metrics.get(metric)
            if old is None or old.value is None:
                continue
            regression = _metric_regression(name, metric, old, new, tolerance)
            if regression is not None:
                regressions.append(regression)
    return regressions


def _metric_regression(name: str, metric: str, old: Rate, new: Rate | None, tolerance: float) -> Regression | None:
    assert old.value is not None
    if new is None or new.value is None:
        reason = new.reason if new is not None else "not measured"
        return Regression(name, metric, render_rate(old), "null", f"no longer measured: {reason}")
    drop = old.value - new.value if metric in HIGHER_IS_BETTER else new.value - old.value
    if drop > tolerance + 1e-12:
        direction = "fell" if metric in HIGHER_IS_BETTER else "rose"
        return Regression(name, metric, render_rate(old), render_rate(new),
                          f"{direction} by {drop:.3f}, beyond the {tolerance} tolerance")
    return None


def header_changes(before: Mapping[str, object], after: Mapping[str, object]) -> list[str]:
    """What differs between two run headers (models, settings, golden set), as `key: old -> new`."""
    flat_before, flat_after = _flatten(before), _flatten(after)
    changes: list[str] = []
    for key in sorted(set(flat_before) | set(flat_after)):
        old, new = flat_before.get(key), flat_after.get(key)
        if old != new:
            changes.append(f"{key}: {json.dumps(old)} -> {json.dumps(new)}")
    return changes


def _flatten(data: object, prefix: str = "") -> dict[str, object]:
    if not is_object(data):
        return {prefix: data}
    flat: dict[str, object] = {}
    for key, value in data.items():
        flat.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return flat


__all__ = ["BASELINE_RELPATH", "DEFAULT_TOLERANCE", "Baseline", "Regression", "compare",
           "header_changes", "read_baseline", "write_baseline"]
