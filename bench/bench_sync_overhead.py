"""What a cold sync costs beyond its model, for two versions taking turns (#45: the cold sync's bar).

    python bench/bench_sync_overhead.py --base REV [--repeat 5] [--cold-docs 300]

bench_sync.py's cold benchmark divides a whole first sync by the pure embedding of its chunks; the
model's ~30 s of CPU move by more between samples than the ~0.1-0.5 s a change to the rest makes.
Here the model's document vectors come from a table made once (the packaged model over every chunk
input of the KB, `--cold-docs` tldr pages as bench_sync.py builds them): each sample is a first sync
in a process of its own, the model loaded and warmed up (the self-calibration embeds its questions
with it, as a sync does), and `embed_documents` answering from the table, so what the sync's CPU
measures is everything but the model's document work. REV's `src/pinakes` (git archive) and the
working tree's take turns. Printed per version (medians; CPU seconds, the chunk-ahead worker's
counted where named): the whole sync, its parts (each doit invocation, by its first stage; the
freed-memory hand-back; `after_sync`, the self-calibration), the worker, and the padded tokens of
the model calls the sync made (the model's work for the same chunks grows with them).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, cast

from bench_sync import (
    PNK,
    SYNC_STATE,
    WORK,
    children_cpu,
    corpus_files,
    load_real_embedder,
    make_kb,
    stored_model_inputs,
)

Parts = dict[str, list[float]]  # part -> [CPU seconds, wall seconds, calls]


def sample(root: Path, table: Path) -> dict[str, object]:
    """One first sync of `root` in this process (the snapshot on sys.path), the vectors from `table`."""
    import numpy as np

    import pinakes

    assert pinakes.__file__ and pinakes.__file__.startswith(os.environ["PYTHONPATH"]), pinakes.__file__
    for name in SYNC_STATE:
        (root / ".pinakes" / name).unlink(missing_ok=True)
    shutil.rmtree(root / ".pinakes" / "cache", ignore_errors=True)
    embedder, _batch = load_real_embedder(root)
    known = json.loads(table.with_suffix(".json").read_text(encoding="utf-8"))
    rows = {text: row for row, text in enumerate(known)}
    vectors = np.load(table.with_suffix(".npy"))
    parts: Parts = {}
    forked_cpu = [0.0]  # children reaped inside clocked parts (the calibration's)
    calls: list[list[str]] = []

    def clocked(key: str, function: Callable[..., object]) -> Callable[..., object]:
        def wrapped(*args: object, **kwargs: object) -> object:
            # children's CPU too: the self-calibration forks one for half its questions
            wall, cpu, forked = time.perf_counter(), time.process_time(), children_cpu()
            try:
                return function(*args, **kwargs)
            finally:
                part = parts.setdefault(key, [0.0, 0.0, 0])
                forked = children_cpu() - forked
                forked_cpu[0] += forked
                part[0] += time.process_time() - cpu + forked
                part[1] += time.perf_counter() - wall
                part[2] += 1
        return wrapped

    def from_table(texts: object, batch_size: int | None = None) -> object:
        texts = list(cast("Iterable[str]", texts))
        calls.append(texts)
        return vectors[[rows[text] for text in texts]].copy()

    embedder.embed_documents = from_table  # pyright: ignore[reportAttributeAccessIssue]  # vectors from the table
    from pinakes.calibration import on_sync
    from pinakes.sync import engine, loader

    run_invocation = loader.run_invocation

    def invocation_clocked(run: object, invocation: loader.Invocation, *args: object, **kwargs: object) -> object:
        return clocked(f"invocation {invocation.stages[0].key}", run_invocation)(run, invocation, *args, **kwargs)

    loader.run_invocation = invocation_clocked
    for module, name in ((loader, "return_freed_memory"), (loader, "_return_freed_memory"),
                         (on_sync, "return_freed_memory")):  # (the second: the name before 2d50afe)
        if hasattr(module, name):
            setattr(module, name, clocked(f"freed memory ({module.__name__.rsplit('.', 1)[-1]})", getattr(module, name)))
    on_sync.after_sync = clocked("after_sync (self-calibration)", on_sync.after_sync)
    from pinakes.sync import SyncOptions

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall, cpu = time.perf_counter(), time.process_time()
    report = engine.run_sync(root, SyncOptions(quiet=True), embedder=embedder)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # the chunk-ahead worker's: every child but those reaped inside a clocked part
    worker = (after.ru_utime - children.ru_utime) + (after.ru_stime - children.ru_stime) - forked_cpu[0]
    assert report.ok and any(note.startswith("confidence self-calibrated") for note in report.notes), report.notes
    return {"sync_cpu": cpu + worker + forked_cpu[0], "sync_wall": wall, "worker_cpu": worker, "parts": parts,
            "padded_tokens": padded_tokens(embedder, calls), "load": os.getloadavg()[0]}


def padded_tokens(embedder: object, calls: list[list[str]]) -> int:
    """The tokens the model would run over for these calls: each call's batches as the embedder
    plans them (longest first), each row padded to its batch's longest."""
    from pinakes.embed.batching import plan_batches

    model = cast(Any, embedder)  # the packaged embedder: its token counter and batch size
    counter = model._counter
    total = 0
    for texts in calls:
        counts = counter.count_batch(texts)
        for batch in plan_batches(counts, counter.special_tokens, model.batch_size):
            total += len(batch) * (max(counts[index] for index in batch) + counter.special_tokens)
    return total


