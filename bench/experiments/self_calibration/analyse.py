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
import itertools
import json
import math
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

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
    aucs: list[float] = field(default_factory=list[float])
    balanced: list[float] = field(default_factory=list[float])

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
    out: dict[str, tuple[float, float]] = {}
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
    # The prior alone: its threshold the strictest of those keeping each other corpus within the ceiling.
    name = "prior alone (threshold: the strictest that keeps each other corpus within 0.10)"
    for corpus, seeds in data.items():
        lows: list[float] = []
        for other, other_seeds in data.items():
            if other != corpus:
                rows = [row for real_rows, _ in other_seeds.values() for row in real_rows]
                lows.append(threshold_on(priors[corpus], rows, CEILING).low)
        fit = threshold_on(priors[corpus], [row for rows, _ in seeds.values() for row in rows], CEILING)
        from dataclasses import replace as _replace

        fit = _replace(fit, low=max(lows), high=max(lows))
        tally = Tally()
        for rows, _ in seeds.values():
            tally.add(fit, rows)
        print(f"{corpus:10} {name:75} {tally.cells()}")
        report[f"{corpus}/{name}"] = tally.to_dict()
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




# -- small golden sets: #25's fit against one shrunk towards the KB's self-calibration ----------------

GOLDEN_SIZES = ((30, 8), (50, 10), (80, 15))
DRAWS = 6


def draw_golden(rows: Sequence[Outcome], size: tuple[int, int], seed: int) -> tuple[list[Outcome], list[Outcome]]:
    """A golden set of `size` (questions, no-answer ones) drawn from the rows, and the rest."""
    import random

    rng = random.Random(seed)
    no_answer = sorted((row for row in rows if row.kind == "no-answer"), key=lambda row: row.id)
    answerable = sorted((row for row in rows if row.kind != "no-answer"), key=lambda row: row.id)
    rng.shuffle(no_answer)
    rng.shuffle(answerable)
    total, negatives = size
    golden = no_answer[:negatives] + answerable[: total - negatives]
    chosen = {row.id for row in golden}
    return golden, [row for row in rows if row.id not in chosen]


def shrunk_threshold(model: SignalModel, golden: Sequence[FitRow], synthetic_no_answer: Sequence[FitRow],
                     synthetic_ceiling: float, pseudo: float, plus_one: bool, ceiling: float = CEILING) -> float:
    """The lowest threshold whose estimated false-confidence for a new real question stays within
    `ceiling`: the synthetic no-answer questions' exceedance, mapped to real by `ceiling /
    synthetic_ceiling`, counts as `pseudo` questions beside the golden set's own no-answer ones."""
    real_no = [model.row_probability(row) for row in golden if row.kind == "no-answer"]
    made_no = [model.row_probability(row) for row in synthetic_no_answer]
    real_no_s = [s for s in real_no if s is not None]
    made_no_s = [s for s in made_no if s is not None]
    candidates = sorted({*real_no_s, *made_no_s, *(model.row_probability(r) or 0.0 for r in golden)})
    candidates = [0.0] + [(a + b) / 2 for a, b in itertools.pairwise(candidates)] + [1.0]
    scale = ceiling / synthetic_ceiling if synthetic_ceiling > 0 else 1.0
    for t in candidates:
        made = sum(1 for s in made_no_s if s >= t) / max(1, len(made_no_s))
        k = sum(1 for s in real_no_s if s >= t)
        n = len(real_no)
        estimate = (pseudo * min(1.0, made * scale) + k + (1 if plus_one else 0)) / (pseudo + n + (1 if plus_one else 0))
        if estimate <= ceiling:
            return t
    return 1.0


CURVE_CEILINGS = (0.0, 0.02, 0.05, 0.08, 0.10, 0.15, 0.20, 0.30, 0.50)


