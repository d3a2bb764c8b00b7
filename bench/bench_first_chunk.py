"""How soon does the first sync of a large tree without sidecars write its first chunk, and what does
the process hold by then? (issue #45: "writes chunks within a minute of starting, under 1 GB RSS".)

    nice -n 10 python bench/bench_first_chunk.py --corpus /tmp/pnk-million-full [--docs N] \
        [--base main] [--after 30] [--json out.json]
    nice -n 10 python bench/bench_first_chunk.py --kb /tmp/pages700k --base none   # a tree in place

`--kb DIR` syncs DIR in place (bench/corpora/make_pages.py's 700k-page tree: copying it again would
double 700k small files); `pnk init` runs there first when it has no pinakes.toml.

A KB of the corpus's first `--docs` files (bench/corpora/make_million.py's corpus, or any folder of
text) is made once under $PNK_BENCH_DIR (/tmp/pnk-bench-first-chunk). Each version (`--base`'s
`src/pinakes` via git archive, and the working tree's, snapshotted as bench/compare_noop.py does)
syncs it from nothing (no index, no sidecar) in a fresh child process with bench_writer.py's
`FastEmbedder` (the real tokenizer, no model cost), which reports: the walk's and pairing's seconds
(`walk_sources`, `compute_plan`), the seconds in `apply_identity` (where the baseline mints every
sidecar), the seconds until the first document's chunks are committed, the peak RSS by then, and,
`--after` seconds later, how many documents were committed and the peak RSS; then the child ends
itself (the rest of the sync is bench_writer.py's subject). The KB's sidecars and index are removed
before each run. The first chunk needs the whole walk (every file hashed) and the plan (every
document paired): both grow with the tree, which is what a projection to a larger tree scales.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sync import REPO
from bench_writer import corpus_files
from compare_noop import snapshot

WORK = Path(os.environ.get("PNK_BENCH_DIR", "/tmp/pnk-bench-first-chunk"))


def _rss_mb() -> int:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def _cpu_seconds() -> float:
    """This process's CPU time: on a shared machine what the sync cost, whatever the others left it."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return round(usage.ru_utime + usage.ru_stime, 2)


def child(root: Path, after: float) -> None:
    """One first sync of `root` in this process (PYTHONPATH names the code under test), cut
    `after` seconds past its first committed document; prints JSON."""
    from bench_writer import FastEmbedder

    import pinakes.pipeline.embed as embed_stage
    import pinakes.pipeline.pair as pair_stage
    import pinakes.pipeline.walk as walk_stage
    from pinakes.sync import SyncOptions
    from pinakes.sync.engine import run_sync

    started = time.perf_counter()
    seconds: dict[str, float] = {}
    state: dict[str, Any] = {"committed": 0}

    def timed(module: Any, name: str) -> None:
        real = getattr(module, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return real(*args, **kwargs)
            finally:
                seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - began

        setattr(module, name, wrapper)

    timed(walk_stage, "walk_sources")
    timed(pair_stage, "compute_plan")
    timed(pair_stage, "apply_identity")
    write = embed_stage.write_document

    def counted_write(*args: Any, **kwargs: Any) -> Any:
        kept = write(*args, **kwargs)
        if kept is not None:
            state["committed"] += 1
            if "first_chunk_seconds" not in state:
                state["first_chunk_seconds"] = round(time.perf_counter() - started, 2)
                state["rss_at_first_chunk_mb"] = _rss_mb()
                state["cpu_at_first_chunk_seconds"] = _cpu_seconds()
                threading.Thread(target=finish, daemon=True).start()
        return kept

    def finish() -> None:
        time.sleep(after)
        say({**state, "documents_committed_after": state["committed"], "after_seconds": after,
             "peak_rss_mb": _rss_mb(), "cpu_seconds": _cpu_seconds(), **{f"{k}_seconds": round(v, 2) for k, v in seconds.items()}})

    def say(result: dict[str, Any]) -> None:
        # To the file descriptor: doit holds sys.stdout while a stage runs, and the process ends here.
        os.write(1, (json.dumps(result) + "\n").encode())
        os._exit(0)

    embed_stage.write_document = counted_write
    run_sync(root, SyncOptions(quiet=True), embedder=FastEmbedder())
    say({**state, "sync_finished_seconds": round(time.perf_counter() - started, 2), "peak_rss_mb": _rss_mb(),
         **{f"{k}_seconds": round(v, 2) for k, v in seconds.items()}})


def make_kb(root: Path, corpus: Path, files: list[Path]) -> None:
    if (root / "pinakes.toml").exists():
        return
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    subprocess.run([sys.executable, "-m", "pinakes", "init", str(root), "--name", "first-chunk-bench"], check=True,
                   env=env, capture_output=True)
    for source in files:
        target = root / "docs" / source.relative_to(corpus)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


def reset(root: Path) -> int:
    """No index, no sidecar, no cache: the tree as a first sync meets it. Returns sidecars removed."""
    removed = 0
    for sidecar in (root / "docs").rglob("*.pnk.yaml"):
        sidecar.unlink()
        removed += 1
    state = root / ".pinakes"
    for leftover in state.glob("index.db*"):
        leftover.unlink()
    shutil.rmtree(state / "cache", ignore_errors=True)
    return removed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=Path("/tmp/pnk-million-full"))
    parser.add_argument("--kb", type=Path, help="sync this folder's docs/ in place instead of a copy of --corpus")
    parser.add_argument("--docs", type=int, default=None, help="only the first N files of the corpus")
    parser.add_argument("--base", default="main", help="the baseline revision, or 'none'")
    parser.add_argument("--after", type=float, default=30.0, help="seconds to run past the first chunk")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.after)
        return
    began = time.perf_counter()
    if args.kb is not None:
        root, corpus = args.kb, args.kb / "docs"
        files = corpus_files(corpus, None)
        make_kb(root, corpus, [])
    else:
        corpus, files = args.corpus, corpus_files(args.corpus, args.docs)
        root = WORK / f"{args.corpus.name}-{len(files)}"
        make_kb(root, args.corpus, files)
    versions = {"working tree": snapshot(None, WORK / f"code-head-{os.getpid()}")}
    if args.base != "none":
        versions = {args.base: snapshot(args.base, WORK / f"code-base-{os.getpid()}"), **versions}
    results: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cores": os.cpu_count(),
                               "load_before": os.getloadavg(), "corpus": str(corpus), "files": len(files),
                               "kb_setup_seconds": round(time.perf_counter() - began, 1), "runs": {}}
    for name, source in versions.items():
        reset(root)
        env = {**os.environ, "PYTHONPATH": f"{source}{os.pathsep}{Path(__file__).resolve().parent}"}
        done = subprocess.run([sys.executable, __file__, "--child", str(root), "--after", str(args.after)],
                              env=env, check=True, capture_output=True, text=True)
        results["runs"][name] = json.loads(done.stdout.strip().splitlines()[-1])
        results["runs"][name]["load"] = os.getloadavg()
        print(name, results["runs"][name], file=sys.stderr, flush=True)
    reset(root)
    results["load_after"] = os.getloadavg()
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
