"""Peak memory of a cold sync (issue "Sync at real scale"). One command:

    python bench/bench_sync_memory.py [--sizes 1000,10000] [--big-mb 20] [--skip-big]

Each case is a whole `python -m pinakes -C KB sync` process with the REAL default model (whatever
`pnk init` writes into the manifest), stderr piped (not a terminal, so the sync prints its plain
progress line at most every 5 s). Measured per case:

- peak RSS: the child's `ru_maxrss` from `os.wait4` (kernel high-water mark, whole process);
- RSS over time: /proc/<pid>/status VmRSS sampled every second (first sample, quartiles, max);
- wall time, and the number of progress lines ("sync: ...") the sync wrote to stderr.

Cases: cold syncs of N tldr pages (default 1k and 10k; the issue's target: peak <= 1 GB, growing
<= 10% from the smallest to the largest N) and a KB holding ONE ~20 MB plain-text file, generated
deterministically by concatenating the python-3.11-docs-rst corpus (blank-line-separated
paragraphs) until the size is reached (target: bounded memory, progress shown throughout). The
baseline printed beside each peak is the RSS of a process that has only loaded the model and
embedded one short text (`model floor`), measured in the same run. Results: bench/results/sync_memory.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import cast

from bench_sync import REPO, SHARED, WORK, corpus_files, freeze_source, make_kb

PNK = [sys.executable, "-m", "pinakes"]
GB = 1024 ** 3

FAKE_SYNC = """
import sys
sys.path.append({repo!r})  # tests.fakes; pinakes itself from the snapshot on PYTHONPATH
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.fakes import FakeEmbedder
report = run_sync(sys.argv[1], SyncOptions(), embedder=FakeEmbedder())
print(report.render_text())
"""

MODEL_FLOOR = """
import json, sys
from pathlib import Path
from pinakes.manifest import load_manifest
from pinakes.embed import load_embedder

def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024

manifest = load_manifest(Path({kb!r}) / "pinakes.toml")
embedder = load_embedder(manifest.embedding)
batch = manifest.embedding.batch_size
embedder.embed_documents(["warm up the model with one short passage"], batch_size=batch)
one = hwm()
words = ("the quick brown fox jumps over the lazy dog while the sync embeds a long passage " * 40).split()
text = " ".join(words[:200])
while embedder.count_tokens(text) > embedder.max_input_tokens:
    text = text.rsplit(" ", 1)[0]
embedder.embed_documents([text] * batch, batch_size=batch)
print(json.dumps({{"one_short_text": one, "one_full_batch": hwm(), "batch_size": batch,
                  "tokens_per_text": embedder.count_tokens(text)}}))
"""


def vmrss_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def measure(cmd: list[str], sample_every: float = 1.0, timeout: float | None = None) -> dict[str, object]:
    """Run `cmd`; peak RSS (wait4), VmRSS samples, wall time, stderr progress lines. Past `timeout`
    seconds the child is interrupted (SIGINT, then SIGKILL) and the case is marked not completed."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    timed_out = threading.Event()

    def interrupt() -> None:
        timed_out.set()
        proc.send_signal(signal.SIGINT)
        time.sleep(30)
        if proc.returncode is None and vmrss_kib(proc.pid) is not None:
            proc.kill()

    timer = threading.Timer(timeout, interrupt) if timeout else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    samples: list[tuple[float, int]] = []
    progress: list[tuple[float, str]] = []
    stderr_lines: list[str] = []
    done = threading.Event()

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            stderr_lines.append(line.rstrip("\n"))
            if line.startswith("sync: "):
                progress.append((time.perf_counter() - started, line.strip()))

    def sample() -> None:
        while not done.is_set():
            rss = vmrss_kib(proc.pid)
            if rss is not None:
                samples.append((time.perf_counter() - started, rss))
            done.wait(sample_every)

    readers = [threading.Thread(target=read_stderr, daemon=True), threading.Thread(target=sample, daemon=True)]
    for thread in readers:
        thread.start()
    assert proc.stdout is not None
    stdout = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    done.set()
    if timer is not None:
        timer.cancel()
    for thread in readers:
        thread.join(timeout=5)
    if proc.returncode != 0 and not timed_out.is_set():
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n" + "\n".join(stderr_lines[-30:]))
    rss = [kib for _, kib in samples]
    quart = sorted(rss)
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(progress)]
    return {
        "completed": not timed_out.is_set(), "wall_seconds": wall, "peak_rss_bytes": usage.ru_maxrss * 1024,
        "cpu_seconds": usage.ru_utime + usage.ru_stime,
        "rss_samples": len(rss),
        "rss_first_bytes": rss[0] * 1024 if rss else None,
        "rss_quartiles_bytes": [quart[int(q * (len(quart) - 1))] * 1024 for q in (0.25, 0.5, 0.75)] if rss else None,
        "rss_sampled_max_bytes": max(rss) * 1024 if rss else None,
        "rss_series_kib": samples,
        "progress_lines": len(progress), "first_progress_at": progress[0][0] if progress else None,
        "last_progress_at": progress[-1][0] if progress else None,
        "max_gap_between_progress_lines": max(gaps) if gaps else None,
        "progress_sample": [text for _, text in progress[:2] + progress[-2:]],
        "stdout": stdout,
    }