def interpolated(curve: Sequence[tuple[float, float]], at: float) -> float | None:
    """False-abstain at false-confidence `at` on a curve of (FA, FC) points (FC rising as FA falls):
    the lower envelope, linearly between its neighbours; None outside the curve's range."""
    points = sorted(curve, key=lambda point: (point[1], point[0]))
    envelope: list[tuple[float, float]] = []
    for fa, fc in points:
        if not envelope or fa < envelope[-1][0]:
            envelope.append((fa, fc))
    if not envelope or at < envelope[0][1]:
        return None
    for (fa1, fc1), (fa2, fc2) in itertools.pairwise(envelope):
        if fc1 <= at <= fc2:
            return fa1 if fc2 == fc1 else fa1 + (fa2 - fa1) * (at - fc1) / (fc2 - fc1)
    return envelope[-1][0]


def logit(p: float) -> float:
    p = min(max(p, 1e-9), 1 - 1e-9)
    return math.log(p / (1 - p))


def shifted_threshold(model: SignalModel, golden: Sequence[FitRow], synthetic_no_answer: Sequence[FitRow],
                      ceiling: float, margin: float) -> float:
    """The synthetic no-answer questions' score distribution (its shape), moved in logit space so its
    median is the golden set's no-answer median (its place in this KB), plus `margin` standard errors
    of that median; the threshold leaves `ceiling` of the moved distribution above it."""
    golden_no = [logit(s) for row in golden if row.kind == "no-answer" and (s := model.row_probability(row)) is not None]
    made_no = sorted(logit(s) for row in synthetic_no_answer if (s := model.row_probability(row)) is not None)
    if not golden_no or not made_no:
        return 1.0
    shift = statistics.median(golden_no) - statistics.median(made_no)
    spread = statistics.pstdev(made_no) if len(made_no) > 1 else 0.0
    shift += margin * 1.2533 * spread / math.sqrt(len(golden_no))  # the median's standard error
    cut = made_no[min(len(made_no) - 1, max(0, math.ceil((1 - ceiling) * len(made_no)) - 1))] if ceiling > 0 else made_no[-1]
    z = cut + shift
    return 1 / (1 + math.exp(-z))


def golden_experiment(variant: str, features: Sequence[str], corpora: Sequence[str], synthetic_ceiling: float,
                      pseudo: float, plus_one: bool) -> dict[str, object]:
    """Per corpus and golden-set size: #25's fit and the shrunk one, each at its shipped ceiling and
    as a curve (the ceiling swept), scored on the rows not drawn; FA of each curve at the FC #25's
    shipped point reaches, and the paired per-draw comparison of balanced errors."""
    from dataclasses import replace as _replace

    data = {corpus: corpus_rows(corpus, variant) for corpus in corpora}
    data = {corpus: seeds for corpus, seeds in data.items() if seeds}
    report: dict[str, object] = {}
    for corpus, seeds in data.items():
        for size in GOLDEN_SIZES:
            names = ("#25", "shrunk", "base", "#25 model, shifted", "#25 model, shifted+1se", "shrunk, shifted")
            curves: dict[str, dict[float, Tally]] = {name: {c: Tally() for c in CURVE_CEILINGS} for name in names}
            for seed, (rows, made) in seeds.items():
                made_no = [row for row in made if row.kind == "no-answer"]
                base_fit = fit_confidence(made, "base", features=features, max_false_confidence=synthetic_ceiling)
                assert base_fit.model is not None
                for draw in range(DRAWS):
                    golden, held_out = draw_golden(rows, size, seed * 100 + draw)
                    if sum(1 for r in held_out if r.kind == "no-answer") < 5:
                        continue
                    try:
                        model = fit_model(golden, features, prior=base_fit.model)
                    except FitError:
                        model = base_fit.model
                    chosen = fit_confidence(golden, "g")
                    assert chosen.model is not None
                    for ceiling in CURVE_CEILINGS:
                        curves["#25"][ceiling].add(fit_confidence(golden, "g", max_false_confidence=ceiling), held_out)
                        for name, fitted, margin in (("#25 model, shifted", chosen.model, 0.0),
                                                     ("#25 model, shifted+1se", chosen.model, 1.0),
                                                     ("shrunk, shifted", model, 0.0)):
                            low = shifted_threshold(fitted, golden, made_no, ceiling, margin)
                            curves[name][ceiling].add(_replace(chosen, model=fitted, low=low, high=low), held_out)
                        low = shrunk_threshold(model, golden, made_no, synthetic_ceiling, pseudo, plus_one, ceiling)
                        curves["shrunk"][ceiling].add(_replace(base_fit, model=model, low=low,
                                                               high=max(low, base_fit.high)), held_out)
                        scaled = synthetic_ceiling * ceiling / CEILING
                        base_low = fit_thresholds(made, "b", base_fit.model, max_false_confidence=scaled).low
                        curves["base"][ceiling].add(_replace(base_fit, low=base_low, high=max(base_low, base_fit.high)),
                                                    held_out)
            shipped = curves["#25"][CEILING]
            at = shipped.fc / max(1, shipped.no_answer)
            entry: dict[str, object] = {"fc_of_25": round(at, 4)}
            for name, curve in curves.items():
                points = [(t.fa / max(1, t.answerable), t.fc / max(1, t.no_answer)) for t in curve.values()]
                matched = interpolated(points, at)
                entry[name] = {"shipped": curve[CEILING].to_dict(), "fa_at_fc_of_25": matched,
                               "curve": [[round(fa, 4), round(fc, 4)] for fa, fc in points]}
                print(f"{corpus:10} golden {size[0]}/{size[1]} {name:7} at 0.10: {curve[CEILING].cells()}   "
                      f"FA at #25's FC {at:.3f}: {matched if matched is None else round(matched, 3)}")
            report[f"{corpus}/{size[0]}-{size[1]}"] = entry
    return report




