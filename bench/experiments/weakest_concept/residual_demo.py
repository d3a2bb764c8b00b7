"""What the query means beyond the words its passage holds, as a confidence feature (experiment only).

    nice -n 10 python bench/experiments/weakest_concept/residual_demo.py --kb /tmp/sc-demo/demo-kb \
        --outcomes /tmp/sc-demo/residual-outcomes.json

The demo's no-answer questions reach their passages through a named thing the KB holds ("Wharf
Wing", "Sessions House", "the emergency plan") while the asked thing (electricity, parking,
earthquakes) is nowhere; a paraphrase reaches its passage by meaning, with few shared words. So the
query is embedded again with the content words the top passage holds taken out, and compared with
that passage:

  residual1      cos(residual query, top passage); the full query's cosine when the passage holds
                 every content word (nothing left to ask) or none (nothing taken out)
  residual_drop  the full query's cosine minus residual1: how much of the match the shared words made
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
from soft_demo import STOP, WORD, words  # noqa: E402

from pinakes.eval import fitting  # noqa: E402
from pinakes.eval.fitting import L2_PENALTY  # noqa: E402
from pinakes.eval.outcomes import OutcomesFile  # noqa: E402
from pinakes.search.confidence import MODEL  # noqa: E402

if TYPE_CHECKING:
    from pinakes.embed import Embedder
    from pinakes.embed.loader import KBSettings

fitting.FEATURE_SETS = fitting.FEATURE_SETS_BEFORE_RELATIONS  # the choice as it shipped before (i)


class Residual:
    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.embedder.embed_documents(texts), dtype=np.float32)

    def features(self, query: str, passages: list[str]) -> dict[str, float]:
        held = set(words(passages[0])) - STOP
        content = [w for w in words(query) if w not in STOP]
        shared = [w for w in content if w in held]
        residual = WORD.sub(lambda m: "" if m.group(0).lower() in held and m.group(0).lower() not in STOP else m.group(0),
                            query)
        q, p = self.embed([query, passages[0]])
        full = float(q @ p)
        if not shared or len(shared) == len(content):
            return {"residual1": full, "residual_drop": 0.0}
        r = self.embed([" ".join(residual.split())])[0]
        return {"residual1": float(r @ p), "residual_drop": full - float(r @ p)}


def residual_features(kb: Path, manifest: object) -> ce.Features:
    from pinakes.embed.loader import load_for_kb

    # collect_with hands over the KB's manifest untyped; load_for_kb reads it as the settings it is
    return Residual(load_for_kb(kb, cast("KBSettings", manifest))).features


C = bench.Candidate
ce.CANDIDATES = (
    C("shipped (feature set chosen per KB)", MODEL, (), L2_PENALTY),
    ce.CANDIDATES[1],
    C("residual1 alone", MODEL, ("residual1",), L2_PENALTY),
    C("csls + keyword_share + residual1", MODEL, ("csls", "keyword_share", "residual1"), L2_PENALTY),
    C("csls + keyword_share + residual_drop", MODEL, ("csls", "keyword_share", "residual_drop"), L2_PENALTY),
    C("cosine + keyword_share + residual1", MODEL, ("cosine", "keyword_share", "residual1"), L2_PENALTY),
    C("keyword_share + residual1", MODEL, ("keyword_share", "residual1"), L2_PENALTY),
    C("csls + keyword_share (shipped demo set)", MODEL, ("csls", "keyword_share"), L2_PENALTY),
)
ce.CONTROL = ce.CANDIDATES[-1]


def collect(kb: Path, out: Path) -> OutcomesFile:
    return ce.collect_with(kb, out, residual_features)


ce.COLLECT = collect

if __name__ == "__main__":
    raise SystemExit(ce.main(sys.argv[1:]))
