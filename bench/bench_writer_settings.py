"""The index writer's SQLite settings, each measured on the write path alone (issue #45). One command:

    nice -n 10 python bench/bench_writer_settings.py [--corpus DIR] [--chunks 30000] [--rounds 2]

Real text (the corpus's files, sorted, cut into pieces of about 700 characters at paragraph breaks,
what the chunker makes of them on average) is written into a fresh index of the product's schema
as a sync writes it: one transaction per document (a documents row, its chunks with their FTS5
entries by the trigger, their vectors with checksums and their term counts, `index/chunk_rows.py`),
under each setting in turn, alternating, each in its own child process. Reported per setting:
wall and CPU seconds, chunks/s, the WAL's largest size, the file's size. Vectors are random unit
rows (their content does not matter to SQLite).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

REPO = Path(__file__).resolve().parents[1]
CORPORA = Path(os.environ.get("PNK_CORPORA") or REPO.parent / "shared" / "corpora")

# name -> PRAGMAs run on the writer connection after the product's own (index/schema.py); "page_size"
# is applied to the empty file before the schema is created.
SETTINGS: dict[str, list[str]] = {
    "shipped (WAL, synchronous NORMAL, 2 MB cache, checkpoint 1000)": [],
    "cache 64 MB": ["cache_size = -65536"],
    "checkpoint 10000": ["wal_autocheckpoint = 10000"],
    "cache 64 MB + checkpoint 10000": ["cache_size = -65536", "wal_autocheckpoint = 10000"],
    "synchronous FULL": ["synchronous = FULL"],
    "page 8192": ["page_size = 8192"],
}


def documents(corpus: Path, chunks: int) -> list[list[str]]:
    """Each file's pieces, until `chunks` pieces."""
    found: list[list[str]] = []
    total = 0
    for path in sorted(p for p in corpus.rglob("*") if p.suffix in {".md", ".txt", ".rst"} and p.is_file()):
        text = path.read_text(encoding="utf-8", errors="replace")
        pieces: list[str] = []
        current = ""
        for paragraph in text.split("\n\n"):
            current = f"{current}\n\n{paragraph}" if current else paragraph
            if len(current) >= 700:
                pieces.append(current)
                current = ""
        if current.strip():
            pieces.append(current)
        found.append(pieces[: chunks - total])
        total += len(found[-1])
        if total >= chunks:
            break
    return found


def child(setting: str, corpus: Path, chunks: int, index: Path) -> None:
    import numpy as np

    from pinakes.index import schema
    from pinakes.index.chunk_rows import ChunkRow, insert_chunks

    pragmas = SETTINGS[setting]
    page = next((p for p in pragmas if p.startswith("page_size")), None)
    if page:  # before the product's connection creates the file (and switches it to WAL)
        import sqlite3

        original = cast("Callable[..., sqlite3.Connection]", sqlite3.connect)

        def connect(*args: object, **kwargs: object) -> sqlite3.Connection:
            conn = original(*args, **kwargs)
            conn.execute(f"PRAGMA {page}")
            return conn

        sqlite3.connect = connect
    docs = documents(corpus, chunks)
    rng = np.random.default_rng(7)
    conn = schema.open_writer(index)
    for pragma in pragmas:
        if not pragma.startswith("page_size"):
            conn.execute(f"PRAGMA {pragma}")
    wal = index.with_name(index.name + "-wal")
    largest_wal = 0
    wall, cpu = time.perf_counter(), time.process_time()
    written = 0
    for number, pieces in enumerate(docs):
        doc_id = f"{number:026d}"
        vectors = rng.standard_normal((len(pieces), 384), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        with schema.transaction(conn):
            conn.execute("INSERT INTO documents (id, path, content_hash, mtime, source_type, indexed_at) "
                         "VALUES (?, ?, 'h', 0, 'text', 'now')", (doc_id, f"docs/{number}.txt"))
            insert_chunks(conn, doc_id, [ChunkRow(i, text, 0, len(text), len(text) // 4, None, None, None, "")
                                         for i, text in enumerate(pieces)], vectors,
                          [os.urandom(16) for _ in pieces])
        written += len(pieces)
        if number % 200 == 0 and wal.exists():
            largest_wal = max(largest_wal, wal.stat().st_size)
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    print(json.dumps({"setting": setting, "page_size": page_size, "chunks": written, "documents": len(docs),
                      "wall_seconds": round(time.perf_counter() - wall, 2),
                      "cpu_seconds": round(time.process_time() - cpu, 2),
                      "largest_wal_mb": round(largest_wal / 1e6, 1), "file_mb": round(index.stat().st_size / 1e6, 1),
                      "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=CORPORA / "python-3.11-docs-rst" / "docs")
    parser.add_argument("--chunks", type=int, default=30_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", action="append", help="only this setting (repeatable)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.corpus, args.chunks, Path(os.environ["PNK_BENCH_INDEX"]))
        return
    runs: dict[str, list[dict[str, object]]] = {name: [] for name in args.only or SETTINGS}
    with tempfile.TemporaryDirectory(prefix="pnk-writer-settings-") as scratch:
        for _ in range(args.rounds):
            for name in runs:
                index = Path(scratch) / "index.db"
                for leftover in Path(scratch).glob("index.db*"):
                    leftover.unlink()
                env = {**os.environ, "PNK_BENCH_INDEX": str(index)}
                done = subprocess.run([sys.executable, __file__, "--child", name, "--corpus", str(args.corpus),
                                       "--chunks", str(args.chunks)], env=env, check=True, capture_output=True, text=True)
                runs[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
                print(runs[name][-1], file=sys.stderr, flush=True)
    summary = {name: {"median_wall_s": statistics.median(float(str(r["wall_seconds"])) for r in samples),
                      "median_cpu_s": statistics.median(float(str(r["cpu_seconds"])) for r in samples),
                      "largest_wal_mb": max(float(str(r["largest_wal_mb"])) for r in samples),
                      "file_mb": samples[-1]["file_mb"]} for name, samples in runs.items()}
    results = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load": os.getloadavg(),
               "corpus": str(args.corpus), "chunks": args.chunks, "runs": runs, "summary": summary}
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