# -- the prior on features normalised by each KB's own synthetic questions -----------------------------

def normaliser(made: Sequence[CalibrationRow], features: Sequence[str]) -> dict[str, tuple[float, float]]:
    """Per feature: (the synthetic no-answer questions' mean, every synthetic question's spread)."""
    out: dict[str, tuple[float, float]] = {}
    for name in features:
        no = [row.features[name] for row in made if row.kind == "no-answer" and row.features]
        every = [row.features[name] for row in made if row.features]
        out[name] = (statistics.fmean(no), statistics.pstdev(every) or 1.0)
    return out


def normalised(rows: Sequence[FitRow], norm: dict[str, tuple[float, float]]) -> list[Outcome]:
    from dataclasses import replace as _replace

    out: list[Outcome] = []
    for row in rows:
        features = row.features
        if features is not None:
            features = {**features, **{name: (features[name] - loc) / scale for name, (loc, scale) in norm.items()}}
        out.append(cast(Outcome, _replace(row, features=features)))  # the rows are Outcomes
    return out


def run_normalised_prior(variant: str, features: Sequence[str], corpora: Sequence[str],
                         threshold_rule: str = "pooled") -> dict[str, object]:
    data = {corpus: corpus_rows(corpus, variant) for corpus in corpora}
    data = {corpus: seeds for corpus, seeds in data.items() if seeds}
    # every seed's real rows, normalised by that seed KB's own synthetic questions
    normal = {corpus: {seed: normalised(rows, normaliser(made, features)) for seed, (rows, made) in seeds.items()}
              for corpus, seeds in data.items()}
    report: dict[str, object] = {}
    for corpus in data:
        pooled: list[FitRow] = []
        per_corpus: list[Sequence[FitRow]] = []
        for other, seeds in normal.items():
            if other == corpus:
                continue
            rows = [row for seed_rows in seeds.values() for row in seed_rows]
            per_corpus.append(rows)
            pooled += rows * max(1, round(2000 / max(1, len(rows))))
        model = fit_model(pooled, features)
        if threshold_rule == "pooled":
            fit = threshold_on(model, pooled, CEILING)
        else:
            from dataclasses import replace as _replace

            fits = [threshold_on(model, rows, CEILING) for rows in per_corpus]
            strictest = max(fit.low for fit in fits)
            fit = _replace(fits[0], low=strictest, high=strictest)
        tally = Tally()
        for rows in normal[corpus].values():
            tally.add(fit, rows)
        name = f"normalised prior ({'+'.join(features)}; threshold {threshold_rule})"
        print(f"{corpus:10} {variant:10} {name:75} {tally.cells()}")
        report[f"{corpus}/{name}"] = tally.to_dict()
    return report




