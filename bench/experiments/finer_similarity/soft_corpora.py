"""Soft keyword overlap on the development corpora, with bench_confidence.py's seeds and halves.

    nice -n 10 python bench/experiments/finer_similarity/soft_corpora.py --corpus cranfield --seeds 5

Each seed's KB is made exactly as bench_confidence.py makes it (evidence of ~40% of the questions
removed, an incremental sync), every question searched through the product's Searcher, and each
search's features get soft_demo.py's `soft1` / `soft3` beside the product's own. Rows are cached
under --work (not the harness's seeds directory). The candidates are then compared held-out, paired
against the shipped fit and against the two-feature model.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path[:0] = [str(HERE), str(REPO / "bench"), str(REPO / "src"), str(REPO)]

import bench_confidence as bench  # noqa: E402
import soft_demo as soft  # noqa: E402  (also sets the cross-encoder script's CANDIDATES)
import tune_retrieval  # noqa: E402

from pinakes.eval.outcomes import Outcome  # noqa: E402

WORDS: dict[str, object] = {}  # one word-vector cache across seeds (same model)


def outcome_rows(kb: Path, corpus: str, evidence: dict[str, set[str]], no_answer: set[str]) -> list[Outcome]:
    from pinakes.eval.runner import first_relevant_rank
    from pinakes.search.core import Searcher

    build = tune_retrieval.build_corpus(corpus, bench.CACHE, quiet=True)
    rows = []
    with Searcher.for_kb(kb, offline=True) as searcher:
        reader = soft.SoftOverlap(searcher.embedder(), kb)  # type: ignore[attr-defined]
        reader.cache = WORDS  # type: ignore[assignment]
        for question in build.questions:
            if question.id not in evidence:
                continue
            result = searcher.search(question.query, mode="hybrid")
            confidence = result.confidence
            features = dict(confidence.features) if confidence.features is not None else None
            if features is not None and result.passages:
                features.update(reader.features(question.query, [p.text for p in result.passages]))
            if question.id in no_answer:
                rows.append(Outcome(question.id, "no-answer", None, None, confidence.level, confidence.signal,
                                    features=features))
                continue
            rank = first_relevant_rank(result.passages, sorted(evidence[question.id]))
            rows.append(Outcome(question.id, "simple-lookup", rank is not None, rank, confidence.level,
                                confidence.signal, 0, len(result.passages), features=features))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--corpus", required=True, choices=bench.CORPORA)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--work", type=Path, default=Path("/work/cache/pnk-conf/soft-seeds"))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    bench.outcome_rows = outcome_rows
    runs = {seed: [bench.cosine_signal(r) for r in bench.collect(args.corpus, seed, bench.SHARE, args.work)]
            for seed in range(1, args.seeds + 1)}
    bench.CANDIDATES = soft.ce.CANDIDATES
    held = bench.evaluate(args.corpus, runs, bench.MAX_FALSE_CONFIDENCE)
    for name, entry in held.items():
        assert isinstance(entry, dict)
        versus = entry.get("vs_old")
        print(f"held-out {name:48} FA {bench._cell(entry['false_abstain'])} FC {bench._cell(entry['false_confidence'])} "
              f"AUC {entry['auc_mean']} bal.err {entry['balanced_error_mean']} "
              + (f"vs shipped {versus['better_folds']}/{versus['worse_folds']} p={versus['sign_test_p']}" if versus else ""))
    control = {c.name: soft.ce.paired(runs, c, soft.ce.CONTROL) for c in soft.ce.CANDIDATES
               if c not in (soft.ce.CANDIDATES[0], soft.ce.CANDIDATES[1], soft.ce.CONTROL)}
    for name, line in control.items():
        print(f"held-out {name} vs {soft.ce.CONTROL.name}: {line}")
    if args.json:
        args.json.write_text(json.dumps({"held_out": held, "vs_control": control}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
