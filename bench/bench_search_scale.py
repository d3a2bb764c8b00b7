"""The whole `pnk search` on a large KB, per vector tier, in one run (issue #45's search bars: warm
hybrid p50 <= 50 ms and p95 <= 150 ms, a searching process <= 1 GB RSS, a cold `pnk search` <= 2 s).

    nice -n 10 python bench/bench_search_scale.py --kb DIR [--tiers auto,numpy] [--queries 60]

For each tier (the KB's manifest is rewritten for the run and restored; use a copy of a KB you care
about):

- cold: `pnk search` in a fresh process, end to end (interpreter start, imports, manifest, model
  load, the generation's open, one hybrid query, printing), `--cold` times over different queries;
  wall seconds measured around the process, its peak RSS (VmHWM) read by the child at exit. The
  page cache is whatever the machine left (this bench cannot drop it on a shared machine): the
  first cold run after a sync reads from disk, the later ones mostly from memory.
- warm: one process, one `Searcher` (what `pnk serve` holds), hybrid queries one at a time after
  WARMUP, p50/p95 of the whole `search()` and of its stages (the timings a result carries: bm25,
  embed_query, vectors...), and the process's peak and final RSS.

The KB's own embedding model embeds the queries (the packaged MiniLM for a KB made by
bench/bench_writer.py: its stored vectors come from that bench's fast embedder, so the rankings
mean nothing; the latencies and memory are the product's). Results print as JSON (and go to --json).

    nice -n 10 python bench/bench_search_scale.py --kb DIR --load-matrix /path/to/base/src

`--load-matrix SRC`: only `search/vectors.py load_matrix` over the KB's index, in a process per
source tree (this one's and SRC, a checkout of the revision to compare with), alternately, each
reporting its seconds and peak RSS (what the exact tier's first search of a generation costs).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
QUERIES = [
    "how to list files sorted by size", "compress a directory with tar and gzip", "configure a network interface",
    "kernel module parameters", "change file permissions recursively", "find files modified in the last day",
    "set up a cron job", "mount a USB drive", "show disk usage of a folder", "create a new user account",
    "search text in files with grep", "kill a process by name", "copy files over ssh", "check open ports",
    "print the environment variables", "convert an image to png", "edit the boot loader configuration",
    "synchronise two directories", "display the manual page of a command", "schedule a shutdown",
    "count lines in a file", "download a file from a url", "install a package from a file",
    "show the routing table", "format a partition as ext4", "create a symbolic link", "compare two files",
    "list running services", "monitor memory usage", "split a large file into parts", "encrypt a file with a key",
    "change the default shell", "rename many files at once", "extract a zip archive", "view the system log",
    "set the system time zone", "measure the time a command takes", "generate a random password",
    "show the last login of users", "limit the bandwidth of a download", "locale settings for a terminal",
    "python virtual environment", "regular expression syntax", "printer queue management", "debian package build",
    "mail server configuration", "font configuration files", "emacs lisp manual", "perl documentation of modules",
    "sound card setup", "X window system keyboard layout", "database backup and restore", "compile a C program",
    "git branch merge conflicts", "firewall rules with iptables", "dns resolver configuration",
    "secure shell keys", "tex document with bibliography", "ncurses terminal library", "apache virtual host",
]
WARMUP = 10
CHILD = """
import json, sys, time
started = time.perf_counter()
from pinakes.cli import main
code = main(["-C", sys.argv[1], "search", sys.argv[2], "--json", "--no-rerank"])
status = open("/proc/self/status").read()
hwm = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM"))
print(json.dumps({"code": code, "inside_s": time.perf_counter() - started, "peak_rss_mib": hwm / 1024}),
      file=sys.stderr)
