"""Fitting `[retrieval.confidence]` on the golden set (spec §4.2, §9 "Confidence heuristic").

Two signals can be fitted (search/confidence.py compares the same number):
  - "model" (the default, issue #25): a logistic model over the search's evidence features
    (search/signals.py, every outcome row carries them as `features`), fitted on the golden set
    with the two classes weighing the same and an L2 penalty (few questions, few parameters); the
    signal is its estimated probability that the KB holds an answer;
  - "top-score": the top passage's rerank score when reranking, else the best cosine among the
    returned passages, which every outcome row carries as `signal`.
A question is treated as abstaining when its signal is below `low`:

  - `low` is the threshold with the fewest false abstentions among those keeping false-confidence
    at or below MAX_FALSE_CONFIDENCE (a confident answer to an unanswerable question is the error
    an agent cannot see; an abstention it can); ties go to fewer false confidences;
  - `high` is the stricter threshold: just above the best-scoring no-answer question, so on the
    golden set nothing unanswerable is "high" (never below `low`).

Each threshold is a midpoint between two observed signals, rounded as far as the classification
allows. A search that returned nothing is low whatever the thresholds say (its signal is None); a
row whose level was unknown for want of any score cannot be fitted and is reported as excluded.
The fit is scored on the set it was fitted on, so the rates it reports are a floor, not a forecast.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pinakes.eval.outcomes import Outcome
from pinakes.eval.scoreboard import Rate
from pinakes.search.confidence import MODEL, TOP_SCORE, model_probability

ROUNDING_DIGITS = (3, 4, 6, 9)
MAX_FALSE_CONFIDENCE = 0.10
# The shipped model's features and penalty (docs/QUALITY.md, "#25": decided on held-out halves of
# the development corpora by bench/bench_confidence.py).
MODEL_FEATURES = ("cosine", "cosine_spread", "keyword_share", "bm25_ratio", "agreement")
L2_PENALTY = 1.0
WEIGHT_DIGITS = 4


@dataclass(frozen=True)
class SignalModel:
    """A logistic model over evidence features, weights on the raw feature scale."""

    features: tuple[str, ...]
    weights: tuple[float, ...]
    bias: float

    def probability(self, features: Mapping[str, float] | None) -> float | None:
        return None if features is None else model_probability(features, self.features, self.weights, self.bias)

    def row_probability(self, row: Outcome) -> float | None:
        """A row's signal under this model: a multi-hop question's weakest hop (where an agent
        following the chain stops), None if any hop has no evidence."""
        if row.hop_features is None:
            return self.probability(row.features)
        hops = [self.probability(features) for features in row.hop_features]
        return None if not hops or any(hop is None for hop in hops) else min(h for h in hops if h is not None)


@dataclass(frozen=True)
class ConfidenceFit:
    high: float
    low: float
    fitted_for: str
    false_abstain: Rate
    false_confidence: Rate
    no_answer_high: Rate  # no-answer questions that would be "high"
    excluded: tuple[str, ...]  # ids with no signal to fit on
    trade_offs: tuple[tuple[float, int, int], ...] = ()  # (low, false abstains, false confidences)
    model: SignalModel | None = None  # None: the top-score signal

    @property
    def signal(self) -> str:
        return TOP_SCORE if self.model is None else MODEL

    def manifest_block(self) -> str:
        lines = ["[retrieval.confidence]", f"signal = {_toml_string(self.signal)}"]
        if self.model is not None:
            lines += [f"features = [{', '.join(_toml_string(name) for name in self.model.features)}]",
                      f"weights = [{', '.join(repr(weight) for weight in self.model.weights)}]",
                      f"bias = {self.model.bias!r}"]
        lines += [f"high = {self.high}", f"low = {self.low}", f"fitted_for = {_toml_string(self.fitted_for)}"]
        return "\n".join(lines) + "\n"

    def row_signal(self, row: Outcome) -> float | None:
        """The signal this fit would compare for an outcome row (None: low whatever the thresholds)."""
        return row.signal if self.model is None else self.model.row_probability(row)

    def to_dict(self) -> dict[str, object]:
        block: dict[str, object] = {"signal": self.signal}
        if self.model is not None:
            block.update(features=list(self.model.features), weights=list(self.model.weights), bias=self.model.bias)
        return {
            "confidence": {**block, "high": self.high, "low": self.low, "fitted_for": self.fitted_for},
            "false_abstain": self.false_abstain.to_dict(),
            "false_confidence": self.false_confidence.to_dict(),
            "no_answer_high": self.no_answer_high.to_dict(),
            "excluded": list(self.excluded),
            "trade_offs": [{"low": low, "false_abstain": fa, "false_confidence": fc}
                           for low, fa, fc in self.trade_offs],
            "manifest_block": self.manifest_block(),
        }


class FitError(ValueError):
    pass


@dataclass(frozen=True)
class _Point:
    signal: float | None  # None: low whatever the thresholds (nothing was returned)
    answerable: bool


def fit_confidence(rows: Sequence[Outcome], fitted_for: str, *, signal: str = MODEL,
                   features: Sequence[str] = MODEL_FEATURES, penalty: float = L2_PENALTY,
                   prior: SignalModel | None = None,
                   max_false_confidence: float = MAX_FALSE_CONFIDENCE) -> ConfidenceFit:
    """Fit the block on `rows`: the model first (for the model signal), then the thresholds on the
    number it yields per row."""
    model = fit_model(rows, features, penalty, prior) if signal == MODEL else None
    return fit_thresholds(rows, fitted_for, model, max_false_confidence=max_false_confidence)


def fit_thresholds(rows: Sequence[Outcome], fitted_for: str, model: SignalModel | None = None, *,
                   max_false_confidence: float = MAX_FALSE_CONFIDENCE) -> ConfidenceFit:
    points, excluded = _points(rows, model)
    answerable = [point for point in points if point.answerable]
    no_answer = [point for point in points if not point.answerable]
    if not answerable or not no_answer:
        raise FitError("fitting needs both answerable and no-answer questions with a score "
                       f"(have {len(answerable)} answerable and {len(no_answer)} no-answer)")
    signals = sorted({point.signal for point in points if point.signal is not None})
    if not signals:
        raise FitError("no question has a score to fit on")
    candidates = _midpoints(signals)

    def errors(low: float) -> tuple[int, int]:
        wrongly_abstained = sum(1 for point in answerable if _abstains(point, low))
        wrongly_confident = sum(1 for point in no_answer if not _abstains(point, low))
        return wrongly_abstained, wrongly_confident

    def cost(low: float) -> tuple[bool, int, int]:
        fa, fc = errors(low)
        return fc / len(no_answer) > max_false_confidence, fa, fc

    best = min(candidates, key=cost)
    low = _round_preserving(best, signals)
    top_no_answer = max((point.signal for point in no_answer if point.signal is not None), default=None)
    if top_no_answer is None:
        high = low
    else:
        stricter = min(candidate for candidate in candidates if candidate > top_no_answer)
        high = max(low, _round_preserving(stricter, signals))
    fa, fc = errors(low)
    scored_no_answer = [point for point in no_answer if point.signal is not None]
    reaching_high = sum(1 for point in scored_no_answer if point.signal is not None and point.signal >= high)
    return ConfidenceFit(
        high=high, low=low, fitted_for=fitted_for,
        false_abstain=Rate(fa, len(answerable)),
        false_confidence=Rate(fc, len(no_answer)),
        no_answer_high=Rate(reaching_high, len(no_answer)),
        excluded=tuple(excluded),
        trade_offs=_pareto([(_round_preserving(candidate, signals), *errors(candidate)) for candidate in candidates]),
        model=model,
    )


def fit_model(rows: Sequence[Outcome], features: Sequence[str] = MODEL_FEATURES,
              penalty: float = L2_PENALTY, prior: SignalModel | None = None) -> SignalModel:
    """Balanced, L2-penalised logistic regression of "answerable" on the rows' features, by Newton
    steps on standardised features (the penalty then weighs every feature alike); the weights are
    returned on the raw scale, so the manifest holds no scaling. Rows without features (a search
    that returned nothing) are left out: they are low whatever the model says. With a `prior`, the
    weights are shrunk towards its weights instead of towards zero: a small golden set then moves
    them little, a large one decides them."""
    import numpy as np

    usable = [(row, evidence) for row in rows for evidence in _evidence(row)
              if all(name in evidence for name in features)]
    labels = np.array([row.kind != "no-answer" for row, _ in usable], dtype=float)
    positives, negatives = int(labels.sum()), int(len(labels) - labels.sum())
    if not positives or not negatives:
        raise FitError("fitting the model needs answerable and no-answer questions with evidence features "
                          f"(have {positives} answerable and {negatives} no-answer)")
    raw = np.array([[float(evidence[name]) for name in features] for _, evidence in usable])
    mean, scale = raw.mean(axis=0), raw.std(axis=0)
    scale[scale == 0] = 1.0
    x = np.hstack([np.ones((len(raw), 1)), (raw - mean) / scale])
    # Each class weighs half, so a small no-answer class is not drowned by the answerable one.
    sample = np.where(labels == 1, len(labels) / (2 * positives), len(labels) / (2 * negatives))
    ridge = np.eye(x.shape[1]) * penalty
    ridge[0, 0] = 0.0  # the intercept is not shrunk
    centre = np.zeros(x.shape[1])
    if prior is not None:
        prior_weights = dict(zip(prior.features, prior.weights, strict=True))
        centre[1:] = [prior_weights.get(name, 0.0) for name in features]
        centre[1:] *= scale  # the prior's raw-scale weights on the standardised features
    beta = centre.copy()
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(x @ beta)))
        gradient = x.T @ (sample * (labels - p)) - ridge @ (beta - centre)
        hessian = (x.T * (sample * p * (1 - p))) @ x + ridge
        step = np.linalg.solve(hessian, gradient)
        beta = beta + step
        if float(np.abs(step).max()) < 1e-8:
            break
    weights = beta[1:] / scale
    bias = float(beta[0] - float((weights * mean).sum()))
    return SignalModel(tuple(features), tuple(round(float(w), WEIGHT_DIGITS) for w in weights),
                       round(bias, WEIGHT_DIGITS))


def _evidence(row: Outcome) -> list[Mapping[str, float]]:
    """The feature sets a row contributes to the model's fit: its search's, or each hop's (every hop
    of an answerable chain found something to answer with; a no-answer question has no hops)."""
    if row.hop_features is not None:
        return [hop for hop in row.hop_features if hop is not None]
    return [row.features] if row.features is not None else []


def score_fit(fit: ConfidenceFit, rows: Sequence[Outcome]) -> tuple[Rate, Rate]:
    """False-abstain and false-confidence of a fit on other rows than it was fitted on: what the
    fit forecasts, where its own report is a floor (bench/bench_confidence.py)."""
    answerable = [row for row in rows if row.kind != "no-answer"]
    no_answer = [row for row in rows if row.kind == "no-answer"]

    def abstains(row: Outcome) -> bool:
        value = fit.row_signal(row)
        return value is None or value < fit.low

    return (Rate(sum(1 for row in answerable if abstains(row)), len(answerable)),
            Rate(sum(1 for row in no_answer if not abstains(row)), len(no_answer)))


def _pareto(points: Sequence[tuple[float, int, int]]) -> tuple[tuple[float, int, int], ...]:
    """The operating points no other point beats on both error counts, by rising `low`: what a
    person choosing a different trade-off than the fit's can pick from."""
    front = [point for point in points
             if not any(other[1] <= point[1] and other[2] <= point[2] and other[1:] != point[1:]
                        for other in points)]
    unique: dict[tuple[int, int], tuple[float, int, int]] = {}
    for point in sorted(front):
        unique.setdefault(point[1:], point)  # the lowest threshold with those errors
    return tuple(unique.values())


