"""What a search of the vector file maps into the searching process (issue #45, calpages): the file is
memory-mapped (vectors/approximate.py `open_vector_file`) and its clean pages count in VmRSS.

    nice -n 5 python bench/bench_file_pages.py --kb <a COPY of a synced KB with .pinakes/vectors.ann> [--searches 30]
    nice -n 10 python bench/bench_file_pages.py --random-rows 1118719 --scratch /tmp/calpages/big

`--kb`: the KB's vector file through the product's `open_vector_file`, its own vectors as queries
(rows of its index). `--random-rows N`: an index of N random unit vectors (what bench_writer's
`FastEmbedder` gives every chunk, so what the 700k bench trees' files hold) built with the product's
parameters (`engine.DEFAULT_PARAMS`, 2 threads; minutes at 1M) and saved raw under `--scratch`,
reused when it is there, viewed through one read-only mmap as the product does; random queries.
In one process, with the product's candidates call (k 50 at the shipped breadth,
`engine.EXPANSION_SEARCH`):

1. `fault-around`: bytes 1 MiB apart touched in a fresh mapping, with and without MADV_RANDOM: what
   one read fault maps (the kernel's fault-around maps the cached pages of the 64 KiB around it).
2. `warm`: the file in the page cache (as after the sync that wrote it), each advice on its own
   mapping: `keep` (as shipped), `random` (MADV_RANDOM), `release` (MADV_DONTNEED before each
   search: its pages are faulted back from the page cache), `both`; the mapping's Rss after each
   search (/proc/self/smaps), minor faults and CPU a search, first apart, alternated in rounds.
   `split`: MADV_DONTNEED before each search on a mapping cut into 4 KiB areas (MADV_RANDOM on every
   other page: areas whose flags differ are not merged, and fault-around stays inside its area),
   so that each fault maps its own page; one area a page, so only where the file has fewer pages
   than `SPLIT_MAX_AREAS` (a process may hold 65,530 areas in all by default).
3. `cold`: a copy of the file evicted from the page cache before each search (POSIX_FADV_DONTNEED)
   with MADV_RANDOM (no readahead, so fault-around finds no neighbour cached): the 4 KiB pages one
   search really reads, i.e. what a search would map if a fault mapped its own page only.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import resource
import shutil
import sqlite3
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from pinakes.vectors import engine
from pinakes.vectors.approximate import open_vector_file
from pinakes.vectors.fileformat import read_header

ADVICE = {"keep": (), "random": (mmap.MADV_RANDOM,), "release": (), "both": (mmap.MADV_RANDOM,), "split": ()}
RELEASED = ("release", "both", "split")  # MADV_DONTNEED before each search
SPLIT_MAX_AREAS = 40_000
PAGE = mmap.PAGESIZE


def mapped_kib(mapping: mmap.mmap) -> int:
    """The Rss of `mapping` in this process (KiB, every area it was cut into), from /proc/self/smaps."""
    probe = np.frombuffer(mapping, dtype=np.uint8, count=1)
    start = probe.ctypes.data
    del probe  # an exported buffer would keep the mapping from closing
    inside, total = False, 0
    for line in Path("/proc/self/smaps").read_text().splitlines():
        parts = line.split()
        if parts and "-" in parts[0] and not parts[0].endswith(":"):
            low = int(parts[0].split("-")[0], 16)
            inside = start <= low < start + len(mapping)
        elif inside and line.startswith("Rss:"):
            total += int(parts[1])
    return total


def split_into_pages(mapping: mmap.mmap) -> None:
    """Cut the mapping into one area a page (see `split` in the module docstring)."""
    for offset in range(0, len(mapping) - PAGE, 2 * PAGE):
        mapping.madvise(mmap.MADV_RANDOM, offset, PAGE)


class Viewed:
    """An index viewed through one read-only mapping of its file: the product's vector file, or a
    raw usearch file (`--random-rows`)."""

    def __init__(self, path: Path, raw: bool) -> None:
        if raw:
            with open(path, "rb") as handle:
                self.mapping = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
            self.view = memoryview(self.mapping)
            self.index = engine.new_index(DIM, engine.DEFAULT_PARAMS)
            self.index.view(self.view)
            self.opened = None
        else:
            header = read_header(path)
            self.opened = open_vector_file(path, header.content_key, dict(header.identity), header.dim,
                                           check_body=False)
            # a vector file is searched piece by piece now: this bench reads one index, so one piece
            assert len(self.opened.pieces) == 1, f"{path} has {len(self.opened.pieces)} pieces, not one"
            self.index = self.opened.pieces[0]
            self.mapping = self.opened._mapping  # pyright: ignore[reportPrivateUsage]  # the bench drives the private part

    def close(self) -> None:
        if self.opened is not None:
            self.opened.close()
        else:
            self.index.reset()
            self.view.release()
            self.mapping.close()


DIM = 384


def fault_around(path: Path) -> dict[str, float]:
    """KiB mapped a touched byte, touches 1 MiB apart, with each advice."""
    found: dict[str, float] = {}
    for name, advice in (("default", None), ("MADV_RANDOM", mmap.MADV_RANDOM)):
        with open(path, "rb") as handle:
            mapping = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        if advice is not None:
            mapping.madvise(advice)
        touches = range(0, len(mapping), 1 << 20)
        for offset in touches:
            mapping[offset]
        found[name] = round(mapped_kib(mapping) / len(touches), 1)
        mapping.close()
    return found


def search(vector_file: Viewed, query: np.ndarray) -> tuple[float, int, int]:
    """(CPU ms, minor faults, major faults) of one candidates call."""
    before, cpu = resource.getrusage(resource.RUSAGE_SELF), time.process_time()
    vector_file.index.expansion_search = engine.EXPANSION_SEARCH
    vector_file.index.search(query, 50, threads=1)
    after = resource.getrusage(resource.RUSAGE_SELF)
    return (time.process_time() - cpu) * 1000, after.ru_minflt - before.ru_minflt, after.ru_majflt - before.ru_majflt


def warm(path: Path, raw: bool, queries: list[np.ndarray], rounds: int) -> dict[str, dict[str, object]]:
    modes = [mode for mode in ADVICE if mode != "split" or path.stat().st_size // PAGE <= SPLIT_MAX_AREAS]
    files = {mode: Viewed(path, raw) for mode in modes}
    if "split" in files:
        split_into_pages(files["split"].mapping)
    for mode, vector_file in files.items():
        vector_file.mapping.madvise(mmap.MADV_DONTNEED)  # what opening the view touched
        for advice in ADVICE[mode]:
            vector_file.mapping.madvise(advice)
    seen: dict[str, list[tuple[float, int, int, int]]] = {mode: [] for mode in modes}
    per_round = max(1, len(queries) // rounds)
    for start in range(0, len(queries), per_round):
        for mode, vector_file in files.items():  # alternated, a round each
            for query in queries[start:start + per_round]:
                if mode in RELEASED:
                    vector_file.mapping.madvise(mmap.MADV_DONTNEED)
                cpu, minor, major = search(vector_file, query)
                seen[mode].append((cpu, minor, major, mapped_kib(vector_file.mapping)))
    result: dict[str, dict[str, object]] = {}
    for mode, rows in seen.items():
        later = rows[1:] or rows
        result[mode] = {"first_cpu_ms": round(rows[0][0], 1), "first_mapped_MB": round(rows[0][3] / 1024, 1),
                        "cpu_ms_median": round(statistics.median(row[0] for row in later), 1),
                        "minflt_median": statistics.median(row[1] for row in later),
                        "mapped_MB_after_search_max": round(max(row[3] for row in rows) / 1024, 1),
                        "mapped_MB_after_search_median": round(statistics.median(row[3] for row in rows) / 1024, 1)}
    for vector_file in files.values():
        vector_file.close()
    return result


def cold(path: Path, raw: bool, scratch: Path, queries: list[np.ndarray]) -> dict[str, object]:
    """Each search on an evicted copy with MADV_RANDOM: the pages it reads, each mapped alone."""
    copy = scratch / "cold-copy.ann"
    shutil.copyfile(path, copy)
    with open(copy, "rb") as written:  # dirty pages are not evicted: write them back first
        os.fsync(written.fileno())
    vector_file = Viewed(copy, raw)
    mapping = vector_file.mapping
    mapping.madvise(mmap.MADV_RANDOM)
    rows: list[tuple[float, int, int]] = []
    for query in queries:
        mapping.madvise(mmap.MADV_DONTNEED)
        descriptor = os.open(copy, os.O_RDONLY)
        try:
            os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(descriptor)
        wall = time.perf_counter()
        _, minor, major = search(vector_file, query)
        rows.append((time.perf_counter() - wall, minor + major, mapped_kib(mapping)))
    vector_file.close()
    copy.unlink()
    return {"pages_read_median": statistics.median(row[1] for row in rows),
            "mapped_MB_median": round(statistics.median(row[2] for row in rows) / 1024, 1),
            "wall_ms_median": round(statistics.median(row[0] for row in rows) * 1000)}


def unit_rows(count: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((count, DIM), dtype=np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows


def random_index(rows: int, scratch: Path) -> Path:
    """A raw usearch file of `rows` random unit vectors, the product's build parameters; reused."""
    path = scratch / f"random-{rows}.usearch"
    if not path.exists():
        scratch.mkdir(parents=True, exist_ok=True)
        index = engine.new_index(DIM, engine.DEFAULT_PARAMS)
        started = time.perf_counter()
        for start in range(0, rows, 65_536):
            take = min(65_536, rows - start)
            index.add(np.arange(start, start + take, dtype=np.int64), unit_rows(take, seed=start), threads=2)
            print(json.dumps({"added": start + take, "seconds": round(time.perf_counter() - started)}), flush=True)
        partial = path.with_suffix(".partial")
        index.save(str(partial))
        os.replace(partial, path)
        del index
    return path


