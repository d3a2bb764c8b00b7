"""The keyword side's BM25F (issue #46) against the keyword side before it, timed in one process on
one index: warm p50/p95 of `bm25` and `hybrid` searches, the two arms interleaved query by query
(which goes first alternates, so neither always finds the pages the other warmed).

    python bench/bench_bm25f.py [--size 10000] [--base 207c877] [--cache DIR] [--json out.json]
    python bench/bench_bm25f.py --stage      # the keyword stage alone (plan + BM25F), both modules

The index is bench_search.py's corpus (cranfield and tldr-nl2bash-dev documents, copied until the
index holds `--size` chunks) built by the sync; tldr's pages carry a title, so most chunks have a
document context. Vectors come from a hash embedder at the packaged model's 384 dimensions: the
vector side is the same code in both arms, and the model's query embedding (several ms) would only
add the same cost to each. The "before" arm is `--base`'s search/bm25.py, loaded from git and put in
place of this tree's module for its searches.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import cast

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import bench_search  # noqa: E402

QUERIES = 120
WARMUP = 10


class Hash384:
    """tests.fakes.HashEmbedder at 384 dimensions, plus the VectorsByText surface build_sized_kb uses."""

    def __init__(self) -> None:
        from tests.fakes import HashEmbedder

        self._inner = HashEmbedder(dim=384)
        self.identity = self._inner.identity
        self.embedded = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    def save(self) -> None:
        pass


def module_at(revision: str) -> ModuleType:
    source = subprocess.run(["git", "-C", str(REPO), "show", f"{revision}:src/pinakes/search/bm25.py"],
                            check=True, capture_output=True, text=True).stdout
    path = Path(os.environ.get("TMPDIR") or "/tmp") / f"pnk_bm25_{revision.replace('~', '_').replace('/', '_')}.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("pnk_bm25_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def run(size: int, base: str, cache: Path) -> dict[str, object]:
    import pinakes.search.core as core
    from pinakes.search.core import Searcher, SearchSettings

    embedder = Hash384()
    # Hash384 has the VectorsByText surface build_sized_kb uses (duck-typed, not a subclass)
    index = bench_search.build_sized_kb(cache / f"bm25f-kb-{size}", size, cast("bench_search.VectorsByText", embedder))
    arms = {"before": module_at(base), "after": core.bm25}
    asked = bench_search.questions()
    queries = asked[:: max(1, len(asked) // QUERIES)][:QUERIES]
    # Each arm's own KeywordOptions: the "before" module compares the options' enums by identity.
    settings = {arm: SearchSettings(rerank=False, keyword=module.KeywordOptions()) for arm, module in arms.items()}
    searcher = Searcher(index, settings["after"],
                        embedder=embedder._inner)  # pyright: ignore[reportPrivateUsage] -- the model Hash384 wraps
    samples: dict[str, list[float]] = {f"{arm} {mode}": [] for arm in arms for mode in ("bm25", "hybrid")}
    same_top = 0
    try:
        for number, query in enumerate(queries[:WARMUP] + queries):
            tops: dict[str, list[str]] = {}
            order = list(arms.items()) if number % 2 == 0 else list(arms.items())[::-1]  # neither arm always first
            for arm, module in order:
                core.bm25 = module
                searcher.settings = settings[arm]
                for mode in ("bm25", "hybrid"):
                    started = time.perf_counter()
                    found = searcher.search(query, mode=mode)
                    elapsed = (time.perf_counter() - started) * 1000
                    if number >= WARMUP:
                        samples[f"{arm} {mode}"].append(elapsed)
                    if mode == "bm25":
                        tops[arm] = [p.path for p in found.passages[:1]]
            same_top += number >= WARMUP and tops["before"] == tops["after"]
    finally:
        core.bm25 = arms["after"]
        searcher.close()
    result: dict[str, object] = {"chunks": bench_search.chunk_count(index), "queries": len(queries), "base": base,
                                 "load_average": [round(v, 2) for v in os.getloadavg()],
                                 "same_top_keyword_passage": same_top}
    for mode in ("bm25", "hybrid"):  # the same query's two searches, a moment apart: the load hits both
        differences = [a - b for a, b in zip(samples[f"after {mode}"], samples[f"before {mode}"], strict=True)]
        result[f"after - before {mode}, median per query"] = round(statistics.median(differences), 3)
    for arm, values in samples.items():
        ordered = sorted(values)
        result[arm] = {"p50_ms": round(statistics.median(values), 3),
                       "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 3)}
    return result


def keyword_stage(size: int, base: str, cache: Path, rounds: int = 5) -> dict[str, object]:
    """The keyword stage alone (plan + BM25 over the pool, 50 rows, as a hybrid search asks), both
    modules on one connection, alternating first, the first round a warm-up: what the change touches,
    without the rest of a search's noise."""
    from pinakes.index import schema
    from pinakes.search import bm25
    from pinakes.search.generation import open_generation
    from pinakes.search.query import analyze

    # Hash384 has the VectorsByText surface build_sized_kb uses (duck-typed, not a subclass)
    index = bench_search.build_sized_kb(cache / f"bm25f-kb-{size}", size, cast("bench_search.VectorsByText", Hash384()))
    arms = {"before": module_at(base), "after": bm25}
    generation = open_generation(index, schema.index_signature(index))
    asked = bench_search.questions()
    queries = [analyze(q, generation.tokenizer) for q in asked[:: max(1, len(asked) // QUERIES)][:QUERIES]]
    samples: dict[str, list[float]] = {arm: [] for arm in arms}
    try:
        for round_number in range(rounds):
            for number, query in enumerate(queries):
                order = list(arms.items()) if (number + round_number) % 2 == 0 else list(arms.items())[::-1]
                for arm, module in order:
                    options = module.KeywordOptions()
                    started = time.perf_counter()
                    plan = module.plan_keywords(generation.conn, query, options, generation.chunk_count,
                                                generation.document_frequencies)
                    module.bm25_search(generation.conn, plan, 50, options=options)
                    if round_number:
                        samples[arm].append((time.perf_counter() - started) * 1000)
    finally:
        generation.conn.close()
    differences = [a - b for a, b in zip(samples["after"], samples["before"], strict=True)]
    return {"stage": "keyword (plan + search, 50 rows)", "chunks": bench_search.chunk_count(index),
            "load_average": [round(v, 2) for v in os.getloadavg()],
            **{arm: {"p50_ms": round(statistics.median(v), 3)} for arm, v in samples.items()},
            "after - before, median per query": round(statistics.median(differences), 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--base", default="207c877",
                        help="the git revision whose search/bm25.py is 'before' (default: the last before BM25F)")
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("TMPDIR") or "/tmp") / "pnk-bm25f")
    parser.add_argument("--stage", action="store_true", help="time the keyword stage alone")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    result = keyword_stage(args.size, args.base, args.cache) if args.stage else run(args.size, args.base, args.cache)
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
