"""What a searching process pays to check a vector file before usearch reads it (format 3): every
byte of each piece but its codes (`verify_graphs`), against checking every byte of the body
(`verify_body`, what the sync's step and doctor do), measured in the same run, alternating.

    nice -n -5 python bench/bench_vector_graph_check.py --kb DIR [--repeat 5] [--evict]

`--evict` drops the file from the page cache before each check (posix_fadvise DONTNEED: nothing is
written), so each reads from disk, as a search after other work has turned the cache over does.
Prints JSON: each check's wall and CPU milliseconds per run, their medians, the bytes each reads,
and the ratio of the medians (graphs / body).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from pinakes.kb import KBPaths
from pinakes.vectors import engine
from pinakes.vectors.fileformat import (
    Header,
    opened_file,
    read_header,
    vector_file_path,
    verify_body,
    verify_graphs,
)


def evict(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def timed(path: Path, check: Callable[[Path, Header, int], None]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    with opened_file(path) as fd:
        check(path, read_header(path, fd), fd)
    return (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--kb", type=Path, required=True)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--evict", action="store_true")
    args = parser.parse_args()
    path = vector_file_path(KBPaths(args.kb.resolve()).state_dir)
    header = read_header(path)
    checks: dict[str, Callable[[Path, Header, int], None]] = {
        "graphs": lambda at, head, fd: verify_graphs(at, head, fd, engine.codes_span),
        "body": lambda at, head, fd: verify_body(at, head, fd)}
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in checks}
    for turn in range(args.repeat):
        order = list(checks) if turn % 2 == 0 else list(reversed(checks))
        for name in order:
            if args.evict:
                evict(path)
            runs[name].append(timed(path, checks[name]))
    medians = {name: {"wall_ms": statistics.median(wall for wall, _ in done),
                      "cpu_ms": statistics.median(cpu for _, cpu in done)} for name, done in runs.items()}
    print(json.dumps({
        "file": str(path), "rows": header.rows, "pieces": len(header.pieces), "evict": args.evict,
        "load_avg": os.getloadavg(),
        "bytes_read": {"graphs": sum(piece.size - piece.codes_bytes for piece in header.pieces),
                       "body": header.footer_offset},
        "runs_ms": {name: [[round(wall, 1), round(cpu, 1)] for wall, cpu in done] for name, done in runs.items()},
        "medians_ms": medians,
        "ratio_graphs_to_body": {key: round(medians["graphs"][key] / medians["body"][key], 3)
                                 for key in ("wall_ms", "cpu_ms")}}, indent=1))


if __name__ == "__main__":
    main()
