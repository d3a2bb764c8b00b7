"""The whole `pnk search` on a large KB, per vector tier, in one run (issue #45's search bars: warm
hybrid p50 <= 50 ms and p95 <= 150 ms, a searching process <= 1 GB RSS, a cold `pnk search` <= 2 s).

    nice -n 10 python bench/bench_search_scale.py --kb DIR [--tiers auto,numpy] [--queries 60]

For each tier (the KB's manifest is rewritten for the run and restored when it names another tier;
a manifest that already names it is left alone, so a read-only KB can be measured with its own):

- cold: `pnk search` in a fresh process, end to end (interpreter start, imports, manifest, model
  load, the generation's open, one hybrid query, printing), `--cold` times over different queries;
  wall seconds measured around the process, its peak RSS (VmHWM) read by the child at exit. The
  page cache is whatever the machine left: the first cold run after a sync reads from disk, the
  later ones mostly from memory. `--evict` drops this KB's index and vector file (only those) from
  the page cache before each cold run (posix_fadvise DONTNEED: nothing is written, no other file
  is touched), so each reads them from disk. Each run reports its stages (the timings the result
  carries) and `outside_ms`: the process's time outside `search()` (interpreter start, imports,
  manifest, printing); `stages_median_ms` summarises them.
- `--src SRC`: measure the source tree SRC (a checkout of another revision) instead of this one's;
  the bench's own code stays this one's, so two revisions are measured the same way.
- `--base-src SRC`: every cold run is repeated with SRC (a checkout of the revision to compare
  with) on the same query, the two alternating which goes first; reported as `cold_base`.
- warm: one process, one `Searcher` (what `pnk serve` holds), hybrid queries one at a time after
  WARMUP, p50/p95 of the whole `search()` and of its stages (the timings a result carries: bm25,
  embed_query, vectors...), and the process's peak and final RSS.

The KB's own embedding model embeds the queries (the packaged MiniLM for a KB made by
bench/bench_writer.py: its stored vectors come from that bench's fast embedder, so the rankings
mean nothing; the latencies and memory are the product's). Results print as JSON (and go to --json).

    nice -n 10 python bench/bench_search_scale.py --kb DIR --load-matrix /path/to/base/src

    nice -n 10 python bench/bench_search_scale.py --kb DIR --rankings /path/to/base/src

`--rankings SRC`: only whether this tree and SRC return the same passages, in the same order with
the same scores, for the first `--queries` queries (one warm process per tree).

    python bench/bench_search_scale.py --kb COPY --record-chunk-counts

`--record-chunk-counts`: only write the index's chunk counts into its meta as the sync's vectors
step does (index/chunk_counts.py), for a copy of a KB synced before that record existed (a sync
that changes nothing does not write it); refused while a sync's start mark is present. Never point
it at a KB that is not yours to write.

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
from typing import cast

REPO = Path(__file__).resolve().parent.parent
SRC = Path(os.environ.get("PNK_BENCH_SRC", REPO / "src"))  # the source tree measured (--src)
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
sys.stdout.flush()
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


def set_tier(kb: Path, tier: str) -> str | None:
    """Make the manifest name `tier`; its text before, or None when it already named it (untouched)."""
    manifest = kb / "pinakes.toml"
    original = manifest.read_text()
    if re.search(rf'^vector_tier = "{re.escape(tier)}"', original, flags=re.M):
        return None
    text, count = re.subn(r'^vector_tier = "[a-z-]+".*$', f'vector_tier = "{tier}"', original, flags=re.M)
    if not count:
        text = re.sub(r"^\[retrieval\]$", f'[retrieval]\nvector_tier = "{tier}"', original, flags=re.M)
    manifest.write_text(text)
    return original


def evict(kb: Path) -> None:
    """This KB's index and vector file out of the page cache (read-only opens; nothing written)."""
    for name in ("index.db", "index.db-wal", "vectors.ann"):
        path = kb / ".pinakes" / name
        if path.exists():
            handle = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(handle, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(handle)


def cold_run(kb: Path, query: str, src: Path, drop: bool) -> dict[str, object]:
    if drop:
        evict(kb)
    env = {**os.environ, "PYTHONPATH": str(src)}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, str(kb), query], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    child = json.loads(done.stderr.strip().splitlines()[-1])
    result = json.loads(done.stdout)
    timings: dict[str, float] = result.get("timings_ms", result.get("timings", {}))
    return {"wall_s": round(wall, 3), "inside_s": round(child["inside_s"], 3),
            "outside_ms": round(child["inside_s"] * 1000 - timings.get("total", 0.0)),
            "peak_rss_mib": round(child["peak_rss_mib"]), "notes": [n for n in result.get("notes", []) if "vector" in n],
            "timings_ms": timings, "passages": [p["citation"] for p in result.get("passages", [])]}


