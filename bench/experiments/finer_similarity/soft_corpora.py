"""Soft keyword overlap on the development corpora, with bench_confidence.py's seeds and halves.

    nice -n 10 python bench/experiments/finer_similarity/soft_corpora.py --corpus cranfield --seeds 5

Each seed's KB is made exactly as bench_confidence.py makes it (evidence of ~40% of the questions
removed, an incremental sync), every question searched through the product's Searcher, and each
search's features get soft_demo.py's `soft1` / `soft3` beside the product's own. Rows are cached
under --work (not the harness's seeds directory). The candidates are then compared held-out, paired
against the shipped fit and against the two-feature model.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path[:0] = [str(HERE), str(REPO / "bench"), str(REPO / "src"), str(REPO)]

import soft_demo as soft  # noqa: E402  (also sets the cross-encoder script's CANDIDATES)

WORDS: dict[str, np.ndarray] = {}  # one word-vector cache across seeds (same model)


def soft_features(searcher: Any, kb: Path) -> Any:
    reader = soft.SoftOverlap(searcher.embedder(), kb)
    reader.cache = WORDS
    return reader.features


def main(argv: list[str] | None = None) -> int:
    return soft.ce.corpora_main(argv, (__doc__ or "").split("\n\n")[0], soft_features, Path("/work/cache/pnk-conf/soft-seeds"))


if __name__ == "__main__":
    raise SystemExit(main())
