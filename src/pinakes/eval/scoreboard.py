"""The scoreboard: per class and in aggregate, every rate with its numerator and denominator.

A rate over nothing is null with a reason, never 0.0: "no question could abstain" and "no question
abstained wrongly" are different findings, and a 0.0 would report the first as the second. The
question count sits beside the rates because it is gated too: a golden set that shrank improves
every rate by losing its hard questions.

Definitions (k is the run's final_k):
  recall@k          answerable questions answered in the top k / answerable questions
  mrr               sum of 1/hit_rank over answerable questions (0 when not found) / answerable questions
  rerank_precision  relevant passages among the reranked top k / passages returned (answerable
                    questions; null when rerank is off)
  false_abstain     answerable questions whose confidence is low / answerable questions with a
                    calibrated (not unknown) confidence
  false_confidence  no-answer questions whose confidence is high or medium / no-answer questions
                    with a calibrated confidence
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pinakes.calibration.fitting import Rate
from pinakes.eval.golden import KINDS
from pinakes.eval.outcomes import Outcome, OutcomesFile, whole
from pinakes.jsontypes import is_object

ALL = "all"
HIGHER_IS_BETTER = ("recall@k", "mrr", "rerank_precision")
LOWER_IS_BETTER = ("false_abstain", "false_confidence")
METRICS = HIGHER_IS_BETTER + LOWER_IS_BETTER
CALIBRATED = ("high", "medium", "low")


def _rate(numerator: float, denominator: int, empty_reason: str) -> Rate:
    return Rate(numerator, denominator, None if denominator else empty_reason)


@dataclass(frozen=True)
class ClassScores:
    questions: int
    metrics: dict[str, Rate]
    confidence_unknown: int

    def to_dict(self) -> dict[str, object]:
        return {"questions": self.questions, "confidence_unknown": self.confidence_unknown,
                **{name: rate.to_dict() for name, rate in self.metrics.items()}}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> ClassScores:
        return cls(whole(data["questions"]),
                   {name: Rate.from_dict(_object(data[name])) for name in METRICS if name in data},
                   whole(data.get("confidence_unknown", 0)))


@dataclass(frozen=True)
class Scoreboard:
    k: int
    classes: dict[str, ClassScores]  # every kind, then "all"

    def to_dict(self) -> dict[str, object]:
        return {"k": self.k, "classes": {name: scores.to_dict() for name, scores in self.classes.items()}}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Scoreboard:
        return cls(whole(data["k"]), {name: ClassScores.from_dict(_object(scores))
                                      for name, scores in _object(data["classes"]).items()})


def _object(value: object) -> Mapping[str, object]:
    if not is_object(value):
        raise TypeError(f"expected an object, got {value!r}")
    return value


def score(outcomes: OutcomesFile) -> Scoreboard:
    """The scoreboard of an outcomes file: a function of its rows and header alone."""
    kinds = list(KINDS) + sorted({row.kind for row in outcomes.rows} - set(KINDS))
    classes = {kind: score_rows([row for row in outcomes.rows if row.kind == kind], outcomes)
               for kind in kinds}
    classes[ALL] = score_rows(list(outcomes.rows), outcomes)
    return Scoreboard(outcomes.k, classes)


def score_rows(rows: Sequence[Outcome], outcomes: OutcomesFile) -> ClassScores:
    answerable = [row for row in rows if row.kind != "no-answer"]
    no_answer = [row for row in rows if row.kind == "no-answer"]
    none_answerable = "no answerable questions in this class"
    metrics = {
        "recall@k": _rate(sum(1 for row in answerable if row.hit), len(answerable), none_answerable),
        "mrr": _rate(sum(1.0 / row.hit_rank for row in answerable if row.hit_rank), len(answerable),
                     none_answerable),
        "rerank_precision": _rerank_precision(answerable, outcomes.reranked),
        "false_abstain": _abstention(answerable, outcomes, "answerable", abstaining_is_wrong=True),
        "false_confidence": _abstention(no_answer, outcomes, "no-answer", abstaining_is_wrong=False),
    }
    return ClassScores(len(rows), metrics, sum(1 for row in rows if row.confidence == "unknown"))


def _rerank_precision(answerable: Sequence[Outcome], reranked: bool) -> Rate:
    if not reranked:
        return Rate(0, 0, "rerank is off ([retrieval] rerank = false): there is no reranked top k")
    return _rate(sum(row.relevant_returned for row in answerable), sum(row.returned for row in answerable),
                 "no answerable question returned a passage")


def _abstention(rows: Sequence[Outcome], outcomes: OutcomesFile, what: str, *, abstaining_is_wrong: bool) -> Rate:
    if outcomes.thresholds is None:
        return Rate(0, 0, "confidence is unknown: pinakes.toml has no [retrieval.confidence] thresholds "
                          "(fit and write them with `pnk eval --fit-confidence --write`)")
    if not rows:
        return Rate(0, 0, f"no {what} questions in this class")
    calibrated = [row for row in rows if row.confidence in CALIBRATED]
    abstained = sum(1 for row in calibrated if row.confidence == "low")
    wrongly = abstained if abstaining_is_wrong else len(calibrated) - abstained
    return _rate(wrongly, len(calibrated),
                 f"no {what} question had a calibrated confidence (every level was unknown: the "
                 "thresholds were fitted for another scorer, or the results carry no score)")


# ------------------------------------------------------------------------------------------------
# Rendering.

COLUMNS = (("recall@k", "recall@{k}"), ("mrr", "MRR"), ("rerank_precision", "rerank prec."),
           ("false_abstain", "false-abstain"), ("false_confidence", "false-conf."))


def render_table(board: Scoreboard) -> str:
    """A fixed-width table: each cell `value (num/den)`, or `—` for a null rate."""
    headers = ["class", "n"] + [label.format(k=board.k) for _, label in COLUMNS]
    body: list[list[str]] = []
    for name, scores in board.classes.items():
        cells = [name, str(scores.questions)]
        for metric, _ in COLUMNS:
            cells.append(render_rate(scores.metrics[metric]))
        body.append(cells)
    widths = [max(len(row[i]) for row in [headers, *body]) for i in range(len(headers))]
    lines = ["  ".join(cell.ljust(width) if i == 0 else cell.rjust(width)
                       for i, (cell, width) in enumerate(zip(row, widths, strict=True))).rstrip()
             for row in [headers, *body]]
    lines.insert(1, "  ".join("-" * width for width in widths))
    lines.insert(len(lines) - 1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def render_rate(rate: Rate) -> str:
    if rate.value is None:
        return "—"
    return f"{rate.value:.3f} ({_number(rate.numerator)}/{rate.denominator})"


def null_reasons(board: Scoreboard) -> list[str]:
    """One line per distinct reason a rate is null, naming the metrics (in the aggregate row)."""
    by_reason: dict[str, list[str]] = {}
    for metric, label in COLUMNS:
        rate = board.classes[ALL].metrics[metric]
        if rate.value is None:
            by_reason.setdefault(rate.reason or "the denominator is zero", []).append(label.format(k=board.k))
    return [f"{', '.join(labels)}: null — {reason}" for reason, labels in by_reason.items()]


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.3f}"