def cold_summary(runs: list[dict[str, object]]) -> dict[str, object]:
    def number(run: dict[str, object], key: str) -> float:
        value = run[key]
        assert isinstance(value, (int, float))
        return float(value)

    walls = [number(run, "wall_s") for run in runs]
    stages: dict[str, list[float]] = {}
    for run in runs:
        timings = run["timings_ms"]
        assert isinstance(timings, dict)
        for stage, value in cast("dict[str, float]", {**timings, "outside": run["outside_ms"]}).items():
            stages.setdefault(str(stage), []).append(float(value))
    return {"runs": runs, "wall_s_first": walls[0], "wall_s_median": round(statistics.median(walls), 3),
            "wall_s": walls, "stages_median_ms": {k: round(statistics.median(v), 1) for k, v in stages.items()},
            "peak_rss_mib_max": max(number(run, "peak_rss_mib") for run in runs)}


def cold(kb: Path, queries: list[str], drop: bool = False, base_src: Path | None = None) -> dict[str, object]:
    this: list[dict[str, object]] = []
    base: list[dict[str, object]] = []
    for turn, query in enumerate(queries):
        arms = [(this, SRC)] + ([(base, base_src)] if base_src is not None else [])
        for runs, src in arms if turn % 2 == 0 else arms[::-1]:
            runs.append(cold_run(kb, query, src, drop))
            print(("base" if runs is base else "this"), json.dumps(runs[-1]["timings_ms"]), runs[-1]["wall_s"],
                  file=sys.stderr, flush=True)
    out = cold_summary(this)
    if base:
        out["base"] = cold_summary(base)
        out["same_passages"] = all(a["passages"] == b["passages"] for a, b in zip(this, base, strict=True))
    return out


RANK_CHILD = """
import json, sys
from pinakes.search.core import Searcher
with Searcher.for_kb(sys.argv[1]) as searcher:
    for query in json.loads(sys.argv[2]):
        result = searcher.search(query, rerank=False)
        print(json.dumps([[p.citation, p.scores.to_dict()] for p in result.passages]
                         + [result.confidence.level, [n for n in result.notes if "vector" in n]]))
"""


def record_chunk_counts(kb: Path) -> dict[str, object]:
    """The sync's chunk-count record written into `kb`'s index, and the seconds its scan took."""
    from pinakes.index import chunk_counts, schema

    index = kb / ".pinakes" / "index.db"
    if not index.is_file():  # open_writer would create an empty index
        raise SystemExit(f"{index}: no index there")
    conn = schema.open_writer(index)
    try:
        if chunk_counts.recorded_since_completed_sync(conn) is None:
            raise SystemExit(f"{kb}: a sync started and did not complete; run `pnk sync` there instead")
        started = time.perf_counter()
        with schema.transaction(conn):
            counts = chunk_counts.scanned(conn)
            schema.write_meta(conn, chunk_counts.as_meta(counts))
        return {"chunks": counts.chunks, "documents": counts.documents,
                "seconds": round(time.perf_counter() - started, 3)}
    finally:
        conn.close()


