"""The shipped vector file (src/pinakes/vectors/) end to end, against the exact path it replaces,
in one run: an index of the product's schema holding real MiniLM vectors (bench/real_vectors.py's
cache; `--rows` beyond it extended by calibrated copies, as bench_vector_recall.py does), then

- the freshness check a searching process runs once per index generation (`expected_key`),
- `refresh_vector_file`: a whole build, an unchanged refresh, and an incremental one after 1% of
  the rows are added and 0.5% of the documents deleted,
- a searching process (its own subprocess, so its RSS is its own): `open_vector_file` (footer,
  body checksum, memory-mapped view) then `approximate_search` with exact rescoring from the index,
  against a process running search/vectors.py's `load_matrix` + `vector_search`, recall@10 of the
  first against the second on the real queries.

    python bench/bench_vector_file.py                 # every real vector the cache holds
    python bench/bench_vector_file.py --rows 1000000  # extended by calibrated copies (--extend-by)

The index is written with plain INSERTs into the product's schema (schema.create_index: FTS triggers
and all), not by a sync: what is timed here reads vectors, it does not write documents.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar, cast

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "src"))

import bench_vector_recall  # noqa: E402
import bench_vector_tiers  # noqa: E402
import real_vectors  # noqa: E402

from pinakes.index import schema  # noqa: E402
from pinakes.index.vector_rows import stored_row  # noqa: E402

IDENTITY = {"embedding_provider": "fastembed", "embedding_model": "sentence-transformers/all-MiniLM-L6-v2",
            "embedding_revision": "bench", "embedding_sha256": real_vectors.PACKAGED_SHA256, "embedding_dim": "384"}
DIM = 384
CHUNKS_PER_DOC = 50

P = ParamSpec("P")
R = TypeVar("R")


def write_index(path: Path, vectors: np.ndarray, first_chunk: int = 1, first_doc: int = 0) -> None:
    conn = schema.create_index(path) if not path.exists() else schema.open_writer(path)
    with schema.transaction(conn):
        for start in range(0, len(vectors), CHUNKS_PER_DOC):
            doc = f"D{first_doc + start // CHUNKS_PER_DOC:024d}"
            conn.execute("INSERT INTO documents (id, path, content_hash, mtime, source_type, indexed_at) "
                         "VALUES (?, ?, '0', 0, 'text', '0')", (doc, f"{doc}.txt"))
            part = vectors[start:start + CHUNKS_PER_DOC]
            ids = range(first_chunk + start, first_chunk + start + len(part))
            conn.executemany("INSERT INTO chunks (id, doc_id, ordinal, text, char_start, char_end, token_count) "
                             "VALUES (?, ?, ?, 'x', 0, 1, 1)", ((i, doc, i) for i in ids))
            conn.executemany("INSERT INTO embeddings (chunk_id, vector, checksum) VALUES (?, ?, ?)",
                             ((i, *stored_row(row, None)) for i, row in zip(ids, part, strict=True)))
    conn.close()


def timed(function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> tuple[R, float]:
    started = time.perf_counter()
    result = function(*args, **kwargs)
    seconds = round(time.perf_counter() - started, 3)
    print(f"{time.strftime('%H:%M:%S', time.gmtime())} {function.__name__}: {seconds} s", file=sys.stderr, flush=True)
    return result, seconds


def searcher(args: argparse.Namespace) -> None:
    """A searching process: open (time), warm, search every query; prints one JSON line."""
    from pinakes.vectors import (
        approximate_search,
        expected_key,
        open_vector_file,
        vector_file_path,
        vectors_of,
    )

    index = Path(args.index)
    queries = np.load(index.parent / "queries.npy")
    if args.ef[0]:  # the search breadth under test (approximate.py reads it at each search)
        import pinakes.vectors.engine
        pinakes.vectors.engine.EXPANSION_SEARCH = args.ef[0]
    floor = bench_vector_tiers.rss_kib()
    started = time.perf_counter()
    conn = schema.open_reader(index)
    if args.mode == "exact":
        from pinakes.search.vectors import load_matrix, vector_search
        matrix = load_matrix(conn, DIM)

        def search(query: np.ndarray) -> list[tuple[int, float]]:
            return vector_search(matrix, query, 10)
    else:
        key = expected_key(conn, IDENTITY)
        opened = open_vector_file(vector_file_path(index.parent), key, IDENTITY, DIM)

        def search(query: np.ndarray) -> list[tuple[int, float]]:
            return approximate_search(opened, query, 10, lambda ids: vectors_of(conn, ids.tolist(), DIM))
    opened_s = time.perf_counter() - started
    for query in queries[:10]:
        search(query)
    latencies: list[float] = []
    found: list[list[int]] = []
    for query in queries:
        began = time.perf_counter()
        hits = search(query)
        latencies.append((time.perf_counter() - began) * 1000)
        found.append([chunk for chunk, _ in hits])
    ordered = sorted(latencies)
    rss = bench_vector_tiers.rss_kib()
    print(json.dumps({"open_s": round(opened_s, 3), "p50_ms": round(ordered[len(ordered) // 2], 3),
                      "p95_ms": round(ordered[round(0.95 * (len(ordered) - 1))], 3),
                      "peak_rss_mib": round(rss["peak"] / 1024), "rss_anon_mib": round(rss["RssAnon"] / 1024),
                      "floor_rss_mib": round(floor["VmRSS"] / 1024), "found": found}))


def spawn(index: Path, mode: str, ef: int = 0) -> dict[str, object]:
    done = subprocess.run([sys.executable, __file__, "--searcher", mode, "--index", str(index), "--ef", str(ef)],
                          capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, default=real_vectors.DEFAULT_CACHE)
    parser.add_argument("--work", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "pnk-vector-file")
    parser.add_argument("--rows", type=int, default=0, help="extend the real vectors to this many")
    parser.add_argument("--extend-by", choices=("calibrated", "noise", "rotation"), default="calibrated",
                        help="how --rows extends the real vectors (bench_vector_recall.py's docstring)")
    parser.add_argument("--seed", type=int, default=45,
                        help="the extension's random draws (another seed: other copies, so another build)")
    parser.add_argument("--real-rows", type=int, default=0, help="only the first N real vectors (a quick check)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--ef", type=int, nargs="*", default=[0], help="search breadths (0: the product's)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--searcher", help=argparse.SUPPRESS)
    parser.add_argument("--index", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.searcher:
        args.mode = args.searcher
        searcher(args)
        return
    from pinakes.vectors import expected_key, refresh_vector_file

    _, real = real_vectors.load_cache(args.cache)
    real = real[:args.real_rows] if args.real_rows else real
    queries = bench_vector_tiers.question_vectors(args.cache, args.queries)
    if args.rows <= len(real):
        base = real
    elif args.extend_by == "calibrated":
        base = bench_vector_recall.extend_calibrated(real, args.rows, seed=args.seed)
    else:
        base = bench_vector_tiers.extend(real, args.rows, seed=args.seed, method=args.extend_by)
    added = max(1, len(base) // 100)
    shutil.rmtree(args.work, ignore_errors=True)
    index = args.work / ".pinakes" / "index.db"
    report: dict[str, object] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                 "load_average": os.getloadavg(), "rows": len(base), "real_rows": len(real),
                                 "extend_by": args.extend_by if args.rows > len(real) else None,
                                 "seed": args.seed if args.rows > len(real) else None, "threads": args.threads}
    _, report["write_index_s"] = timed(write_index, index, base[:-added])
    np.save(index.parent / "queries.npy", queries)
    conn = schema.open_reader(index)
    _, report["expected_key_s"] = timed(expected_key, conn, IDENTITY)
    full, report["full_build_s"] = timed(refresh_vector_file, conn, index.parent, IDENTITY, DIM, min_rows=0,
                                         threads=args.threads)
    same, report["unchanged_refresh_s"] = timed(refresh_vector_file, conn, index.parent, IDENTITY, DIM, min_rows=0)
    conn.close()
    report["file_bytes"] = full.file_bytes
    assert same.mode == "unchanged", same
    write_index(index, base[-added:], first_chunk=len(base) - added + 1, first_doc=10**9)
    writer = schema.open_writer(index)
    with schema.transaction(writer):
        writer.execute("UPDATE documents SET state = 'deleted' WHERE rowid % 200 = 7")
    writer.close()
    conn = schema.open_reader(index)
    update, report["incremental_refresh_s"] = timed(refresh_vector_file, conn, index.parent, IDENTITY, DIM,
                                                    min_rows=0, threads=args.threads)
    conn.close()
    report["incremental"] = {"mode": update.mode, "added": update.added, "removed": update.removed}
    exact = spawn(index, "exact")
    truth = exact.pop("found")
    assert isinstance(truth, list)
    truth = cast("list[list[int]]", truth)
    report["exact_search_process"] = exact
    for ef in args.ef:
        approximate = spawn(index, "approximate", ef)
        found = approximate.pop("found")
        assert isinstance(found, list)
        found = cast("list[list[int]]", found)
        suffix = f"_ef{ef}" if ef else ""
        report[f"recall@10_vs_exact{suffix}"] = round(float(np.mean(
            [len(set(a) & set(e)) / max(1, len(e)) for a, e in zip(found, truth, strict=True)])), 4)
        report[f"vector_file_search_process{suffix}"] = approximate
        print(f"ef {ef}: recall {report[f'recall@10_vs_exact{suffix}']} {json.dumps(approximate)}", file=sys.stderr,
              flush=True)
    report["load_average_after"] = os.getloadavg()
    print(json.dumps(report, indent=1))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1), encoding="utf-8")
    shutil.rmtree(args.work, ignore_errors=True)


if __name__ == "__main__":
    main()