def describe_fit(embedding_model: str, reranker_model: str | None, golden_path: str, questions: int,
                 settings: str, *, signal: str = MODEL) -> str:
    """`fitted_for`: the scorer's model first (what `search/confidence.py` checks it names), then
    the golden set and the settings. A fit without rerank never names a reranker, so turning rerank
    on later makes the thresholds "unknown" instead of silently comparing other numbers to them."""
    if signal == MODEL:
        scorer = f"{embedding_model} + {reranker_model} (evidence model, reranked)" if reranker_model \
            else f"{embedding_model} (evidence model, rerank off)"
    else:
        scorer = f"{embedding_model} + {reranker_model} (top rerank score)" if reranker_model \
            else f"{embedding_model} (best cosine, rerank off)"
    return f"{scorer}, {golden_path} ({questions} questions), {settings}"


def _points(rows: Sequence[Outcome], model: SignalModel | None) -> tuple[list[_Point], list[str]]:
    points: list[_Point] = []
    excluded: list[str] = []
    for row in rows:
        signal = row.signal if model is None else model.row_probability(row)
        if signal is None and row.confidence != "low":
            excluded.append(row.id)
            continue
        points.append(_Point(signal, row.kind != "no-answer"))
    return points, excluded


def _abstains(point: _Point, low: float) -> bool:
    return point.signal is None or point.signal < low


def _midpoints(signals: Sequence[float]) -> list[float]:
    spread = (signals[-1] - signals[0]) or 1.0
    below = signals[0] - spread / 10
    above = signals[-1] + spread / 10
    return [below] + [(a + b) / 2 for a, b in itertools.pairwise(signals)] + [above]


def _round_preserving(value: float, signals: Sequence[float]) -> float:
    """`value` with as few digits as keep every observed signal on the same side of it."""
    side = [signal >= value for signal in signals]
    for digits in ROUNDING_DIGITS:
        rounded = round(value, digits)
        if [signal >= rounded for signal in signals] == side:
            return rounded
    return value


def _toml_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