def rankings(kb: Path, base_src: Path, queries: list[str]) -> dict[str, object]:
    """Whether this tree and `base_src` answer every query with the same passages, order and scores."""
    answers: dict[str, list[str]] = {}
    for label, src in (("base", base_src), ("this", SRC)):
        done = subprocess.run([sys.executable, "-c", RANK_CHILD, str(kb), json.dumps(queries)],
                              env={**os.environ, "PYTHONPATH": str(src)}, capture_output=True, text=True, check=True)
        answers[label] = done.stdout.strip().splitlines()
    differ = [query for query, a, b in zip(queries, answers["base"], answers["this"], strict=True) if a != b]
    return {"queries": len(queries), "identical": len(queries) - len(differ), "differ": differ}


def warm(kb: Path, queries: list[str]) -> dict[str, object]:
    """In this process (one Searcher, as `pnk serve` holds it)."""
    sys.path.insert(0, str(SRC))
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
        generation = searcher._generation  # pyright: ignore[reportPrivateUsage] -- which tier answered
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
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--kb", type=Path, required=True)
    parser.add_argument("--tiers", default="auto,numpy")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--cold", type=int, default=3)
    parser.add_argument("--warm-only", action="store_true")
    parser.add_argument("--cold-only", action="store_true")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--load-matrix", type=Path, metavar="SRC")
    parser.add_argument("--evict", action="store_true", help="cold runs read this KB's files from disk")
    parser.add_argument("--base-src", type=Path, metavar="SRC", help="cold runs alternate with this source tree")
    parser.add_argument("--rankings", type=Path, metavar="SRC")
    parser.add_argument("--src", type=Path, help="the source tree to measure (default: this checkout's)")
    parser.add_argument("--record-chunk-counts", action="store_true")
    parser.add_argument("--child-warm", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.src is not None:  # this process's cold runs and rankings, and (through the variable) its warm child
        global SRC
        SRC = args.src.resolve()  # pyright: ignore[reportConstantRedefinition] -- --src replaces the default tree
        os.environ["PNK_BENCH_SRC"] = str(SRC)
    queries = QUERIES[:args.queries]
    if args.record_chunk_counts:
        print(json.dumps(record_chunk_counts(args.kb)))
        return
    if args.load_matrix:
        result = {"load_avg_start": os.getloadavg(), **load_matrix_compare(args.kb, args.load_matrix),
                  "load_avg_end": os.getloadavg()}
        if args.json:
            args.json.write_text(json.dumps(result, indent=1))
        return
    if args.rankings:
        result = rankings(args.kb, args.rankings, queries)
        print(json.dumps(result, indent=1))
        if args.json:
            args.json.write_text(json.dumps(result, indent=1))
        return
    if args.child_warm:
        print(json.dumps(warm(args.kb, queries)))
        return
    out: dict[str, object] = {"kb": str(args.kb), "load_avg_start": os.getloadavg()}
    env = {**os.environ, "PYTHONPATH": str(SRC), "PNK_BENCH_SRC": str(SRC)}
    for tier in args.tiers.split(","):
        original = set_tier(args.kb, tier)
        try:
            entry: dict[str, object] = {}
            if not args.warm_only:
                entry["cold"] = cold(args.kb, QUERIES[-args.cold:], args.evict, args.base_src)
            if not args.cold_only:
                done = subprocess.run([sys.executable, __file__, "--kb", str(args.kb), "--queries", str(args.queries),
                                       "--child-warm", "1"], env=env, capture_output=True, text=True, check=True)
                entry["warm"] = json.loads(done.stdout.strip().splitlines()[-1])
            out[tier] = entry
        finally:
            if original is not None:
                (args.kb / "pinakes.toml").write_text(original)
        print(json.dumps({tier: out[tier]}, indent=1), flush=True)
    out["load_avg_end"] = os.getloadavg()
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
