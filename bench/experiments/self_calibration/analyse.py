"""How the KB's own questions stand in for real ones (issue #41), from collect.py's cached rows.

    python bench/experiments/self_calibration/analyse.py gap --variants run6,rare6
    python bench/experiments/self_calibration/analyse.py strategies --json out.json

`gap`: per corpus and rule variant, a model fitted on the seed KB's synthetic questions alone and
scored on the same KB's real questions (evidence removed for the no-answer ones): false-abstain,
false-confidence and AUC, beside the features' class means on both sets.
`strategies`: what could ship with no golden set, each scored on corpora it never saw (leave one
corpus out): the prior alone, self-calibration alone, and combinations (module docstrings there).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent.parent
sys.path[:0] = [str(REPO / "bench"), str(REPO / "src"), str(REPO)]

from bench_confidence import pairwise_auc, wilson  # noqa: E402

from pinakes.calibration.fitting import (  # noqa: E402
    ConfidenceFit,
    FitError,
    FitRow,
    SignalModel,
    fit_confidence,
    fit_model,
    fit_thresholds,
    score_fit,
)
from pinakes.calibration.self_calibration import CalibrationRow  # noqa: E402
from pinakes.eval.outcomes import Outcome  # noqa: E402

CACHE = Path("/work/cache/confidence")
CORPORA = ("cranfield", "pydocs", "pymodules", "tldr", "demo")
SEEDS = {"cranfield": 5, "pydocs": 5, "pymodules": 5, "tldr": 3, "demo": 1}
CEILING = 0.10


def real(corpus: str, seed: int) -> list[Outcome]:
    path = CACHE / "rows" / f"{corpus}-{seed}.real.json"
    return [Outcome.from_dict(row, str(path)) for row in json.loads(path.read_text())]


def synth(corpus: str, seed: int, variant: str) -> list[CalibrationRow]:
    path = CACHE / "rows" / f"{corpus}-{seed}.synth-{variant}.json"
    return [CalibrationRow.from_dict(row) for row in json.loads(path.read_text())]


def available(corpus: str, variant: str) -> list[int]:
    return [seed for seed in range(1, SEEDS[corpus] + 1)
            if (CACHE / "rows" / f"{corpus}-{seed}.real.json").exists()
            and (CACHE / "rows" / f"{corpus}-{seed}.synth-{variant}.json").exists()]


@dataclass
class Tally:
    fa: int = 0
    answerable: int = 0
    fc: int = 0
    no_answer: int = 0
    aucs: list[float] = field(default_factory=list)
    balanced: list[float] = field(default_factory=list)

    def add(self, fit: ConfidenceFit, rows: Sequence[FitRow]) -> None:
        fa, fc = score_fit(fit, rows)
        self.fa += int(fa.numerator)
        self.answerable += fa.denominator
        self.fc += int(fc.numerator)
        self.no_answer += fc.denominator
        self.aucs.append(auc(fit, rows))
        self.balanced.append((fa.numerator / max(1, fa.denominator) + fc.numerator / max(1, fc.denominator)) / 2)

    def cells(self) -> str:
        fa_low, fa_high = wilson(self.fa, self.answerable)
        fc_low, fc_high = wilson(self.fc, self.no_answer)
        area = statistics.fmean(self.aucs) if self.aucs else math.nan
        return (f"FA {self.fa / max(1, self.answerable):.3f} ({self.fa}/{self.answerable}) [{fa_low}, {fa_high}]  "
                f"FC {self.fc / max(1, self.no_answer):.3f} ({self.fc}/{self.no_answer}) [{fc_low}, {fc_high}]  "
                f"AUC {area:.3f}")

    def to_dict(self) -> dict[str, object]:
        return {"false_abstain": [self.fa, self.answerable, wilson(self.fa, self.answerable)],
                "false_confidence": [self.fc, self.no_answer, wilson(self.fc, self.no_answer)],
                "auc": round(statistics.fmean(self.aucs), 4) if self.aucs else None,
                "balanced_per_seed": [round(value, 4) for value in self.balanced]}


def auc(fit: ConfidenceFit, rows: Sequence[FitRow]) -> float:
    scored = [(fit.row_signal(row), row.kind != "no-answer") for row in rows]
    return pairwise_auc([s if s is not None else -math.inf for s, a in scored if a],
                        [s if s is not None else -math.inf for s, a in scored if not a])


def class_means(rows: Sequence[FitRow], names: Sequence[str]) -> dict[str, tuple[float, float]]:
    out = {}
    for name in names:
        answerable = [row.features[name] for row in rows if row.features and row.kind != "no-answer"]
        no_answer = [row.features[name] for row in rows if row.features and row.kind == "no-answer"]
        out[name] = (round(statistics.fmean(answerable), 3) if answerable else math.nan,
                     round(statistics.fmean(no_answer), 3) if no_answer else math.nan)
    return out


def gap(variants: Sequence[str], corpora: Sequence[str]) -> dict[str, object]:
    from pinakes.search.signals import FEATURES

    report: dict[str, object] = {}
    for corpus in corpora:
        for variant in variants:
            seeds = available(corpus, variant)
            if not seeds:
                continue
            tally = Tally()
            real_means: list[dict[str, tuple[float, float]]] = []
            synth_means: list[dict[str, tuple[float, float]]] = []
            found = 0
            made = 0
            for seed in seeds:
                rows, made_rows = real(corpus, seed), synth(corpus, seed, variant)
                made += sum(1 for row in made_rows if row.kind != "no-answer")
                found += sum(1 for row in made_rows if row.found)
                try:
                    fit = fit_confidence(made_rows, "synthetic", max_false_confidence=CEILING)
                except FitError as exc:
                    print(f"{corpus} {seed} {variant}: {exc}")
                    continue
                tally.add(fit, rows)
                real_means.append(class_means(rows, FEATURES))
                synth_means.append(class_means(made_rows, FEATURES))
            print(f"{corpus:10} {variant:10} seeds {len(seeds)}  {tally.cells()}  synthetic found {found}/{made}")
            for name in ("cosine", "keyword_share", "related_share", "csls", "agreement"):
                r = [m[name] for m in real_means]
                s = [m[name] for m in synth_means]
                print(f"    {name:14} real ans/no {statistics.fmean(x[0] for x in r):.3f}/{statistics.fmean(x[1] for x in r):.3f}"
                      f"   synth ans/no {statistics.fmean(x[0] for x in s):.3f}/{statistics.fmean(x[1] for x in s):.3f}")
            report[f"{corpus}/{variant}"] = tally.to_dict()
    return report


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=("gap", "strategies"))
    parser.add_argument("--variants", default="run6")
    parser.add_argument("--features", default="cosine,keyword_share,related_share")
    parser.add_argument("--corpus", action="append", choices=CORPORA)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.what == "gap":
        report = gap(args.variants.split(","), args.corpus or CORPORA)
    else:
        report = {variant: run_strategies(variant, tuple(args.features.split(",")), args.corpus or CORPORA)
                  for variant in args.variants.split(",")}
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


# -- strategies with no golden set, leave one corpus out ----------------------------------------------

CEILINGS = (0.0, 0.01, 0.02, 0.05, 0.10)


def corpus_rows(corpus: str, variant: str) -> dict[int, tuple[list[Outcome], list[CalibrationRow]]]:
    return {seed: (real(corpus, seed), synth(corpus, seed, variant)) for seed in available(corpus, variant)}


def pooled_prior(data: dict[str, dict[int, tuple[list[Outcome], list[CalibrationRow]]]], leave_out: str,
                 features: Sequence[str], penalty: float = 10.0) -> SignalModel:
    """A model fitted on every other corpus's real rows, each corpus weighing the same (its rows
    repeated up to the largest corpus's count, by seed rows pooled)."""
    pooled: list[FitRow] = []
    for corpus, seeds in data.items():
        if corpus == leave_out:
            continue
        rows = [row for real_rows, _ in seeds.values() for row in real_rows]
        pooled += rows * max(1, round(2000 / max(1, len(rows))))
    return fit_model(pooled, features, penalty)


