"""The weakest-aligned query word as a confidence feature on the demo KB (experiment only).

    nice -n 10 python bench/experiments/weakest_concept/weakest_demo.py --kb /tmp/sc-demo/demo-kb \
        --outcomes /tmp/sc-demo/weakest-outcomes.json

Subsection (e) averaged each query word's best match in the passage (a soft keyword share) and the
paraphrases and the no-answer questions overlapped. But an in-domain no-answer question differs from
a paraphrase in one word, not on average: "what does the emergency plan say to do in an
*earthquake*" matches its passage everywhere but in the asked thing, while every word of a
paraphrase ("fabric mittens" -> gloves) has some counterpart. So the aggregate here is the minimum:

  weakest1   min over the query's content words of the word's best cosine with any word of the top
             passage (a word the passage holds counts 1.0); word vectors: the KB's model on the
             word alone, as in (e)
  weakest3   the best weakest1 of the top 3 passages
  weak2_1    the mean of the two weakest words (one odd word less decisive)
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, cast

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path[:0] = [str(HERE.parent / "finer_similarity"), str(HERE.parent / "cross_encoder"), str(REPO / "bench"),
                str(REPO / "src"), str(REPO)]

import bench_confidence as bench  # noqa: E402
import measure_demo as ce  # noqa: E402
import numpy as np  # noqa: E402
from soft_demo import STOP, SoftOverlap, words  # noqa: E402

from pinakes.eval import fitting  # noqa: E402
from pinakes.eval.fitting import L2_PENALTY  # noqa: E402
from pinakes.eval.outcomes import OutcomesFile  # noqa: E402
from pinakes.search.confidence import MODEL  # noqa: E402

if TYPE_CHECKING:
    from pinakes.embed.loader import KBSettings

SHIPPED_SETS = fitting.FEATURE_SETS = fitting.FEATURE_SETS_BEFORE_RELATIONS  # the choice as it shipped before (i)


class Weakest(SoftOverlap):
    def alignments(self, query: list[str], passage: str) -> np.ndarray:
        ps = sorted(set(words(passage)) - STOP) or ["empty"]
        held = set(ps)
        best = (self.vectors(query) @ self.vectors(ps).T).max(axis=1)
        return np.array([1.0 if w in held else float(b) for w, b in zip(query, best, strict=True)])

    def weakest_features(self, query: str, passages: list[str]) -> dict[str, float]:
        q = [w for w in dict.fromkeys(words(query)) if w not in STOP] or words(query)
        aligned = [np.sort(self.alignments(q, p)) for p in passages[:3]]
        weakest = [float(a[0]) for a in aligned]
        two = [float(a[:2].mean()) for a in aligned]
        return {"weakest1": weakest[0], "weakest3": max(weakest), "weak2_1": two[0]}


def weakest_features(kb: Path, manifest: object) -> ce.Features:
    from pinakes.embed.loader import load_for_kb

    # collect_with hands over the KB's manifest untyped; load_for_kb reads it as the settings it is
    return Weakest(load_for_kb(kb, cast("KBSettings", manifest)), kb).weakest_features


C = bench.Candidate
ce.CANDIDATES = (
    C("shipped (feature set chosen per KB)", MODEL, (), L2_PENALTY),
    ce.CANDIDATES[1],
    C("weakest1 alone", MODEL, ("weakest1",), L2_PENALTY),
    C("weakest3 alone", MODEL, ("weakest3",), L2_PENALTY),
    C("weak2_1 alone", MODEL, ("weak2_1",), L2_PENALTY),
    C("csls + keyword_share + weakest1", MODEL, ("csls", "keyword_share", "weakest1"), L2_PENALTY),
    C("csls + keyword_share + weak2_1", MODEL, ("csls", "keyword_share", "weak2_1"), L2_PENALTY),
    C("cosine + keyword_share + weakest1", MODEL, ("cosine", "keyword_share", "weakest1"), L2_PENALTY),
    C("csls + weakest1", MODEL, ("csls", "weakest1"), L2_PENALTY),
    C("csls + keyword_share (shipped demo set)", MODEL, ("csls", "keyword_share"), L2_PENALTY),
)
ce.CONTROL = ce.CANDIDATES[-1]


def collect(kb: Path, out: Path) -> OutcomesFile:
    return ce.collect_with(kb, out, weakest_features)


ce.COLLECT = collect

if __name__ == "__main__":
    raise SystemExit(ce.main(sys.argv[1:]))
