"""Self-calibration's searches shared with a forked child against one process, alternated (#45).

    python bench/bench_calibration_processes.py [--kb DIR] [--rounds 6] [--docs 300] [--compare shared]

Without --kb, the first --docs tldr pages are synced into $PNK_BENCH_DIR/kbcal (the real packaged
model; the sync's own calibration is not timed). Then `self_calibrate` runs on that KB with the
sync's model, once with its questions shared with a forked child (calibration/two_processes.py, as
a sync does on a KB this small) and once all in this process, alternated --rounds times; every
run's rows and fit must equal the first one-process run's (the bench fails otherwise). Prints each
run's wall and CPU seconds (the child's included) and the medians; JSON in
bench/results/calibration_processes.json.

--compare shared: instead, each question's two searches sharing their work (`Searcher.search_twice`,
search/twice.py) against two separate searches (`self_calibration.question_rows`), both as a sync
runs them (shared with a child where it would), alternated the same way, rows and fit equal in every run;
JSON in bench/results/calibration_shared.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_sync  # (the corpus, the KB and the model as the cold-sync bench makes them)


def synced_kb(docs: int) -> Path:
    from pinakes.sync import SyncOptions
    from pinakes.sync.engine import run_sync

    root = bench_sync.WORK / "kbcal"
    if root.exists():
        shutil.rmtree(root)
    bench_sync.make_kb(root, bench_sync.corpus_files(docs))
    model, _ = bench_sync.load_real_embedder(root)
    report = run_sync(root, SyncOptions(quiet=True), embedder=model)
    assert report.ok, report.render_text()
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kb", type=Path, help="a synced KB (default: sync --docs tldr pages)")
    parser.add_argument("--docs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--compare", choices=("processes", "shared"), default="processes")
    args = parser.parse_args()

    from pinakes.calibration import self_calibration
    from pinakes.kb import KBPaths
    from pinakes.manifest import load_manifest
    from pinakes.search.calibrated import KBConfidence
    from pinakes.search.core import Searcher, SearchSettings

    root = args.kb or synced_kb(args.docs)
    model, _ = bench_sync.load_real_embedder(root)
    paths = KBPaths(root)
    manifest = load_manifest(paths.manifest)
    on_two, shared_rows = self_calibration.searched_on_two_processes, self_calibration._rows  # pyright: ignore[reportPrivateUsage]  # the bench drives the private part
    names = ("two processes", "one process") if args.compare == "processes" else ("shared", "two searches")

    def one_process(searcher: Searcher, chunks: int) -> bool:
        return False

    def calibrated(first: bool) -> tuple[self_calibration.SelfCalibration, float, float]:
        if args.compare == "processes":
            self_calibration.searched_on_two_processes = on_two if first else one_process
        else:
            self_calibration._rows = shared_rows if first else self_calibration.question_rows  # pyright: ignore[reportPrivateUsage]  # the bench drives the private part
        settings = SearchSettings.from_retrieval(manifest.retrieval, KBConfidence.for_kb(paths, None))
        with Searcher(paths.index_db, settings, embedder=model) as searcher:
            wall, cpu = time.perf_counter(), time.process_time() + bench_sync.children_cpu()
            result = self_calibration.self_calibrate(root, seconds=self_calibration.SYNC_SECONDS, searcher=searcher)
            return result, time.perf_counter() - wall, time.process_time() + bench_sync.children_cpu() - cpu

    reference, _, _ = calibrated(False)
    samples: dict[str, list[tuple[float, float, float]]] = {name: [] for name in names}
    for _ in range(args.rounds):
        for first in (True, False):
            result, wall, cpu = calibrated(first)
            assert not result.stopped_early and result.rows == reference.rows and result.fit == reference.fit, \
                "the calibration's rows or fit differ between the two paths"
            name = names[0] if first else names[1]
            samples[name].append((wall, cpu, os.getloadavg()[0]))
            print(f"{name}: {wall:.2f} s wall, {cpu:.2f} s CPU, load {os.getloadavg()[0]:.1f}", flush=True)
    summary = {name: {"wall_median": statistics.median(s[0] for s in runs), "cpu_median": statistics.median(s[1] for s in runs),
                      "samples": runs} for name, runs in samples.items()}
    faster = sum(two[0] < one[0] for two, one in zip(samples[names[0]], samples[names[1]], strict=True))
    for name, values in summary.items():
        print(f"{name}: median {values['wall_median']:.2f} s wall, {values['cpu_median']:.2f} s CPU")
    cpu_pairs = [a[1] / b[1] for a, b in zip(samples[names[0]], samples[names[1]], strict=True)]
    print(f"{names[0]} / {names[1]} CPU, pair by pair: {' / '.join(f'{pair:.3f}' for pair in cpu_pairs)} "
          f"(median {statistics.median(cpu_pairs):.3f})")
    print(f"{names[0]} faster in {faster} of {args.rounds} pairs; {len(reference.rows)} rows, equal in every run")
    out = Path(__file__).resolve().parent / "results" / f"calibration_{args.compare}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"kb": str(root), "rows": len(reference.rows), "faster_pairs": faster, **summary}, indent=2) + "\n")


if __name__ == "__main__":
    main()
