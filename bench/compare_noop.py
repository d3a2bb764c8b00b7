"""The no-op sync of two versions of Pinakes side by side, against the same bare walk, in one run.

    python bench/compare_noop.py --base ec8a764 [--repeat 11] [--kb KB]

bench_sync.py measures one version against its baseline; when that ratio moves, this says whether
the code moved it: `--base REV`'s `src/pinakes` (git archive) and the working tree's are each
byte-compiled into their own folder, and a no-op `pnk sync` of bench_sync.py's 10k-document KB
(run `python bench/bench_sync.py --skip-cold --skip-reuse` once first) is timed under each,
alternating with the bare walk+stat, so both versions and the baseline share the machine's moods.
Prints each median and its ratio to the bare walk. The KB's index must suit both versions.

`--head-kb COPY`: the working tree's no-op runs on COPY (a copy of `--kb`, synced once by the working
tree) instead: for when the two versions write the settled mark differently, so that each version's
no-op on one KB would rewrite the other's mark every time (a write no no-op makes).
"""

from __future__ import annotations

import argparse
import compileall
import io
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from bench_sync import BARE_WALK, REPO, WORK  # this script's folder is first on sys.path


def snapshot(rev: str | None, into: Path) -> Path:
    """`src/pinakes` at `rev` (the working tree when None), with `rules/` where the tree has it at the
    top level (mapped into the package as the build maps it), byte-compiled, under `into`."""
    if into.exists():
        shutil.rmtree(into)
    into.mkdir(parents=True)
    if rev is None:
        compiled = shutil.ignore_patterns("__pycache__", "*.pyc")
        top = REPO / "src" / "pinakes"

        def ignored(folder: str, names: list[str]) -> set[str]:
            # A link src/pinakes/rules -> ../../rules (a checkout's way to test its own adapters)
            # is not copied twice: the top-level folder is mapped in below.
            mapped: set[str] = {"rules"} if Path(folder) == top and (REPO / "rules").is_dir() else set()
            return set(compiled(folder, names)) | mapped

        shutil.copytree(top, into / "pinakes", ignore=ignored)
        if (REPO / "rules").is_dir():
            shutil.copytree(REPO / "rules", into / "pinakes" / "rules",
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    else:
        top_rules = subprocess.run(["git", "ls-tree", "--name-only", rev, "rules"], cwd=REPO, check=True,
                                   capture_output=True, text=True).stdout.strip() == "rules"
        archive = subprocess.run(["git", "archive", rev, "src/pinakes", *(["rules"] if top_rules else [])],
                                 cwd=REPO, check=True, capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(into, filter="data")
        (into / "src" / "pinakes").rename(into / "pinakes")
        if top_rules:
            (into / "rules").rename(into / "pinakes" / "rules")
    compileall.compile_dir(into / "pinakes", quiet=1)
    return into


def seconds(cmd: list[str], env: dict[str, str] | None = None) -> float:
    return timed(cmd, env)[0]


def timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of `cmd` in a child process: on a loaded machine the CPU time
    says what the process cost, the wall time also what the other tenants left it."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=env)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the git revision to compare the working tree with")
    parser.add_argument("--repeat", type=int, default=11)
    parser.add_argument("--kb", type=Path, default=WORK / "kb10k", help="a synced KB (default: bench_sync.py's 10k)")
    parser.add_argument("--head-kb", type=Path, default=None,
                        help="the working tree's no-op runs on this copy of --kb (see the module docstring)")
    args = parser.parse_args(argv)
    kb = args.kb
    if not (kb / ".pinakes").is_dir():
        parser.error(f"no benchmark KB at {kb}: run `python bench/bench_sync.py --skip-cold --skip-reuse` first")
    # Each run its own snapshots: two runs at once never import from a folder the other rewrites.
    versions = {args.base: snapshot(args.base, WORK / f"compare-base-{os.getpid()}"),
                "working tree": snapshot(None, WORK / f"compare-head-{os.getpid()}")}
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in [*versions, "bare walk+stat"]}
    kbs = {args.base: kb, "working tree": args.head_kb or kb}
    for _ in range(args.repeat):
        for name, source in versions.items():
            env = {**os.environ, "PYTHONPATH": str(source)}
            samples[name].append(timed([sys.executable, "-m", "pinakes", "-C", str(kbs[name]), "sync", "-q"], env))
        samples["bare walk+stat"].append(timed([sys.executable, "-c", BARE_WALK, str(kb / "docs")]))
    bare = statistics.median(wall for wall, _ in samples["bare walk+stat"])
    bare_cpu = statistics.median(cpu for _, cpu in samples["bare walk+stat"])
    for name, values in samples.items():
        median = statistics.median(wall for wall, _ in values)
        cpu = statistics.median(cpu for _, cpu in values)
        print(f"{name:20} {median:.3f} s  {median / bare:.2f}x the bare walk  (fastest {min(values)[0]:.3f} s); "
              f"CPU {cpu:.3f} s  {cpu / bare_cpu:.2f}x the bare walk's")
    print(f"load average {os.getloadavg()}")
    for source in versions.values():
        shutil.rmtree(source, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
