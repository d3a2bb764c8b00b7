"""Fitting an evidence model and its thresholds on questions whose class is known (spec §4.2, §9
"Confidence heuristic"): a golden set's (`pnk eval --fit-confidence`, eval/) or the questions
self-calibration makes from the KB's own documents (calibration/self_calibration.py). The rows are
anything shaped like an eval outcome row (`FitRow`).

Two signals can be fitted (search/confidence.py compares the same number):
  - "model" (the default, issue #25): a logistic model over the search's evidence features
    (search/signals.py, every outcome row carries them as `features`), fitted on the golden set
    with the two classes weighing the same and an L2 penalty (few questions, few parameters); the
    signal is its estimated probability that the KB holds an answer;
  - "top-score": the top passage's rerank score when reranking, else the best cosine among the
    returned passages, which every outcome row carries as `signal`.
A question is treated as abstaining when its signal is below `low`:

  - `low` is the threshold with the fewest false abstentions among those that keep the share of
    confident no-answer questions within MAX_FALSE_CONFIDENCE *for a new question* (a confident
    answer to an unanswerable question is the error an agent cannot see; an abstention it can);
    ties go to fewer false confidences. Keeping k/n within the ceiling on the fitted questions is
    not enough: the threshold that just meets it sits at the edge, and new questions cross it more
    often (held-out false-confidence 0.13-0.145 against a 0.10 aim on every corpus measured:
    docs/QUALITY.md, "#25", (h)). So k of n no-answer questions may be confident only while
    (k + 1) / (n + 1) stays within the ceiling: conformal risk control (Angelopoulos et al. 2022),
    which bounds the expected false-confidence on a new question when the scores come from a model
    that never saw the scored questions (the cross-fitted ones below). Under 1 / ceiling - 1
    no-answer questions (9 at 0.10) no count meets it: the fit then leaves none of them confident
    and says the promise needs more;
  - `high` is the stricter threshold: just above the best-scoring no-answer question, so on the
    golden set nothing unanswerable is "high" (never below `low`).

Each threshold is a midpoint between two observed signals, rounded as far as the classification
allows. A search that returned nothing is low whatever the thresholds say (its signal is None); a
row whose level was unknown for want of any score cannot be fitted and is reported as excluded.
The fit is scored on the set it was fitted on, so the rates it reports are a floor, not a forecast.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Protocol, TypeVar

from pinakes.manifest.sections import RERANK_FEATURE
from pinakes.search.confidence import MODEL, TOP_SCORE, model_probability

ROUNDING_DIGITS = (3, 4, 6, 9)
RATE_DIGITS = 6
MAX_FALSE_CONFIDENCE = 0.10
# The shipped model's features and penalty (docs/QUALITY.md, "#25": decided on held-out halves of
# the development corpora by bench/bench_confidence.py).
MODEL_FEATURES = ("cosine", "cosine_spread", "keyword_share", "bm25_ratio", "agreement")
# The feature sets a fit chooses between, by their cross-fitted error on the KB's own golden set:
# few parameters where the golden set is small, more where it can carry them, the two that
# correct for crowded neighbourhoods (each wins on some corpora and loses on others; the choice
# among all four was ahead on every corpus measured: docs/QUALITY.md, "#25", (f)), and one that
# reads paraphrases through WordNet's relations ((i): chosen where a golden set asks in other words).
FEATURE_SETS_BEFORE_RELATIONS = (("cosine", "keyword_share"), MODEL_FEATURES, ("csls", "keyword_share"),
                                 ("cosine", "keyword_share", "crowding"))
# With a reranker (issue #41): its top score alone (the spec's signal), and beside the two features it
# helped most when a reader fine-tuned here was tried as a feature (docs/QUALITY.md, "#25", (d)).
# Candidates only where every searched question carries it (a search the reranker did not serve has
# no `rerank` feature). A further feature a fit may choose joins here: a set of its own, offered
# where the rows carry it (`_carried`).
RERANK_FEATURE_SETS = ((RERANK_FEATURE,), ("cosine", "keyword_share", RERANK_FEATURE))
FEATURE_SETS = (*FEATURE_SETS_BEFORE_RELATIONS, ("cosine", "related_share"), *RERANK_FEATURE_SETS)
L2_PENALTY = 10.0
WEIGHT_DIGITS = 4
CROSS_FIT_FOLDS = 5


@dataclass(frozen=True)
class Rate:
    """A count over a count (the scoreboard's rates, eval/scoreboard.py, and a fit's). A rate over
    nothing is null with a reason, never 0.0."""

    numerator: float
    denominator: int
    reason: str | None = None  # why the value is null, when it is

    @property
    def value(self) -> float | None:
        if self.reason is not None or self.denominator == 0:
            return None
        return round(self.numerator / self.denominator, RATE_DIGITS)

    def to_dict(self) -> dict[str, object]:
        numerator = self.numerator if isinstance(self.numerator, int) else round(self.numerator, RATE_DIGITS)
        data: dict[str, object] = {"value": self.value, "numerator": numerator, "denominator": self.denominator}
        if self.value is None:
            data["reason"] = self.reason or "the denominator is zero"
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Rate:
        reason = None
        if data.get("value") is None:
            reason = str(data.get("reason") or "the denominator is zero")
        numerator, denominator = data["numerator"], data["denominator"]
        if (isinstance(numerator, bool) or not isinstance(numerator, int | float)
                or isinstance(denominator, bool) or not isinstance(denominator, int | float | str)):
            raise TypeError(f"a rate's numerator and denominator are numbers, got {numerator!r} / {denominator!r}")
        return cls(numerator, int(denominator), reason)


class FitRow(Protocol):
    """What a fit reads of a question's row: an eval outcome row (eval/outcomes.py) or a
    self-calibration question's (calibration/self_calibration.py). A dataclass, so a fit can hand
    back the row with another signal."""

    __dataclass_fields__: ClassVar[dict[str, Any]]  # Any: dataclasses' Field of each field's own type, as typeshed's DataclassInstance

    @property
    def id(self) -> str: ...

    @property
    def kind(self) -> str: ...  # "no-answer", or a kind of answerable question

    @property
    def signal(self) -> float | None: ...

    @property
    def confidence(self) -> str: ...

    @property
    def features(self) -> Mapping[str, float] | None: ...

    @property
    def hop_features(self) -> tuple[Mapping[str, float] | None, ...] | None: ...


Row = TypeVar("Row", bound=FitRow)


@dataclass(frozen=True)
class SignalModel:
    """A logistic model over evidence features, weights on the raw feature scale."""

    features: tuple[str, ...]
    weights: tuple[float, ...]
    bias: float

    def probability(self, features: Mapping[str, float] | None) -> float | None:
        return None if features is None else model_probability(features, self.features, self.weights, self.bias)

    def row_probability(self, row: FitRow) -> float | None:
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
    # Cross-fitted (model signal): each question scored by a model fitted without it, at the
    # thresholds chosen on those scores — a forecast for new questions, where the rates above are
    # scored on the questions the model was fitted on.
    cross_validated: tuple[Rate, Rate] | None = None
    max_false_confidence: float = MAX_FALSE_CONFIDENCE

    @property
    def no_answer_needed(self) -> int | None:
        """How many no-answer questions the ceiling needs before it can be promised for new ones."""
        return no_answer_needed(self.max_false_confidence)

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

    def row_signal(self, row: FitRow) -> float | None:
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
            "cross_validated": ({"false_abstain": self.cross_validated[0].to_dict(),
                                 "false_confidence": self.cross_validated[1].to_dict(),
                                 "folds": CROSS_FIT_FOLDS} if self.cross_validated else None),
            "trade_offs": [{"low": low, "false_abstain": fa, "false_confidence": fc}
                           for low, fa, fc in self.trade_offs],
            "max_false_confidence": self.max_false_confidence,
            "no_answer_needed": self.no_answer_needed,
            "manifest_block": self.manifest_block(),
        }


class FitError(ValueError):
    pass


@dataclass(frozen=True)
class _Point:
    signal: float | None  # None: low whatever the thresholds (nothing was returned)
    answerable: bool


def fit_confidence(rows: Sequence[FitRow], fitted_for: str, *, signal: str = MODEL,
                   features: Sequence[str] | None = None, penalty: float = L2_PENALTY,
                   prior: SignalModel | None = None, cross_fit: bool = True,
                   max_false_confidence: float = MAX_FALSE_CONFIDENCE,
                   feature_sets: Sequence[Sequence[str]] | None = None) -> ConfidenceFit:
    """Fit the block on `rows`: the model first (for the model signal), then the thresholds on the
    number it yields per row. A model's `low` is the stricter of the threshold chosen on its own
    scores and the one chosen on cross-fitted scores (each question scored by a model fitted on the
    other folds), so the model's fit to these very questions does not make the thresholds promise a
    false-confidence rate new questions will not see. Without
    `features`, each of `feature_sets` (FEATURE_SETS unless given) is fitted and the one with the
    lowest cross-fitted error (false-abstain rate + false-confidence rate) is kept; ties go to fewer
    features."""
    if signal != MODEL:
        return fit_thresholds(rows, fitted_for, max_false_confidence=max_false_confidence)
    if features is None:
        fits = [fit_confidence(rows, fitted_for, features=choice, penalty=penalty, prior=prior, cross_fit=cross_fit,
                               max_false_confidence=max_false_confidence)
                for choice in (FEATURE_SETS if feature_sets is None else feature_sets) if _carried(rows, choice)]
        if not fits:
            raise FitError("no feature set is carried by every question's evidence")
        return min(fits, key=_forecast_error)
    model = fit_model(rows, features, penalty, prior)
    in_sample = fit_thresholds(rows, fitted_for, model, max_false_confidence=max_false_confidence)
    crossed = cross_fitted(rows, lambda training: fit_model(training, features, penalty, prior)) if cross_fit else None
    if crossed is None:
        return in_sample
    try:
        forecast = fit_thresholds(crossed, fitted_for, max_false_confidence=max_false_confidence)
    except FitError:
        return in_sample
    # The stricter of the two: the ceiling then holds on these questions and in the forecast.
    low = max(forecast.low, in_sample.low)
    chosen = replace(in_sample, low=low, high=max(low, forecast.high, in_sample.high))
    false_abstain, false_confidence = score_fit(chosen, rows)
    no_answer_high = sum(1 for row in rows if row.kind == "no-answer"
                         and (value := chosen.row_signal(row)) is not None and value >= chosen.high)
    return replace(chosen, false_abstain=false_abstain, false_confidence=false_confidence,
                   no_answer_high=Rate(no_answer_high, false_confidence.denominator),
                   cross_validated=(forecast.false_abstain, forecast.false_confidence))


def _forecast_error(fit: ConfidenceFit) -> tuple[float, int]:
    rates = fit.cross_validated or (fit.false_abstain, fit.false_confidence)
    values = [rate.value if rate.value is not None else 1.0 for rate in rates]
    return sum(values), len(fit.model.features) if fit.model else 0


def cross_fit_folds(rows: Sequence[Row]) -> dict[int, list[Row]] | None:
    """The rows in CROSS_FIT_FOLDS folds, stratified by class and assigned by a hash of the id (the
    same set always folds alike); None when a fold would leave a class without questions."""
    import zlib

    folds: dict[int, list[Row]] = {}
    for answerable in (False, True):
        group = sorted((row for row in rows if (row.kind != "no-answer") == answerable),
                       key=lambda row: (zlib.crc32(row.id.encode()), row.id))
        if len(group) < CROSS_FIT_FOLDS:
            return None
        for position, row in enumerate(group):
            folds.setdefault(position % CROSS_FIT_FOLDS, []).append(row)
    return folds


def cross_fitted(rows: Sequence[Row], make_model: Callable[[list[Row]], SignalModel]) -> list[Row] | None:
    """Every row with, as its signal, the probability from the model `make_model` fits on the other
    folds (cross_fit_folds). None when a fold leaves a class without questions or a model cannot be fitted."""
    folds = cross_fit_folds(rows)
    if folds is None:
        return None
    crossed: list[Row] = []
    for number, held_out in folds.items():
        training = [row for other, fold in folds.items() if other != number for row in fold]
        try:
            model = make_model(training)
        except FitError:
            return None
        crossed += [replace(row, signal=model.row_probability(row)) for row in held_out]
    return crossed


def fit_thresholds(rows: Sequence[FitRow], fitted_for: str, model: SignalModel | None = None, *,
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
    abstaining, confident = _Abstentions(answerable), _Abstentions(no_answer)

    def errors(low: float) -> tuple[int, int]:
        return abstaining.at(low), len(no_answer) - confident.at(low)

    allowed = allowed_false_confidences(len(no_answer), max_false_confidence)

    def cost(low: float) -> tuple[bool, int, int]:
        fa, fc = errors(low)
        return fc > allowed, fa, fc

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
        max_false_confidence=max_false_confidence,
    )


def allowed_false_confidences(no_answer: int, ceiling: float) -> int:
    """The most of `no_answer` fitted no-answer questions a threshold may leave confident: the largest
    k with (k + 1) / (no_answer + 1) <= ceiling, never below 0 (module docstring)."""
    return max(0, math.floor(ceiling * (no_answer + 1) - 1 + 1e-9))


def no_answer_needed(ceiling: float) -> int | None:
    """The fewest no-answer questions for which leaving none confident meets `ceiling` for a new one
    (None: a ceiling of 0 is met by no number of them)."""
    return math.ceil(1.0 / ceiling - 1.0 - 1e-9) if ceiling > 0 else None


def fit_model(rows: Sequence[FitRow], features: Sequence[str] = MODEL_FEATURES,
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


def _carried(rows: Sequence[FitRow], features: Sequence[str]) -> bool:
    """Whether every searched question's evidence holds `features` (a reranked feature set is no
    candidate for rows the reranker did not score)."""
    return all(name in evidence for row in rows for evidence in _evidence(row) for name in features)


def _evidence(row: FitRow) -> list[Mapping[str, float]]:
    """The feature sets a row contributes to the model's fit: its search's, or each hop's (every hop
    of an answerable chain found something to answer with; a no-answer question has no hops)."""
    if row.hop_features is not None:
        return [hop for hop in row.hop_features if hop is not None]
    return [row.features] if row.features is not None else []


def score_fit(fit: ConfidenceFit, rows: Sequence[FitRow]) -> tuple[Rate, Rate]:
    """False-abstain and false-confidence of a fit on other rows than it was fitted on: what the
    fit forecasts, where its own report is a floor (bench/bench_confidence.py)."""
    answerable = [row for row in rows if row.kind != "no-answer"]
    no_answer = [row for row in rows if row.kind == "no-answer"]

    def abstains(row: FitRow) -> bool:
        value = fit.row_signal(row)
        return value is None or value < fit.low

    return (Rate(sum(1 for row in answerable if abstains(row)), len(answerable)),
            Rate(sum(1 for row in no_answer if not abstains(row)), len(no_answer)))


def _pareto(points: Sequence[tuple[float, int, int]]) -> tuple[tuple[float, int, int], ...]:
    """The operating points no other point beats on both error counts, by rising `low`: what a
    person choosing a different trade-off than the fit's can pick from."""
    # A pair of error counts is beaten only by a pair sorted before it (fewer false abstentions, or
    # as many and fewer false confidences) that has no more false confidences: one sweep, where
    # comparing every point with every other took most of a self-calibration's fit.
    kept: set[tuple[int, int]] = set()
    fewest = math.inf
    for pair in sorted({point[1:] for point in points}):
        if pair[1] < fewest:
            kept.add(pair)
            fewest = pair[1]
    front = [point for point in points if point[1:] in kept]
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


