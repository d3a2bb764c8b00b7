"""Sentence-level cosine as a confidence feature on the demo KB (experiment only; nothing in src/).

    nice -n 10 python bench/experiments/finer_similarity/sentence_demo.py --kb /tmp/sc-demo/demo-kb

A chunk's cosine averages every sentence in it; a paraphrase asks about one sentence. Each
search's top passages are split into sentences, each embedded with the KB's own model, and the
best sentence cosine against the query becomes a feature: `sent1` (top passage), `sent3` (top 3),
`sent8` (all returned). Measured with cross_encoder/measure_demo.py's in-sample and held-out code.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, cast

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path[:0] = [str(HERE.parent / "cross_encoder"), str(REPO / "bench"), str(REPO / "src"), str(REPO)]

import bench_confidence as bench  # noqa: E402
import measure_demo as ce  # noqa: E402
import numpy as np  # noqa: E402

from pinakes.eval.fitting import L2_PENALTY  # noqa: E402
from pinakes.eval.outcomes import OutcomesFile  # noqa: E402
from pinakes.search.confidence import MODEL  # noqa: E402

if TYPE_CHECKING:
    from pinakes.manifest import Manifest

SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+|\n+")


def sentences(text: str) -> list[str]:
    parts = [p.strip(" -*#>|\t") for p in SENTENCE_END.split(text)]
    return [p for p in parts if len(p.split()) >= 3] or [text]


def sentence_features(kb: Path, manifest: object) -> ce.Features:
    """`sent1` / `sent3` / `sent8`: the best cosine between the query and one sentence of the top
    passage / the top 3 / every returned passage, each sentence embedded alone with the KB's model."""
    from pinakes.embed.loader import load_for_kb

    embedder = load_for_kb(kb, cast("Manifest", manifest))  # collect_with's manifest: the KB's own

    def features(query: str, passages: list[str]) -> dict[str, float]:
        q = np.asarray(embedder.embed_query(query), dtype=np.float32)
        best = [float(np.max(np.asarray(embedder.embed_documents(sentences(text)), dtype=np.float32) @ q))
                for text in passages]
        return {"sent1": best[0], "sent3": max(best[:3]), "sent8": max(best)}

    return features


ce.CANDIDATES = (
    bench.Candidate("shipped (feature set chosen per KB)", MODEL, (), L2_PENALTY),
    ce.CANDIDATES[1],
    bench.Candidate("sent1 alone", MODEL, ("sent1",), L2_PENALTY),
    bench.Candidate("sent3 alone", MODEL, ("sent3",), L2_PENALTY),
    bench.Candidate("sent8 alone", MODEL, ("sent8",), L2_PENALTY),
    bench.Candidate("sent1 + keyword_share", MODEL, ("sent1", "keyword_share"), L2_PENALTY),
    bench.Candidate("sent3 + keyword_share", MODEL, ("sent3", "keyword_share"), L2_PENALTY),
    bench.Candidate("cosine + keyword_share + sent1", MODEL, ("cosine", "keyword_share", "sent1"), L2_PENALTY),
    bench.Candidate("cosine + keyword_share + sent3", MODEL, ("cosine", "keyword_share", "sent3"), L2_PENALTY),
    bench.Candidate("cosine + keyword_share (the 2-feature model)", MODEL, ("cosine", "keyword_share"), L2_PENALTY),
)
ce.CONTROL = ce.CANDIDATES[-1]


def _collect(kb: Path, out: Path) -> OutcomesFile:
    return ce.collect_with(kb, out, sentence_features)


ce.COLLECT = _collect

if __name__ == "__main__":
    raise SystemExit(ce.main(sys.argv[1:]))