def kb_queries(kb: Path, searches: int) -> list[np.ndarray]:
    conn = sqlite3.connect(f"file:{kb / '.pinakes' / 'index.db'}?mode=ro", uri=True)
    count = conn.execute("SELECT count(*) FROM embeddings").fetchone()[0]
    step = max(1, count // searches)
    queries = [np.frombuffer(row[0], dtype=np.float32) for row in
               conn.execute("SELECT vector FROM embeddings WHERE chunk_id % ? = 7 LIMIT ?", [step, searches])]
    conn.close()
    return queries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kb", type=Path)
    parser.add_argument("--random-rows", type=int)
    parser.add_argument("--scratch", type=Path, help="--random-rows: where its index is built and kept")
    parser.add_argument("--searches", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cold-searches", type=int, default=5)
    args = parser.parse_args()
    engine.load_library()
    if args.random_rows:
        if args.scratch is None:
            parser.error("--random-rows needs --scratch")
        path, raw, scratch = random_index(args.random_rows, args.scratch), True, args.scratch
        queries = list(unit_rows(args.searches, seed=2**32 - 1))  # not a build seed
        rows = args.random_rows
    elif args.kb is not None:
        path, raw, scratch = args.kb / ".pinakes" / "vectors.ann", False, args.kb / ".pinakes"
        queries = kb_queries(args.kb, args.searches)
        rows = read_header(path).rows
    else:
        parser.error("--kb or --random-rows")
    print(json.dumps({"file_MB": round(path.stat().st_size / 2**20, 1), "rows": rows,
                      "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load": os.getloadavg(),
                      "kernel": os.uname().release, "library": engine.load_library()[0]}), flush=True)
    print(json.dumps({"fault_around_KiB_a_touch": fault_around(path)}), flush=True)
    print(json.dumps({"warm": warm(path, raw, queries, args.rounds)}), flush=True)
    print(json.dumps({"cold_random": cold(path, raw, scratch, queries[:args.cold_searches])}), flush=True)


if __name__ == "__main__":
    main()
