"""The keyword-plan sweep on the development corpora: which words of a question the BM25 side
searches (function words, unknown words, words stemming onto function words, weightless words, a
ubiquity cut, an IDF-weighted quorum), BM25 only, on indexes the product built.

    python bench/quality_dev.py                       # both corpora
    python bench/quality_dev.py --corpus cranfield --json out.json

The indexes are bench/bench_keyword.py's: `pnk init`, the corpus's documents copied into docs/, and
the sync API with the template's default model for chunking (only the vectors are skipped: the
keyword side never reads them), cached under --cache. So the chunks, FTS rows and chunk_terms are
exactly a sync's. The tokenizer is the schema's (`porter unicode61 remove_diacritics 2`): a sync
builds no other, so the unstemmed rows of the 2026-11-30 sweep (docs/QUALITY.md) are not re-run here.
The retrievers compared as shipped (BM25, vector, hybrid) are bench/tune_retrieval.py's.

Metrics (pinakes.eval.corpus, as `pnk eval --questions` scores): 100 passages folded to documents in
rank order, nDCG@10 binary on `relevant`, recall@10; the ms column is the mean keyword-stage time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import bench_keyword  # noqa: E402

from pinakes.search import bm25  # noqa: E402

# The first rows build the plan up step by step, each without the steps after it. FTS5's own
# bm25() (k1=None) throughout: the plan, not the scoring, is what this sweep varies.
_FTS5: dict[str, Any] = {"k1": None}
_BEFORE_WEIGHTLESS: dict[str, Any] = {"drop_weightless_terms": False, **_FTS5}
_QUORUM: dict[str, Any] = {"strategy": bm25.KeywordStrategy.QUORUM, "drop_stemmed_function_words": False, **_BEFORE_WEIGHTLESS}
SWEEP = {
    "OR, all words": bm25.KeywordOptions(drop_function_words=False, drop_unknown_terms=False,
                                         drop_stemmed_function_words=False, **_BEFORE_WEIGHTLESS),
    "OR, function words dropped": bm25.KeywordOptions(drop_unknown_terms=False, drop_stemmed_function_words=False,
                                                      **_BEFORE_WEIGHTLESS),
    "OR, function words + df=0 dropped": bm25.KeywordOptions(drop_stemmed_function_words=False,
                                                             **_BEFORE_WEIGHTLESS),
    "OR, + words stemming onto function words dropped": bm25.KeywordOptions(**_BEFORE_WEIGHTLESS),
    "OR, + weightless words (df >= N/2) dropped (default)": bm25.KeywordOptions(**_FTS5),
    "OR, + ubiquity cut 25%": bm25.KeywordOptions(ubiquity_ceiling=0.25, **_FTS5),
    "OR, + ubiquity cut 10%": bm25.KeywordOptions(ubiquity_ceiling=0.10, **_FTS5),
    "IDF quorum 0.5, all words": bm25.KeywordOptions(drop_function_words=False, **_QUORUM),
    "IDF quorum 0.5, function words dropped": bm25.KeywordOptions(**_QUORUM),
    "IDF quorum 0.4, function words dropped": bm25.KeywordOptions(quorum_fraction=0.4, **_QUORUM),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", choices=sorted(bench_keyword.CORPORA), action="append")
    parser.add_argument("--cache", type=Path,
                        default=Path(os.environ.get("TMPDIR", tempfile.gettempdir())) / "pnk-keyword")
    parser.add_argument("--json", type=Path, help="write every row here")
    args = parser.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    print("| corpus | keyword plan | nDCG@10 | recall@10 | ms/query |")
    print("|---|---|---|---|---|")
    for name in args.corpus or sorted(bench_keyword.CORPORA):
        kb, questions, seconds = bench_keyword.build(name, args.cache)
        if seconds is not None:
            print(f"(built {name}: {seconds:.0f} s)", file=sys.stderr)
        for label, options in SWEEP.items():
            rank, close = bench_keyword.product_ranker(kb, options)
            try:
                result = bench_keyword.score(rank, questions)
            finally:
                close()
            row = {"corpus": name, "keyword": label, "ndcg@10": round(bench_keyword.mean(result.ndcg), 4),
                   "recall@10": round(bench_keyword.mean(result.recall10), 4), "ms": round(result.ms, 1)}
            rows.append(row)
            print(f"| {name} ({len(questions)} q) | {label} | {row['ndcg@10']:.4f} | {row['recall@10']:.4f} "
                  f"| {row['ms']:.1f} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "rows": rows}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