def make_table(root: Path, table: Path) -> None:
    """Every chunk input of a synced `root`, embedded once by the packaged model."""
    import numpy as np

    embedder, batch = load_real_embedder(root)
    inputs = stored_model_inputs(root)
    np.save(table.with_suffix(".npy"), embedder.embed_documents(inputs, batch_size=batch))
    table.with_suffix(".json").write_text(json.dumps(inputs), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the git revision the working tree takes turns with")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cold-docs", type=int, default=300)
    parser.add_argument("--sample", nargs=2, type=Path, metavar=("KB", "TABLE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.sample:  # a child: one sample, under the PYTHONPATH it was given
        print(json.dumps(sample(*args.sample)))
        return
    from compare_noop import snapshot  # this script's folder is first on sys.path

    root, table = WORK / "kb-overhead", WORK / "overhead-vectors"
    make_kb(root, corpus_files(args.cold_docs))
    subprocess.run([*PNK, "-C", str(root), "sync", "-q", "--sidecars-only"], check=True, capture_output=True)
    versions = {args.base: snapshot(args.base, WORK / f"overhead-base-{os.getpid()}"),
                "working tree": snapshot(None, WORK / f"overhead-head-{os.getpid()}")}
    env = {**os.environ, "PYTHONPATH": str(versions["working tree"])}
    subprocess.run([*PNK, "-C", str(root), "sync", "-q"], check=True, capture_output=True, env=env)
    subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
                    f"import bench_sync_overhead as b; from pathlib import Path; "
                    f"b.make_table(Path({str(root)!r}), Path({str(table)!r}))"], check=True, env=env)
    samples: dict[str, list[dict[str, object]]] = {name: [] for name in versions}
    for _ in range(args.repeat):
        for name, source in versions.items():
            done = subprocess.run([sys.executable, __file__, "--base", args.base, "--sample", str(root), str(table)],
                                  check=True, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(source)})
            samples[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
    for source in versions.values():
        shutil.rmtree(source, ignore_errors=True)
    for name, runs in samples.items():
        loads = " / ".join(f"{float(cast(float, run['load'])):.1f}" for run in runs)
        print(f"{name} ({len(runs)} samples, load {loads}):")
        for key in ("sync_cpu", "sync_wall", "worker_cpu", "padded_tokens"):
            values = [float(cast(float, run[key])) for run in runs]
            print(f"  {key:32s} median {statistics.median(values):10.3f}   {' / '.join(f'{v:.3f}' for v in values)}")
        for part in sorted({part for run in runs for part in cast(Parts, run["parts"])}):
            values = [cast(Parts, run["parts"]).get(part, [0.0])[0] for run in runs]
            print(f"  {part + ' CPU':32s} median {statistics.median(values):10.3f}   {' / '.join(f'{v:.3f}' for v in values)}")
    base, head = samples[args.base], samples["working tree"]
    pairs = [float(cast(float, h["sync_cpu"])) - float(cast(float, b["sync_cpu"]))
             for h, b in zip(head, base, strict=True)]
    print(f"working tree - {args.base}, the sync's CPU beyond the model, turn by turn: "
          f"{' / '.join(f'{pair:+.3f}' for pair in pairs)} s (median {statistics.median(pairs):+.3f} s)")
    (WORK / "overhead.json").write_text(json.dumps({"base": args.base, "samples": samples}), encoding="utf-8")


if __name__ == "__main__":
    main()
