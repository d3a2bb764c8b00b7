"""A small golden set's fit, shrunk towards the KB's self-calibration (issue #41).

#25's fit keeps false-confidence within its ceiling for a new question by letting k of n golden
no-answer questions be confident only while (k + 1) / (n + 1) stays within it: with fewer than 9
no-answer questions no k qualifies, so the threshold goes above the best-scoring one — the
strictest point, set by the single most answerable-looking question of eight. A KB's
self-calibration has asked some hundred unanswerable questions of its own; they are not real ones
(they score lower: docs/QUALITY.md, "Self-calibration"), but they say where this KB's unanswerable
questions score, and how often a threshold is crossed, far more smoothly than eight can.

So, below CARRY no-answer questions:
  - the model keeps the self-calibration's features and is refitted on the golden set with the
    self-calibration's weights as its prior (the penalty shrinks towards them, not towards zero:
    calibration/fitting.fit_model), so a few questions move it a little;
  - `low` is the lowest threshold whose estimated false-confidence for a new question stays within
    the ceiling, the estimate a weighted count: the synthetic no-answer questions' exceedance,
    scaled by the measured gap between synthetic and real ones (ceiling / SYNTHETIC_CEILING: the
    self-calibration's own ceiling is the one that kept real questions within 0.10), counts as
    PSEUDO_QUESTIONS questions, beside the golden set's own no-answer questions and the conformal + 1:
        (m × min(1, gap × exceedance(t)) + k(t) + 1) / (m + n + 1) <= ceiling;
  - `high` is the same estimate at half the ceiling: a band, so `medium` exists.
From CARRY no-answer questions on, the golden set carries #25's fit alone; and it does below CARRY
too where the golden set's questions are unlike the made-up ones (MIN_LIKENESS): there leaning on
them lost.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace

from pinakes.calibration.fitting import (
    MAX_FALSE_CONFIDENCE,
    ConfidenceFit,
    FitError,
    FitRow,
    fit_confidence,
    fit_model,
    fit_thresholds,
    no_answer_needed,
    score_fit,
)
from pinakes.calibration.self_calibration import SYNTHETIC_CEILING, StoredSelfCalibration

PSEUDO_QUESTIONS = 20.0  # what the self-calibration's no-answer questions weigh, in real questions
# Shrink only where the golden set's answerable questions are like the made-up ones: the share of
# their keywords the top passage holds, over the made-up questions' share, at least this. Made-up
# questions copy their document's words; where real ones do too (0.88-1.04 on pydocs and pymodules)
# the fit leaning on them won or tied; where real ones ask in their own words (0.36-0.72 on
# cranfield, tldr and the demo) it lost to #25's rule (docs/QUALITY.md, "Small golden sets").
MIN_LIKENESS = 0.85
# From this many golden no-answer questions on, #25's rule alone: where it allows a confident one.
CARRY = 2 * (no_answer_needed(MAX_FALSE_CONFIDENCE) or 9)


def shrunk_fit(golden: Sequence[FitRow], base: ConfidenceFit, synthetic: Sequence[FitRow], fitted_for: str, *,
               pseudo: float = PSEUDO_QUESTIONS, ceiling: float = MAX_FALSE_CONFIDENCE,
               synthetic_ceiling: float, model_from: str = "base") -> ConfidenceFit:
    """The golden set's fit shrunk towards `base` (the KB's self-calibration, fitted on `synthetic`
    at `synthetic_ceiling`): module docstring. Its rates are scored on the golden set. `model_from`
    "golden" keeps #25's model (its feature set chosen on the golden set) and shrinks only the threshold."""
    if base.model is None:
        raise FitError("the self-calibration holds no model to shrink towards")
    if model_from == "golden":
        chosen = fit_confidence(golden, fitted_for, max_false_confidence=ceiling).model
        assert chosen is not None
        model = chosen
    else:
        try:
            model = fit_model(golden, base.model.features, prior=base.model)
        except FitError:
            model = base.model
    gap = ceiling / synthetic_ceiling if synthetic_ceiling > 0 else 1.0
    made_no = sorted(s for row in synthetic if row.kind == "no-answer" and (s := model.row_probability(row)) is not None)
    golden_no = [s for row in golden if row.kind == "no-answer" and (s := model.row_probability(row)) is not None]
    n_golden = sum(1 for row in golden if row.kind == "no-answer")
    every = sorted({*made_no, *golden_no, *(s for row in golden if (s := model.row_probability(row)) is not None)})
    candidates = [0.0, *((a + b) / 2 for a, b in itertools.pairwise(every)), 1.0]

    def lowest(at: float) -> float:
        for t in candidates:
            exceedance = (len(made_no) - bisect.bisect_left(made_no, t)) / max(1, len(made_no))
            k = sum(1 for s in golden_no if s >= t)
            if (pseudo * min(1.0, gap * exceedance) + k + 1) / (pseudo + n_golden + 1) <= at:
                return t
        return 1.0

    low, high = lowest(ceiling), lowest(ceiling / 2)
    fit = replace(fit_thresholds(golden, fitted_for, model, max_false_confidence=ceiling),
                  low=round(low, 4), high=round(max(low, high), 4), cross_validated=None, trade_offs=())
    false_abstain, false_confidence = score_fit(fit, golden)
    at_high = sum(1 for s in golden_no if s >= fit.high)
    return replace(fit, false_abstain=false_abstain, false_confidence=false_confidence,
                   no_answer_high=replace(fit.no_answer_high, numerator=at_high))


