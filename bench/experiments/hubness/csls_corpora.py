"""Hubness-corrected cosine on the development corpora, with bench_confidence.py's seeds and halves.

    nice -n 10 python bench/experiments/hubness/csls_corpora.py --corpus cranfield --seeds 5

Each seed's KB is made exactly as bench_confidence.py makes it (evidence of ~40% of the questions
removed, an incremental sync), every question searched through the product's Searcher, and each
search's features get csls_demo.py's beside the product's own. Rows are cached under --work. The
candidates are then compared held-out, paired against the shipped fit and the two-feature model.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path[:0] = [str(HERE), str(REPO / "bench"), str(REPO / "src"), str(REPO)]

import csls_demo as csls  # noqa: E402  (also sets the cross-encoder script's CANDIDATES)


def crowding_features(searcher: Any, kb: Path) -> Any:
    return csls.Crowding(searcher.embedder(), kb).features


def main(argv: list[str] | None = None) -> int:
    return csls.ce.corpora_main(argv, (__doc__ or "").split("\n\n")[0], crowding_features, Path("/work/cache/pnk-conf/csls-seeds"))


if __name__ == "__main__":
    raise SystemExit(main())
