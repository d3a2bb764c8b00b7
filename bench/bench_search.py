"""Search latency: warm in-process p50/p95 per mode at ~10k and ~100k chunks, each next to the
floor measured in the same run (one query embedding + one matrix-vector product over the same
matrix), peak RSS, and a cold `pnk search` end to end; then hybrid + rerank over 20 queries with a
stand-in cross-encoder (real architecture, made-up weights: bench/standin_reranker.py).

    python bench/bench_search.py                    # both sizes, the packaged model (fastembed int8)
    python bench/bench_search.py --rerank-standin bge-base   # time the spec's default reranker shape
    python bench/bench_search.py --provider sentence-transformers --sizes 10000
    python bench/bench_search.py --json out.json

Corpus: the documents of the two development corpora (cranfield and tldr-nl2bash-dev), indexed by
the product itself: `pnk init`'s code, the files copied under docs/, and the sync API (`run_sync`,
what `pnk sync` runs) with the packaged model's tokenizer, so chunks, FTS rows, chunk_terms and the
graph are exactly what a sync writes. A size is reached by adding documents (whole copies of the
corpora, each copy under its own directory, so document counts, FTS doclists and the matrix really
hold that many rows) until the index holds at least that many chunks. Vectors are the packaged
model's, looked up by chunk text (`VectorsByText`): each distinct chunk text is embedded once, on
the first run, and cached under --cache; every later occurrence of a text (the copies) gets that
vector with a small perturbation (sigma 0.01, renormalised) so the matrix holds no exact
duplicates. Embedding 100k chunks on this machine would take about an hour, which is why the
vectors of the copies are reused. Queries are the corpora's questions. Each size runs in its own
process, so its peak RSS is its own.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
import zlib
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from pinakes.embed.base import identity_meta  # noqa: E402
from pinakes.index import schema  # noqa: E402
from pinakes.search.bm25 import KeywordOptions  # noqa: E402
from pinakes.search.core import Searcher, SearchSettings  # noqa: E402
from pinakes.search.threads import BLAS_THREADS_VARIABLE  # noqa: E402

# The keyword side a run times: as shipped (BM25 k1 2.5, b 0.4 over chunk_terms), or FTS5's bm25() alone.
KEYWORD_SIDES = {"shipped": KeywordOptions(), "fts5-bm25": KeywordOptions(k1=None)}
from tests.fakes import default_section  # noqa: E402
from tests.kb_helpers import init_test_kb, sync  # noqa: E402

if TYPE_CHECKING:
    from pinakes.embed import Embedder
    from pinakes.manifest import EmbeddingSection

SHARED = REPO.parent / "shared" / "corpora"
CORPORA = {"cranfield": (SHARED / "cranfield", "*.txt"), "tldr": (SHARED / "tldr-nl2bash-dev", "*/*.md")}
QUERIES = 120
WARMUP = 10
RERANK_QUERIES = 20  # one search reranks 20 passages: ~0.6 s (MiniLM-L6) to ~4 s (bge-base) on 2 cores
PERTURBATION = 0.01


class VectorsByText:
    """The packaged model as the sync sees it (its identity and tokenizer, so chunks are the
    product's), with document vectors looked up by chunk text: a text not in the cache is embedded
    by the model and kept; each repeat of a text within this process gets the cached vector
    perturbed (seeded by the text and the repeat number, so a rebuild draws the same vectors)."""

    def __init__(self, real: Any, cache: Path):
        self._real = real
        self.identity = real.identity
        self.max_input_tokens = real.max_input_tokens
        slug = f"{real.identity.provider}-{real.identity.model}".replace("/", "_")
        self._texts_path, self._vectors_path = cache / f"vectors-{slug}.json", cache / f"vectors-{slug}.npy"
        self._vectors: dict[str, np.ndarray] = {}
        if self._texts_path.exists() and self._vectors_path.exists():
            texts = json.loads(self._texts_path.read_text(encoding="utf-8"))
            self._vectors = dict(zip(texts, np.load(self._vectors_path), strict=True))
        self._seen: Counter[str] = Counter()
        self.embedded = 0  # texts the model embedded in this process

    def __getattr__(self, name: str) -> Any:  # count_tokens, count_tokens_batch: the model's own
        return getattr(self._real, name)

    def embed_documents(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        missing = [text for text in dict.fromkeys(texts) if text not in self._vectors]
        if missing:
            fresh = np.asarray(self._real.embed_documents(missing), dtype=np.float32)
            self._vectors.update(zip(missing, fresh, strict=True))
            self.embedded += len(missing)
        rows: list[np.ndarray] = []
        for text in texts:
            vector = self._vectors[text]
            repeat = self._seen[text]
            self._seen[text] += 1
            if repeat:
                rng = np.random.default_rng([zlib.crc32(text.encode()), repeat])
                vector = vector + rng.normal(0.0, PERTURBATION, vector.shape).astype(np.float32)
                vector = vector / np.linalg.norm(vector)
            rows.append(vector)
        return np.stack(rows).astype(np.float32) if rows else np.zeros((0, self.identity.dim), np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self._real.embed_query(text)

    def save(self) -> None:
        texts = list(self._vectors)
        self._texts_path.write_text(json.dumps(texts), encoding="utf-8")
        np.save(self._vectors_path, np.stack([self._vectors[text] for text in texts]))


def corpus_documents() -> list[tuple[Path, str]]:
    """(source file, path under docs/) of both corpora, in a fixed order; empty files skipped."""
    documents: list[tuple[Path, str]] = []
    for name, (root, pattern) in CORPORA.items():
        for path in sorted((root / "docs").glob(pattern)):
            if path.stat().st_size:
                documents.append((path, f"{name}/{path.relative_to(root / 'docs').as_posix()}"))
    return documents


def questions() -> list[str]:
    found: list[str] = []
    for root, _ in CORPORA.values():
        with open(root / "questions.jsonl", encoding="utf-8") as handle:
            found.extend(json.loads(line)["query"] for line in handle if line.strip())
    return found


def chunk_count(index: Path) -> int:
    if not index.exists():
        return 0
    conn = sqlite3.connect(f"{index.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    finally:
        conn.close()


def build_sized_kb(kb: Path, size: int, embedder: VectorsByText) -> Path:
    """A KB whose index holds at least `size` chunks, built by the sync: copies of the corpora's
    documents (copy0/, copy1/, ...) are added in batches, each batch sized from the chunks per
    document seen so far, and synced. A cached KB is reused while it was stamped with this model
    identity and is big enough; otherwise it is built again from nothing."""
    index = kb / ".pinakes" / "index.db"
    if index.exists():
        reader = schema.open_reader(index)
        try:
            stamped = {key: value for key, value in schema.read_meta(reader).items()
                       if key in identity_meta(embedder.identity)}
        finally:
            reader.close()
        if stamped == identity_meta(embedder.identity) and chunk_count(index) >= size:
            return index
    if kb.exists():
        shutil.rmtree(kb)
    init_test_kb(kb, embedder.identity, name=kb.name)
    documents = corpus_documents()
    written = 0
    started = time.perf_counter()
    while (chunks := chunk_count(index)) < size:
        per_document = chunks / written if written else 1.0
        batch = max(1, math.ceil((size - chunks) / per_document / (1 if written else 2)))
        for number in range(written, written + batch):
            source, relative = documents[number % len(documents)]
            target = kb / "docs" / f"copy{number // len(documents)}" / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
        written += batch
        sync(kb, embedder, quiet=True)
        embedder.save()
    print(f"  built {kb.name}: {chunk_count(index)} chunks from {written} documents in "
          f"{time.perf_counter() - started:.0f} s ({embedder.embedded} texts embedded by the model)", file=sys.stderr)
    return index


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50_ms": round(statistics.median(ordered), 2), "p95_ms": round(p95, 2)}


def measure_size(size: int, provider: str, cache: Path, standin: str | None,
                 keyword: str = "shipped", threads: str = "product") -> dict[str, object]:
    from pinakes.embed import load_embedder
    from pinakes.search.core import QUERY_MODEL_THREADS

    section = default_section(provider)
    index = build_sized_kb(cache / f"sync-kb-{size}-{provider}", size,
                           VectorsByText(load_embedder(section, offline=True), cache))
    # The query model as a KB's Searcher loads it (Searcher.for_kb), or on the runtime's default threads.
    embedder = load_embedder(section, offline=True,
                             threads=QUERY_MODEL_THREADS if threads == "product" else None)
    asked = questions()
    queries = asked[:: max(1, len(asked) // QUERIES)][:QUERIES]
    searcher = Searcher(index, SearchSettings(rerank=False, keyword=KEYWORD_SIDES[keyword]), embedder=embedder,
                        embedding_section=section)
    started = time.perf_counter()
    searcher.search(queries[0], mode="vector")  # loads the matrix
    load_s = time.perf_counter() - started
    generation = searcher._generation  # pyright: ignore[reportPrivateUsage]  # a bench reads the loaded matrix
    assert generation is not None
    matrix = generation.matrix
    assert matrix is not None
    for query in queries[:WARMUP]:
        for mode in ("bm25", "vector", "hybrid"):
            searcher.search(query, mode=mode)
    samples: dict[str, list[float]] = {"floor": [], "embed_query": [], "matvec": [], "bm25": [], "vector": [],
                                       "hybrid": []}
    for query in queries:  # interleaved, so drift on a shared machine hits every arm alike
        started = time.perf_counter()
        vector = embedder.embed_query(query)
        embedded = time.perf_counter()
        scores = matrix.vectors @ vector
        finished = time.perf_counter()
        assert scores.shape[0] == len(matrix)
        samples["embed_query"].append((embedded - started) * 1000)
        samples["matvec"].append((finished - embedded) * 1000)
        samples["floor"].append((finished - started) * 1000)
        for mode in ("bm25", "vector", "hybrid"):
            started = time.perf_counter()
            searcher.search(query, mode=mode)
            samples[mode].append((time.perf_counter() - started) * 1000)
    searcher.close()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result: dict[str, object] = {
        "chunks": len(matrix), "provider": provider, "keyword": keyword, "threads": threads,
        "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"), "queries": len(queries),
        "matrix_mb": round(matrix.nbytes / 2**20, 1), "matrix_load_s": round(load_s, 2),
        "peak_rss_mb": round(rss_mb, 1), "index_mb": round(index.stat().st_size / 2**20, 1),
        "load_average": [round(value, 2) for value in os.getloadavg()],
    }
    for arm, values in samples.items():
        result[arm] = percentiles(values)
    floor = cast("dict[str, float]", result["floor"])["p50_ms"]
    hybrid = cast("dict[str, float]", result["hybrid"])["p50_ms"]
    result["hybrid_target_ms"] = round(2 * floor + 10, 2)
    result["hybrid_within_target"] = hybrid <= 2 * floor + 10
    if standin:
        result["hybrid_rerank"] = measure_rerank(index, embedder, section, queries, standin, cache)
    else:
        result["hybrid_rerank"] = "not measured (--rerank-standin none)"
    return result


def measure_rerank(index: Path, embedder: Embedder, section: EmbeddingSection, queries: list[str], shape: str,
                   cache: Path) -> dict[str, object]:
    """hybrid + rerank with a cross-encoder of the real shape and made-up weights: latency only
    (bench/standin_reranker.py says why that is honest, and what it cannot tell)."""
    from pinakes.errors import PinakesError

    try:
        from standin_reranker import standin_reranker

        reranker = standin_reranker(shape, cache)
    except (ImportError, PinakesError) as exc:
        return {"skipped": f"the stand-in reranker needs sentence-transformers ([st]): {exc}"}
    searcher = Searcher(index, SearchSettings(rerank=True), embedder=embedder, reranker=reranker,
                        embedding_section=section)
    searcher.search(queries[0])
    totals: list[float] = []
    stage: list[float] = []
    for query in queries[:RERANK_QUERIES]:
        started = time.perf_counter()
        result = searcher.search(query)
        totals.append((time.perf_counter() - started) * 1000)
        stage.append(result.timings["rerank"])
    searcher.close()
    return {"stand_in": shape, "queries": len(totals), "passages_reranked": SearchSettings().fusion_top_k,
            **percentiles(totals), "rerank_stage": percentiles(stage),
            "note": "made-up weights of the real architecture: the timing is real, the ranking is not"}


def cold_cli(size: int, provider: str, cache: Path, runs: int = 3) -> dict[str, object]:
    """`pnk search` in a fresh process over the sized KB (its manifest names the model it was
    synced with, and rerank is off as the template ships it)."""
    kb = cache / f"sync-kb-{size}-{provider}"
    walls: list[float] = []
    completed: subprocess.CompletedProcess[str] | None = None
    for _ in range(runs):
        started = time.perf_counter()
        completed = subprocess.run(
            [sys.executable, "-m", "pinakes", "-C", str(kb), "search", "how do I extract a tar archive", "--json"],
            capture_output=True, text=True, env={**os.environ, "PNK_OFFLINE": "1"}, check=False,
        )
        walls.append(time.perf_counter() - started)
        if completed.returncode != 0:
            return {"error": completed.stderr.strip()[-400:]}
    assert completed is not None  # runs >= 1
    payload = json.loads(completed.stdout)
    return {"runs": runs, "median_s": round(statistics.median(walls), 2), "min_s": round(min(walls), 2),
            "timings_ms": payload["timings_ms"]}


def child_environment(threads: str) -> dict[str, str]:
    """The measuring child's environment: OpenBLAS reads its thread count when NumPy loads, so the
    one-thread choice a searching command makes (pinakes.search.threads) is made here, before."""
    environment = dict(os.environ)
    if threads == "product":
        environment.setdefault(BLAS_THREADS_VARIABLE, "1")
    else:
        environment.pop(BLAS_THREADS_VARIABLE, None)
    return environment


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--provider", default="fastembed", choices=["fastembed", "sentence-transformers"])
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "pnk-dev")
    parser.add_argument("--one-size", type=int, help=argparse.SUPPRESS)  # the per-size child process
    parser.add_argument("--no-cold", action="store_true", help="skip the cold `pnk search` runs")
    parser.add_argument("--rerank-standin", default="minilm-l6", choices=["minilm-l6", "bge-base", "none"],
                        help="cross-encoder shape timed for hybrid + rerank (made-up weights; default %(default)s)")
    parser.add_argument("--keyword", default="shipped", choices=sorted(KEYWORD_SIDES),
                        help="the keyword side timed: as shipped, or FTS5's bm25() alone (the baseline before #18)")
    parser.add_argument("--threads", default="product", choices=["product", "runtime-default"],
                        help="query-time threads: as `pnk search`/`pnk serve` run (one BLAS thread, one model-runtime "
                             "thread: pinakes.search.threads), or every runtime's default")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    if args.one_size:
        standin = None if args.rerank_standin == "none" else args.rerank_standin
        print(json.dumps(measure_size(args.one_size, args.provider, args.cache, standin, args.keyword, args.threads)))
        return 0
    rows: list[dict[str, Any]] = []
    for size in (int(value) for value in args.sizes.split(",")):
        child = subprocess.run(
            [sys.executable, __file__, "--one-size", str(size), "--provider", args.provider,
             "--cache", str(args.cache), "--rerank-standin", args.rerank_standin, "--keyword", args.keyword,
             "--threads", args.threads],
            env=child_environment(args.threads),
            capture_output=True, text=True, check=True,
        )
        row = json.loads(child.stdout.strip().splitlines()[-1])
        if not args.no_cold:
            row["cold_pnk_search"] = cold_cli(size, args.provider, args.cache)
        rows.append(row)
        print(json.dumps(row, indent=2))
    report = {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": f"{os.cpu_count()} cores, "
              f"Python {sys.version.split()[0]}", "rows": rows}
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
