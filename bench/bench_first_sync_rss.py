"""The whole first sync of a large tree, its memory sampled throughout (issue #45: "the first sync of
a 700k-page tree ... stays under 1 GB RSS throughout").

    nice -n 10 python bench/bench_first_sync_rss.py --kb /tmp/pages700k [--every 15] [--log rss.jsonl]

bench/bench_first_chunk.py stops 20-30 s past the first chunk; this runs the sync of `--kb` (a tree
from bench/corpora/make_pages.py, synced in place: its sidecars and index are removed first) to its
end, in a child process on a snapshot of the working tree's code (bench/compare_noop.py's, so later
edits do not change the run) with bench_writer.py's `FastEmbedder` (the real tokenizer, no model
cost). Every `--every` seconds the parent appends one JSON line to `--log`: seconds since the start,
the child's VmRSS and VmHWM (peak) from /proc, its CPU seconds, the documents and chunks
committed so far (read from the index, read-only), and the stage it is in ("plan", "group 0" for
the streamed groups, then "graph", "vectors", "reverse-scan", "self-calibration", "done": the child
marks each as it starts, by wrapping the doit invocations and the calibration). The last line says
how the child ended. When the run is cut short, the log is the curve to where it got.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_first_chunk import reset
from compare_noop import snapshot

CHILD = """
import sys
from bench_writer import FastEmbedder
import pinakes.calibration.on_sync as on_sync
import pinakes.sync.loader as loader
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync

def mark(stage):
    with open(sys.argv[2], "a", encoding="utf-8") as marks:
        marks.write(stage + "\\n")

run_invocation, after_sync = loader.run_invocation, on_sync.after_sync
def marked_invocation(run, invocation, *args, **kwargs):
    if invocation.label == "plan" or not invocation.label.startswith("group") or invocation.label == "group 0":
        mark(invocation.label)
    return run_invocation(run, invocation, *args, **kwargs)
def marked_after_sync(*args, **kwargs):
    mark("self-calibration")
    return after_sync(*args, **kwargs)
loader.run_invocation, on_sync.after_sync = marked_invocation, marked_after_sync
report = run_sync(sys.argv[1], SyncOptions(quiet=True), embedder=FastEmbedder())
mark("done")
print(len(report.added), len(report.failures), report.chunks_embedded, flush=True)
print(report.notes, report.warnings, report.timings, flush=True)
"""


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS / VmHWM of `pid` in MB and its CPU seconds (utime + stime), from /proc."""
    values: dict[str, int] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = round(int(rest.split()[0]) / 1024)
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        values["cpu_seconds"] = round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"))
    except (OSError, IndexError, ValueError):
        pass
    return values


def committed(index: Path) -> dict[str, int]:
    if not index.exists():
        return {}
    try:
        conn = sqlite3.connect(f"file:{index}?mode=ro", uri=True, timeout=1)
        try:
            documents = conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
            chunks = conn.execute("SELECT MAX(id) FROM chunks").fetchone()[0] or 0
        finally:
            conn.close()
    except sqlite3.Error:
        return {}
    return {"documents": documents, "chunks": chunks}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--kb", type=Path, required=True)
    parser.add_argument("--every", type=float, default=15.0)
    parser.add_argument("--log", type=Path, default=Path("first-sync-rss.jsonl"))
    args = parser.parse_args()
    reset(args.kb)
    code = snapshot(None, args.kb.parent / f"code-rss-{os.getpid()}")
    env = {**os.environ, "PYTHONPATH": f"{code}{os.pathsep}{Path(__file__).resolve().parent}"}
    started = time.perf_counter()
    output = args.log.with_suffix(".out")  # a file, not a pipe: a full pipe would stall the sync
    with args.log.open("a", encoding="utf-8") as log, output.open("w", encoding="utf-8") as out:
        marks = args.log.with_suffix(".stages")
        marks.write_text("", encoding="utf-8")
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(args.kb), str(marks)], env=env, stdout=out,
                                 stderr=out)
        log.write(json.dumps({"start": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "kb": str(args.kb),
                              "pid": child.pid, "load": os.getloadavg()}) + "\n")
        while child.poll() is None:
            sample = {"seconds": round(time.perf_counter() - started), **proc_status(child.pid),
                      **committed(args.kb / ".pinakes" / "index.db"), "load1": os.getloadavg()[0],
                      "stage": (marks.read_text(encoding="utf-8").splitlines() or [""])[-1]}
            log.write(json.dumps(sample) + "\n")
            log.flush()
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=args.every)
        log.write(json.dumps({"seconds": round(time.perf_counter() - started), "returncode": child.returncode,
                              "output_tail": output.read_text(encoding="utf-8")[-2000:]}) + "\n")
    return child.returncode


if __name__ == "__main__":
    raise SystemExit(main())
