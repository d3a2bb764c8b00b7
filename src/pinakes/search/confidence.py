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
Levels: "high" (signal >= high), "low" (signal < low), otherwise "medium" — which exists only where
the block has a band (low < high; a fit whose low equals high says so in the reason). Where no
thresholds apply, the level is "unknown": a number is never invented.

The thresholds come from the first source that applies (search/calibrated.py): pinakes.toml's block
(`fitted`), the KB's self-calibration (`self-calibrated`), the shipped prior (`prior`); every result
names its `source`, `unknown` when none applied or `[retrieval.confidence] signal = "none"`.

`fitted_for` names what the thresholds were fitted on ("<embedding> + <reranker>, <golden set>").
Thresholds fitted on reranker scores name the reranker's model; a cosine fit names the embedding
model and no reranker. A signal is compared only against thresholds fitted for its own scorer,
because a cross-encoder logit and a cosine share no scale, and a fit for another model is no
calibration of this one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from pinakes.manifest.sections import MODEL, TOP_SCORE
from pinakes.search.calibrated import FITTED, UNCALIBRATED, KBConfidence

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
    # Where the thresholds compared came from (search/calibrated.py): fitted, self-calibrated, prior,
    # or unknown when none applied.
    source: str = UNCALIBRATED

    def to_dict(self) -> dict[str, object]:
        return {"level": self.level, "signal": self.signal, "scorer": self.scorer, "source": self.source,
                "reason": self.reason}


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
    thresholds: Thresholds | KBConfidence | None,
    reranker_model: str | None,
    embedding_model: str | None,
    features: Mapping[str, float] | None = None,
) -> Confidence:
    """The level of one search. `thresholds` is a block (pinakes.toml's, as `fitted`) or a KB's
    sources in order (search/calibrated.py): the first that applies to this search's scorer decides."""
    if isinstance(thresholds, KBConfidence):
        candidates = thresholds.candidates()
        turned_off = thresholds.turned_off
    else:
        candidates = [(thresholds, FITTED)] if thresholds is not None else []
        turned_off = False
    scoring = _Scoring(passage_count, rerank_top, best_cosine, reranker_model, embedding_model, features)
    if turned_off:
        confidence = scoring.turned_off()
    elif not candidates:
        confidence, _ = scoring.assess(None, UNCALIBRATED)
    else:
        confidence, applies = scoring.assess(*candidates[0])
        for block, source in candidates[1:]:
            # pinakes.toml's block is reported even where it does not apply (it asks for a re-fit); a
            # derived block that does not apply gives way to the next source.
            if applies:
                break
            confidence, applies = scoring.assess(block, source)
        if not applies and confidence.source != FITTED:
            confidence = Confidence(UNKNOWN, confidence.signal, confidence.scorer,
                                    "neither this KB's self-calibration nor the shipped prior was fitted for this "
                                    f"search's scorer ({confidence.scorer}); run `pnk eval --self-calibrate`",
                                    source=UNCALIBRATED)
    return replace(confidence, features=features)


@dataclass(frozen=True)
class _Scoring:
    passage_count: int
    rerank_top: float | None
    best_cosine: float | None
    reranker_model: str | None
    embedding_model: str | None
    features: Mapping[str, float] | None

    def turned_off(self) -> Confidence:
        if self.passage_count == 0:
            return Confidence(LOW, None, None, "no passage matched the query", source=UNCALIBRATED)
        return Confidence(UNKNOWN, None, None, '[retrieval.confidence] signal = "none" turns confidence off',
                          source=UNCALIBRATED)

    def assess(self, thresholds: Thresholds | None, source: str) -> tuple[Confidence, bool]:
        """The level under one block, and whether that block applies to this search's scorer."""
        if self.passage_count == 0:
            return Confidence(LOW, None, None, "no passage matched the query", source=source), True
        if signal_of(thresholds) == MODEL and thresholds is not None:
            probability = model_probability(self.features or {}, getattr(thresholds, "features", ()),
                                            getattr(thresholds, "weights", ()), getattr(thresholds, "bias", 0.0))
            if probability is None:
                missing = [name for name in getattr(thresholds, "features", ()) if name not in (self.features or {})]
                return Confidence(UNKNOWN, None, None,
                                  "the confidence model needs the vector search's evidence, and this "
                                  "search has none (keyword-only)" if self.features is None else
                                  f"the confidence model needs {', '.join(missing)}, which this search "
                                  "lacks (the reranker did not score it)", source=UNCALIBRATED), True
            signal, scorer = round(probability, 6), f"model:{self.embedding_model}"
        elif self.rerank_top is not None:
            signal, scorer = self.rerank_top, f"rerank:{self.reranker_model}"
        elif self.best_cosine is not None:
            signal, scorer = self.best_cosine, f"cosine:{self.embedding_model}"
        else:
            return Confidence(
                UNKNOWN, None, None,
                "keyword-only results without rerank carry no calibrated score (BM25 scores are not "
                "comparable across queries)", source=UNCALIBRATED,
            ), True
        if thresholds is None:
            return Confidence(
                UNKNOWN, signal, scorer,
                "no [retrieval.confidence] thresholds in pinakes.toml, no self-calibration and no prior for "
                "this model; fit them with `pnk eval --fit-confidence --write`, or run `pnk eval --self-calibrate`",
                source=UNCALIBRATED,
            ), True
        fitted_for = thresholds.fitted_for or ""
        reranker_model, embedding_model = self.reranker_model, self.embedding_model
        fitted_on_reranker = reranker_model is not None and model_named_in(reranker_model, fitted_for)
        reranked = self.rerank_top is not None
        scorer_model = reranker_model if reranked and signal_of(thresholds) == TOP_SCORE else embedding_model
        scorer_named = scorer_model is None or model_named_in(scorer_model, fitted_for) \
            or (getattr(thresholds, "any_embedding", False) and scorer_model == embedding_model)
        # A fit on reranked passages is no fit for unreranked ones, nor the other way round.
        if not scorer_named or (reranked != fitted_on_reranker and signal_of(thresholds) == MODEL) \
                or (not reranked and fitted_on_reranker):
            return Confidence(
                UNKNOWN, signal, scorer,
                f"[retrieval.confidence] was fitted for {fitted_for!r}, not for this search's scorer "
                f"({scorer}); re-fit with `pnk eval --fit-confidence --write`", source=source,
            ), False
        if signal >= thresholds.high:
            level = HIGH
        elif signal < thresholds.low:
            level = LOW
        else:
            level = MEDIUM
        if thresholds.low == thresholds.high:
            against = f"its one threshold {thresholds.low} (low = high: this fit has no medium band)"
        else:
            against = f"low {thresholds.low} / high {thresholds.high}"
        return Confidence(level, signal, scorer, f"{scorer} {signal:.3f} against {against}", source=source), True
