"""Hubness-corrected cosine on the development corpora, with bench_confidence.py's seeds and halves.

    nice -n 10 python bench/experiments/hubness/csls_corpora.py --corpus cranfield --seeds 5

Each seed's KB is made exactly as bench_confidence.py makes it (evidence of ~40% of the questions
removed, an incremental sync), every question searched through the product's Searcher, and each
search's features get csls_demo.py's beside the product's own. Rows are cached under --work. The
candidates are then compared held-out, paired against the shipped fit and the two-feature model.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path[:0] = [str(HERE), str(REPO / "bench"), str(REPO / "src"), str(REPO)]

import bench_confidence as bench  # noqa: E402
import csls_demo as csls  # noqa: E402  (also sets the cross-encoder script's CANDIDATES)


def crowding_features(searcher: Any, kb: Path) -> Any:
    return csls.Crowding(searcher.embedder(), kb).features


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--corpus", required=True, choices=bench.CORPORA)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--work", type=Path, default=Path("/work/cache/pnk-conf/csls-seeds"))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    runs = {seed: [bench.cosine_signal(r) for r in bench.collect(args.corpus, seed, bench.SHARE, args.work, crowding_features)]
            for seed in range(1, args.seeds + 1)}
    ce = csls.ce
    bench.CANDIDATES = ce.CANDIDATES
    held = bench.evaluate(args.corpus, runs, bench.MAX_FALSE_CONFIDENCE)
    ce.print_held_out(held)
    control = {c.name: ce.paired(runs, c, ce.CONTROL) for c in ce.CANDIDATES
               if c not in (ce.CANDIDATES[0], ce.CANDIDATES[1], ce.CONTROL)}
    for name, line in control.items():
        print(f"held-out {name} vs {ce.CONTROL.name}: {line}")
    if args.json:
        args.json.write_text(json.dumps({"held_out": held, "vs_control": control}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
