"""Keyword share with WordNet's relations on the development corpora, with bench_confidence.py's seeds and halves.

    WORDNET_DIR=... nice -n 10 python bench/experiments/lexical_relations/wordnet_corpora.py --corpus cranfield --seeds 5

Each seed's KB is made exactly as bench_confidence.py makes it (evidence of ~40% of the questions
removed, an incremental sync), every question searched through the product's Searcher, and each
search's features get wordnet_demo.py's beside the product's own. Rows are cached under --work.
The candidates are then compared held-out, paired against the shipped fit and `csls + keyword_share`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path[:0] = [str(HERE), str(REPO / "bench"), str(REPO / "src"), str(REPO)]

import wordnet_demo as wd  # noqa: E402  (also sets the cross-encoder script's CANDIDATES)

WORDNET: list[wd.WordNet] = []  # read once across seeds


def wordnet_features(_searcher: Any, kb: Path) -> Any:
    if not WORDNET:
        WORDNET.append(wd.WordNet(Path(os.environ["WORDNET_DIR"])))
    return wd.RelatedShare(kb, WORDNET[0]).features


def main(argv: list[str] | None = None) -> int:
    return wd.ce.corpora_main(argv, (__doc__ or "").split("\n\n")[0], wordnet_features, Path("/work/cache/pnk-conf/wordnet-seeds"))


if __name__ == "__main__":
    raise SystemExit(main())
