"""The keyword side alone on a large KB, this tree against another checkout, same run, same KB
(search/keyword_pool.py: FTS5's pool without bm25() on every matched row).

    nice -n 10 python bench/bench_keyword_scale.py --kb DIR --base /work/main/src [--rounds 2]

Each round runs one process per source tree (base first, then this), alternately: it opens the
KB's index read-only, plans and runs every query of bench/bench_search_scale.py once ("first": each
query's terms met for the first time by the process, as in bench_search_scale's warm run), then
all again ("again": document frequencies remembered), timing `plan_keywords` plus `bm25_search`
(what a warm `Searcher` in `--mode bm25` spends on the keyword side). It prints p50/p95 per tree
and whether both trees returned the same (chunk id, score) lists, to the float.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import cast

REPO = Path(__file__).resolve().parent.parent
CHILD = """
import json, sys, time
from pathlib import Path
from pinakes.search import bm25
from pinakes.search.generation import open_generation
from pinakes.search.query import analyze
queries = json.loads(sys.argv[2])
generation = open_generation(Path(sys.argv[1]) / ".pinakes" / "index.db", None)
options = bm25.KeywordOptions()
def once(query):
    plan = bm25.plan_keywords(generation.conn, analyze(query, generation.tokenizer), options,
                              generation.chunk_count, generation.document_frequencies)
    return bm25.bm25_search(generation.conn, plan, int(sys.argv[3]), options=options)
first = []
for query in queries:
    started = time.perf_counter()
    once(query)
    first.append((time.perf_counter() - started) * 1000)
timings, hits = [], []
for query in queries:
    started = time.perf_counter()
    found = once(query)
    timings.append((time.perf_counter() - started) * 1000)
    hits.append([[chunk_id, score.hex()] for chunk_id, score in found])
print(json.dumps({"ms": timings, "first_ms": first, "hits": hits}))
"""


def run(kb: Path, src: Path, queries: list[str], limit: int) -> dict[str, list[object]]:
    done = subprocess.run([sys.executable, "-c", CHILD, str(kb), json.dumps(queries), str(limit)],
                          env={**os.environ, "PYTHONPATH": str(src)}, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"p50": round(statistics.median(ordered), 1), "p95": round(ordered[round(0.95 * (len(ordered) - 1))], 1)}


def main() -> None:
    sys.path.insert(0, str(REPO / "bench"))
    from bench_search_scale import QUERIES

    parser = argparse.ArgumentParser()
    parser.add_argument("--kb", type=Path, required=True)
    parser.add_argument("--base", type=Path, required=True, help="the src/ of the checkout to compare with")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--limit", type=int, default=50, help="candidates_per_source")
    args = parser.parse_args()
    report: dict[str, object] = {}
    same = True
    for round_number in range(args.rounds):
        base = run(args.kb, args.base, QUERIES, args.limit)
        this = run(args.kb, REPO / "src", QUERIES, args.limit)
        same = same and base["hits"] == this["hits"]
        report[f"round {round_number + 1}"] = {
            tree: {"first": percentiles(cast("list[float]", answer["first_ms"])),
                   "again": percentiles(cast("list[float]", answer["ms"]))}
            for tree, answer in (("base", base), ("this", this))}
        print(json.dumps(report[f"round {round_number + 1}"]), flush=True)
    report["identical_hits"] = same
    report["queries"] = len(QUERIES)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