# -- small golden sets against the normalised prior as the base ---------------------------------------

def denormalised(model: SignalModel, norm: dict[str, tuple[float, float]]) -> SignalModel:
    """The model on normalised features as one on the KB's raw features."""
    weights = [w / norm[name][1] for name, w in zip(model.features, model.weights, strict=True)]
    bias = model.bias - sum(w * norm[name][0] for name, w in zip(model.features, weights, strict=True))
    return SignalModel(model.features, tuple(weights), bias)


def raw_rows(rows: Sequence[FitRow], norm: dict[str, tuple[float, float]]) -> list[Outcome]:
    """Normalised rows put back on a KB's raw scale (the inverse of `normalised`)."""
    from dataclasses import replace as _replace

    out: list[Outcome] = []
    for row in rows:
        features = row.features
        if features is not None:
            features = {**features, **{name: features[name] * scale + loc for name, (loc, scale) in norm.items()}}
        out.append(cast(Outcome, _replace(row, features=features)))  # the rows are Outcomes
    return out


def posterior_threshold(model: SignalModel, golden: Sequence[FitRow], prior_no_answer: Sequence[FitRow],
                        pseudo: float, ceiling: float = CEILING) -> float:
    """The lowest threshold whose false-confidence estimate for a new question stays within the
    ceiling: the development corpora's no-answer questions (on this KB's scale) weigh `pseudo`
    questions, the golden set's own no-answer ones one each, plus one (the conformal +1)."""
    golden_no = [s for row in golden if row.kind == "no-answer" and (s := model.row_probability(row)) is not None]
    n_golden = sum(1 for row in golden if row.kind == "no-answer")
    prior_no = sorted(s for row in prior_no_answer if (s := model.row_probability(row)) is not None)
    every = sorted({*golden_no, *prior_no, *(s for row in golden if (s := model.row_probability(row)) is not None)})
    candidates = [0.0] + [(a + b) / 2 for a, b in itertools.pairwise(every)] + [1.0]
    import bisect

    for t in candidates:
        exceed = (len(prior_no) - bisect.bisect_left(prior_no, t)) / max(1, len(prior_no))
        k = sum(1 for s in golden_no if s >= t)
        if (pseudo * exceed + k + 1) / (pseudo + n_golden + 1) <= ceiling:
            return t
    return 1.0


def golden_normalised(variant: str, features: Sequence[str], corpora: Sequence[str],
                      pseudos: Sequence[float]) -> dict[str, object]:
    from dataclasses import replace as _replace

    data = {corpus: corpus_rows(corpus, variant) for corpus in corpora}
    data = {corpus: seeds for corpus, seeds in data.items() if seeds}
    norms = {corpus: {seed: normaliser(made, features) for seed, (_, made) in seeds.items()}
             for corpus, seeds in data.items()}
    normal = {corpus: {seed: normalised(rows, norms[corpus][seed]) for seed, (rows, _) in seeds.items()}
              for corpus, seeds in data.items()}
    report: dict[str, object] = {}
    for corpus, seeds in data.items():
        pooled: list[FitRow] = []
        for other, other_seeds in normal.items():
            if other != corpus:
                rows = [row for seed_rows in other_seeds.values() for row in seed_rows]
                pooled += rows * max(1, round(2000 / max(1, len(rows))))
        prior = fit_model(pooled, features)
        prior_fit = threshold_on(prior, pooled, CEILING)
        prior_no = [row for row in pooled if row.kind == "no-answer"]
        for size in GOLDEN_SIZES:
            names = ["#25", "base", *(f"shrunk m={m:g}" for m in pseudos), *(f"base model, shrunk m={m:g}" for m in pseudos)]
            curves = {name: {c: Tally() for c in CURVE_CEILINGS} for name in names}
            for seed, (rows, _) in seeds.items():
                norm = norms[corpus][seed]
                base = denormalised(prior, norm)
                kb_prior_no = raw_rows(prior_no, norm)
                template = _replace(prior_fit, model=base)
                for draw in range(DRAWS):
                    golden, held_out = draw_golden(rows, size, seed * 100 + draw)
                    if sum(1 for r in held_out if r.kind == "no-answer") < 5:
                        continue
                    try:
                        model = fit_model(golden, features, prior=base)
                    except FitError:
                        model = base
                    for ceiling in CURVE_CEILINGS:
                        curves["#25"][ceiling].add(fit_confidence(golden, "g", max_false_confidence=ceiling), held_out)
                        low = threshold_on(prior, pooled, ceiling).low
                        curves["base"][ceiling].add(_replace(template, low=low, high=low), held_out)
                        for m in pseudos:
                            for name, fitted in ((f"shrunk m={m:g}", model), (f"base model, shrunk m={m:g}", base)):
                                low = posterior_threshold(fitted, golden, kb_prior_no, m, ceiling)
                                curves[name][ceiling].add(_replace(template, model=fitted, low=low, high=low), held_out)
            shipped = curves["#25"][CEILING]
            at = shipped.fc / max(1, shipped.no_answer)
            entry: dict[str, object] = {"fc_of_25": round(at, 4)}
            for name, curve in curves.items():
                points = [(t.fa / max(1, t.answerable), t.fc / max(1, t.no_answer)) for t in curve.values()]
                matched = interpolated(points, at)
                entry[name] = {"shipped": curve[CEILING].to_dict(), "fa_at_fc_of_25": matched,
                               "curve": [[round(fa, 4), round(fc, 4)] for fa, fc in points]}
                print(f"{corpus:10} {size[0]}/{size[1]} {name:24} at 0.10: {curve[CEILING].cells()}   "
                      f"FA at #25's FC {at:.3f}: {matched if matched is None else round(matched, 3)}")
            report[f"{corpus}/{size[0]}-{size[1]}"] = entry
    return report




