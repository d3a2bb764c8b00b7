"""Hubness-corrected cosine as a confidence feature on the demo KB (experiment only; nothing in src/).

    nice -n 10 python bench/experiments/hubness/csls_demo.py --kb /tmp/sc-demo/demo-kb \
        --outcomes /tmp/sc-demo/csls-outcomes.json

The best cosine cannot tell "this passage answers the question" from "this passage is near every
question about this KB": some chunks are hubs, close to much of the KB, and an in-domain question
whose answer is missing still lands on one. Cross-domain similarity local scaling (CSLS, Lample et
al. 2018, word translation) corrects a cosine by how crowded both ends are:

    csls = 2 cos(q, d) - r_q - r_d

r_q: the mean cosine of the query with its k nearest chunks; r_d: the mean cosine of the top
passage d with its own k nearest other chunks (one matrix-vector product over the KB: ~0.5 ms at
10k chunks). Features (top passage, k = 10): `csls`, `doc_crowding` (r_d), `cos_over_hub`
(cos - r_d), `query_crowding` (r_q), and `centroid_gap` (cos(q, d) - cos(q, the KB's mean chunk));
`csls5` / `csls20` with k = 5 / 20, `csls_top3` the best CSLS of the top three passages;
`doc_crowding_cand` / `csls_cand` with r_d taken among the vector retriever's 50 candidates only
(no pass over the KB).
Measured with cross_encoder/measure_demo.py's in-sample and held-out code.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path[:0] = [str(HERE.parent / "cross_encoder"), str(REPO / "bench"), str(REPO / "src"), str(REPO)]

import bench_confidence as bench  # noqa: E402
import measure_demo as ce  # noqa: E402
import numpy as np  # noqa: E402

from pinakes.eval import fitting  # noqa: E402
from pinakes.eval.fitting import L2_PENALTY  # noqa: E402
from pinakes.eval.outcomes import OutcomesFile  # noqa: E402
from pinakes.search.confidence import MODEL  # noqa: E402
from pinakes.search.vectors import load_matrix  # noqa: E402

if TYPE_CHECKING:
    from pinakes.embed.base import Embedder
    from pinakes.embed.loader import KBSettings

K = 10
KS = (5, 10, 20)  # neighbourhood sizes measured beside the default
CANDIDATES = 50  # the vector retriever's candidates per search (the template's width)


class Crowding:
    """The KB's chunk vectors (as search loads them) and the query embedder: CSLS and its parts."""

    def __init__(self, embedder: Embedder, kb: Path) -> None:
        self.embedder = embedder
        conn = sqlite3.connect(f"file:{kb / '.pinakes' / 'index.db'}?mode=ro", uri=True)
        self.matrix = load_matrix(conn, None)
        row_of = {int(chunk): row for row, chunk in enumerate(self.matrix.chunk_ids)}
        self.row_by_text: dict[str, int] = {}
        for chunk_id, text in conn.execute("SELECT id, text FROM chunks"):
            if chunk_id in row_of:
                self.row_by_text.setdefault(text, row_of[chunk_id])
        mean = self.matrix.vectors.mean(axis=0)
        self.centroid = mean / (np.linalg.norm(mean) or 1.0)
        self.missed = 0

    def crowding(self, vector: np.ndarray, skip: int | None = None) -> dict[int, float]:
        """The mean cosine of `vector` with its k nearest rows (`skip`: its own), for each k in KS."""
        scores = self.matrix.vectors @ vector
        if skip is not None:
            scores[skip] = -np.inf
        top = -np.sort(np.partition(-scores, max(KS) - 1)[: max(KS)])
        return {k: float(top[:k].mean()) for k in KS}

    def row_of(self, text: str, q: np.ndarray) -> int:
        row = self.row_by_text.get(text)
        if row is None:  # the cited text is not a stored chunk text: take the query's nearest row
            self.missed += 1
            row = int(np.argmax(self.matrix.vectors @ q))
        return row

    def candidate_crowding(self, q: np.ndarray, row: int) -> float:
        """r_d estimated from the vector retriever's own candidates (q's CANDIDATES nearest rows):
        the mean of d's K best cosines among them, d itself left out — no pass over the KB."""
        scores = self.matrix.vectors @ q  # what the retriever has already computed
        count = min(CANDIDATES, scores.shape[0])
        rows = np.argpartition(-scores, count - 1)[:count]
        rows = rows[rows != row]
        near = self.matrix.vectors[rows] @ self.matrix.vectors[row]
        k = min(K, near.shape[0])
        return float(-np.sort(np.partition(-near, k - 1)[:k]).mean()) if k else 0.0

    def features(self, query: str, passages: list[str]) -> dict[str, float]:
        q = np.asarray(self.embedder.embed_query(query), dtype=np.float32).reshape(-1)
        r_q = self.crowding(q)
        out: dict[str, float] = {}
        for rank, text in enumerate(passages[:3]):
            row = self.row_of(text, q)
            d = self.matrix.vectors[row]
            cos = float(d @ q)
            r_d = self.crowding(d, skip=row)
            if rank == 0:
                out.update({f"csls{k}": 2 * cos - r_q[k] - r_d[k] for k in KS})
                out.update({"doc_crowding": r_d[K], "cos_over_hub": cos - r_d[K], "query_crowding": r_q[K],
                            "centroid_gap": cos - float(self.centroid @ q)})
                out["csls_top3"] = out[f"csls{K}"]
                r_c = self.candidate_crowding(q, row)
                out.update({"csls_cand": 2 * cos - r_q[K] - r_c, "doc_crowding_cand": r_c})
            else:
                out["csls_top3"] = max(out["csls_top3"], 2 * cos - r_q[K] - r_d[K])
        out["csls"] = out[f"csls{K}"]
        return out


