"""What a first sync's process holds when its vector build starts (issue #45: the 700k first sync's
vectors stage is the usearch index on top of this), by kind: a tree from bench/corpora/make_pages.py
synced in place (sidecars and index removed first) with bench_writer.py's `FastEmbedder`, at the
start of the `vectors` invocation (after the graph, `PipelineRun.release_documents()` and the trim)
and at the start of the self-calibration (after the sync returned; before and after the collection
and trim that precede it: `pipeline.run.return_freed_memory`; the calibration itself is not run):
/proc/self/smaps_rollup (anonymous and file pages), glibc's heap (mallinfo2: in use, free, mapped),
SQLite's own allocator (sqlite3_memory_used), Python's objects by type (count, shallow size), the
modules loaded, and with `--trace` tracemalloc's top allocators (slower: a smaller tree). Then a
gc + malloc_trim and the same again, which says what fragmentation alone holds. One JSON line.

    nice -n 10 python bench/bench_sync_held.py --kb /tmp/endbase/pages10k [--trace] [--phases] [--frames 3]

`--phases` adds snapshots when the plan is done and when the last group has run; `--survivors` lets
go, at the vector step, of what the trace finds surviving the release. `model objects|columns|table N
[KEEP_EVERY]` runs no sync: it holds N documents' walk and plan state as the sync's objects path does
(objects), as modelled columns (columns), or as the first sync's own `DocTable` + `WorkTable` + pending
mints (table), lets it go, and says what the process keeps (same process kind: compare them).
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import gc
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_end_stages import memory  # VmRSS, VmHWM, RssAnon, RssFile in MB
from bench_first_chunk import reset


class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


def heap() -> dict[str, float]:
    """glibc's main and thread arenas (MB): bytes in use, free inside the heap, in mmapped blocks."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.mallinfo2.restype = MallInfo2
    info = libc.mallinfo2()
    return {"arena": info.arena / 2**20, "in_use": info.uordblks / 2**20, "free": info.fordblks / 2**20,
            "mmapped": info.hblkhd / 2**20}


def sqlite_used() -> float | None:
    """SQLite's own allocator, in MB (the library Python's sqlite3 module loaded), or None."""
    import sqlite3

    _ = sqlite3.sqlite_version
    try:
        maps = Path("/proc/self/maps").read_text()
        path = next(line.split()[-1] for line in maps.splitlines() if "libsqlite3" in line)
        lib = ctypes.CDLL(path)
        lib.sqlite3_memory_used.restype = ctypes.c_int64
        return int(lib.sqlite3_memory_used()) / 2**20
    except (StopIteration, OSError, AttributeError):
        return None


def rollup() -> dict[str, int]:
    values: dict[str, int] = {}
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines()[1:]:
        key, _, rest = line.partition(":")
        if key in ("Rss", "Anonymous", "Shared_Clean", "Private_Clean", "Private_Dirty"):
            values[key] = round(int(rest.split()[0]) / 1024)
    return values


def mappings(top: int = 8) -> list[tuple[str, int, int]]:
    """/proc/self/smaps summed by what is mapped (a file's name, [heap], [anon] for anonymous
    mappings): (name, Rss MB, anonymous MB), largest first."""
    rss: Counter[str] = Counter()
    anon: Counter[str] = Counter()
    name = "[anon]"
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
            name = head[5] if len(head) > 5 else "[anon]"
        elif head and head[0] == "Rss:":
            rss[name] += int(head[1])
        elif head and head[0] == "Anonymous:":
            anon[name] += int(head[1])
    return [(key, round(value / 1024), round(anon[key] / 1024)) for key, value in rss.most_common(top)]


def pymalloc() -> dict[str, int]:
    """Python's small-object allocator (sys._debugmallocstats, which writes to fd 2): arenas, and the
    bytes in live blocks, free blocks and unused pools, in MB: what fragmentation alone holds."""
    wanted = {"# arenas allocated current": "arenas", "# arenas highwater mark": "arenas_highwater", "# bytes in allocated blocks": "live",
              "# bytes in available blocks": "free_blocks", "# bytes lost to pool headers": "headers",
              "# bytes lost to quantization": "quantization", "Total": "total"}
    saved = os.dup(2)
    with tempfile.TemporaryFile() as out:
        os.dup2(out.fileno(), 2)
        try:
            sys._debugmallocstats()  # pyright: ignore[reportPrivateUsage]  # CPython's only way to them
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition("=")
        for prefix, name in wanted.items():
            if key.strip().startswith(prefix) and rest.strip() and name not in values:
                number = int(rest.split()[0].replace(",", ""))
                values[name] = number if name.startswith("arenas") else round(number / 2**20)
        if "unused pools *" in line:
            values["unused_pools"] = round(int(rest.split()[0].replace(",", "")) / 2**20)
    return values


