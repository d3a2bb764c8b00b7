"""One `pnk eval` over a KB: find the golden set (or the reason to skip), sync, run, score, gate.

A KB without a golden set — a freshly stamped template ships none — is skipped with a printed
reason, never failed (spec §7). What keeps that from blessing a golden set that was emptied or
deleted is the baseline: once one is committed, a missing or empty golden set is a question-count
regression, and a misspelt `questions` key is a load error, not "no golden set".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes.eval.baseline import (
    BASELINE_RELPATH,
    DEFAULT_TOLERANCE,
    Baseline,
    Regression,
    compare,
    header_changes,
)
from pinakes.eval.golden import GOLDEN_SET_RELPATH, GoldenSet, load_golden_set
from pinakes.eval.outcomes import OUTCOMES_RELPATH, OutcomesFile
from pinakes.eval.scoreboard import Scoreboard, score

if TYPE_CHECKING:
    from pinakes.embed.base import Embedder
    from pinakes.manifest import Manifest


@dataclass(frozen=True)
class EvalPaths:
    kb_root: Path
    golden: Path
    baseline: Path
    outcomes: Path

    @classmethod
    def for_kb(cls, kb_root: Path, *, baseline: Path | None = None, outcomes: Path | None = None) -> EvalPaths:
        return cls(kb_root, kb_root / GOLDEN_SET_RELPATH, baseline or kb_root / BASELINE_RELPATH,
                   outcomes or kb_root / OUTCOMES_RELPATH)


@dataclass
class EvalRun:
    golden: GoldenSet
    outcomes: OutcomesFile
    scoreboard: Scoreboard
    sync_warnings: list[str] = field(default_factory=list[str])


@dataclass(frozen=True)
class GateResult:
    baseline: Baseline | None
    regressions: tuple[Regression, ...]
    changes: tuple[str, ...]  # how the run's models/settings differ from the baseline's
    tolerance: float

    @property
    def ok(self) -> bool:
        return not self.regressions


def load_for_run(paths: EvalPaths, manifest: Manifest) -> tuple[GoldenSet | None, str | None]:
    """The golden set to run, or None and the reason to skip. A missing or empty golden set is
    skipped only while no baseline exists; with one, it runs and fails the question-count gate."""
    has_baseline = paths.baseline.exists()
    if not paths.golden.exists():
        if not has_baseline:
            return None, (f"no golden set at {GOLDEN_SET_RELPATH} (a KB has none until someone writes one; "
                          "`pnk eval --init` drafts one from the KB's headings)")
        return GoldenSet(paths.golden, ()), None
    golden = load_golden_set(paths.golden, paths.kb_root, sources=manifest.sources)
    if not golden.questions and not has_baseline:
        return None, f"the golden set at {GOLDEN_SET_RELPATH} lists no questions"
    return golden, None


def evaluate(paths: EvalPaths, manifest: Manifest, golden: GoldenSet, *, sync: bool = True,
             embedder: Embedder | None = None) -> EvalRun:
    from pinakes.eval.runner import outcomes_for, sync_before_eval

    warnings: list[str] = []
    if sync:
        warnings.extend(sync_before_eval(paths.kb_root, embedder=embedder).warnings)
    outcomes = outcomes_for(paths.kb_root, manifest, golden, embedder=embedder)
    return EvalRun(golden, outcomes, score(outcomes), warnings)


def gate(run_header: Mapping[str, object], board: Scoreboard, baseline: Baseline | None,
         tolerance: float = DEFAULT_TOLERANCE) -> GateResult:
    if baseline is None:
        return GateResult(None, (), (), tolerance)
    return GateResult(baseline, tuple(compare(baseline.scoreboard, board, tolerance)),
                      tuple(header_changes(baseline.header, run_header)), tolerance)
