"""The self-calibration's CPU for two versions taking turns, and whether they store the same file (#45).

    python bench/bench_self_calibration.py --base REV [--repeat 5] [--kb DIR] [--docs 300] [--one-process]

A first sync's self-calibration (calibration/on_sync.py) costs ~1.5-2 s of CPU on bench_sync.py's
300 tldr pages, a third of it the model embedding the questions, the rest Python and SQLite. Here `self_calibrate` runs on a synced KB (--kb;
without it, --docs tldr pages synced by bench_calibration_processes.py's `synced_kb`) as a sync runs
it: with the sync's model (loaded and warmed up first, not timed) and `SYNC_SECONDS`; `--one-process`
keeps its questions in the sampling process (calibration/two_processes.py, or two_threads.py before
it, otherwise decides, as in a sync; a forked child's CPU is counted). Each
sample is a process of its own, on a fresh copy of the KB, under REV's `src/pinakes` (git archive)
or the working tree's, the two taking turns (compare_noop.py's `snapshot`). Each sample stores its
calibration (`store`); the bench fails unless every sample's `.pinakes/self-calibration.json` is
the same bytes apart from `made_at` and `seconds`. Printed: each version's process CPU of
`self_calibrate`, that CPU less the model's query calls (the questions' batched vectors: the part
the code around the model decides), and its wall seconds (medians, every sample, the load), and the
working tree's CPU over the base's, turn by turn.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, cast

from bench_sync import WORK, children_cpu, load_real_embedder  # this script's folder is first on sys.path

if TYPE_CHECKING:  # not at run time: a base revision's pinakes may lack a name
    from pinakes.embed.base import QueryBatches

TIMED_FIELDS = ("made_at", "seconds")  # what may differ between two stores of one calibration
KEYS = (("cpu", "CPU"), ("beyond_model", "CPU beyond the model"), ("wall", "wall"))


def sample(kb: Path, one_process: bool) -> dict[str, object]:
    """One calibration of a fresh copy of `kb` in this process (the snapshot on sys.path)."""
    import pinakes

    assert pinakes.__file__ and pinakes.__file__.startswith(os.environ["PYTHONPATH"]), pinakes.__file__
    from pinakes.calibration import self_calibration
    from pinakes.kb import KBPaths
    from pinakes.manifest import load_manifest
    from pinakes.search.calibrated import KBConfidence, self_calibration_path
    from pinakes.search.core import Searcher, SearchSettings

    root = WORK / f"calibration-sample-{os.getpid()}"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(kb, root)
    try:
        paths = KBPaths(root)
        self_calibration_path(paths).unlink(missing_ok=True)  # as before a first sync's calibration
        model, _ = load_real_embedder(root)
        queries = cast("QueryBatches", model)  # the packaged model: it embeds the questions in batches
        queries.embed_queries(["warm up the query side"])
        embedding = [0.0]  # the CPU of the model's query calls (the questions' batches)
        embed_queries = cast(Callable[..., object], queries.embed_queries)

        def clocked_queries(*args: object, **kwargs: object) -> object:
            started = time.process_time()
            try:
                return embed_queries(*args, **kwargs)
            finally:
                embedding[0] += time.process_time() - started

        # the clock in place of the model's own method, on this one instance
        queries.embed_queries = clocked_queries  # pyright: ignore[reportAttributeAccessIssue]  # a method swapped
        if one_process:  # whichever switch this version has
            def never(searcher: object, chunks: object) -> bool:
                return False

            for switch in ("searched_on_two_processes", "searched_on_threads"):
                if hasattr(self_calibration, switch):
                    setattr(self_calibration, switch, never)
        settings = SearchSettings.from_retrieval(load_manifest(paths.manifest).retrieval, KBConfidence.for_kb(paths, None))
        with Searcher(paths.index_db, settings, embedder=model) as searcher:
            wall, cpu = time.perf_counter(), time.process_time() + children_cpu()
            calibration = self_calibration.self_calibrate(root, seconds=self_calibration.SYNC_SECONDS,
                                                          searcher=searcher)
            cpu, wall = time.process_time() + children_cpu() - cpu, time.perf_counter() - wall
        assert calibration.fit is not None and not calibration.stopped_early, calibration.why_not
        stored = self_calibration.store(root, calibration).read_text(encoding="utf-8")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    untimed = {key: value for key, value in json.loads(stored).items() if key not in TIMED_FIELDS}
    # The stored text with the timed fields' values blanked: what must be the same bytes in every sample.
    blanked = "\n".join(line for line in stored.splitlines()
                        if not any(line.lstrip().startswith(f'"{key}":') for key in TIMED_FIELDS))
    return {"cpu": cpu, "beyond_model": cpu - embedding[0], "wall": wall, "load": os.getloadavg()[0], "questions": untimed["questions"],
            "digest": hashlib.sha256(blanked.encode("utf-8")).hexdigest()}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the git revision the working tree takes turns with")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--kb", type=Path, help="a synced KB (default: sync --docs tldr pages)")
    parser.add_argument("--docs", type=int, default=300)
    parser.add_argument("--one-process", action="store_true", help="the questions all in the sampling process")
    parser.add_argument("--sample", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.sample:  # a child: one sample, under the PYTHONPATH it was given
        print(json.dumps(sample(args.sample, args.one_process)))
        return
    from compare_noop import snapshot

    if args.kb is None:
        from bench_calibration_processes import synced_kb

        args.kb = synced_kb(args.docs)
    versions = {args.base: snapshot(args.base, WORK / f"calibration-base-{os.getpid()}"),
                "working tree": snapshot(None, WORK / f"calibration-head-{os.getpid()}")}
    # each sample's JSON: its numbers (questions an int), and its digest a str
    samples: dict[str, list[dict[str, float | str]]] = {name: [] for name in versions}
    try:
        for _ in range(args.repeat):
            for name, source in versions.items():
                done = subprocess.run([sys.executable, __file__, "--base", args.base, "--sample", str(args.kb),
                                       *(["--one-process"] if args.one_process else [])], check=True,
                                      capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(source)})
                samples[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
    finally:
        for source in versions.values():
            shutil.rmtree(source, ignore_errors=True)
    digests = {str(run["digest"]) for runs in samples.values() for run in runs}
    for name, runs in samples.items():
        loads = " / ".join(f"{float(run['load']):.1f}" for run in runs)
        print(f"{name} ({len(runs)} samples, {runs[0]['questions']} questions, load {loads}):")
        for key, label in KEYS:
            values = [float(run[key]) for run in runs]
            print(f"  {label:24s} median {statistics.median(values):7.3f} s   {' / '.join(f'{v:.3f}' for v in values)}")
    base, head = samples[args.base], samples["working tree"]
    for key, label in KEYS[:2]:
        ratios = [float(h[key]) / float(b[key]) for h, b in zip(head, base, strict=True)]
        print(f"working tree / {args.base}, {label}, turn by turn: {' / '.join(f'{r:.3f}' for r in ratios)} "
              f"(median {statistics.median(ratios):.3f})")
    print("the stored self-calibration.json, timestamps and durations aside: "
          + ("the same bytes in every sample" if len(digests) == 1 else f"DIFFERS ({len(digests)} versions)"))
    (WORK / "self_calibration.json").write_text(json.dumps({"base": args.base, "samples": samples}), encoding="utf-8")
    if len(digests) != 1:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
