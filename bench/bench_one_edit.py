"""What one edited document costs a sync of a large KB, under two versions, in one run (issue #45:
"the one-edit cost stays where it is at 1M chunks").

    nice -n 10 python bench/bench_one_edit.py KB [--base main] [--repeat 3] [--json out.json]

KB is a synced KB (e.g. a copy of bench_writer.py's 917k-chunk first-sync KB: the KB is edited).
For each version in turn (`--base`'s `src/pinakes` via git archive, then the working tree's, as
bench/compare_noop.py snapshots them), `--repeat` times: one paragraph is appended to the same
document, then `pnk sync` runs in a fresh child process (run_sync with bench_writer.py's
`FastEmbedder`, no model cost) and reports its wall seconds, the graph stage's seconds and its
stage timings. The versions run one after the other, not alternately: the graph is updated only
when the index's graph is the one the working tree last wrote or derived (`pipeline.graph_update`),
so its first sync after the baseline's derives the graph in full; it is reported apart ("warm-up").
At the end, the working tree's last census is checked against a full derivation of the same index.
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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_noop import snapshot

WORK = Path(os.environ.get("PNK_BENCH_DIR", "/tmp/pnk-bench-one-edit"))


def child(root: Path, full_check: bool) -> None:
    """One sync of `root` in this process (PYTHONPATH names the code under test); prints JSON."""
    from bench_writer import FastEmbedder

    from pinakes.sync import SyncOptions
    from pinakes.sync.engine import run_sync

    try:  # the KB's self-calibration after a sync is not what is measured (and costs ~30 s)
        import pinakes.calibration.on_sync as on_sync

        def no_calibration(*_args: object, **_kwargs: object) -> None:
            return None

        on_sync.after_sync = no_calibration
    except ImportError:
        pass
    started = time.perf_counter()
    report = run_sync(root, SyncOptions(quiet=True), embedder=FastEmbedder())
    wall = time.perf_counter() - started
    assert report.ok, report.render_text()
    result: dict[str, Any] = {"wall_seconds": round(wall, 2), "graph_seconds": round(report.graph_seconds or 0.0, 2),
                              "timings": {k: round(v, 2) for k, v in report.timings.items()},
                              "changed": report.changed, "census": report.graph_census}
    if full_check:
        import sqlite3

        from pinakes.pipeline.graph import derive_structure

        conn = sqlite3.connect(root / ".pinakes" / "index.db", isolation_level=None)
        try:
            began = time.perf_counter()
            full = derive_structure(conn)
            result["full_derivation_seconds"] = round(time.perf_counter() - began, 2)
        finally:
            conn.close()
        result["census_matches_full"] = all((report.graph_census or {}).get(kind) == count
                                            for kind, count in full.items())
    print(json.dumps(result), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kb", type=Path)
    parser.add_argument("--base", default="main")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--full-check", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.kb, args.full_check)
        return
    versions = {args.base: snapshot(args.base, WORK / f"code-base-{os.getpid()}"),
                "working tree": snapshot(None, WORK / f"code-head-{os.getpid()}")}
    edited = sorted((args.kb / "docs").rglob("*.md"))[len(list((args.kb / "docs").rglob("*.md"))) // 2]
    results: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cores": os.cpu_count(),
                               "load_before": os.getloadavg(), "kb": str(args.kb),
                               "document": str(edited.relative_to(args.kb)), "runs": {}}
    for name, source in versions.items():
        samples: list[dict[str, Any]] = []
        rounds = args.repeat + (1 if name == "working tree" else 0)  # its first sync derives in full
        for number in range(rounds):
            with edited.open("a", encoding="utf-8") as handle:
                handle.write(f"\n\nAn edit, number {number} under {name}: one more paragraph.\n")
            env = {**os.environ, "PYTHONPATH": f"{source}{os.pathsep}{Path(__file__).resolve().parent}"}
            last = name == "working tree" and number == rounds - 1
            done = subprocess.run([sys.executable, __file__, str(args.kb), "--child",
                                   *(["--full-check"] if last else [])],
                                  env=env, check=True, capture_output=True, text=True)
            sample = json.loads(done.stdout.strip().splitlines()[-1])
            sample["load"] = os.getloadavg()
            samples.append(sample)
            print(name, sample, file=sys.stderr, flush=True)
        if name == "working tree":
            results["warm_up"] = samples.pop(0)
        results["runs"][name] = samples
        results.setdefault("median_wall_seconds", {})[name] = round(statistics.median(s["wall_seconds"] for s in samples), 2)
        results.setdefault("median_graph_seconds", {})[name] = round(statistics.median(s["graph_seconds"] for s in samples), 2)
    results["load_after"] = os.getloadavg()
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