def threshold_on(model: SignalModel, rows: Sequence[FitRow], ceiling: float) -> ConfidenceFit:
    return fit_thresholds(rows, "strategy", model, max_false_confidence=ceiling)


@dataclass(frozen=True)
class Strategy:
    name: str
    # (model fitted elsewhere or None, this seed's synthetic rows, ceiling) -> the fit scored on real rows
    make: Callable[[SignalModel | None, list[CalibrationRow], float], ConfidenceFit]
    needs_prior: bool = True


def strategies(features: Sequence[str]) -> list[Strategy]:
    def self_only(_prior: SignalModel | None, made: list[CalibrationRow], ceiling: float) -> ConfidenceFit:
        return fit_confidence(made, "self", max_false_confidence=ceiling)

    def self_fixed(_prior: SignalModel | None, made: list[CalibrationRow], ceiling: float) -> ConfidenceFit:
        return fit_confidence(made, "self", features=features, max_false_confidence=ceiling)

    def prior_synth_threshold(prior: SignalModel | None, made: list[CalibrationRow], ceiling: float) -> ConfidenceFit:
        assert prior is not None
        return threshold_on(prior, made, ceiling)

    def self_shrunk(prior: SignalModel | None, made: list[CalibrationRow], ceiling: float) -> ConfidenceFit:
        return fit_confidence(made, "self", features=features, prior=prior, max_false_confidence=ceiling)

    return [Strategy("self-calibration, feature set chosen", self_only, needs_prior=False),
            Strategy("self-calibration, prior's features", self_fixed, needs_prior=False),
            Strategy("prior model, thresholds on the KB's synthetic questions", prior_synth_threshold),
            Strategy("self-calibration shrunk to the prior", self_shrunk)]


