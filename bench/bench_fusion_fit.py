"""Latency of issue #46's fusion changes (weighted RRF, search/fusion.py; bm25_ratio's BM25F bound,
search/signals.py) against `--base`'s modules, timed in one process on one index: warm p50/p95 of
hybrid searches (rerank off, so confidence features are computed on every one), the two arms
interleaved query by query, which goes first alternating.

    python bench/bench_fusion_fit.py [--size 10000] [--base 113c8a4] [--cache DIR] [--json out.json]
    python bench/bench_fusion_fit.py --stage   # the fusion and the keyword features alone, both arms

The index is bench_search.py's corpus built by the sync to `--size` chunks with bench_bm25f.py's hash
embedder at 384 dimensions (the vector side is the same code in both arms). The "before" arm swaps in
`--base`'s search/fusion.py (called without weights) and search/signals.py; the "after" arm searches
with this tree's, at fixed RRF weights (what a KB without [retrieval.fusion] runs) and at fitted ones
(2:1, k 20), which cost the same arithmetic.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import cast

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import bench_bm25f  # noqa: E402
import bench_search  # noqa: E402

QUERIES = 120
Ranked = list[tuple[int, float]]  # (chunk id, score), best first
WARMUP = 10


def module_at(revision: str, relative: str, name: str) -> ModuleType:
    source = subprocess.run(["git", "-C", str(REPO), "show", f"{revision}:src/pinakes/{relative}"],
                            check=True, capture_output=True, text=True).stdout
    path = Path(os.environ.get("TMPDIR") or "/tmp") / f"{name}_{revision}.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def run(size: int, base: str, cache: Path) -> dict[str, object]:
    import pinakes.search.core as core
    import pinakes.search.signals as signals
    from pinakes.search.core import Searcher, SearchSettings
    from pinakes.search.fusion import FusionWeights

    embedder = bench_bm25f.Hash384()
    # Hash384 has the VectorsByText surface build_sized_kb uses (duck-typed, not a subclass)
    index = bench_search.build_sized_kb(cache / f"bm25f-kb-{size}", size, cast("bench_search.VectorsByText", embedder))
    old_fusion = module_at(base, "search/fusion.py", "pnk_fusion_before")
    old_signals = module_at(base, "search/signals.py", "pnk_signals_before")
    fuse_now = core.reciprocal_rank_fusion

    def fuse_before(keyword: object, vector: object, k: int, _weights: object = None) -> object:
        return old_fusion.reciprocal_rank_fusion(keyword, vector, k)

    plain = SearchSettings(rerank=False)
    arms = {"before": (fuse_before, old_signals, plain), "after fixed RRF": (fuse_now, signals, plain),
            "after fitted 2:1 k20": (fuse_now, signals, dataclasses.replace(plain, rrf_k=20,
                                                                          fusion_weights=FusionWeights(2.0, 1.0)))}
    asked = bench_search.questions()
    queries = asked[:: max(1, len(asked) // QUERIES)][:QUERIES]
    inner = embedder._inner  # pyright: ignore[reportPrivateUsage] -- the bench searches with the wrapped HashEmbedder
    searcher = Searcher(index, plain, embedder=inner)
    samples: dict[str, list[float]] = {arm: [] for arm in arms}
    try:
        for number, query in enumerate(queries[:WARMUP] + queries):
            order = list(arms.items())
            order = order[number % len(order):] + order[:number % len(order)]  # each arm first in turn
            for arm, (fuse, signal_module, settings) in order:
                core.reciprocal_rank_fusion = fuse
                sys.modules["pinakes.search.signals"] = signal_module
                searcher.settings = settings
                started = time.perf_counter()
                result = searcher.search(query, mode="hybrid")
                elapsed = (time.perf_counter() - started) * 1000
                assert result.confidence.features is not None or not result.passages
                if number >= WARMUP:
                    samples[arm].append(elapsed)
    finally:
        core.reciprocal_rank_fusion = fuse_now
        sys.modules["pinakes.search.signals"] = signals
        searcher.close()
    out: dict[str, object] = {"chunks": bench_search.chunk_count(index), "queries": len(queries), "base": base,
                              "load_average": [round(v, 2) for v in os.getloadavg()]}
    for arm, values in samples.items():
        ordered = sorted(values)
        out[arm] = {"p50_ms": round(statistics.median(values), 3), "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 3)}
        if arm != "before":
            differences = [a - b for a, b in zip(values, samples["before"], strict=True)]
            out[f"{arm} - before, median per query"] = round(statistics.median(differences), 3)
    return out


def stage(size: int, base: str, cache: Path, rounds: int = 5) -> dict[str, object]:
    """What the change touches, alone, on each query's real lists and plan (both arms alternating
    first, the first round a warm-up): the fusion of 50 + 50 candidates, and the keyword features
    (`keyword_features`, which now takes the BM25F bound `scored_weights` builds)."""
    from pinakes.index import schema
    from pinakes.search import bm25, fusion, signals
    from pinakes.search.core import Searcher, SearchSettings
    from pinakes.search.generation import open_generation
    from pinakes.search.query import analyze

    embedder = bench_bm25f.Hash384()
    # Hash384 has the VectorsByText surface build_sized_kb uses (duck-typed, not a subclass)
    index = bench_search.build_sized_kb(cache / f"bm25f-kb-{size}", size, cast("bench_search.VectorsByText", embedder))
    old_fusion = module_at(base, "search/fusion.py", "pnk_fusion_before")
    old_signals = module_at(base, "search/signals.py", "pnk_signals_before")
    asked = bench_search.questions()
    queries = asked[:: max(1, len(asked) // QUERIES)][:QUERIES]
    lists: list[list[Ranked]] = []
    inner = embedder._inner  # pyright: ignore[reportPrivateUsage] -- the bench searches with the wrapped HashEmbedder
    with Searcher(index, SearchSettings(rerank=False), embedder=inner) as searcher:
        for query in queries:
            found: list[Ranked] = []
            for mode in ("bm25", "vector"):
                passages = searcher.search(query, mode=mode, final_k=50).passages
                found.append([(hash((p.path, p.ordinal)), (p.scores.bm25_score if mode == "bm25" else p.scores.cosine)
                               or 0.0) for p in passages])
            lists.append(found)
    generation = open_generation(index, schema.index_signature(index))
    options = bm25.KeywordOptions()
    plans = [bm25.plan_keywords(generation.conn, analyze(q, generation.tokenizer), options, generation.chunk_count,
                                generation.document_frequencies) for q in queries]
    arms: dict[str, tuple[Callable[[Ranked, Ranked], object], Callable[[bm25.KeywordPlan, Ranked], object]]] = {
        "before": (lambda k, v: old_fusion.reciprocal_rank_fusion(k, v, 60),
                   lambda plan, k: old_signals.keyword_features(generation.conn, old_signals.query_weights(plan),
                                                                k, [c for c, _ in k[:8]], 2.5)),
        "after": (lambda k, v: fusion.reciprocal_rank_fusion(k, v, 60, fusion.FIXED_RRF),
                  lambda plan, k: signals.keyword_features(generation.conn, signals.query_weights(plan), k,
                                                           [c for c, _ in k[:8]], 2.5, signals.scored_weights(plan)))}
    samples: dict[str, list[float]] = {f"{arm} {part}": [] for arm in arms for part in ("fusion", "keyword features")}
    try:
        for round_number in range(rounds):
            for number, ((keyword, vector), plan) in enumerate(zip(lists, plans, strict=True)):
                order = list(arms.items()) if (number + round_number) % 2 == 0 else list(arms.items())[::-1]
                for arm, (fuse, features) in order:
                    started = time.perf_counter()
                    fuse(keyword, vector)
                    middle = time.perf_counter()
                    features(plan, keyword)
                    ended = time.perf_counter()
                    if round_number:
                        samples[f"{arm} fusion"].append((middle - started) * 1000)
                        samples[f"{arm} keyword features"].append((ended - middle) * 1000)
    finally:
        generation.conn.close()
    out: dict[str, object] = {"stage": "fusion of 50 + 50, keyword features", "chunks": bench_search.chunk_count(index),
                              "load_average": [round(v, 2) for v in os.getloadavg()]}
    for name, values in samples.items():
        out[name] = {"p50_ms": round(statistics.median(values), 4)}
    for part in ("fusion", "keyword features"):
        differences = [a - b for a, b in zip(samples[f"after {part}"], samples[f"before {part}"], strict=True)]
        out[f"after - before {part}, median per query"] = round(statistics.median(differences), 4)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--base", default="113c8a4", help="the git revision whose fusion and signals are 'before'")
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("TMPDIR") or "/tmp") / "pnk-bm25f")
    parser.add_argument("--stage", action="store_true", help="time the fusion and keyword features alone")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    result = stage(args.size, args.base, args.cache) if args.stage else run(args.size, args.base, args.cache)
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
