"""Recall@10 of the vector file's index against exact float search, per build setting (issue #45:
>= 0.98 on real vectors), on the real MiniLM vectors of bench/real_vectors.py's cache.

    nice -n 10 python bench/bench_vector_recall.py                        # every cached real vector
    nice -n 10 python bench/bench_vector_recall.py --rows 1000000 --extend-by calibrated \
        --settings i8/16/128 --ef 512 1024 --index-dir /tmp/recall1m --log /tmp/recall1m/log

Each setting (`--settings`: dtype/connectivity[/expansion_add], e.g. i8/16 i8/16/64 f16/16; the
product's own is vectors/engine.py DEFAULT_PARAMS) is built once, in this process (`--threads`,
`--batch` rows an `add` call), or restored from `--index-dir` when an earlier run saved it there
for the same rows, then searched at each `--ef` with the product's candidate count (50:
vectors/approximate.py), one query at a time on one thread. Queries: real questions (cranfield,
tldr-nl2bash) embedded as queries, and held-out real passages (their own vectors left out of the
base). Recall counts ties at the 10th exact cosine, as bench_vector_tiers.py does, and checks the
candidates' top 10 after exact rescoring, what search returns.

`--rows` beyond the real vectors extends them with copies of the real set:
- "calibrated" (the one recall at 1M is claimed on): each copy of a real vector v is
  c*v + sqrt(1-c^2)*u, u a random unit vector orthogonal to v, and c drawn per copy from the real
  set's own nearest-neighbour cosines (the 1st neighbour of `CALIBRATION_SAMPLE` real rows among the
  others). So a copy sits from its original where real vectors sit from their nearest real
  neighbour: as near as the corpus's near-duplicates, as far as its loners. `--distribution`
  prints the held-out passages' 1st/2nd/5th/10th neighbour cosines in the real base and in the
  extended one, to check what the extension did to the neighbourhoods search must find.
- "noise" (bench_vector_tiers.extend): Gaussian noise of sigma 0.03 a component per copy, every
  copy at cosine ~0.86 to its original, all inside the real cone.
- "rotation": each copy a disjoint cone (a stress case, not a corpus).
Results print as JSON lines (and go to --json); `--log` gets the build's progress.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, cast

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "src"))

import bench_vector_tiers  # noqa: E402
import real_vectors  # noqa: E402

CANDIDATES = 50
TOP = 10
CALIBRATION_SAMPLE = 2_000
DEFAULT_EXPANSION_ADD = 128


def extend_calibrated(real: np.ndarray, size: int, seed: int = 45) -> np.ndarray:
    """`size` rows: the real set, then copies whose cosine to their original follows the real set's
    nearest-neighbour cosines (module docstring)."""
    rng = np.random.default_rng(seed)
    nearest = neighbour_cosines(real, real[rng.choice(len(real), CALIBRATION_SAMPLE, replace=False)], 1,
                                exclude_self=True)[:, 0]
    out = np.empty((size, real.shape[1]), np.float32)
    out[:min(size, len(real))] = real[:size]
    filled = min(size, len(real))
    while filled < size:
        take = min(len(real), size - filled)
        original = real[:take]
        cosine = np.clip(rng.choice(nearest, take), 0.0, 0.9999).astype(np.float32)[:, None]  # duplicates: ~1
        direction = rng.standard_normal(original.shape).astype(np.float32)
        direction -= (direction * original).sum(axis=1, keepdims=True) * original
        direction /= np.linalg.norm(direction, axis=1, keepdims=True)
        copy = cosine * original + np.sqrt(1 - cosine**2) * direction
        out[filled:filled + take] = copy / np.linalg.norm(copy, axis=1, keepdims=True)
        filled += take
    return out


def neighbour_cosines(base: np.ndarray, queries: np.ndarray, k: int, exclude_self: bool = False) -> np.ndarray:
    """(len(queries), k): each query's k best cosines in base, best first (a query's own row,
    cosine ~1, left out when exclude_self)."""
    best = np.full((len(queries), k + 1), -np.inf, np.float32)
    for start in range(0, len(base), 16_384):
        scores = queries @ base[start:start + 16_384].T
        best = np.partition(np.concatenate([best, scores], axis=1), -(k + 1), axis=1)[:, -(k + 1):]
    best = -np.sort(-best, axis=1)
    return best[:, 1:] if exclude_self else best[:, :k]


def distribution(cosines: np.ndarray) -> dict[str, list[float]]:
    return {f"nn{k}": np.percentile(cosines[:, k - 1], [5, 25, 50, 75, 95]).round(3).tolist() for k in (1, 2, 5, 10)}


def parse_setting(setting: str) -> tuple[str, int, int]:
    parts = setting.split("/")
    return parts[0], int(parts[1]), int(parts[2]) if len(parts) > 2 else DEFAULT_EXPANSION_ADD


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--cache", type=Path, default=real_vectors.DEFAULT_CACHE)
    parser.add_argument("--rows", type=int, default=0)
    parser.add_argument("--extend-by", choices=("calibrated", "noise", "rotation"), default="calibrated")
    parser.add_argument("--queries", type=int, default=200, help="per query set")
    parser.add_argument("--settings", nargs="*", default=["i8/16", "i8/32", "f16/16"])
    parser.add_argument("--ef", type=int, nargs="*", default=[256, 512, 1024])
    parser.add_argument("--candidates", type=int, nargs="*", default=[CANDIDATES],
                        help="rescored for the top 10 (the product's: vectors/approximate.py MIN_CANDIDATES)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=65_536, help="rows an add call")
    parser.add_argument("--index-dir", type=Path, help="save each built index here; reuse one saved for the same rows")
    parser.add_argument("--distribution", action="store_true", help="neighbour cosines, real base vs extended")
    parser.add_argument("--log", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from pinakes.vectors.engine import load_library
    load_library()  # imports onnxruntime before usearch (the other order segfaults: engine.py)
    from usearch.index import Index as index_class

    def log(message: str) -> None:
        line = f"{time.strftime('%H:%M:%S', time.gmtime())} load {os.getloadavg()[0]:.1f} {message}"
        print(line, file=sys.stderr, flush=True)
        if args.log:
            with open(args.log, "a", encoding="utf-8") as handle:
                handle.write(line + "\n")

    _, real = real_vectors.load_cache(args.cache)
    rng = np.random.default_rng(45)
    held = cast(np.ndarray, rng.choice(len(real), args.queries, replace=False))
    keep = np.ones(len(real), bool)
    keep[held] = False
    base = real[keep]
    real_rows = len(base)
    extended = args.rows > real_rows
    if extended:
        base = (extend_calibrated(base, args.rows) if args.extend_by == "calibrated"
                else bench_vector_tiers.extend(base, args.rows, method=args.extend_by))
    log(f"base {len(base)} rows ({real_rows} real, extended by {args.extend_by if extended else 'nothing'})")
    ids = np.arange(len(base), dtype=np.int64)
    query_sets = {"questions": bench_vector_tiers.question_vectors(args.cache, args.queries), "held-out": real[held]}
    out: dict[str, object] = {"rows": len(base), "real_rows": real_rows, "extend_by": args.extend_by if extended else None,
                              "threads": args.threads, "batch": args.batch, "load_avg_start": os.getloadavg(), "runs": []}
    if args.distribution:
        out["distribution"] = {name: {"real": distribution(neighbour_cosines(base[:real_rows], queries, TOP)),
                                      "extended": distribution(neighbour_cosines(base, queries, TOP))}
                               for name, queries in query_sets.items()}
        log(f"distribution {json.dumps(out['distribution'])}")
    truth = {name: bench_vector_tiers.exact_truth(base, np.ones(len(base), bool), queries, ids)
             for name, queries in query_sets.items()}
    log("exact truth done")
    runs = cast("list[dict[str, object]]", out["runs"])  # the list put in `out` above
    tag = f"{len(base)}-{args.extend_by if extended else 'real'}"
    for setting in args.settings:
        dtype, connectivity, expansion_add = parse_setting(setting)
        # usearch's load and save are partially unknown to pyright: the index as Any
        index = cast(Any, index_class(ndim=base.shape[1], metric="cos", dtype=dtype, connectivity=connectivity,
                                      expansion_add=expansion_add, expansion_search=64))
        saved = args.index_dir / f"{tag}-{setting.replace('/', '-')}.usearch" if args.index_dir else None
        built: dict[str, object]
        if saved is not None and saved.exists() and saved.with_suffix(".json").exists():
            index.load(str(saved))
            built = json.loads(saved.with_suffix(".json").read_text())
            built["restored"] = True
            log(f"{setting}: restored {saved} (built in {built['build_s']} s)")
        else:
            cpu, started = time.process_time(), time.perf_counter()
            for start in range(0, len(base), args.batch):
                index.add(ids[start:start + args.batch], base[start:start + args.batch], threads=args.threads)
                if start // args.batch % max(1, 65_536 // args.batch) == 0:
                    log(f"{setting}: {start + len(ids[start:start + args.batch])} rows added, "
                        f"{time.perf_counter() - started:.0f} s")
            built = {"build_s": round(time.perf_counter() - started, 1), "build_cpu_s": round(time.process_time() - cpu, 1),
                     "threads": args.threads, "batch": args.batch, "load_avg_after_build": os.getloadavg()}
            log(f"{setting}: built {json.dumps(built)}")
            if saved is not None:
                saved.parent.mkdir(parents=True, exist_ok=True)
                index.save(str(saved))
                saved.with_suffix(".json").write_text(json.dumps(built))
        for ef in args.ef:
            for candidates in args.candidates:
                index.expansion_search = max(ef, candidates)
                row: dict[str, object] = {"setting": setting, **built, "ef": ef, "candidates": candidates,
                                          "file_mib": round(index.serialized_length / 2**20, 1)}
                for name, queries in query_sets.items():
                    found: list[np.ndarray] = []
                    times: list[float] = []
                    for query in queries:
                        began = time.perf_counter()
                        keys = np.asarray(index.search(query, candidates, threads=1).keys, dtype=np.int64)
                        rescored = keys[np.argsort(-(base[keys] @ query), kind="stable")][:TOP]
                        times.append((time.perf_counter() - began) * 1000)
                        found.append(np.pad(rescored, (0, TOP - len(rescored)), constant_values=-1))
                    row[f"recall_{name}"] = round(bench_vector_tiers.recall(np.stack(found), truth[name]), 4)
                    row[f"p50_ms_{name}"] = round(statistics.median(times), 2)
                    row[f"p95_ms_{name}"] = round(float(np.percentile(times, 95)), 2)
                row["load_avg"] = os.getloadavg()
                runs.append(row)
                log(json.dumps(row))
                print(json.dumps(row), flush=True)
        del index
    out["load_avg_end"] = os.getloadavg()
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
