"""The keyword retriever against bm25s on the English development corpora, same chunks, paired.

    python bench/bench_keyword.py                     # every English corpus, the table
    python bench/bench_keyword.py --corpus cranfield --variants

bm25s (https://github.com/xhluca/bm25s, a dev/bench dependency: `pip install -e '.[dev]'`) is run
as its README does it: English stopwords, the Snowball English stemmer (PyStemmer), Lucene's BM25
(k1 1.5, b 0.75), over exactly the chunks the product's index holds (read back from it). The
product arms are `Searcher(..., mode="bm25")` with the keyword plan as shipped and as it was
before (FTS5's own bm25()); `--variants` adds the k1/b settings measured and rejected. All return 100
chunks, folded to documents in rank order (pinakes.eval.corpus, as `pnk eval --questions` does);
nDCG@10 is binary on `relevant`, recall@10 and recall@100 too. The paired test is the exact sign
test (pinakes.eval.paired.sign_test) on per-question nDCG@10: questions where the product scores
higher against those where bm25s does, one-sided, with the two-sided p beside it.

The indexes are the product's: `pnk init`, the corpus's documents copied into docs/, and the sync
API (`run_sync`, what `pnk sync` calls) with the template's default model for chunking: its
tokenizer sizes the chunks exactly as a real sync does. Only the vectors are skipped (every chunk
gets the same unit vector; the keyword side never reads them), which turns a 20-minute embedding
run into a minute. Cached under --cache. The third corpus, pydocs (the Python 3.11 library pages,
each question a module's synopsis, removed from its page), is bench/tune_retrieval.py's KB, reused
from that harness's cache (built by the same sync, with its real vectors).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pinakes.eval.corpus import document_ranking, ndcg, recall  # noqa: E402
from pinakes.eval.paired import rises_and_falls, sign_test  # noqa: E402
from pinakes.search import bm25  # noqa: E402
from pinakes.search.core import Searcher, SearchSettings  # noqa: E402

SHARED = REPO.parent / "shared" / "corpora"
CORPORA = {"cranfield": SHARED / "cranfield", "tldr-nl2bash-dev": SHARED / "tldr-nl2bash-dev"}
PYDOCS = "pydocs"  # built from ../shared/corpora/python-3.11-docs-rst by bench/tune_retrieval.py
DEPTH = 100


@dataclass(frozen=True)
class Question:
    id: str
    query: str
    relevant: tuple[str, ...]  # KB-root-relative


class ChunkingOnlyEmbedder:
    """The real model's tokenizer (so chunks are the product's), one constant unit vector."""

    def __init__(self, real: Any):
        self._real = real
        self.identity = real.identity
        self.max_input_tokens = real.max_input_tokens

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def embed_documents(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        vectors = np.zeros((len(texts), self.identity.dim), dtype=np.float32)
        vectors[:, 0] = 1.0
        return vectors

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


def build(name: str, cache: Path) -> tuple[Path, list[Question], float | None]:
    if name == PYDOCS:
        return build_pydocs()
    source = CORPORA[name]
    kb = cache / name
    questions: list[Question] = []
    for line in (source / "questions.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        questions.append(Question(str(row["id"]), row["query"], tuple("docs/" + path for path in row["relevant"])))
    if (kb / ".pinakes" / "index.db").exists():
        return kb, questions, None
    if kb.exists():
        shutil.rmtree(kb)
    subprocess.run([sys.executable, "-m", "pinakes", "init", str(kb), "--name", name], check=True,
                   stdout=subprocess.DEVNULL)
    shutil.rmtree(kb / "docs")
    shutil.copytree(source / "docs", kb / "docs")
    from pinakes.embed import Embedder, load_embedder
    from pinakes.manifest import load_manifest
    from pinakes.sync import SyncOptions
    from pinakes.sync.engine import run_sync

    embedder = ChunkingOnlyEmbedder(load_embedder(load_manifest(kb / "pinakes.toml").embedding, offline=True))
    started = time.perf_counter()
    run_sync(kb, SyncOptions(), embedder=cast("Embedder", embedder))  # the rest of Embedder via __getattr__
    return kb, questions, time.perf_counter() - started


def build_pydocs() -> tuple[Path, list[Question], float | None]:
    """The python-3.11 library pages with their synopsis questions, as bench/tune_retrieval.py builds
    them (its cache, real vectors: the keyword side never reads them)."""
    sys.path.insert(0, str(REPO / "bench"))
    import tune_retrieval

    corpus = tune_retrieval.build_corpus("pydocs", quiet=True)
    return corpus.root, [Question(q.id, q.query, q.relevant) for q in corpus.questions], None


def chunks_of(kb: Path) -> tuple[list[int], list[str], list[str]]:
    conn = sqlite3.connect(kb / ".pinakes" / "index.db")
    rows = conn.execute("SELECT c.id, d.path, c.text FROM chunks c JOIN documents d ON d.id = c.doc_id "
                        "WHERE d.state = 'active' ORDER BY c.id").fetchall()
    conn.close()
    return [row[0] for row in rows], [row[1] for row in rows], [row[2] for row in rows]


Ranker = Callable[[str], list[str]]  # a query -> document paths, best first


def product_ranker(kb: Path, options: bm25.KeywordOptions) -> tuple[Ranker, Callable[[], None]]:
    searcher = Searcher(kb / ".pinakes" / "index.db", SearchSettings(rerank=False, keyword=options))

    def rank(text: str) -> list[str]:
        result = searcher.search(text, mode="bm25", final_k=DEPTH)
        return document_ranking([passage.path for passage in result.passages])

    return rank, searcher.close


def bm25s_ranker(kb: Path, k1: float = 1.5, b: float = 0.75, method: str = "lucene") -> Ranker:
    import bm25s  # pyright: ignore[reportMissingTypeStubs] -- bm25s ships no stubs
    import Stemmer

    # bm25s and PyStemmer leave their stemmer, tokens and results untyped: they are Any here.
    stemmer: Any = cast(Any, Stemmer).Stemmer("english")
    _, paths, texts = chunks_of(kb)
    retriever: Any = cast(Any, bm25s).BM25(k1=k1, b=b, method=method)
    retriever.index(cast(Any, bm25s).tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False),
                    show_progress=False)

    def rank(text: str) -> list[str]:
        tokens: Any = cast(Any, bm25s).tokenize([text], stopwords="en", stemmer=stemmer, show_progress=False)
        if not tokens.vocab:
            return []
        found, scores = retriever.retrieve(tokens, k=min(DEPTH, len(paths)), show_progress=False)
        hits: list[str] = [paths[i] for i, score in zip(found[0], scores[0], strict=True) if score > 0]
        return document_ranking(hits)

    return rank


@dataclass
class Scores:
    ndcg: dict[str, float]
    recall10: dict[str, float]
    recall100: dict[str, float]
    ms: float


def score(rank: Ranker, questions: list[Question]) -> Scores:
    result = Scores({}, {}, {}, 0.0)
    started = time.perf_counter()
    for question in questions:
        ranking = rank(question.query)
        result.ndcg[question.id] = ndcg(ranking, question.relevant, 10)
        result.recall10[question.id] = recall(ranking, question.relevant, 10)
        result.recall100[question.id] = recall(ranking, question.relevant, 100)
    result.ms = (time.perf_counter() - started) * 1000.0 / max(1, len(questions))
    return result


def mean(values: dict[str, float]) -> float:
    return sum(values.values()) / len(values) if values else 0.0


def paired(ours: dict[str, float], theirs: dict[str, float]) -> str:
    up, down = rises_and_falls(ours, theirs)
    return f"+{up}/-{down} (p one-sided {sign_test(up, down):.3g}, two-sided {sign_test(up, down, two_sided=True):.3g})"


SHIPPED = "shipped: BM25 k1 2.5, b 0.4 over chunk_terms"
BEFORE = "before: FTS5 bm25() alone (k1 1.2, b 0.75 fixed)"


def variants(every: bool) -> dict[str, bm25.KeywordOptions]:
    """The product's keyword plans compared with bm25s (each a KeywordOptions)."""
    arms = {SHIPPED: bm25.KeywordOptions(), BEFORE: bm25.KeywordOptions(k1=None)}
    if every:
        for k1, b in ((1.2, 0.75), (1.5, 0.75), (2.0, 0.75), (2.5, 0.75), (3.0, 0.75), (1.5, 0.4), (2.0, 0.4),
                      (2.5, 0.5), (2.5, 0.6)):
            arms[f"postings, k1 {k1}, b {b}"] = bm25.KeywordOptions(k1=k1, b=b)
    return arms


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", choices=[*sorted(CORPORA), PYDOCS], action="append")
    parser.add_argument("--cache", type=Path,
                        default=Path(os.environ.get("TMPDIR", tempfile.gettempdir())) / "pnk-keyword")
    parser.add_argument("--variants", action="store_true", help="also the rejected k1/b variants")
    parser.add_argument("--json", type=Path, help="write every per-question score here")
    args = parser.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    names = args.corpus or [*sorted(CORPORA), PYDOCS]
    dump: dict[str, Any] = {}
    print("| corpus | retriever | nDCG@10 | recall@10 | recall@100 | ms/query "
          "| nDCG@10 vs bm25s: better/worse | vs before |")
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        kb, questions, seconds = build(name, args.cache)
        if seconds is not None:
            print(f"(built {name}: {seconds:.0f} s)", file=sys.stderr)
        reference = score(bm25s_ranker(kb), questions)
        arms = {"bm25s (stemmed, en stopwords)": reference}
        for label, options in variants(args.variants).items():
            rank, close = product_ranker(kb, options)
            try:
                arms[f"pinakes FTS5, {label}"] = score(rank, questions)
            finally:
                close()
        before = arms[f"pinakes FTS5, {BEFORE}"]
        for label, result in arms.items():
            versus = "" if result is reference else paired(result.ndcg, reference.ndcg)
            moved = "" if result is reference or result is before else paired(result.ndcg, before.ndcg)
            print(f"| {name} ({len(questions)} q) | {label} | {mean(result.ndcg):.4f} | {mean(result.recall10):.4f} "
                  f"| {mean(result.recall100):.4f} | {result.ms:.1f} | {versus} | {moved} |", flush=True)
        dump[name] = {label: result.__dict__ for label, result in arms.items()}
    if args.json:
        args.json.write_text(json.dumps(dump, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
