"""What a first sync's plan-wide reads cost (issue #45, plantail): progress's byte total, the image
estimate's hashes, the chunk-ahead worker's count of chunkable documents and its start position, each
done the old way (one `DocWork` made per row of the `WorkTable`, as iterating the plan does) and off
the plan's columns (`plan_table.total_size`, `content_hashes_of_type`, `count_of_types`,
`WorkTable.position_of`), on an N-row table built in memory (no tree, no sync). Both ways must give
the same figures (asserted); the best of 3 each, and the ratio.

    nice -n 5 python bench/bench_plan_reads.py [N]
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pinakes.init import init_kb
from pinakes.manifest import load_manifest
from pinakes.pipeline import chunk_ahead
from pinakes.pipeline.keys import build_keys
from pinakes.pipeline.plan_table import WorkTable, content_hashes_of_type, count_of_types, total_size
from pinakes.sources.file_state import FileState
from pinakes.sources.walk_table import DocRows

TYPES = ("markdown", "text", "html", "pdf", "image")


def plan(rows: int, kb: Path) -> WorkTable:
    """`rows` documents, most markdown or text, one in 50 of the other types, a third hashed."""
    table = DocRows()
    for n in range(rows):
        source_type = TYPES[(n // 50) % len(TYPES)] if n % 50 == 0 else TYPES[n % 2]
        table.add(FileState(f"docs/d{n % 97}/page-{n:07d}.md", 100 + (n * 37) % 50_000, 1_700_000_000 * 10**9 + n,
                            n, "" if n % 3 else f"{n:032x}", 1_700_000_000 * 10**9 + n), source_type)
    init_kb(kb, name="bench")
    return WorkTable.minting(table.freeze(), build_keys(load_manifest(kb / "pinakes.toml")))


def best(run: Callable[[], object]) -> tuple[float, object]:
    times: list[float] = []
    result: object = None
    for _ in range(3):
        started = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - started)
    return min(times), result


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    with tempfile.TemporaryDirectory() as scratch:
        work = plan(rows, Path(scratch) / "kb")
    # the driver is chunking the first group when the worker starts: its position is near the start
    text, limit, at = chunk_ahead._text_source_types(), 1 << 20, work[min(128, rows - 1)]  # pyright: ignore[reportPrivateUsage]
    reads: dict[str, tuple[Callable[[], object], Callable[[], object]]] = {
        "progress bytes": (lambda: sum(item.file.size for item in work), lambda: total_size(work)),
        "image hashes": (lambda: [item.file.content_hash for item in work if item.source_type == "image"],
                         lambda: list(content_hashes_of_type(work, "image"))),
        "chunkable count": (lambda: sum(item.source_type in text and item.file.size < limit for item in work),
                            lambda: count_of_types(work, text, limit)),
        "start position": (lambda: next(n for n, item in enumerate(work) if item.doc_id == at.doc_id),
                           lambda: work.position_of(at.doc_id)),
    }
    print(f"{rows} rows")
    for name, (per_item, columns) in reads.items():
        (old, expected), (new, got) = best(per_item), best(columns)
        assert expected == got, name
        print(f"{name:16} per item {old * 1000:8.1f} ms   columns {new * 1000:7.2f} ms   x{old / max(new, 1e-9):9.1f}")


if __name__ == "__main__":
    main()
