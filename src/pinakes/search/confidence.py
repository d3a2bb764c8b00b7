"""The confidence signal (spec §4.2): a calibrated heuristic, labelled as one.

The signal is one number per search, compared against `[retrieval.confidence]` thresholds. Which
number is the block's `signal`:
  - "model" (what `pnk eval --fit-confidence` fits, issue #25): a logistic model over the search's
    evidence features (search/signals.py) with the KB's own fitted weights — the estimated
    probability that the KB holds an answer. It needs the vector list, so a keyword-only search has
    no model signal;
  - "top-score" (the default of a block that names none): with rerank, the cross-encoder score of
    the top passage (what the spec calibrates on); without rerank, when vector search ran, the best
    cosine among the returned passages; keyword-only without rerank: none — BM25 scores are not
    comparable across queries.
Levels: "high" (signal >= high), "low" (signal < low), otherwise "medium". Where the thresholds
are absent, or were fitted for another scorer, the level is "unknown": a number is never invented.

`fitted_for` names what the thresholds were fitted on ("<embedding> + <reranker>, <golden set>").
Thresholds fitted on reranker scores name the reranker's model; a cosine fit names the embedding
model and no reranker. A signal is compared only against thresholds fitted for its own scorer,
because a cross-encoder logit and a cosine share no scale, and a fit for another model is no
calibration of this one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from pinakes.manifest.sections import MODEL, TOP_SCORE

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
    scorer: str | None  # "rerank:<model>", "cosine:<model>" or "model:<model>"
    reason: str
    # The evidence features of the search (search/signals.py), whatever the block's signal: what
    # eval records per question so a later fit needs no re-run. Not part of to_dict.
    features: Mapping[str, float] | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, object]:
        return {"level": self.level, "signal": self.signal, "scorer": self.scorer, "reason": self.reason}


def model_named_in(model: str, text: str) -> bool:
    """Whether `text` names `model`, with or without its organisation prefix."""
    lowered = text.lower()
    return model.lower() in lowered or model.rsplit("/", 1)[-1].lower() in lowered


def signal_of(thresholds: Thresholds | None) -> str:
    return getattr(thresholds, "signal", None) or TOP_SCORE


def model_probability(features: Mapping[str, float], names: Sequence[str], weights: Sequence[float],
                      bias: float) -> float | None:
    """The logistic model's estimate, or None when a feature it needs is missing."""
    if any(name not in features for name in names):
        return None
    z = bias + sum(weight * features[name] for name, weight in zip(names, weights, strict=True))
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


def assess(
    *,
    passage_count: int,
    rerank_top: float | None,
    best_cosine: float | None,
    thresholds: Thresholds | None,
    reranker_model: str | None,
    embedding_model: str | None,
    features: Mapping[str, float] | None = None,
) -> Confidence:
    confidence = _assess(passage_count, rerank_top, best_cosine, thresholds, reranker_model, embedding_model,
                         features)
    return Confidence(confidence.level, confidence.signal, confidence.scorer, confidence.reason, features)


def _assess(passage_count: int, rerank_top: float | None, best_cosine: float | None, thresholds: Thresholds | None,
            reranker_model: str | None, embedding_model: str | None,
            features: Mapping[str, float] | None) -> Confidence:
    if passage_count == 0:
        return Confidence(LOW, None, None, "no passage matched the query")
    if signal_of(thresholds) == MODEL and thresholds is not None:
        probability = model_probability(features or {}, getattr(thresholds, "features", ()),
                                        getattr(thresholds, "weights", ()), getattr(thresholds, "bias", 0.0))
        if probability is None:
            missing = [name for name in getattr(thresholds, "features", ()) if name not in (features or {})]
            return Confidence(UNKNOWN, None, None,
                              "the [retrieval.confidence] model needs the vector search's evidence, and this "
                              "search has none (keyword-only)" if features is None else
                              f"the [retrieval.confidence] model needs {', '.join(missing)}, which this search "
                              "lacks (the reranker did not score it)")
        signal, scorer = round(probability, 6), f"model:{embedding_model}"
    elif rerank_top is not None:
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
            "no [retrieval.confidence] thresholds in pinakes.toml; fit and write them with "
            "`pnk eval --fit-confidence --write`",
        )
    fitted_for = thresholds.fitted_for or ""
    fitted_on_reranker = reranker_model is not None and model_named_in(reranker_model, fitted_for)
    reranked = rerank_top is not None
    scorer_model = reranker_model if reranked and signal_of(thresholds) == TOP_SCORE else embedding_model
    scorer_named = scorer_model is None or model_named_in(scorer_model, fitted_for)
    # A fit on reranked passages is no fit for unreranked ones, nor the other way round.
    if not scorer_named or (reranked != fitted_on_reranker and signal_of(thresholds) == MODEL) \
            or (not reranked and fitted_on_reranker):
        return Confidence(
            UNKNOWN, signal, scorer,
            f"[retrieval.confidence] was fitted for {fitted_for!r}, not for this search's scorer "
            f"({scorer}); re-fit with `pnk eval --fit-confidence --write`",
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