def run_guarded(variant: str, features: Sequence[str], corpora: Sequence[str], ceilings: Sequence[float],
                own_features: Sequence[str] | None) -> dict[str, object]:
    """Self-calibration's own model (fitted on its questions at ceiling c), its threshold raised to
    the normalised prior's where that is stricter: how often each (on real questions) crosses both."""
    data = {corpus: corpus_rows(corpus, variant) for corpus in corpora}
    data = {corpus: seeds for corpus, seeds in data.items() if seeds}
    norms = {corpus: {seed: normaliser(made, features) for seed, (_, made) in seeds.items()}
             for corpus, seeds in data.items()}
    normal = {corpus: {seed: normalised(rows, norms[corpus][seed]) for seed, (rows, _) in seeds.items()}
              for corpus, seeds in data.items()}
    report: dict[str, object] = {}
    for corpus, seeds in data.items():
        pooled: list[FitRow] = []
        for other, other_seeds in normal.items():
            if other != corpus:
                rows = [row for seed_rows in other_seeds.values() for row in seed_rows]
                pooled += rows * max(1, round(2000 / max(1, len(rows))))
        prior = fit_model(pooled, features)
        prior_low = threshold_on(prior, pooled, CEILING).low
        for ceiling in ceilings:
            tallies = {"own": Tally(), "prior": Tally(), "own, guarded by the prior": Tally(),
                       "both must agree": Tally()}
            for seed, (rows, made) in seeds.items():
                own = fit_confidence(made, "self", features=own_features, max_false_confidence=ceiling)
                base = denormalised(prior, norms[corpus][seed])
                prior_fit = _with(own, base, prior_low)
                tallies["own"].add(own, rows)
                tallies["prior"].add(prior_fit, rows)
                # both: confident only where each model is (the minimum of the two margins)
                # _Both stands in for a ConfidenceFit: score_fit reads only its row_signal and low
                tallies["both must agree"].add(
                    _Both(own, prior_fit), rows)  # pyright: ignore[reportArgumentType]  # a duck-typed fit
                tallies["own, guarded by the prior"].add(
                    _Both(own, prior_fit), rows)  # pyright: ignore[reportArgumentType]  # a duck-typed fit
            for name, tally in tallies.items():
                print(f"{corpus:10} {variant:8} c={ceiling:<5} {name:28} {tally.cells()}")
                report[f"{corpus}/{ceiling}/{name}"] = tally.to_dict()
    return report