def objects_by_type(top: int = 15) -> list[tuple[str, int, float]]:
    counts: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    for obj in gc.get_objects():
        name = type(obj).__name__
        counts[name] += 1
        sizes[name] += sys.getsizeof(obj)
    return [(name, counts[name], round(sizes[name] / 2**20, 1)) for name, _ in sizes.most_common(top)]


def pins(top: int = 12) -> dict[str, object]:
    """What keeps pymalloc's arenas: every object reachable from the gc-tracked ones (strings and
    numbers included), those of at most 512 bytes (pymalloc's) grouped by 1 MiB of address (about
    an arena each); for the sparse groups (under a quarter live), the types that live there, with
    a few strings as examples."""
    seen: dict[int, object] = {}
    for obj in gc.get_objects():
        seen[id(obj)] = obj
        for ref in gc.get_referents(obj):
            seen.setdefault(id(ref), ref)
    live: Counter[int] = Counter()
    kinds: dict[int, Counter[str]] = {}
    for address, obj in seen.items():
        size = sys.getsizeof(obj)
        if size <= 512:
            live[address >> 20] += size
            kinds.setdefault(address >> 20, Counter())[type(obj).__name__] += 1
    sparse = [group for group, size in live.items() if size < (1 << 20) // 4]
    resident: Counter[str] = Counter()
    for group in sparse:
        resident.update(kinds[group])
    examples = [str(obj)[:60] for address, obj in seen.items()
                if address >> 20 in set(sparse[:50]) and isinstance(obj, str)][:8]
    return {"groups": len(live), "sparse_groups": len(sparse), "live_mb": round(sum(live.values()) / 2**20, 1),
            "sparse_live_mb": round(sum(live[group] for group in sparse) / 2**20, 1),
            "sparse_types": resident.most_common(top), "sparse_strings": examples}


def snapshot(label: str, trace: bool) -> dict[str, object]:
    entry: dict[str, object] = {"at": label, "memory": memory(), "rollup": rollup(), "heap": heap(),
                                "mappings": mappings(), "sqlite_mb": sqlite_used(), "pymalloc": pymalloc(), "modules": len(sys.modules),
                                "objects": objects_by_type(), "gc_tracked": len(gc.get_objects())}
    if trace and tracemalloc.is_tracing():
        taken = tracemalloc.take_snapshot()
        stats = taken.statistics("lineno")
        entry["traced_mb"] = round(sum(stat.size for stat in stats) / 2**20, 1)
        entry["top"] = [(str(stat.traceback[0]), round(stat.size / 2**20, 2), stat.count) for stat in stats[:20]]
        entry["top_tracebacks"] = [([str(frame) for frame in stat.traceback], round(stat.size / 2**20, 2), stat.count)
                                   for stat in taken.statistics("traceback")[:12]]
    return entry


def phase_point(label: str, previous: str | None) -> str | None:
    """The streamed phase's points a `--phases` run snapshots, from the invocation about to start
    (`label`) and the one before it: the plan done (the first group starts), the last group's start
    is not known ahead, so the groups done (the stage after them starts), and the release (the
    vector step, as without --phases)."""
    if label == "group 0":
        return "plan done (group 0 starts)"
    if previous is not None and previous.startswith("group ") and not label.startswith("group "):
        return f"groups done ({previous} ran; {label} starts)"
    return None


def model(layout: str, documents: int, keep_every: int) -> None:
    """The walk's and the plan's per-document state of a first sync, alone in this process, held
    as the sync holds it (`objects`: a FileState, a DocWork, a minted ID, the walk's two dicts, the
    pending mints' set) or as columns (`columns`: the paths in one str, the stats in int64 arrays,
    the IDs in one bytes; what a compact plan would keep); then let go, as the release does. One
    small object in `keep_every` documents' time is kept, as the sync's later objects (imports,
    caches, the report) land among the plan's. Prints VmRSS and pymalloc's arenas at each point."""
    from array import array

    from pinakes.ids import new_ulid
    from pinakes.pipeline.types import DocWork
    from pinakes.sources.walk import FileState

    points: list[dict[str, object]] = [{"at": "start", "memory": memory(), "pymalloc": pymalloc()}]
    kept: list[str] = []
    held: list[object] = []
    paths = (f"docs/debian-handbook/usr/share/doc/debian-handbook/html/l{n % 40:02d}/sect.p{n:07d}.md"
             for n in range(documents))
    if layout == "objects":
        docs: dict[str, FileState] = {}
        types: dict[str, str] = {}
        work: list[DocWork] = []
        for number, path in enumerate(paths):
            stat = os.stat_result((0, 10**9 + number, 0, 1, 0, 0, 4000 + number % 900, 0, 0, 0,
                                   1_733_500_000_000_000_000 + number, 1_733_500_000_000_000_000 + number))
            state = FileState(path, stat.st_size, stat.st_mtime_ns, stat.st_ino, "", stat.st_ctime_ns)
            docs[path], types[path] = state, "markdown"
            work.append(DocWork(new_ulid(), path, "markdown", state, None, None, f"k{number:x}", "added"))
            if number % keep_every == 0:
                kept.append(f"later object {number}")
        held = [docs, types, work, {item.doc_id for item in work}]
        del docs, types, work
    elif layout == "table":  # the sync's own columns (sources/walk_table.py, pipeline/plan_table.py)
        from typing import cast

        from pinakes.pipeline.keys import BuildKeys
        from pinakes.pipeline.plan_table import WorkTable
        from pinakes.sources.walk_table import DocRows

        rows = DocRows()
        for number, path in enumerate(paths):
            stamp = 1_733_500_000_000_000_000 + number
            rows.add(FileState(path, 4000 + number % 900, stamp, 10**9 + number, "", stamp), "markdown")
            if number % keep_every == 0:
                kept.append(f"later object {number}")
        table = rows.freeze()
        work_table = WorkTable.minting(table, cast("BuildKeys", None))  # no row is hashed: no key is made
        held = [table, work_table, work_table.pending_mints()]
        del rows, table, work_table
    else:
        text: list[str] = []
        columns = {name: array("q") for name in ("offset", "size", "mtime_ns", "inode", "ctime_ns")}
        ids = bytearray()
        at = 0
        for number, path in enumerate(paths):
            text.append(path)
            columns["offset"].append(at)
            at += len(path) + 1
            for name, value in (("size", 4000 + number % 900), ("mtime_ns", 1_733_500_000_000_000_000 + number),
                                ("inode", 10**9 + number), ("ctime_ns", 1_733_500_000_000_000_000 + number)):
                columns[name].append(value)
            ids += new_ulid().encode()
            if number % keep_every == 0:
                kept.append(f"later object {number}")
            if len(text) >= 4096:  # joined as it goes: the column never holds the small strings all at once
                text = ["\n".join(text)]
        held = ["\n".join(text), columns, bytes(ids)]
        del text, columns, ids
    points.append({"at": "held", "memory": memory(), "pymalloc": pymalloc()})
    held.clear()
    gc.collect()
    from pinakes.pipeline.run import collect_and_trim

    collect_and_trim()
    points.append({"at": "released", "memory": memory(), "pymalloc": pymalloc()})
    print(json.dumps({"model": layout, "documents": documents, "keep_every": keep_every, "kept": len(kept),
                      "points": points, "load": os.getloadavg(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}))


def main() -> None:
    if sys.argv[1:2] == ["model"]:  # bench_sync_held.py model objects|columns|table DOCUMENTS [KEEP_EVERY]
        model(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 64)
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kb", type=Path, required=True)
    parser.add_argument("--trace", action="store_true", help="tracemalloc from the start (slower)")
    parser.add_argument("--phases", action="store_true",
                        help="also snapshot when the plan is done and when the last group has run")
    parser.add_argument("--frames", type=int, default=1, help="tracemalloc's frames a traceback keeps")
    parser.add_argument("--pins", action="store_true", help="at the vector step: what lives in sparse arenas")
    parser.add_argument("--modules", type=Path, help="write the modules loaded at the vector step to this file, or, "
                        "when it exists, import them all before the sync starts (an experiment)")
    parser.add_argument("--compact", action="store_true", help="then copy the report's path lists anew (an experiment)")
    parser.add_argument("--survivors", action="store_true",
                        help="then let go of what the trace finds surviving the release, one at a time: the heading "
                        "cache (index/chunk_rows.py), then the report's paths (an experiment: its report is wrong)")
    parser.add_argument("--spill", action="store_true",
                        help="then keep the report's paths as one string instead (an experiment: its report is wrong)")
    args = parser.parse_args()
    reset(args.kb)
    if not (args.kb / "pinakes.toml").exists():
        subprocess.run([sys.executable, "-m", "pinakes", "init", str(args.kb)], check=True, capture_output=True)
    if args.trace:
        tracemalloc.start(args.frames)
    modules: Path | None = args.modules
    preimported = modules is not None and modules.exists()
    if modules is not None and preimported:
        import contextlib
        import importlib

        for name in modules.read_text().split():
            with contextlib.suppress(Exception):  # an experiment: a module that does not import alone is skipped
                importlib.import_module(name)
    from bench_writer import FastEmbedder

    import pinakes.calibration.on_sync as on_sync
    import pinakes.sync.loader as loader
    from pinakes.errors import PinakesError
    from pinakes.pipeline.run import collect_and_trim
    from pinakes.rules import Halt, PipelineRun, TaskDict
    from pinakes.sync import SyncOptions
    from pinakes.sync.engine import run_sync

    found: list[dict[str, object]] = []
    kept: dict[str, str] = {}
    run_invocation = loader.run_invocation
    previous: list[str] = []

    def measured(run: PipelineRun, invocation: loader.Invocation, tasks: list[TaskDict] | None = None,
                 halt: Halt | None = None) -> tuple[int, str]:
        point = phase_point(invocation.label, previous[-1] if previous else None) if args.phases else None
        previous.append(invocation.label)
        if point is not None:
            found.append(snapshot(point, args.trace))
        if invocation.label == "vectors" and not any(entry["at"] == "vectors start" for entry in found):
            found.append(snapshot("vectors start", args.trace))
            if modules is not None and not preimported:
                modules.write_text("\n".join(sorted(name for name in sys.modules if "." not in name or
                                                          name.startswith(("pinakes.", "numpy.", "usearch.")))))
            gc.collect()
            collect_and_trim()
            found.append(snapshot("after gc + trim", args.trace))
            if args.pins:
                found[-1]["pins"] = pins()
            if args.compact:
                report = cast(Any, run.ctx.report)
                lists = (report.added, report.sidecars_written._documents)
                fresh = pickle.loads(pickle.dumps(lists))  # new strings, packed; shared ones stay shared
                report.added[:] = fresh[0]
                report.sidecars_written._documents[:] = fresh[1]
                del lists, fresh
                gc.collect()
                collect_and_trim()
                found.append(snapshot("after compacting the report's paths", args.trace))
            if args.survivors:
                from pinakes.index import chunk_rows

                chunk_rows._heading_json.cache_clear()  # pyright: ignore[reportPrivateUsage]  # an experiment
                gc.collect()
                collect_and_trim()
                found.append(snapshot("after the heading cache cleared", args.trace))
                report = cast(Any, run.ctx.report)
                report.added.clear()
                report.sidecars_written._documents.clear()
                gc.collect()
                collect_and_trim()
                found.append(snapshot("after the report's paths dropped", args.trace))
            if args.spill:
                report = cast(Any, run.ctx.report)
                kept["paths"] = "\n".join([*report.added, *report.sidecars_written._documents])
                report.added.clear()
                report.sidecars_written._documents.clear()
                gc.collect()
                collect_and_trim()
                found.append(snapshot("after the report's paths as one string", args.trace))
        return run_invocation(run, invocation, tasks, halt)

    free = on_sync.return_freed_memory

    def freeing(documents: int) -> None:  # self-calibration's start: as it was (the run just let go), then freed
        found.append(snapshot("calibration start, before the trim", args.trace))
        free(documents)
        found.append(snapshot("calibration start", args.trace))

    def not_calibrating(*_a: object, **_k: object) -> None:  # its own cost: bench_end_stages.py calibrate
        raise PinakesError("measured up to here")

    loader.run_invocation = measured
    on_sync.return_freed_memory = freeing
    on_sync.self_calibrate = not_calibrating
    started = time.perf_counter()
    report = run_sync(str(args.kb), SyncOptions(quiet=True), embedder=FastEmbedder())
    print(json.dumps({"kb": str(args.kb), "preimported": preimported, "documents": len(report.added), "chunks": report.chunks_embedded,
                      "seconds": round(time.perf_counter() - started), "snapshots": found, "end": memory(),
                      "load": os.getloadavg(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}))


if __name__ == "__main__":
    main()
