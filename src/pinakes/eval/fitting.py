"""Fitting `[retrieval.confidence]` on the golden set (spec §4.2, §9 "Confidence heuristic").

The fit uses exactly the number `search/confidence.py` compares — the top passage's rerank score
when reranking, else the best cosine among the returned passages — which every outcome row carries
as `signal`. A question is treated as abstaining when its signal is below `low`:

  - `low` minimises false-abstain rate + false-confidence rate (the two classes weigh the same, so
    a small no-answer class is not drowned by the answerable one); ties go to fewer false
    abstentions, because an abstention that should not have happened is the costlier error (§9);
  - `high` is the stricter threshold: just above the best-scoring no-answer question, so on the
    golden set nothing unanswerable is "high" (never below `low`).

Each threshold is a midpoint between two observed signals, rounded as far as the classification
allows. A search that returned nothing is low whatever the thresholds say (its signal is None); a
row whose level was unknown for want of any score cannot be fitted and is reported as excluded.
The fit is scored on the set it was fitted on, so the rates it reports are a floor, not a forecast.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from pinakes.eval.outcomes import Outcome
from pinakes.eval.scoreboard import Rate

ROUNDING_DIGITS = (3, 4, 6, 9)


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

    def manifest_block(self) -> str:
        return ("[retrieval.confidence]\n"
                f"high = {self.high}\n"
                f"low = {self.low}\n"
                f"fitted_for = {_toml_string(self.fitted_for)}\n")

    def to_dict(self) -> dict[str, object]:
        return {
            "confidence": {"high": self.high, "low": self.low, "fitted_for": self.fitted_for},
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


def fit_confidence(rows: Sequence[Outcome], fitted_for: str) -> ConfidenceFit:
    points, excluded = _points(rows)
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

    def cost(low: float) -> tuple[float, int]:
        fa, fc = errors(low)
        return fa / len(answerable) + fc / len(no_answer), fa

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
    )


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
                 settings: str) -> str:
    """`fitted_for`: the scorer's model first (what `search/confidence.py` checks it names), then
    the golden set and the settings. A cosine fit never names a reranker, so turning rerank on later
    makes the thresholds "unknown" instead of silently comparing a cross-encoder score to them."""
    scorer = f"{embedding_model} + {reranker_model} (top rerank score)" if reranker_model \
        else f"{embedding_model} (best cosine, rerank off)"
    return f"{scorer}, {golden_path} ({questions} questions), {settings}"


def _points(rows: Sequence[Outcome]) -> tuple[list[_Point], list[str]]:
    points: list[_Point] = []
    excluded: list[str] = []
    for row in rows:
        if row.signal is None and row.confidence != "low":
            excluded.append(row.id)
            continue
        points.append(_Point(row.signal, row.kind != "no-answer"))
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