def _with(template: ConfidenceFit, model: SignalModel, low: float) -> ConfidenceFit:
    from dataclasses import replace as _replace

    return _replace(template, model=model, low=low, high=low)


@dataclass(frozen=True)
class _Both:
    """Abstains unless both fits are confident: its signal is 1 when both are, 0 otherwise."""

    one: ConfidenceFit
    other: ConfidenceFit
    low: float = 0.5

    def row_signal(self, row: FitRow) -> float | None:
        a, b = self.one.row_signal(row), self.other.row_signal(row)
        if a is None or b is None:
            return None
        return min((a - self.one.low) / max(1e-9, 1 - self.one.low), (b - self.other.low) / max(1e-9, 1 - self.other.low)) + 0.5




# -- small golden sets shrunk towards the KB's self-calibration (what ships) --------------------------

GOLDEN_CURVE = (0.0, 0.05, 0.10, 0.15, 0.20, 0.30)
MODEL_FROM_GOLDEN = False  # also the variant that keeps #25's model and shrinks only its threshold
GOLDEN_SIZES_ALL = ((30, 8), (50, 10), (80, 15), (100, 25))


def golden_shrunk(variant: str, corpora: Sequence[str], synthetic_ceiling: float, pseudos: Sequence[float],
                  draws: int = DRAWS) -> dict[str, object]:
    """Per corpus and golden-set size (drawn from the seed's real rows; the rest held out): #25's fit,
    the KB's self-calibration alone, and the golden set's fit shrunk towards it (calibration/shrinkage.py:
    the model refitted on the golden set with the self-calibration's weights as its prior, the
    threshold the lowest whose estimated false-confidence for a new question — the synthetic no-answer
    questions' exceedance, doubled for their measured gap to real ones, worth `m` questions, beside the
    golden set's own — stays within the ceiling). Each as a curve over the ceiling; FA compared at the
    FC #25's shipped point reaches; paired per draw on the balanced error."""
    from pinakes.calibration.shrinkage import shrunk_fit

    report: dict[str, object] = {}
    for corpus in corpora:
        seeds = corpus_rows(corpus, variant)
        # the demo's 85 questions (11 no-answer): half of them, the other half held out
        for size in ((42, 5),) if corpus == "demo" else GOLDEN_SIZES_ALL:
            names = ["#25", "self-calibration", *(f"shrunk m={m:g}" for m in pseudos),
                     *(f"gated m={m:g}" for m in pseudos),
                     *((f"#25 model, shrunk threshold m={m:g}" for m in pseudos) if MODEL_FROM_GOLDEN else ())]
            curves = {name: {c: Tally() for c in GOLDEN_CURVE} for name in names}
            paired: dict[str, list[tuple[float, float]]] = {name: [] for name in names[1:]}
            for seed, (rows, made) in seeds.items():
                base = fit_confidence(made, "base", max_false_confidence=synthetic_ceiling)
                for draw in range(20 if corpus == "demo" else draws):  # the demo has one seed
                    golden, held_out = draw_golden(rows, size, seed * 100 + draw)
                    if sum(1 for r in held_out if r.kind == "no-answer") < 5 or \
                            sum(1 for r in golden if r.kind == "no-answer") < size[1]:
                        continue
                    shipped: dict[str, float] = {}
                    for ceiling in GOLDEN_CURVE:
                        fits = {"#25": fit_confidence(golden, "g", max_false_confidence=ceiling)}
                        base_c = fit_confidence(made, "base", max_false_confidence=synthetic_ceiling * ceiling / CEILING) \
                            if ceiling != CEILING else base
                        fits["self-calibration"] = base_c
                        for m in pseudos:
                            fits[f"shrunk m={m:g}"] = shrunk_fit(golden, base, made, "g", pseudo=m, ceiling=ceiling,
                                                                 synthetic_ceiling=synthetic_ceiling)
                            from pinakes.calibration.shrinkage import MIN_LIKENESS, likeness

                            like = likeness(golden, made)
                            fits[f"gated m={m:g}"] = fits[f"shrunk m={m:g}"] if like is not None and \
                                like >= MIN_LIKENESS else fits["#25"]
                            if MODEL_FROM_GOLDEN:
                                fits[f"#25 model, shrunk threshold m={m:g}"] = shrunk_fit(
                                    golden, base, made, "g", pseudo=m, ceiling=ceiling,
                                    synthetic_ceiling=synthetic_ceiling, model_from="golden")
                        for name, fit in fits.items():
                            curves[name][ceiling].add(fit, held_out)
                            if ceiling == CEILING:
                                fa, fc = score_fit(fit, held_out)
                                shipped[name] = ((fa.value or 0) + (fc.value or 0)) / 2
                    for name in names[1:]:
                        paired[name].append((shipped[name], shipped["#25"]))
            first = curves["#25"][CEILING]
            at = first.fc / max(1, first.no_answer)
            entry: dict[str, object] = {"fc_of_25": round(at, 4)}
            for name, curve in curves.items():
                points = [(t.fa / max(1, t.answerable), t.fc / max(1, t.no_answer)) for t in curve.values()]
                matched = interpolated(points, at)
                pairs = paired.get(name, [])
                better = sum(1 for a, b in pairs if a < b)
                worse = sum(1 for a, b in pairs if a > b)
                from pinakes.eval.paired import sign_test

                entry[name] = {"shipped": curve[CEILING].to_dict(), "fa_at_fc_of_25": matched,
                               "curve": [[round(fa, 4), round(fc, 4)] for fa, fc in points],
                               "vs_25": {"better": better, "worse": worse, "p": round(sign_test(better, worse), 4)}
                               if pairs else None}
                versus = f"  vs #25 {better}/{worse} p {sign_test(better, worse):.3f}" if pairs else ""
                print(f"{corpus:10} {size[0]}/{size[1]} {name:17} at 0.10: {curve[CEILING].cells()}   "
                      f"FA at #25's FC {at:.3f}: {matched if matched is None else round(matched, 3)}{versus}",
                      flush=True)
            report[f"{corpus}/{size[0]}-{size[1]}"] = entry
    return report


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=("gap", "strategies", "golden", "normalised", "golden-normalised", "guarded", "golden-shrunk"))
    parser.add_argument("--own-features", default=None)
    parser.add_argument("--pseudos", default="10,20,40")
    parser.add_argument("--threshold-rule", default="pooled", choices=("pooled", "strictest"))
    parser.add_argument("--synthetic-ceiling", type=float, default=0.05)
    parser.add_argument("--pseudo", type=float, default=20.0)
    parser.add_argument("--plus-one", action="store_true")
    parser.add_argument("--variants", default="run6")
    parser.add_argument("--features", default="cosine,keyword_share,related_share")
    parser.add_argument("--corpus", action="append", choices=CORPORA)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.what == "gap":
        report = gap(args.variants.split(","), args.corpus or CORPORA)
    elif args.what == "normalised":
        report = {variant: run_normalised_prior(variant, tuple(args.features.split(",")), args.corpus or CORPORA,
                                                args.threshold_rule)
                  for variant in args.variants.split(",")}
    elif args.what == "guarded":
        report = {variant: run_guarded(variant, tuple(args.features.split(",")), args.corpus or CORPORA,
                                       (0.05, 0.10), tuple(args.own_features.split(",")) if args.own_features else None)
                  for variant in args.variants.split(",")}
    elif args.what == "golden-shrunk":
        report = golden_shrunk(args.variants, args.corpus or CORPORA, args.synthetic_ceiling,
                               [float(m) for m in args.pseudos.split(",")])
    elif args.what == "golden-normalised":
        report = golden_normalised(args.variants, tuple(args.features.split(",")), args.corpus or CORPORA,
                                   [float(m) for m in args.pseudos.split(",")])
    elif args.what == "golden":
        report = golden_experiment(args.variants, tuple(args.features.split(",")), args.corpus or CORPORA,
                                   args.synthetic_ceiling, args.pseudo, args.plus_one)
    else:
        report = {variant: run_strategies(variant, tuple(args.features.split(",")), args.corpus or CORPORA)
                  for variant in args.variants.split(",")}
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