def _points(rows: Sequence[FitRow], model: SignalModel | None) -> tuple[list[_Point], list[str]]:
    points: list[_Point] = []
    excluded: list[str] = []
    for row in rows:
        signal = row.signal if model is None else model.row_probability(row)
        if signal is None and row.confidence != "low":
            excluded.append(row.id)
            continue
        points.append(_Point(signal, row.kind != "no-answer"))
    return points, excluded


class _Abstentions:
    """How many of some points abstain at a threshold `low` (no signal, or a signal below it),
    counted by bisection over their sorted signals: the fit tries every midpoint of the observed
    signals (hundreds for a self-calibration), and counting each point at each threshold was most
    of a sync's fitting time. The counts are those of comparing every point (a NaN signal, which
    compares below nothing, never abstains)."""

    def __init__(self, points: Sequence[_Point]) -> None:
        signals = [point.signal for point in points]
        self._without = sum(1 for signal in signals if signal is None)
        self._sorted = sorted(signal for signal in signals if signal is not None and not math.isnan(signal))

    def at(self, low: float) -> int:
        return self._without + bisect.bisect_left(self._sorted, low)


def _midpoints(signals: Sequence[float]) -> list[float]:
    spread = (signals[-1] - signals[0]) or 1.0
    below = signals[0] - spread / 10
    above = signals[-1] + spread / 10
    return [below] + [(a + b) / 2 for a, b in itertools.pairwise(signals)] + [above]


def _round_preserving(value: float, signals: Sequence[float]) -> float:
    """`value` with as few digits as keep every observed signal on the same side of it. `signals`
    are sorted: two thresholds split them alike when as many lie below each."""
    below = bisect.bisect_left(signals, value)
    for digits in ROUNDING_DIGITS:
        rounded = round(value, digits)
        if bisect.bisect_left(signals, rounded) == below:
            return rounded
    return value


def _toml_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