def crowding_features(kb: Path, manifest: object) -> ce.Features:
    from pinakes.embed.loader import load_for_kb

    return Crowding(load_for_kb(kb, cast("KBSettings", manifest)), kb).features


ce.CANDIDATES = (
    bench.Candidate("shipped (feature set chosen per KB)", MODEL, (), L2_PENALTY),
    ce.CANDIDATES[1],
    bench.Candidate("csls alone", MODEL, ("csls",), L2_PENALTY),
    bench.Candidate("centroid_gap + keyword_share", MODEL, ("centroid_gap", "keyword_share"), L2_PENALTY),
    bench.Candidate("csls + keyword_share", MODEL, ("csls", "keyword_share"), L2_PENALTY),
    bench.Candidate("csls5 + keyword_share", MODEL, ("csls5", "keyword_share"), L2_PENALTY),
    bench.Candidate("csls20 + keyword_share", MODEL, ("csls20", "keyword_share"), L2_PENALTY),
    bench.Candidate("csls_top3 + keyword_share", MODEL, ("csls_top3", "keyword_share"), L2_PENALTY),
    bench.Candidate("cosine + csls + keyword_share", MODEL, ("cosine", "csls", "keyword_share"), L2_PENALTY),
    bench.Candidate("cosine + keyword_share + doc_crowding", MODEL, ("cosine", "keyword_share", "doc_crowding"), L2_PENALTY),
    bench.Candidate("csls_cand + keyword_share", MODEL, ("csls_cand", "keyword_share"), L2_PENALTY),
    bench.Candidate("cosine + keyword_share + doc_crowding_cand", MODEL, ("cosine", "keyword_share", "doc_crowding_cand"), L2_PENALTY),
    bench.Candidate("cosine + keyword_share (the 2-feature model)", MODEL, ("cosine", "keyword_share"), L2_PENALTY),
)
ce.CONTROL = ce.CANDIDATES[-1]

# The shipped fit chooses its feature set per KB by cross-fitted error (pinakes.eval.fitting's
# FEATURE_SETS); "choice + crowding" lets it also choose the crowding sets, so a corpus where they
# lose can refuse them. Its name routes the fit through the longer list.
# "shipped" here is the fit as it shipped before (f), choosing between two sets; (f) measured what
# more sets buy. (The product's own `csls` / `crowding` since then are `csls_cand` /
# `doc_crowding_cand` below; this experiment's `csls` is the whole-KB form and overrides it.)
BEFORE = ce.FIT_BEFORE_F
CHOICE = bench.Candidate("choice + crowding (per-KB choice among 4 sets)", MODEL, (), L2_PENALTY)
CHOICE_CAND = bench.Candidate("choice + candidate crowding (among 4 sets)", MODEL, (), L2_PENALTY)
SETS = {CHOICE.name: (*BEFORE, ("csls", "keyword_share"), ("cosine", "keyword_share", "doc_crowding")),
        CHOICE_CAND.name: (*BEFORE, ("csls_cand", "keyword_share"),
                           ("cosine", "keyword_share", "doc_crowding_cand"))}
ce.CANDIDATES = (*ce.CANDIDATES[:-1], CHOICE, CHOICE_CAND, ce.CANDIDATES[-1])


def _with_crowding_sets(fit: Callable[..., Any]) -> Callable[..., Any]:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        candidate = args[0] if args and isinstance(args[0], bench.Candidate) else None
        name = candidate.name if candidate else (args[1] if len(args) > 1 else kwargs.get("fitted_for"))
        if name not in SETS:
            return fit(*args, **kwargs)
        shipped = fitting.FEATURE_SETS
        fitting.FEATURE_SETS = SETS[name]
        try:
            return fit(*args, **kwargs)
        finally:
            fitting.FEATURE_SETS = shipped
    return wrapped


bench.fit_candidate = _with_crowding_sets(bench.fit_candidate)
ce.fit_confidence = _with_crowding_sets(ce.fit_confidence)


def _collect(kb: Path, out: Path) -> OutcomesFile:
    return ce.collect_with(kb, out, crowding_features)


ce.COLLECT = _collect

if __name__ == "__main__":
    raise SystemExit(ce.main(sys.argv[1:]))
