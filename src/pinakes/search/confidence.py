"""The confidence signal (spec §4.2): a calibrated heuristic, labelled as one.

The signal is one number per search, compared against `[retrieval.confidence]` thresholds:
  - with rerank: the cross-encoder score of the top passage (what the spec calibrates on);
  - without rerank, when vector search ran: the best cosine among the returned passages;
  - keyword-only without rerank: none — BM25 scores are not comparable across queries.
Levels: "high" (signal >= high), "low" (signal < low), otherwise "medium". Where the thresholds
are absent, or were fitted for another scorer, the level is "unknown": a number is never invented.

`fitted_for` names what the thresholds were fitted on ("<embedding> + <reranker>, <golden set>").
Thresholds fitted on reranker scores name the reranker's model; a cosine fit names the embedding
model and no reranker. A signal is compared only against thresholds fitted for its own scorer,
because a cross-encoder logit and a cosine share no scale, and a fit for another model is no
calibration of this one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

HIGH, MEDIUM, LOW, UNKNOWN = "high", "medium", "low", "unknown"


class Thresholds(Protocol):
    """The manifest's [retrieval.confidence] section, or anything shaped like it."""

    @property
    def high(self) -> float: ...

    @property
    def low(self) -> float: ...

    @property
    def fitted_for(self) -> str: ...


@dataclass(frozen=True)
class Confidence:
    level: str
    signal: float | None  # the number compared, when there is one
    scorer: str | None  # "rerank:<model>" or "cosine:<model>"
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {"level": self.level, "signal": self.signal, "scorer": self.scorer, "reason": self.reason}


def model_named_in(model: str, text: str) -> bool:
    """Whether `text` names `model`, with or without its organisation prefix."""
    lowered = text.lower()
    return model.lower() in lowered or model.rsplit("/", 1)[-1].lower() in lowered


def assess(
    *,
    passage_count: int,
    rerank_top: float | None,
    best_cosine: float | None,
    thresholds: Thresholds | None,
    reranker_model: str | None,
    embedding_model: str | None,
) -> Confidence:
    if passage_count == 0:
        return Confidence(LOW, None, None, "no passage matched the query")
    if rerank_top is not None:
        signal, scorer = rerank_top, f"rerank:{reranker_model}"
    elif best_cosine is not None:
        signal, scorer = best_cosine, f"cosine:{embedding_model}"
    else:
        return Confidence(
            UNKNOWN, None, None,
            "keyword-only results without rerank carry no calibrated score (BM25 scores are not "
            "comparable across queries)",
        )
    if thresholds is None:
        return Confidence(
            UNKNOWN, signal, scorer,
            "no [retrieval.confidence] thresholds in pinakes.toml; fit them with `pnk eval --fit-confidence`",
        )
    fitted_for = thresholds.fitted_for or ""
    fitted_on_reranker = reranker_model is not None and model_named_in(reranker_model, fitted_for)
    scorer_model = reranker_model if rerank_top is not None else embedding_model
    scorer_named = scorer_model is None or model_named_in(scorer_model, fitted_for)
    if not scorer_named or (rerank_top is None and fitted_on_reranker):
        return Confidence(
            UNKNOWN, signal, scorer,
            f"[retrieval.confidence] was fitted for {fitted_for!r}, not for this search's scorer "
            f"({scorer}); re-fit with `pnk eval --fit-confidence`",
        )
    if signal >= thresholds.high:
        level = HIGH
    elif signal < thresholds.low:
        level = LOW
    else:
        level = MEDIUM
    return Confidence(
        level, signal, scorer, f"{scorer} {signal:.3f} against low {thresholds.low} / high {thresholds.high}"
    )
