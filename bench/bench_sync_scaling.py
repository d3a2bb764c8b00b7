"""Is the first sync linear in the number of new documents? (issue "Sync at real scale"). One command:

    python bench/bench_sync_scaling.py [--sizes 2000,8000,32000] [--max-docs 8000]

For each N, a fresh KB of N tldr pages (English, then translations; no sidecars, so every document
gets a minted ULID and a sidecar write, two fsyncs each) is synced for the first time in a fresh
child process, in-process there (`run_sync` with the test suite's FakeEmbedder, so the model does not
dominate). Reported per N: total seconds and seconds per document, the sync's own stage timings
(walk, pair = the plan, pipeline = identity + extract/chunk/embed/commit + graph), the time spent in
`apply_identity` (sidecar writes and their walk-cache rows; timed by wrapping the function) and in
the graph derivation. The baseline is the smallest N of the same run: ratio = (t(N)/N) / (t(N0)/N0),
so 1.0 means linear (32k vs 2k: t(32k)/t(2k)/16). --max-docs drops larger sizes (quick run: 8000).
Results: bench/results/sync_scaling.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from typing import Any

from bench_sync import REPO, WORK, corpus_files, freeze_source, make_kb


def single(n: int) -> dict[str, object]:
    sys.path.append(str(REPO))  # tests.fakes; pinakes comes from the parent's snapshot (PYTHONPATH)
    from pinakes.pipeline import pair
    from pinakes.sync import SyncOptions
    from pinakes.sync.engine import run_sync
    from tests.fakes import FakeEmbedder

    root = WORK / f"scale-{n}"
    files = corpus_files(n)
    assert len(files) == n, f"the corpus holds only {len(files)} documents"
    started = time.perf_counter()
    make_kb(root, files)
    setup = time.perf_counter() - started

    identity_seconds = 0.0
    original = pair.apply_identity

    def timed_apply_identity(*args: Any, **kwargs: Any) -> None:  # apply_identity's own, passed through
        nonlocal identity_seconds
        began = time.perf_counter()
        try:
            original(*args, **kwargs)
        finally:
            identity_seconds += time.perf_counter() - began

    pair.apply_identity = timed_apply_identity
    wall, cpu = time.perf_counter(), time.process_time()
    report = run_sync(root, SyncOptions(quiet=True), embedder=FakeEmbedder())
    seconds, cpu_seconds = time.perf_counter() - wall, time.process_time() - cpu
    assert report.ok, report.render_text()
    assert report.indexed == n and len(report.sidecars_written) == n, (report.indexed, len(report.sidecars_written))
    return {"documents": n, "setup_seconds": setup, "seconds": seconds, "cpu_seconds": cpu_seconds,
            "seconds_per_doc": seconds / n, "timings": dict(report.timings),
            "apply_identity_seconds": identity_seconds, "graph_seconds": report.graph_seconds,
            "chunks": report.chunks_embedded, "source_bytes": sum(src.stat().st_size for src, _ in files)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="2000,8000,32000")
    parser.add_argument("--max-docs", type=int, default=None, help="skip sizes above this (quick run: 8000)")
    parser.add_argument("--single", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    if args.single is not None:
        print(json.dumps(single(args.single)))
        return
    source = freeze_source()
    print(f"source: {source}", flush=True)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if args.max_docs is not None:
        sizes = [n for n in sizes if n <= args.max_docs]
    runs: list[dict[str, Any]] = []  # each run's JSON, as --single printed it
    for n in sizes:
        out = subprocess.run([sys.executable, __file__, "--single", str(n)], check=True, capture_output=True,
                             text=True)
        run = json.loads(out.stdout.strip().splitlines()[-1])
        runs.append(run)
        base = runs[0]
        ratio = (run["seconds"] / n) / (base["seconds"] / base["documents"])
        run["ratio_per_doc_to_smallest"] = ratio
        t = run["timings"]
        per = 1000 / n
        print(f"{n:>6} new docs: {run['seconds']:7.1f}s = {run['seconds'] * per:.2f} ms/doc "
              f"(ratio to {base['documents']}: {ratio:.2f}; 1.0 = linear) | walk {t['walk'] * per:.3f}, "
              f"pair(plan) {t['pair'] * per:.3f}, apply_identity {run['apply_identity_seconds'] * per:.3f}, "
              f"pipeline {t['pipeline'] * per:.3f} (of which graph {(run['graph_seconds'] or 0) * per:.3f}) "
              f"ms/doc; CPU {run['cpu_seconds']:.1f}s", flush=True)
    if len(runs) >= 2:
        first, last = runs[0], runs[-1]
        scale = last["documents"] / first["documents"]
        linearity = last["seconds"] / first["seconds"] / scale
        print(f"t({last['documents']}) / t({first['documents']}) / {scale:g} = {linearity:.2f} (1.0 = linear)")
    out_path = REPO / "bench" / "results" / "sync_scaling.json"
    out_path.parent.mkdir(exist_ok=True)
    out_path.write_text(json.dumps({"date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "source": source, "runs": runs},
                                   indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
