"""Make the shipped confidence prior (issue #41): src/pinakes/data/confidence/prior.json, and measure
it leave one corpus out.

    python bench/experiments/self_calibration/collect.py build
    python bench/experiments/self_calibration/collect.py rows --variants lead6   # every corpus's rows
    python bench/make_confidence_prior.py --measure     # the leave-one-corpus-out table, nothing written
    python bench/make_confidence_prior.py               # writes prior.json
    python bench/make_confidence_prior.py --check       # fails if the shipped prior is not what this makes

How it is made:
 1. Each development corpus (the demo KB's golden set; cranfield, pydocs, pymodules and tldr's
    800-page sample with the evidence of ~40% of their real questions removed per seed, as
    bench/bench_confidence.py does) has every real question searched once through the product's
    Searcher on that KB copy (collect.py; its rows are cached under /work/cache/confidence/rows).
 2. A logistic model over FEATURES (eval/fitting's penalty, each class weighing half) is fitted on
    every corpus's rows, each corpus weighing the same. FEATURES are shares of the query's
    IDF-weighted keywords the top passages hold (outright, or through WordNet's relatives): numbers
    on the same scale in every KB and under every embedding model, so the prior applies to any
    model. Adding the cosine lost leave one corpus out (docs/QUALITY.md).
 3. `low` is the strictest of the corpora's own thresholds, each keeping that corpus's no-answer
    questions within 0.10 for a new question (the conformal rule of a golden-set fit): a KB nobody
    fitted may be any of them. `high` is the same point: the same rule at 0.05 left every answerable
    question below it on four of the five corpora (measured), so the prior has no band it could
    vouch for, and says so (a search under it is high or low, never medium).

It is used only where a KB has neither a golden-set fit in pinakes.toml nor a self-calibration
(search/calibrated.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "src"), str(REPO / "bench" / "experiments" / "self_calibration")]

import analyse  # noqa: E402

from pinakes.calibration.fitting import (  # noqa: E402
    L2_PENALTY,
    MAX_FALSE_CONFIDENCE,
    FitRow,
    SignalModel,
    fit_model,
    fit_thresholds,
)
from pinakes.search.calibrated import ANY_EMBEDDING, PRIOR_FORMAT, PRIOR_PATH  # noqa: E402

CORPORA = ("cranfield", "pydocs", "pymodules", "tldr", "demo")
FEATURES = ("keyword_share", "related_share")
VARIANT = "lead6"  # the rows' cache names; the real rows are the same under every variant
HIGH_CEILING = 0.05  # measured for the record (--measure prints it); not shipped
BALANCE = 2000  # each corpus's rows repeated up to about this many, so each corpus weighs the same


def corpus_rows() -> dict[str, list[FitRow]]:
    out: dict[str, list[FitRow]] = {}
    for corpus in CORPORA:
        seeds = analyse.corpus_rows(corpus, VARIANT)
        if not seeds:
            raise SystemExit(f"no rows for {corpus}: run collect.py rows first")
        out[corpus] = [row for rows, _ in seeds.values() for row in rows]
    return out


def made_from(rows: dict[str, list[FitRow]], features: tuple[str, ...] = FEATURES) -> tuple[SignalModel, float, float]:
    pooled = [row for corpus_rows in rows.values() for row in corpus_rows * max(1, round(BALANCE / len(corpus_rows)))]
    model = fit_model(pooled, features, L2_PENALTY)
    low = max(fit_thresholds(corpus_rows, "prior", model, max_false_confidence=MAX_FALSE_CONFIDENCE).low
              for corpus_rows in rows.values())
    high = max(fit_thresholds(corpus_rows, "prior", model, max_false_confidence=HIGH_CEILING).low
               for corpus_rows in rows.values())
    return model, low, max(low, high)


def measure(rows: dict[str, list[FitRow]], features: tuple[str, ...] = FEATURES) -> dict[str, object]:
    """Each corpus scored by the prior made from the other four (seeds summed)."""
    report: dict[str, object] = {}
    for corpus in rows:
        model, low, high = made_from({other: r for other, r in rows.items() if other != corpus}, features)
        template = fit_thresholds(rows[corpus], "prior", model)
        tally, at_high = analyse.Tally(), analyse.Tally()
        tally.add(replace(template, low=low, high=high), rows[corpus])
        at_high.add(replace(template, low=high, high=high), rows[corpus])
        print(f"{corpus:10} low {low:.4f}: {tally.cells()}   (high {high:.4f}: {at_high.cells()})")
        report[corpus] = {"low": tally.to_dict(), "high": at_high.to_dict()}
    return report


def build() -> dict[str, object]:
    rows = corpus_rows()
    model, low, _high = made_from(rows)
    return {
        "format": PRIOR_FORMAT,
        "made_by": "bench/make_confidence_prior.py",
        "corpora": {corpus: {"answerable": sum(1 for r in rs if r.kind != "no-answer"),
                             "no_answer": sum(1 for r in rs if r.kind == "no-answer")} for corpus, rs in rows.items()},
        "applies_to": ANY_EMBEDDING,
        "confidence": {"signal": "model", "features": list(model.features), "weights": list(model.weights),
                       "bias": model.bias, "high": round(low, 4), "low": round(low, 4),
                       "fitted_for": "any embedding model (evidence model over keyword shares, rerank off), "
                                     f"development prior: {', '.join(CORPORA)} (bench/make_confidence_prior.py)"},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if the shipped prior is not what this makes")
    parser.add_argument("--measure", action="store_true", help="leave one corpus out; writes nothing")
    parser.add_argument("--features", default=",".join(FEATURES))
    parser.add_argument("--json", type=Path, help="with --measure: the table as JSON")
    args = parser.parse_args()
    if args.measure:
        report = measure(corpus_rows(), tuple(args.features.split(",")))
        if args.json:
            args.json.write_text(json.dumps(report, indent=2))
        return 0
    made = build()
    if args.check:
        same = json.loads(PRIOR_PATH.read_text(encoding="utf-8")) == made
        print("the shipped prior is what this makes" if same else "the shipped prior differs from what this makes")
        return 0 if same else 1
    PRIOR_PATH.parent.mkdir(parents=True, exist_ok=True)
    PRIOR_PATH.write_text(json.dumps(made, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {PRIOR_PATH}: {made['confidence']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