"""


LOAD_CHILD = """
import sys, time
from pinakes.index import schema
from pinakes.search.vectors import load_matrix
from pathlib import Path
conn = schema.open_reader(Path(sys.argv[1]))
started = time.perf_counter()
matrix = load_matrix(conn, 384)
seconds = time.perf_counter() - started
status = open("/proc/self/status").read()
hwm = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM"))
print(len(matrix), round(seconds, 2), round(hwm / 1024), round(matrix.nbytes / 2**20))
"""


def load_matrix_compare(kb: Path, base_src: Path, rounds: int = 2) -> dict[str, list[dict[str, float]]]:
    out: dict[str, list[dict[str, float]]] = {"this": [], "base": []}
    for _ in range(rounds):
        for label, src in (("base", base_src), ("this", REPO / "src")):
            done = subprocess.run([sys.executable, "-c", LOAD_CHILD, str(kb / ".pinakes" / "index.db")],
                                  env={**os.environ, "PYTHONPATH": str(src)}, capture_output=True, text=True,
                                  check=True)
            rows, seconds, peak, matrix = done.stdout.split()
            out[label].append({"rows": int(rows), "seconds": float(seconds), "peak_rss_mib": int(peak),
                               "matrix_mib": int(matrix)})
            print(label, out[label][-1], flush=True)
    return out


def set_tier(kb: Path, tier: str) -> str:
    manifest = kb / "pinakes.toml"
    original = manifest.read_text()
    text, count = re.subn(r'^vector_tier = "[a-z-]+".*$', f'vector_tier = "{tier}"', original, flags=re.M)
    if not count:
        text = re.sub(r"^\[retrieval\]$", f'[retrieval]\nvector_tier = "{tier}"', original, flags=re.M)
    manifest.write_text(text)
    return original


def cold(kb: Path, queries: list[str]) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    runs = []
    for query in queries:
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", CHILD, str(kb), query], env=env, capture_output=True, text=True)
        wall = time.perf_counter() - started
        child = json.loads(done.stderr.strip().splitlines()[-1])
        result = json.loads(done.stdout)
        runs.append({"wall_s": round(wall, 3), "peak_rss_mib": round(child["peak_rss_mib"]),
                     "notes": [n for n in result.get("notes", []) if "vector" in n],
                     "timings_ms": result.get("timings", {})})
    walls = [run["wall_s"] for run in runs]
    return {"runs": runs, "wall_s_first": walls[0], "wall_s_median": round(statistics.median(walls), 3),
            "peak_rss_mib_max": max(run["peak_rss_mib"] for run in runs)}


def warm(kb: Path, queries: list[str]) -> dict[str, object]:
    """In this process (one Searcher, as `pnk serve` holds it)."""
    sys.path.insert(0, str(REPO / "src"))
    from pinakes.search.core import Searcher

    def rss(field: str) -> float:
        status = Path("/proc/self/status").read_text()
        return next(int(line.split()[1]) for line in status.splitlines() if line.startswith(field)) / 1024

    started = time.perf_counter()
    with Searcher.for_kb(kb) as searcher:
        first = searcher.search(queries[0], rerank=False)
        open_s = time.perf_counter() - started
        for query in queries[1:1 + WARMUP]:
            searcher.search(query, rerank=False)
        totals: list[float] = []
        stages: dict[str, list[float]] = {}
        for query in queries[1 + WARMUP:]:
            began = time.perf_counter()
            result = searcher.search(query, rerank=False)
            totals.append((time.perf_counter() - began) * 1000)
            for stage, value in result.timings.items():
                stages.setdefault(stage, []).append(value)
        generation = searcher._generation
        tier = "file" if generation is not None and generation.vector_file is not None else "matrix"
    return {"tier_used": tier, "first_search_s": round(open_s, 3), "queries": len(totals),
            "p50_ms": round(percentile(totals, 50), 1), "p95_ms": round(percentile(totals, 95), 1),
            "stages_p50_ms": {stage: round(percentile(values, 50), 1) for stage, values in stages.items()},
            "stages_p95_ms": {stage: round(percentile(values, 95), 1) for stage, values in stages.items()},
            "peak_rss_mib": round(rss("VmHWM")), "rss_mib": round(rss("VmRSS")),
            "notes": [n for n in first.notes if "vector" in n]}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kb", type=Path, required=True)
    parser.add_argument("--tiers", default="auto,numpy")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--cold", type=int, default=3)
    parser.add_argument("--warm-only", action="store_true")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--load-matrix", type=Path, metavar="SRC")
    parser.add_argument("--child-warm", help=argparse.SUPPRESS)
    args = parser.parse_args()
    queries = QUERIES[:args.queries]
    if args.load_matrix:
        result = {"load_avg_start": os.getloadavg(), **load_matrix_compare(args.kb, args.load_matrix),
                  "load_avg_end": os.getloadavg()}
        if args.json:
            args.json.write_text(json.dumps(result, indent=1))
        return
    if args.child_warm:
        print(json.dumps(warm(args.kb, queries)))
        return
    out: dict[str, object] = {"kb": str(args.kb), "load_avg_start": os.getloadavg()}
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    for tier in args.tiers.split(","):
        original = set_tier(args.kb, tier)
        try:
            entry: dict[str, object] = {}
            if not args.warm_only:
                entry["cold"] = cold(args.kb, QUERIES[-args.cold:])
            done = subprocess.run([sys.executable, __file__, "--kb", str(args.kb), "--queries", str(args.queries),
                                   "--child-warm", "1"], env=env, capture_output=True, text=True, check=True)
            entry["warm"] = json.loads(done.stdout.strip().splitlines()[-1])
            out[tier] = entry
        finally:
            (args.kb / "pinakes.toml").write_text(original)
        print(json.dumps({tier: out[tier]}, indent=1), flush=True)
    out["load_avg_end"] = os.getloadavg()
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