@dataclass(frozen=True)
class GoldenFit:
    fit: ConfidenceFit
    shrunk_towards: str | None  # the self-calibration file the fit was shrunk towards; None: #25's fit
    note: str | None  # why it was (or could not be) shrunk, in words


def fit_golden_set(rows: Sequence[FitRow], fitted_for: str, base: StoredSelfCalibration | None,
                   why_no_base: str | None = None) -> GoldenFit:
    """#25's fit where the golden set carries it (CARRY no-answer questions or more), else the fit
    shrunk towards `base` (the KB's self-calibration), else #25's fit with a note saying why."""
    no_answer = sum(1 for row in rows if row.kind == "no-answer")
    if no_answer >= CARRY:
        return GoldenFit(fit_confidence(rows, fitted_for), None, None)
    if base is None:
        return GoldenFit(fit_confidence(rows, fitted_for), None,
                         f"{no_answer} no-answer questions, and no self-calibration to shrink them towards "
                         f"({why_no_base or 'none could be made'}): the fit keeps #25's rule, which leaves every "
                         "golden no-answer question below its threshold")
    like = likeness(rows, base.rows)
    if like is None or like < MIN_LIKENESS:
        measured = "cannot be measured" if like is None else f"is {like:.2f} of the made-up questions'"
        return GoldenFit(fit_confidence(rows, fitted_for), None,
                         f"{no_answer} no-answer questions, but the share of your questions' words their top passage "
                         f"holds {measured} (under {MIN_LIKENESS}): the KB's self-calibration asks unlike you, so the "
                         "fit keeps #25's rule, which leaves every golden no-answer question below its threshold")
    fit = shrunk_fit(rows, base.fit, base.rows, f"{fitted_for}, shrunk towards the KB's self-calibration "
                     f"({len(base.rows) // 2} questions)", synthetic_ceiling=SYNTHETIC_CEILING)
    return GoldenFit(fit, str(base.path),
                     f"{no_answer} no-answer questions (fewer than {CARRY}): the fit is shrunk towards this KB's "
                     f"self-calibration ({base.path.name}) instead of its strictest point; from {CARRY} on, the "
                     "golden set carries its own thresholds")


def likeness(golden: Sequence[FitRow], synthetic: Sequence[FitRow]) -> float | None:
    """The golden set's answerable questions' mean keyword_share over the made-up answerable ones':
    how far the self-calibration's questions are from the KB's real ones (None: not measurable)."""
    def share(rows: Sequence[FitRow]) -> float | None:
        values = [row.features["keyword_share"] for row in rows
                  if row.kind != "no-answer" and row.features is not None and "keyword_share" in row.features]
        return sum(values) / len(values) if values else None

    real, made = share(golden), share(synthetic)
    return None if real is None or not made else real / made
