"""Search latency: warm in-process p50/p95 per mode at ~10k and ~100k chunks, each next to the
floor measured in the same run (one query embedding + one matrix-vector product over the same
matrix), peak RSS, and a cold `pnk search` end to end; then hybrid + rerank over 20 queries with a
stand-in cross-encoder (real architecture, made-up weights: bench/standin_reranker.py).

    python bench/bench_search.py                    # both sizes, the packaged model (fastembed int8)
    python bench/bench_search.py --rerank-standin bge-base   # time the spec's default reranker shape
    python bench/bench_search.py --provider sentence-transformers --sizes 10000
    python bench/bench_search.py --json out.json

Corpus: the real chunks of the two development corpora (tldr-nl2bash-dev and cranfield, chunked as
bench/quality_dev.py chunks them) with their real all-MiniLM-L6-v2 vectors. The 100k index
repeats those chunks (each copy is a distinct document, so document counts, FTS doclists and the
matrix are really 100k rows); each repeated vector gets a small perturbation (sigma 0.01,
renormalised) so the matrix holds no exact duplicates. Embedding 100k chunks on this machine would
take about an hour, which is why the texts and vectors are reused. Queries are the corpora's
questions. Each size runs in its own process, so its peak RSS is its own.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import quality_dev  # noqa: E402

from pinakes.embed.base import identity_meta  # noqa: E402
from pinakes.index import schema  # noqa: E402
from pinakes.search.core import Searcher, SearchSettings  # noqa: E402
from tests.fakes import default_section  # noqa: E402
from tests.helpers_index import ChunkSpec, DocSpec, write_documents  # noqa: E402

QUERIES = 120
WARMUP = 10
RERANK_QUERIES = 20  # one search reranks 20 passages: ~0.6 s (MiniLM-L6) to ~4 s (bge-base) on 2 cores


def real_chunks(cache: Path) -> tuple[list[tuple[str, str]], np.ndarray, list[str]]:
    """(doc path, chunk text) of both corpora, their vectors, and the questions."""
    model: quality_dev.PackagedMiniLM | None = None
    texts: list[tuple[str, str]] = []
    vectors = []
    questions: list[str] = []
    for corpus in quality_dev.CORPORA.values():
        docs = quality_dev.load_documents(corpus)
        cached = sorted(cache.glob(f"{corpus.name}-vectors-*.npy"))
        if cached:
            vectors.append(np.load(cached[-1]))
        else:
            model = model or quality_dev.PackagedMiniLM()
            vectors.append(quality_dev.cached_vectors(corpus, docs, model, cache))
        texts.extend((f"{corpus.name}/{doc.path}", chunk.text) for doc in docs for chunk in doc.chunks or ())
        questions.extend(question.query for question in quality_dev.load_questions(corpus))
    return texts, np.concatenate(vectors).astype(np.float32), questions


def build_sized_index(path: Path, size: int, texts, vectors, meta: dict[str, str]) -> None:
    """`size` chunks: the real ones, then perturbed copies, each copy under its own document.

    A cached index is reused while it was stamped with this model identity; otherwise rebuilt."""
    if path.exists():
        reader = schema.open_reader(path)
        try:
            stamped = {key: value for key, value in schema.read_meta(reader).items() if key in meta}
        finally:
            reader.close()
        if stamped == meta:
            return
        for suffix in ("", "-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
    rng = np.random.default_rng(20260801)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = schema.open_writer(path)
    written = 0
    copy = 0
    with schema.transaction(conn):
        while written < size:
            docs: dict[str, DocSpec] = {}
            for (doc_path, text), vector in zip(texts, vectors, strict=True):
                if written >= size:
                    break
                if copy:
                    vector = vector + rng.normal(0.0, 0.01, vector.shape).astype(np.float32)
                    vector /= np.linalg.norm(vector)
                name = f"copy{copy}/{doc_path}"
                doc = docs.setdefault(name, DocSpec(name, source_type="markdown", chunks=[]))
                doc.chunks.append(ChunkSpec(text, 0, len(text), vector=vector))  # type: ignore[union-attr]
                written += 1
            write_documents(conn, docs.values())
            copy += 1
        schema.write_meta(conn, dict(meta))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50_ms": round(statistics.median(ordered), 2), "p95_ms": round(p95, 2)}


def measure_size(size: int, provider: str, cache: Path, standin: str | None) -> dict[str, object]:
    from pinakes.embed import load_embedder

    section = default_section(provider)
    embedder = load_embedder(section, offline=True)
    texts, vectors, questions = real_chunks(cache)
    index = cache / f"bench-{size}-{provider}" / "index.db"
    build_sized_index(index, size, texts, vectors, identity_meta(embedder.identity))
    queries = questions[:: max(1, len(questions) // QUERIES)][:QUERIES]
    searcher = Searcher(index, SearchSettings(rerank=False), embedder=embedder, embedding_section=section)
    started = time.perf_counter()
    searcher.search(queries[0], mode="vector")  # loads the matrix
    load_s = time.perf_counter() - started
    matrix = searcher._generation.matrix  # type: ignore[union-attr]
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
        "chunks": len(matrix), "provider": provider, "queries": len(queries),
        "matrix_mb": round(matrix.nbytes / 2**20, 1), "matrix_load_s": round(load_s, 2),
        "peak_rss_mb": round(rss_mb, 1), "index_mb": round(index.stat().st_size / 2**20, 1),
        "load_average": [round(value, 2) for value in os.getloadavg()],
    }
    for arm, values in samples.items():
        result[arm] = percentiles(values)
    floor = result["floor"]["p50_ms"]  # type: ignore[index]
    hybrid = result["hybrid"]["p50_ms"]  # type: ignore[index]
    result["hybrid_target_ms"] = round(2 * floor + 10, 2)
    result["hybrid_within_target"] = hybrid <= 2 * floor + 10
    if standin:
        result["hybrid_rerank"] = measure_rerank(index, embedder, section, queries, standin, cache)
    else:
        result["hybrid_rerank"] = "not measured (--rerank-standin none)"
    return result


def measure_rerank(index: Path, embedder, section, queries: list[str], shape: str, cache: Path) -> dict[str, object]:
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
    """`pnk search` in a fresh process over a KB whose index is the sized one."""
    kb = cache / f"bench-kb-{size}-{provider}"
    (kb / ".pinakes").mkdir(parents=True, exist_ok=True)
    (kb / "docs").mkdir(exist_ok=True)
    index = kb / ".pinakes" / "index.db"
    if not index.exists():
        index.symlink_to(cache / f"bench-{size}-{provider}" / "index.db")
    (kb / "pinakes.toml").write_text(
        '[kb]\nname = "bench"\nid = "01J9Z8Y7X6W5V4T3S2R1Q0P9N8"\n\n[sources]\nroots = ["docs"]\n\n'
        f'[embedding]\nprovider = "{provider}"\nmodel = "sentence-transformers/all-MiniLM-L6-v2"\ndim = 384\n\n'
        "[retrieval]\nrerank = false\n"
    )
    walls = []
    for _ in range(runs):
        started = time.perf_counter()
        completed = subprocess.run(
            [sys.executable, "-m", "pinakes", "-C", str(kb), "search", "how do I extract a tar archive", "--json"],
            capture_output=True, text=True, env={**os.environ, "PNK_OFFLINE": "1"}, check=False,
        )
        walls.append(time.perf_counter() - started)
        if completed.returncode != 0:
            return {"error": completed.stderr.strip()[-400:]}
    payload = json.loads(completed.stdout)
    return {"runs": runs, "median_s": round(statistics.median(walls), 2), "min_s": round(min(walls), 2),
            "timings_ms": payload["timings_ms"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--provider", default="fastembed", choices=["fastembed", "sentence-transformers"])
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "pnk-dev")
    parser.add_argument("--one-size", type=int, help=argparse.SUPPRESS)  # the per-size child process
    parser.add_argument("--no-cold", action="store_true", help="skip the cold `pnk search` runs")
    parser.add_argument("--rerank-standin", default="minilm-l6", choices=["minilm-l6", "bge-base", "none"],
                        help="cross-encoder shape timed for hybrid + rerank (made-up weights; default %(default)s)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    if args.one_size:
        standin = None if args.rerank_standin == "none" else args.rerank_standin
        print(json.dumps(measure_size(args.one_size, args.provider, args.cache, standin)))
        return 0
    rows = []
    for size in (int(value) for value in args.sizes.split(",")):
        child = subprocess.run(
            [sys.executable, __file__, "--one-size", str(size), "--provider", args.provider,
             "--cache", str(args.cache), "--rerank-standin", args.rerank_standin],
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
