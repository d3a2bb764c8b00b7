"""What checking an index for damage costs (issue #40 item 10: doctor detects a damaged index; "PRAGMA
quick_check or a cheaper sampled check — measure"), next to baselines measured in the same run:

    python bench/bench_index_check.py                  # ~12,000 chunks
    python bench/bench_index_check.py --chunks 50000 --skip-rebuild

The index is written by the product's own sync (`tests/kb_helpers.build_kb`: `pnk init`'s code, the
real chunker, FTS5, chunk_terms, the graph) with the test suite's fake embedder at 384 dimensions
(the packaged model's width; vectors do not change what a check reads). Timed, warm (the file in
the page cache; each figure the median of --repeat):

- reading every byte of the file (the floor any whole-file check pays),
- `PRAGMA quick_check` (what doctor, a rebuild's read of the old index and its install run),
- `PRAGMA integrity_check` (quick_check plus every index cross-checked against its table),
- the vector-row check (index/vector_rows.py `row_faults` over every row: checksum, width, finite,
  unit length; what doctor's "index vectors" runs),
- a whole `pnk doctor` in process (`run_checks`), and once (unless --skip-rebuild) a `--rebuild`
  that reuses every vector, to put the checks a rebuild runs in proportion.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pinakes.doctor import DoctorContext, run_checks  # noqa: E402
from pinakes.index.vector_rows import row_faults  # noqa: E402
from pinakes.kb import KBPaths  # noqa: E402
from pinakes.sync import SyncOptions  # noqa: E402
from pinakes.sync.engine import run_sync  # noqa: E402
from tests.fakes import FakeEmbedder  # noqa: E402
from tests.kb_helpers import Doc, build_kb  # noqa: E402

WORK = Path(os.environ.get("PNK_BENCH_DIR", "/tmp/pnk-bench-index-check"))
CHUNKS_PER_DOC = 10  # ten paragraphs of 150 words, each its own chunk at max_tokens 200


def build(root: Path, chunks: int) -> None:
    import random

    rng = random.Random(1)
    words = [f"w{k}" for k in range(5000)]
    docs = [Doc(f"docs/d{number // 100}/d{number}.md", "\n\n".join(
        [f"# Doc {number}"] + [" ".join(rng.choice(words) for _ in range(150)) for _ in range(CHUNKS_PER_DOC)]) + "\n")
        for number in range(chunks // CHUNKS_PER_DOC)]
    build_kb(root, docs, FakeEmbedder(), max_tokens=200)


def median_seconds(action: Callable[[], object], repeat: int) -> tuple[float, list[float]]:
    samples: list[float] = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples), samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=12_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--skip-rebuild", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    root = WORK / f"kb-{args.chunks}"
    index = KBPaths(root).index_db
    if not index.exists():
        shutil.rmtree(root, ignore_errors=True)
        started = time.perf_counter()
        build(root, args.chunks)
        print(f"built {root} in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    conn = sqlite3.connect(f"{index.resolve().as_uri()}?mode=ro", uri=True)
    chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]

    def read_file() -> None:
        with open(index, "rb") as handle:
            while handle.read(1 << 20):
                pass

    def pragma(name: str) -> Callable[[], object]:
        return lambda: conn.execute(f"PRAGMA {name}").fetchall()

    def vector_rows() -> None:
        cursor = conn.execute("SELECT vector, text_key, checksum FROM embeddings")
        while batch := cursor.fetchmany(4096):
            assert not any(row_faults(batch, 384))

    results: dict[str, object] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": platform.platform(),
        "cpus": os.cpu_count(), "python": platform.python_version(), "sqlite": sqlite3.sqlite_version,
        "chunks": chunks, "index_mb": round(index.stat().st_size / 1e6, 1), "repeat": args.repeat,
    }
    read_file()  # into the page cache: every figure below is warm
    for name, action in (("read_file", read_file), ("quick_check", pragma("quick_check")),
                         ("integrity_check", pragma("integrity_check")), ("vector_rows", vector_rows),
                         ("doctor", lambda: list(run_checks(DoctorContext(root))))):
        seconds, samples = median_seconds(action, args.repeat)
        results[name] = {"median_s": round(seconds, 3), "samples_s": [round(s, 3) for s in samples]}
        print(f"{name:16} {seconds:7.3f} s  (samples {', '.join(f'{s:.3f}' for s in samples)})")
    conn.close()
    if not args.skip_rebuild:
        started = time.perf_counter()
        report = run_sync(root, SyncOptions(rebuild=True, quiet=True), embedder=FakeEmbedder())
        seconds = time.perf_counter() - started
        assert report.ok and report.chunks_embedded == 0
        results["rebuild_reusing_every_vector"] = {"s": round(seconds, 2)}
        print(f"{'rebuild':16} {seconds:7.2f} s  (every vector reused; it runs quick_check twice)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
