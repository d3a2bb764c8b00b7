"""Issue #46's latency bar, whole searches: this tree against the tree before #46 (`207c877`), each in
its own process on one index, driven query by query from one driver (which process goes first
alternates), so both arms meet the same load at the same moment.

    git archive 207c877 src | tar -x -C /tmp/verdict46-base
    nice -n -5 python bench/verdict46_latency.py --base /tmp/verdict46-base [--index DIR/.pinakes/index.db]

Module swaps in one process (bench_bm25f.py, bench_fusion_fit.py) time #46's modules against their
own past; between 207c877 and now search/bm25.py also gained #45's keyword pool, which those swaps
would undo. Here each arm is a whole tree: its Searcher with default settings, rerank off, over
bench_search.py's corpus synced to 10k chunks with bench_bm25f.py's hash embedder at 384 dimensions
(the index built by this tree; the vector side's code is the same in both). Each worker times its
own `search()` (wall: perf_counter; CPU: process_time, steadier when the machine is loaded; and the
Searcher's own per-stage timings); the driver only passes queries and collects times. `--base` may be
any tree: 207c877, or this commit with #46's merges reverted on a scratch worktree (docs/QUALITY.md,
"Against the bar, through the product"), which leaves #45's search changes on both sides.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import cast

REPO = Path(__file__).resolve().parent.parent
QUERIES = 120
WARMUP = 10
MODES = ("bm25", "hybrid")


def worker(index: Path) -> int:
    sys.path.insert(0, str(REPO))
    from pinakes.search.core import Searcher, SearchSettings
    from tests.fakes import HashEmbedder

    searcher = Searcher(index, SearchSettings(rerank=False), embedder=HashEmbedder(dim=384))
    for line in sys.stdin:
        mode, query = line.rstrip("\n").split("\t", 1)
        started, cpu = time.perf_counter(), time.process_time()
        result = searcher.search(query, mode=mode)
        elapsed, spent = (time.perf_counter() - started) * 1000, (time.process_time() - cpu) * 1000
        top = result.passages[0].path if result.passages else ""
        print(json.dumps([round(elapsed, 4), round(spent, 4), top, result.timings]), flush=True)
    searcher.close()
    return 0


def drive(index: Path, base: Path, queries: int, rounds: int) -> dict[str, object]:
    sys.path.insert(0, str(REPO / "bench"))
    import bench_search

    here = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    before = dict(os.environ, PYTHONPATH=str(base / "src"))
    arms = {name: subprocess.Popen([sys.executable, __file__, "worker", "--index", str(index)], env=env,
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            for name, env in (("before", before), ("after", here))}
    asked = bench_search.questions()
    chosen = asked[:: max(1, len(asked) // queries)][:queries]
    samples: dict[str, list[float]] = {f"{arm} {mode}": [] for arm in arms for mode in MODES}
    cpu: dict[str, list[float]] = {f"{arm} {mode}": [] for arm in arms for mode in MODES}
    same_top = {mode: 0 for mode in MODES}

    stages: dict[str, dict[str, list[float]]] = {f"{arm} {mode}": {} for arm in arms for mode in MODES}

    def ask(arm: str, mode: str, query: str) -> tuple[float, float, str, dict[str, float]]:
        process = arms[arm]
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(f"{mode}\t{query}\n")
        process.stdin.flush()
        elapsed, spent, top, timings = json.loads(process.stdout.readline())
        return float(elapsed), float(spent), str(top), timings

    try:
        for round_number in range(rounds + 1):  # round 0 warms both
            for number, query in enumerate(chosen[:WARMUP] if round_number == 0 else chosen):
                order = ["before", "after"] if (number + round_number) % 2 == 0 else ["after", "before"]
                for mode in MODES:
                    tops = {}
                    for arm in order:
                        elapsed, spent, tops[arm], timings = ask(arm, mode, query)
                        if round_number:
                            for stage, value in timings.items():
                                stages[f"{arm} {mode}"].setdefault(stage, []).append(float(value))
                            samples[f"{arm} {mode}"].append(elapsed)
                            cpu[f"{arm} {mode}"].append(spent)
                    if round_number == 1:
                        same_top[mode] += tops["before"] == tops["after"]
    finally:
        for process in arms.values():
            assert process.stdin is not None
            process.stdin.close()
            process.wait()
    result: dict[str, object] = {"chunks": bench_search.chunk_count(index), "queries": len(chosen), "rounds": rounds,
                                 "load_average": [round(v, 2) for v in os.getloadavg()],
                                 "same_top_passage": same_top}
    for mode in MODES:
        differences = [a - b for a, b in zip(samples[f"after {mode}"], samples[f"before {mode}"], strict=True)]
        result[f"{mode}: after - before, median per query ms"] = round(statistics.median(differences), 3)
        for arm in arms:
            values = sorted(samples[f"{arm} {mode}"])
            result[f"{mode}: {arm}"] = {"p50_ms": round(statistics.median(values), 3),
                                        "p95_ms": round(values[int(0.95 * (len(values) - 1))], 3)}
        result[f"{mode}: CPU ms p50 before, after"] = [round(statistics.median(cpu[f"{arm} {mode}"]), 3)
                                                       for arm in ("before", "after")]
        result[f"{mode}: stage p50 ms (before, after)"] = {
            stage: [round(statistics.median(stages[f"{arm} {mode}"].get(stage) or [0.0]), 3) for arm in ("before", "after")]
            for stage in stages[f"after {mode}"]}
        p50 = {arm: cast("dict[str, float]", result[f"{mode}: {arm}"])["p50_ms"] for arm in ("before", "after")}
        result[f"{mode}: p50 after - before ms"] = round(p50["after"] - p50["before"], 3)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", nargs="?", default="drive", choices=["drive", "worker"])
    parser.add_argument("--index", type=Path, default=Path("/work/cache/fusion/bench/bm25f-kb-10000/.pinakes/index.db"))
    parser.add_argument("--base", type=Path, default=Path("/tmp/verdict46-base"))
    parser.add_argument("--queries", type=int, default=QUERIES)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.command == "worker":
        return worker(args.index)
    result = drive(args.index, args.base, args.queries, args.rounds)
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
