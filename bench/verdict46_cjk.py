"""Issue #46's CJK bar in one run: the shipped keyword side (the product's default KeywordOptions,
`mode="bm25"`) against plain FTS5 over character bigrams of the same pages (bench_cjk.py's
`bigram_baseline`), on bench_cjk_keyword.py's development set (its KBs, questions and scorer), with
a paired one-sided sign test per set and kind, pooled, and on random halves of the pooled questions.

    python bench/verdict46_cjk.py [--questions 500] [--cache /tmp/pnk-cjk-keyword] [--json out.json]

`--questions N`: at most N questions per set and kind (bench_cjk_keyword's seeded sample); 0: all.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_cjk_keyword as cjk

from pinakes.eval.paired import sign_test

SEEDS = 10


def counts(mine: dict[str, float], other: dict[str, float], keys: list[str]) -> tuple[int, int, float, float]:
    """(questions mine ranks better, worse, one-sided p better, one-sided p worse)."""
    up = sum(1 for key in keys if mine[key] > other[key] + 1e-12)
    down = sum(1 for key in keys if mine[key] < other[key] - 1e-12)
    return up, down, sign_test(up, down), sign_test(down, up)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=500)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "pnk-cjk-keyword")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    shipped: dict[str, float] = {}
    baseline: dict[str, float] = {}
    rows: list[dict[str, Any]] = []
    for name in cjk.SETS:
        kb = cjk.build(name, args.cache)
        for kind, questions in cjk.questions_of(kb).items():
            chosen = cjk.limited(questions, args.questions or None)
            mine = cjk.product(kb, chosen, cjk.SHIPPED)
            plain = cjk.bigram_baseline(kb, chosen)
            keys = sorted(mine)
            rows.append({"set": name, "kind": kind, "n": len(keys), "baseline": statistics.fmean(plain[k] for k in keys),
                         "shipped": statistics.fmean(mine[k] for k in keys), "paired": counts(mine, plain, keys)})
            shipped.update({f"{name}|{kind}|{k}": v for k, v in mine.items()})
            baseline.update({f"{name}|{kind}|{k}": plain[k] for k in keys})
    print("| set | kind | questions | baseline | shipped | better / worse, p better, p worse |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        up, down, pb, pw = row["paired"]
        print(f"| {row['set']} | {row['kind']} | {row['n']} | {row['baseline']:.4f} | {row['shipped']:.4f} | "
              f"+{up}/−{down}, {pb:.3g}, {pw:.3g} |")
    keys = sorted(shipped)
    up, down, pb, pw = counts(shipped, baseline, keys)
    print(f"| pooled | | {len(keys)} | {statistics.fmean(baseline.values()):.4f} | "
          f"{statistics.fmean(shipped.values()):.4f} | +{up}/−{down}, {pb:.3g}, {pw:.3g} |")
    halves: list[dict[str, Any]] = []
    for seed in range(SEEDS):
        order = keys[:]
        random.Random(seed).shuffle(order)
        for half in (order[: len(order) // 2], order[len(order) // 2:]):
            h_up, h_down, h_pb, h_pw = counts(shipped, baseline, half)
            halves.append({"seed": seed, "n": len(half), "shipped": statistics.fmean(shipped[k] for k in half),
                           "baseline": statistics.fmean(baseline[k] for k in half), "up": h_up, "down": h_down,
                           "p_better": h_pb, "p_worse": h_pw})
    above = sum(1 for h in halves if h["shipped"] > h["baseline"])
    print(f"\nRandom halves of the pooled questions ({SEEDS} seeds × 2): shipped above the baseline in {above}/"
          f"{len(halves)}; significantly better in {sum(1 for h in halves if h['p_better'] < 0.05)}, "
          f"significantly worse in {sum(1 for h in halves if h['p_worse'] < 0.05)}; p_better "
          + ", ".join(f"{h['p_better']:.3g}" for h in halves))
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "halves": halves}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
