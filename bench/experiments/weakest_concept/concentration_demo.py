"""Where a search's passages come from, as a confidence feature on the demo KB (experiment only).

    nice -n 10 python bench/experiments/weakest_concept/concentration_demo.py --kb /tmp/sc-demo/demo-kb \
        --outcomes /tmp/sc-demo/concentration-outcomes.json

An answerable question has a document that is about it; an in-domain question the KB cannot answer
lands on neighbours, one passage from each. Features of the returned passages (hybrid, final 8):

  doc_share      the share of the passages from the top passage's document
  doc_spread     the number of distinct documents among them, over their count
  doc_share3     the share of the top 3 from the top passage's document
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path[:0] = [str(HERE.parent / "cross_encoder"), str(REPO / "bench"), str(REPO / "src"), str(REPO)]

import bench_confidence as bench  # noqa: E402
import measure_demo as ce  # noqa: E402

from pinakes.eval import fitting  # noqa: E402
from pinakes.eval.fitting import L2_PENALTY  # noqa: E402
from pinakes.eval.outcomes import OutcomesFile  # noqa: E402
from pinakes.search.confidence import MODEL  # noqa: E402
from pinakes.search.results import Passage, SearchResult  # noqa: E402

fitting.FEATURE_SETS = fitting.FEATURE_SETS_BEFORE_RELATIONS  # the choice as it shipped before (i)


def concentration(passages: list[Passage]) -> dict[str, float]:
    docs = [passage.doc_id for passage in passages]
    top = docs[0]
    return {"doc_share": docs.count(top) / len(docs), "doc_spread": len(set(docs)) / len(docs),
            "doc_share3": docs[:3].count(top) / len(docs[:3])}


class PassageSearcher(ce.FeatureSearcher):
    def search(self, query: str, **kwargs: object) -> object:
        searcher = cast(Any, self._searcher)  # the KB's Searcher, held as object by the base
        result = cast(SearchResult, searcher.search(query, **kwargs))
        confidence = result.confidence
        if confidence.features is None or not result.passages:
            return result
        extra = concentration(list(result.passages))
        return replace(result, confidence=replace(confidence, features={**confidence.features, **extra}))


ce.FeatureSearcher = PassageSearcher

C = bench.Candidate
ce.CANDIDATES = (
    C("shipped (feature set chosen per KB)", MODEL, (), L2_PENALTY),
    ce.CANDIDATES[1],
    C("doc_share alone", MODEL, ("doc_share",), L2_PENALTY),
    C("doc_spread alone", MODEL, ("doc_spread",), L2_PENALTY),
    C("csls + keyword_share + doc_share", MODEL, ("csls", "keyword_share", "doc_share"), L2_PENALTY),
    C("csls + keyword_share + doc_spread", MODEL, ("csls", "keyword_share", "doc_spread"), L2_PENALTY),
    C("csls + keyword_share + doc_share3", MODEL, ("csls", "keyword_share", "doc_share3"), L2_PENALTY),
    C("csls + keyword_share (shipped demo set)", MODEL, ("csls", "keyword_share"), L2_PENALTY),
)
ce.CONTROL = ce.CANDIDATES[-1]


def collect(kb: Path, out: Path) -> OutcomesFile:
    return ce.collect_with(kb, out, lambda _kb, _manifest: lambda _q, _p: {})


ce.COLLECT = collect

if __name__ == "__main__":
    raise SystemExit(ce.main(sys.argv[1:]))
