"""The reader feature on the demo KB's golden set (never trained on), against the shipped model.

    nice -n 10 python bench/experiments/cross_encoder/measure_demo.py --kb /tmp/ce-demo/demo-kb \
        --json /work/cache/ce-minilm/demo-report.json

--kb is a COPY of tests/demo-kb synced with `pnk -C <copy> sync` (the repo's own copy is never
written). Every golden question runs through the KB's own Searcher exactly as `pnk eval` does
(pinakes.eval.runner.answer), with one addition: each search's evidence features get
`reader` (the cross-encoder's sigmoid score of the question and the top passage) and `reader3`
(the maximum over the top 3 passages); a multi-hop question gets them per hop, like every feature.
Then, with the product's fit code (pinakes.eval.fitting) and bench/bench_confidence.py's halves:

  - in-sample (what the demo gate checks): each candidate fitted on all 85 questions and scored on
    them, plus the fit's own 5-fold cross-fitted forecast;
  - held-out halves over --seeds seeds (stratified by class, both ways round), paired fold by fold
    against the shipped fit (the feature set chosen per KB), with the sign test; held-out AUC.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path[:0] = [str(HERE), str(REPO / "bench"), str(REPO / "src"), str(REPO)]

import bench_confidence as bench  # noqa: E402
from reader import DTYPE, MODEL_DIR, Reader  # noqa: E402

from pinakes.eval import fitting  # noqa: E402
from pinakes.eval.fitting import L2_PENALTY, ConfidenceFit, fit_confidence, fit_thresholds  # noqa: E402
from pinakes.eval.outcomes import Outcome, OutcomesFile, read_outcomes, write_outcomes  # noqa: E402
from pinakes.search.confidence import MODEL, TOP_SCORE  # noqa: E402

if TYPE_CHECKING:
    from pinakes.search.core import Searcher

# The experiments of docs/QUALITY.md (d)-(f) compare against the fit as it shipped before (f), which
# chose between two feature sets; (f) added two more. Their recorded numbers are reproduced with it.
FIT_BEFORE_F = (("cosine", "keyword_share"), fitting.MODEL_FEATURES)
fitting.FEATURE_SETS = FIT_BEFORE_F

CANDIDATES = (
    bench.Candidate("shipped (feature set chosen per KB)", MODEL, (), L2_PENALTY),
    bench.Candidate("best cosine (old)", TOP_SCORE),
    bench.Candidate("reader (top 1) alone", MODEL, ("reader",), L2_PENALTY),
    bench.Candidate("reader3 (max top 3) alone", MODEL, ("reader3",), L2_PENALTY),
    bench.Candidate("cosine + keyword_share + reader", MODEL, ("cosine", "keyword_share", "reader"), L2_PENALTY),
    bench.Candidate("cosine + keyword_share + reader3", MODEL, ("cosine", "keyword_share", "reader3"), L2_PENALTY),
    bench.Candidate("5 features + reader", MODEL, (*bench.FIVE, "reader"), L2_PENALTY),
    bench.Candidate("cosine + keyword_share (the 2-feature model)", MODEL, ("cosine", "keyword_share"), L2_PENALTY),
)


Features = Callable[[str, list[str]], dict[str, float]]  # (query, its passages' texts) -> extra features


class FeatureSearcher:
    """The KB's Searcher, whose results' evidence features also carry `features` of each search
    (the experiments' extra signals; every search that has features and passages gets them)."""

    def __init__(self, searcher: object, features: Features) -> None:
        self._searcher = searcher
        self._features = features

    def search(self, query: str, **kwargs: object) -> object:
        result = cast(Any, self._searcher).search(query, **kwargs)  # the KB's Searcher, as `pnk eval` calls it
        confidence = result.confidence
        if confidence.features is None or not result.passages:
            return result
        extra = self._features(query, [p.text for p in result.passages])
        return replace(result, confidence=replace(confidence, features={**confidence.features, **extra}))


def collect_with(kb: Path, out: Path, make_features: Callable[[Path, object], Features]) -> OutcomesFile:
    """The golden set through `pnk eval`'s own path (`pinakes.eval.runner.answer`), each search's
    features plus `make_features(kb, manifest)`'s; written to `out`."""
    from pinakes.eval.golden import load_golden_set
    from pinakes.eval.runner import answer, open_searcher, run_header
    from pinakes.kb import KBPaths
    from pinakes.manifest.loading import load_manifest

    manifest = load_manifest(KBPaths(kb).manifest)
    golden = load_golden_set(kb / "eval" / "questions.yaml", kb, sources=manifest.sources)
    features = make_features(kb, manifest)
    with open_searcher(kb, manifest) as searcher:
        reading = FeatureSearcher(searcher, features)
        # FeatureSearcher has the Searcher surface `answer` uses (duck-typed, not a subclass)
        rows = [answer(cast("Searcher", reading), question) for question in golden.questions]
    outcomes = OutcomesFile(run_header(kb, manifest, golden), tuple(rows))
    write_outcomes(out, outcomes)
    return outcomes


def reader_features(_kb: Path, _manifest: object) -> Features:
    """`reader`: the cross-encoder's score of the top passage; `reader3`: the best of the top 3."""
    reader = Reader(MODEL_DIR, threads=2, dtype=DTYPE)

    def features(query: str, passages: list[str]) -> dict[str, float]:
        scores = reader.scores(query, passages[:3])
        return {"reader": scores[0], "reader3": max(scores)}

    return features


def collect(kb: Path, out: Path) -> OutcomesFile:
    return collect_with(kb, out, reader_features)


def print_held_out(held: dict[str, object]) -> None:
    cell = bench._cell  # pyright: ignore[reportPrivateUsage]  # bench_confidence's cell format, shared
    for name, entry in held.items():
        assert isinstance(entry, dict)
        entry = cast("dict[str, Any]", entry)
        versus = entry.get("vs_old")
        print(f"held-out {name:48} FA {cell(entry['false_abstain'])} FC {cell(entry['false_confidence'])} "
              f"AUC {entry['auc_mean']} bal.err {entry['balanced_error_mean']} "
              + (f"vs shipped {versus['better_folds']}/{versus['worse_folds']} p={versus['sign_test_p']}" if versus else ""))


def in_sample(rows: list[Outcome]) -> dict[str, dict[str, object]]:
    report: dict[str, dict[str, object]] = {}
    for candidate in CANDIDATES:
        if candidate.signal == TOP_SCORE:
            fit = fit_thresholds([bench.cosine_signal(r) for r in rows], candidate.name)
        else:
            fit = fit_confidence(rows, candidate.name, features=candidate.features or None, penalty=candidate.penalty)
        fa, fc = fit.false_abstain, fit.false_confidence
        scored = [bench.cosine_signal(r) for r in rows] if candidate.signal == TOP_SCORE else rows
        entry: dict[str, object] = {"false_abstain": f"{int(fa.numerator)}/{fa.denominator}",
                 "false_confidence": f"{int(fc.numerator)}/{fc.denominator}",
                 "auc_in_sample": round(bench.auc(scored, fit), 4),
                 "model": None if fit.model is None else {"features": fit.model.features,
                                                          "weights": fit.model.weights, "bias": fit.model.bias},
                 "low": fit.low, "high": fit.high,
                 "by_class_false_abstain": by_class(fit, scored)}
        if fit.cross_validated:
            cfa, cfc = fit.cross_validated
            entry["cross_fitted"] = f"{int(cfa.numerator)}/{cfa.denominator} at {int(cfc.numerator)}/{cfc.denominator}"
        report[candidate.name] = entry
    return report


def paired(runs: dict[int, list[Outcome]], new: bench.Candidate, old: bench.Candidate) -> str:
    """`new` against `old` fold by fold (bench_confidence.py's halves, both ways round): folds where
    the held-out balanced error fell / rose, and the one-sided sign test."""
    from pinakes.eval.fitting import FitError, score_fit
    from pinakes.eval.paired import sign_test

    better = worse = 0
    for seed, rows in sorted(runs.items()):
        first, second = bench.halves(rows, seed)
        for fit_on, score_on in ((first, second), (second, first)):
            errors: list[float] = []
            for candidate in (new, old):
                try:
                    fa, fc = score_fit(bench.fit_candidate(candidate, fit_on, bench.MAX_FALSE_CONFIDENCE), score_on)
                except FitError:
                    break
                errors.append((fa.numerator / fa.denominator + fc.numerator / fc.denominator) / 2)
            if len(errors) == 2:
                better += errors[0] < errors[1]
                worse += errors[0] > errors[1]
    return f"{better}/{worse} folds, p={sign_test(better, worse):.4f}"


def corpora_main(argv: list[str] | None, description: str, extra_features: bench.ExtraFeatures,
                 default_work: Path) -> int:
    """The experiments' run on one development corpus: bench_confidence.py's seeds (evidence of ~40%
    of the questions removed, an incremental sync), each search's features plus `extra_features`',
    rows cached under --work; CANDIDATES compared held-out, paired against the shipped fit and CONTROL."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--corpus", required=True, choices=bench.CORPORA)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--work", type=Path, default=default_work)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    runs = {seed: [bench.cosine_signal(r)
                   for r in bench.collect(args.corpus, seed, bench.SHARE, args.work, extra_features)]
            for seed in range(1, args.seeds + 1)}
    bench.CANDIDATES = CANDIDATES
    held = bench.evaluate(args.corpus, runs, bench.MAX_FALSE_CONFIDENCE)
    print_held_out(held)
    control = {c.name: paired(runs, c, CONTROL) for c in CANDIDATES if c not in (CANDIDATES[0], CANDIDATES[1], CONTROL)}
    for name, line in control.items():
        print(f"held-out {name} vs {CONTROL.name}: {line}")
    if args.json:
        args.json.write_text(json.dumps({"held_out": held, "vs_control": control}, indent=2, default=str))
    return 0


CONTROL = CANDIDATES[-1]  # the same model without the reader
COLLECT = collect  # what main() searches with (the other experiments set their own)


def by_class(fit: ConfidenceFit, rows: list[Outcome]) -> dict[str, str]:
    out: dict[str, str] = {}
    for kind in sorted({r.kind for r in rows if r.kind != "no-answer"}):
        group = [r for r in rows if r.kind == kind]
        low = sum(1 for r in group if (s := fit.row_signal(r)) is None or s < fit.low)
        out[kind] = f"{low}/{len(group)}"
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--kb", type=Path, required=True)
    parser.add_argument("--outcomes", type=Path, default=Path("/work/cache/ce-minilm/demo-outcomes.json"))
    parser.add_argument("--reuse", action="store_true", help="re-analyse --outcomes without searching again")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    outcomes = read_outcomes(args.outcomes) if args.reuse else COLLECT(args.kb, args.outcomes)
    rows = list(outcomes.rows)
    shipped = read_outcomes(args.kb / "eval" / "outcomes.json").rows
    same = sum(1 for a, b in zip(rows, shipped, strict=False) if a.id == b.id and a.hit == b.hit and a.confidence == b.confidence)
    print(f"{len(rows)} rows; {same}/{len(shipped)} agree with the KB's committed outcomes on hit and confidence level")
    inside = in_sample(rows)
    for name, entry in inside.items():
        print(f"in-sample {name:48} FA {entry['false_abstain']:>6} FC {entry['false_confidence']:>5} "
              f"AUC {entry['auc_in_sample']} cross-fitted {entry.get('cross_fitted')} {entry['by_class_false_abstain']}")
    bench.CANDIDATES = CANDIDATES  # the paired comparison is against CANDIDATES[0], the shipped fit
    cosine_rows = [bench.cosine_signal(r) for r in rows]
    held = bench.evaluate("demo", {seed: cosine_rows for seed in range(1, args.seeds + 1)}, bench.MAX_FALSE_CONFIDENCE)
    print_held_out(held)
    against_control = {c.name: paired({seed: cosine_rows for seed in range(1, args.seeds + 1)}, c, CONTROL)
                       for c in CANDIDATES if c not in (CANDIDATES[0], CANDIDATES[1], CONTROL)}
    for name, line in against_control.items():
        print(f"held-out {name} vs {CONTROL.name}: {line}")
    if args.json:
        args.json.write_text(json.dumps({"in_sample": inside, "held_out": held, "vs_control": against_control}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