def big_text(target_bytes: int) -> str:
    """Deterministic English prose with blank-line-separated paragraphs, `target_bytes` long (about)."""
    sources = sorted((SHARED / "python-3.11-docs-rst" / "docs").rglob("*.rst*"))  # the files are *.rst.txt
    paragraphs: list[str] = []
    for path in sources:
        text = path.read_text(encoding="utf-8", errors="replace")
        paragraphs += [p.strip() for p in text.replace("\r\n", "\n").split("\n\n") if p.strip()]
    if not paragraphs:
        raise SystemExit("no python-3.11-docs-rst text found to build the large file from")
    out: list[str] = []
    size = 0
    while size < target_bytes:
        for paragraph in paragraphs:
            piece = paragraph + "\n\n"
            out.append(piece)
            size += len(piece.encode("utf-8"))
            if size >= target_bytes:
                break
    return "".join(out)


def mib(value: object) -> str:
    return f"{value / 2**20:,.0f} MiB" if isinstance(value, (int, float)) else "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated document counts")
    parser.add_argument("--big-mb", type=float, default=20.0, help="size of the one-file case, in MB (10^6 B)")
    parser.add_argument("--skip-big", action="store_true")
    parser.add_argument("--only-big", action="store_true")
    parser.add_argument("--timeout", type=float, default=None,
                        help="interrupt a case after this many seconds (reported as not completed)")
    parser.add_argument("--fake-embedder", action="store_true",
                        help="sync with tests/fakes.py's FakeEmbedder: the pipeline's memory without the model")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "sync_memory.json"))
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    source = freeze_source()
    print(f"source: {source}", flush=True)
    sizes = [] if args.only_big else [int(s) for s in args.sizes.split(",") if s]
    results: dict[str, object] = {"date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "source": source,
                                  "cases": {}}
    cases = cast(dict[str, dict[str, object]], results["cases"])
    results["embedder"] = "fake" if args.fake_embedder else "default model (from the manifest)"

    def sync_cmd(root: Path) -> list[str]:
        if args.fake_embedder:
            return [sys.executable, "-c", FAKE_SYNC.format(repo=str(REPO)), str(root)]
        return [*PNK, "-C", str(root), "sync"]  # not --json: that implies --quiet (no progress)

    floor_kb = WORK / "mem-floor"
    make_kb(floor_kb, [])
    floor = measure([sys.executable, "-c", MODEL_FLOOR.format(kb=str(floor_kb))])
    floor.update(json.loads(str(floor.pop("stdout"))))
    results["model_floor"] = {k: floor[k] for k in ("peak_rss_bytes", "wall_seconds", "one_short_text",
                                                    "one_full_batch", "batch_size", "tokens_per_text")}
    print(f"model floor: load + embed one short text: peak RSS {mib(floor['one_short_text'])}; then one "
          f"full batch ({floor['batch_size']} x {floor['tokens_per_text']} tokens): peak RSS "
          f"{mib(floor['one_full_batch'])} (process peak {mib(floor['peak_rss_bytes'])})", flush=True)

    for n in sizes:
        root = WORK / f"mem-{n}"
        files = corpus_files(n)
        make_kb(root, files)
        source_bytes = sum(src.stat().st_size for src, _ in files)
        print(f"cold sync, {len(files)} tldr pages ({source_bytes / 1e6:.1f} MB) ...", flush=True)
        case = measure(sync_cmd(root), timeout=args.timeout)
        case["report_tail"] = str(case.pop("stdout"))[-600:]
        chunks = _count_chunks(root)
        case.update({"documents": len(files), "source_bytes": source_bytes, "chunks": chunks})
        cases[f"tldr-{n}"] = case
        peak, floor_peak = cast(int, case["peak_rss_bytes"]), cast(int, floor["peak_rss_bytes"])
        print(f"  peak RSS {mib(case['peak_rss_bytes'])} (model floor {mib(floor['peak_rss_bytes'])}, "
              f"{peak / floor_peak:.2f}x); {chunks} chunks; wall "
              f"{case['wall_seconds']:.0f}s; {case['progress_lines']} progress lines; "
              f"target <= 1 GB: {'met' if peak <= GB else 'NOT met'}", flush=True)

    if len(sizes) >= 2:
        small, large = cases[f"tldr-{sizes[0]}"], cases[f"tldr-{sizes[-1]}"]
        growth = cast(int, large["peak_rss_bytes"]) / cast(int, small["peak_rss_bytes"]) - 1
        results["growth"] = {"from": sizes[0], "to": sizes[-1], "growth": growth, "target": 0.10,
                             "met": growth <= 0.10}
        print(f"peak RSS growth {sizes[0]} -> {sizes[-1]} documents: {growth:+.1%} (target <= +10%: "
              f"{'met' if growth <= 0.10 else 'NOT met'})", flush=True)

    if not args.skip_big:
        root = WORK / "mem-big"
        make_kb(root, [])
        target = int(args.big_mb * 1_000_000)
        text = big_text(target)
        big = root / "docs" / "big.txt"
        big.parent.mkdir(parents=True, exist_ok=True)
        big.write_text(text, encoding="utf-8")
        size = big.stat().st_size
        print(f"cold sync, one {size / 1e6:.1f} MB text file ...", flush=True)
        case = measure(sync_cmd(root), timeout=args.timeout)
        case["report_tail"] = str(case.pop("stdout"))[-600:]
        case.update({"documents": 1, "source_bytes": size,
                     "chunks": _count_chunks(root) if case["completed"] else None})
        cases["one-big-file"] = case
        peak, floor_peak = cast(int, case["peak_rss_bytes"]), cast(int, floor["peak_rss_bytes"])
        quartiles = cast("list[int] | None", case["rss_quartiles_bytes"])
        print(f"  {'' if case['completed'] else 'INTERRUPTED after --timeout: '}"
              f"peak RSS {mib(case['peak_rss_bytes'])} (model floor {mib(floor['peak_rss_bytes'])}, "
              f"{peak / floor_peak:.2f}x); {case['chunks']} chunks; "
              f"wall {case['wall_seconds']:.0f}s; RSS quartiles "
              f"{', '.join(mib(q) for q in quartiles or [])}; {case['progress_lines']} "
              f"progress lines, first at {case['first_progress_at']}s, last at {case['last_progress_at']}s, "
              f"longest gap {case['max_gap_between_progress_lines']}s; target <= 1 GB: "
              f"{'met' if peak <= GB else 'NOT met'}", flush=True)

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1), encoding="utf-8")
    print(f"results: {out}")


def _count_chunks(root: Path) -> int:
    import sqlite3

    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    try:
        return int(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
    finally:
        conn.close()


if __name__ == "__main__":
    main()