def run_strategies(variant: str, features: Sequence[str], corpora: Sequence[str]) -> dict[str, object]:
    data = {corpus: corpus_rows(corpus, variant) for corpus in corpora}
    data = {corpus: seeds for corpus, seeds in data.items() if seeds}
    report: dict[str, object] = {}
    priors = {corpus: pooled_prior(data, corpus, features) for corpus in data}
    # The prior alone: its thresholds on the other corpora's real rows (pooled, at the ceiling).
    for ceiling in (0.05, 0.10):
        name = f"prior alone (thresholds on the other corpora's real rows at {ceiling})"
        for corpus, seeds in data.items():
            others = [row for other, s in data.items() if other != corpus for rows, _ in s.values() for row in rows]
            fit = threshold_on(priors[corpus], others, ceiling)
            tally = Tally()
            for rows, _ in seeds.values():
                tally.add(fit, rows)
            print(f"{corpus:10} {name:75} {tally.cells()}")
            report[f"{corpus}/{name}"] = tally.to_dict()
    for strategy in strategies(features):
        # each ceiling's result per corpus, then the ceiling chosen on the other corpora (LOCO)
        by_ceiling: dict[float, dict[str, Tally]] = {}
        for ceiling in CEILINGS:
            by_ceiling[ceiling] = {}
            for corpus, seeds in data.items():
                tally = Tally()
                for rows, made in seeds.values():
                    try:
                        fit = strategy.make(priors[corpus], made, ceiling)
                    except FitError:
                        continue
                    tally.add(fit, rows)
                by_ceiling[ceiling][corpus] = tally
        for corpus in data:
            def others_fc(ceiling: float, corpus: str = corpus,
                          by_ceiling: dict[float, dict[str, Tally]] = by_ceiling) -> tuple[bool, float]:
                fc = sum(t.fc for c, t in by_ceiling[ceiling].items() if c != corpus)
                n = sum(t.no_answer for c, t in by_ceiling[ceiling].items() if c != corpus)
                fa = sum(t.fa / max(1, t.answerable) for c, t in by_ceiling[ceiling].items() if c != corpus)
                return fc / max(1, n) > CEILING, fa
            chosen = min(CEILINGS, key=others_fc)
            for ceiling in CEILINGS:
                mark = "*" if ceiling == chosen else " "
                print(f"{corpus:10} {strategy.name:60} c={ceiling:<5}{mark} {by_ceiling[ceiling][corpus].cells()}")
            report[f"{corpus}/{strategy.name}"] = {"chosen_ceiling": chosen,
                                                   **by_ceiling[chosen][corpus].to_dict(),
                                                   "by_ceiling": {str(c): by_ceiling[c][corpus].to_dict()
                                                                  for c in CEILINGS}}
    return report
