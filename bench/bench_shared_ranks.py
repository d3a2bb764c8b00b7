"""What sharing vector ranks between near-duplicates adds to fusion (search/shared_ranks.py), at every
list width a KB's `candidates_per_source` can ask for, in its cheapest and costliest shapes.

    python bench/bench_shared_ranks.py [--dim 384] [--repeat 20]

For each width (50, 100, 500, 1,000, 10,000 rows of unit vectors) and shape, the median over
`--repeat` runs of: RRF over a keyword list and the vector list (`reciprocal_rank_fusion`, the
baseline, measured in the same run), and `near_duplicates_above` + that fusion (every keyword-ranked
chunk defers to its near-duplicates above it: the costliest fusion). Shapes: `none` (random
vectors: no pair near), `clique` (every row a near-duplicate of every other, cosines to the query
within noise: every row shares), `chain` (each row near only the one before it). Prints milliseconds and the ratio to the baseline.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from pinakes.search.threads import prefer_one_blas_thread

prefer_one_blas_thread()  # as a searching process does, before NumPy loads

import numpy as np  # noqa: E402

from pinakes.search.fusion import reciprocal_rank_fusion  # noqa: E402
from pinakes.search.shared_ranks import near_duplicates_above  # noqa: E402
from pinakes.search.vectors import VectorMatrix  # noqa: E402

WIDTHS = (50, 100, 500, 1_000, 10_000)


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)


def shaped(shape: str, n: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    if shape == "none":
        return unit(rng.standard_normal((n, dim)))
    if shape == "clique":
        return unit(np.ones((n, dim)) + 0.01 * rng.standard_normal((n, dim)))
    rows = [unit(rng.standard_normal(dim))]  # chain: consecutive rows at cosine 0.96, the rest apart
    for _ in range(n - 1):
        step = unit(rng.standard_normal(dim))
        step = unit(step - (step @ rows[-1]) * rows[-1])
        angle = np.arccos(0.96)
        rows.append(unit(np.cos(angle) * rows[-1] + np.sin(angle) * step))
    return np.stack(rows)


def median_ms(run: Callable[[], object], repeat: int) -> float:
    times: list[float] = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print("| rows | shape | fusion ms | near-duplicates + fusion ms | ratio | positions with one above |")
    print("|---|---|---|---|---|---|")
    for n in WIDTHS:
        ids = np.arange(1, n + 1, dtype=np.int64) * 7
        keyword = [(int(i), float(n - k)) for k, i in enumerate(ids[::3])]
        vector = [(int(i), 0.8 - k * 1e-6) for k, i in enumerate(ids)]  # all within noise of each other
        for shape in ("none", "clique", "chain"):
            rows = VectorMatrix(shaped(shape, n, args.dim, rng), ids, np.zeros(n, dtype=np.int32), ())
            near = near_duplicates_above(vector, rows)
            base = median_ms(lambda k=keyword, v=vector: reciprocal_rank_fusion(k, v, 60), args.repeat)
            both = median_ms(lambda k=keyword, v=vector, r=rows: reciprocal_rank_fusion(
                k, v, 60, near_duplicates=near_duplicates_above(v, r)), args.repeat)
            moved = 0 if near is None else len(near)
            print(f"| {n:,} | {shape} | {base:.3f} | {both:.3f} | {both / base:.2f}x | {moved} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
