"""Recall@10 of the vector file's index against exact float search, per build setting (issue #45:
>= 0.98 on real vectors), on the real MiniLM vectors of bench/real_vectors.py's cache.

    nice -n 10 python bench/bench_vector_recall.py                        # every cached real vector
    nice -n 10 python bench/bench_vector_recall.py --rows 400000 --extend-by noise

Each setting (`--settings`: dtype/connectivity, e.g. i8/16 i8/32 f16/16) is built once, in this
process, with the product's other parameters (metric cos, expansion_add 128: vectors/engine.py),
then searched at each `--ef` with the product's candidate count (50: vectors/approximate.py), one
query at a time on one thread. Queries: real questions (cranfield, tldr-nl2bash) embedded as
queries, and held-out real passages (their own vectors left out of the base). Recall counts ties
at the 10th exact cosine, as bench_vector_tiers.py does, and checks the candidates' top 10 after
exact rescoring, what search returns.

`--rows` beyond the real vectors extends them (bench_vector_tiers.extend): "noise" adds to each real
vector Gaussian noise of sigma 0.03 a component (cosine ~0.86 to its original) per copy: it stays in
the real cone, unlike "rotation", whose copies are disjoint cones (a stress case, not a corpus).
Results print as JSON (and go to --json).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "src"))

import bench_vector_tiers  # noqa: E402
import real_vectors  # noqa: E402

CANDIDATES = 50
TOP = 10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", type=Path, default=real_vectors.DEFAULT_CACHE)
    parser.add_argument("--rows", type=int, default=0)
    parser.add_argument("--extend-by", choices=("rotation", "noise"), default="noise")
    parser.add_argument("--queries", type=int, default=200, help="per query set")
    parser.add_argument("--settings", nargs="*", default=["i8/16", "i8/32", "f16/16"])
    parser.add_argument("--ef", type=int, nargs="*", default=[256, 512, 1024])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from usearch.index import Index

    _, real = real_vectors.load_cache(args.cache)
    rng = np.random.default_rng(45)
    held = rng.choice(len(real), args.queries, replace=False)
    keep = np.ones(len(real), bool)
    keep[held] = False
    base = real[keep]
    if args.rows > len(base):
        base = bench_vector_tiers.extend(base, args.rows, method=args.extend_by)
    ids = np.arange(len(base), dtype=np.int64)
    query_sets = {"questions": bench_vector_tiers.question_vectors(args.cache, args.queries), "held-out": real[held]}
    truth = {name: bench_vector_tiers.exact_truth(base, np.ones(len(base), bool), queries, ids)
             for name, queries in query_sets.items()}
    out: dict[str, object] = {"rows": len(base), "real_rows": int(keep.sum()), "extend_by": args.extend_by
                              if args.rows > keep.sum() else None, "load_avg_start": os.getloadavg(), "runs": []}
    runs: list[dict[str, object]] = out["runs"]  # type: ignore[assignment]
    for setting in args.settings:
        dtype, connectivity = setting.split("/")
        index = Index(ndim=base.shape[1], metric="cos", dtype=dtype, connectivity=int(connectivity),
                      expansion_add=128)
        started = time.perf_counter()
        for start in range(0, len(base), 65_536):
            index.add(ids[start:start + 65_536], base[start:start + 65_536], threads=args.threads)
        build = time.perf_counter() - started
        for ef in args.ef:
            index.expansion_search = ef
            row: dict[str, object] = {"setting": setting, "ef": ef, "build_s": round(build, 1),
                                      "file_mib": round(index.serialized_length / 2**20, 1)}
            for name, queries in query_sets.items():
                found, times = [], []
                for query in queries:
                    began = time.perf_counter()
                    keys = np.asarray(index.search(query, CANDIDATES, threads=1).keys, dtype=np.int64)
                    rescored = keys[np.argsort(-(base[keys] @ query), kind="stable")][:TOP]
                    times.append((time.perf_counter() - began) * 1000)
                    found.append(np.pad(rescored, (0, TOP - len(rescored)), constant_values=-1))
                row[f"recall_{name}"] = round(bench_vector_tiers.recall(np.stack(found), truth[name]), 4)
                row[f"p50_ms_{name}"] = round(statistics.median(times), 2)
            runs.append(row)
            print(json.dumps(row), flush=True)
        del index
    out["load_avg_end"] = os.getloadavg()
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
