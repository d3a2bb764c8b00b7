"""The vector file in pieces against one index (issue #45's memory bar): the build's peak memory, warm
vector-side latency and recall@10 of the product's whole path, one `PIECE_ROWS` setting at a time, on
the SAME rows and queries in the same run.

    nice -n 5 python bench/bench_vector_pieces.py --rows 1000000 --real /tmp/vecpieces/real \\
        --piece-rows 0 524288 262144 --work /tmp/vecpieces/work --update

- The rows: the real MiniLM vectors of `--real` (bench/real_vectors.py's cache) extended to `--rows`
  by bench_vector_recall's calibrated copies (each copy's cosine to its original follows the real
  set's nearest-neighbour cosines), or seeded random unit vectors without `--real`; written once
  into a minimal index (documents, chunks, embeddings: the tables vectors/source.py reads) under
  `--work`, with the exact top 10 of every query (float32, every row scored).
- The queries: `--queries` calibrated copies of random real rows (another seed), not in the rows.
- For each `--piece-rows` (0: one piece, as the file was before pieces): in a fresh process, the
  sync's step `refresh_vector_file` builds the file whole (threads `--threads`); the child reports
  its VmHWM (peak) and VmRSS before the build. Then in another fresh process the file is opened as
  a searching process opens it (mapped, no body check), every query asked once to warm the pages,
  then again timed: `approximate_search` with its exact rescoring from the index, p50/p95 in ms,
  and recall@10 against the exact top 10.
- `--update`: then, in a third fresh process, an update in place (10 documents in the middle leave,
  2,000 rows are added after the last, in a transaction rolled back afterwards): its peak.
- `--child load --load-method temp-copy|view-copy --piece-rows N` (run by hand after a run): the
  file's largest piece loaded to be updated, the product's way (a kernel copy to a temp file the
  library loads from its path) or viewed in a mapping and copied; the VmHWM of each.
- `--child search --breadth B --piece-rows N`: the search alone, each piece at breadth B (a lever
  measured, not shipped).
- Beside the latency, the candidate step alone as the product asks it (a loop over the pieces) and
  as usearch's `Indexes` would (the pieces merged, searched in C++), one thread each.
Ratios are against the first setting. Times on a loaded 2-core machine measure the load as well.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
from numpy.typing import NDArray

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "src"))

DIM = 384
IDENTITY = {"embedding_model": "bench/pieces", "embedding_dim": str(DIM)}
ONE_PIECE = 1 << 40
ROWS_PER_DOCUMENT = 100
TOP = 10


def memory() -> dict[str, int]:
    """VmRSS, VmHWM, RssAnon, RssFile of this process in MB."""
    values: dict[str, int] = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            values[key] = round(int(rest.split()[0]) / 1024)
    return values


def rows_and_queries(real: Path | None, rows: int, queries: int) -> tuple[np.ndarray, np.ndarray, str]:
    if real is None:
        rng = np.random.default_rng(45)
        base = rng.standard_normal((rows + queries, DIM)).astype(np.float32)
        base /= np.linalg.norm(base, axis=1, keepdims=True)
        return base[:rows], base[rows:], "seeded random unit vectors"
    import bench_vector_recall
    import real_vectors

    _, vectors = real_vectors.load_cache(real)
    vectors = vectors.astype(np.float32)
    base = bench_vector_recall.extend_calibrated(vectors, rows)
    asked = bench_vector_recall.extend_calibrated(vectors, len(vectors) + queries, seed=99)[len(vectors):]
    return base, asked, f"{len(vectors)} real MiniLM vectors extended to {rows} by calibrated copies"


def make_index(work: Path, real: Path | None, rows: int, queries: int) -> dict[str, object]:
    """The minimal index and the queries' exact answers under `work` (reused when already there)."""
    described = work / "rows.json"
    if described.exists():
        made = json.loads(described.read_text())
        if made["rows"] == rows and made["queries"] == queries:
            return made
    work.mkdir(parents=True, exist_ok=True)
    base, asked, what = rows_and_queries(real, rows, queries)
    db = work / "index.db"
    db.unlink(missing_ok=True)
    conn = sqlite3.connect(db)
    conn.executescript("CREATE TABLE documents(id INTEGER PRIMARY KEY, state TEXT);"
                       "CREATE TABLE chunks(id INTEGER PRIMARY KEY, doc_id INTEGER);"
                       "CREATE TABLE embeddings(chunk_id INTEGER PRIMARY KEY, vector BLOB, checksum BLOB);")
    conn.executemany("INSERT INTO documents VALUES (?, 'active')",
                     [(doc,) for doc in range(1, rows // ROWS_PER_DOCUMENT + 2)])
    for start in range(0, rows, 65_536):
        part = range(start, min(rows, start + 65_536))
        conn.executemany("INSERT INTO chunks VALUES (?, ?)", [(row + 1, row // ROWS_PER_DOCUMENT + 1) for row in part])
        conn.executemany("INSERT INTO embeddings VALUES (?, ?, ?)",
                         [(row + 1, base[row].tobytes(), row.to_bytes(8, "little")) for row in part])
    conn.commit()
    conn.close()
    best = np.full((len(asked), TOP), -np.inf, np.float32)
    best_ids = np.zeros((len(asked), TOP), np.int64)
    for start in range(0, rows, 65_536):
        scores = asked @ base[start:start + 65_536].T
        numbers = cast("NDArray[np.int64]", np.arange(start + 1, start + 1 + scores.shape[1]))
        ids = np.broadcast_to(numbers, scores.shape)
        both, both_ids = np.concatenate([best, scores], axis=1), np.concatenate([best_ids, ids], axis=1)
        keep = np.argsort(-both, axis=1, kind="stable")[:, :TOP]
        best, best_ids = np.take_along_axis(both, keep, 1), np.take_along_axis(both_ids, keep, 1)
    np.savez(work / "queries.npz", queries=asked, exact=best_ids)
    made: dict[str, object] = {"rows": rows, "queries": queries, "what": what}
    described.write_text(json.dumps(made))
    return made


def child_build(work: Path, piece_rows: int, threads: int) -> dict[str, object]:
    from pinakes.vectors import build

    build.PIECE_ROWS = piece_rows or ONE_PIECE
    conn = sqlite3.connect(work / "index.db")
    out = work / f"pieces-{piece_rows}"
    out.mkdir(exist_ok=True)
    (out / "vectors.ann").unlink(missing_ok=True)
    before = memory()
    started = time.perf_counter()
    cpu = time.process_time()
    report = build.refresh_vector_file(conn, out, IDENTITY, DIM, min_rows=0, threads=threads)
    return {"before": before, "after": memory(), "seconds": round(time.perf_counter() - started, 1),
            "cpu_s": round(time.process_time() - cpu, 1), "pieces": report.pieces, "bytes": report.file_bytes}


def child_search(work: Path, piece_rows: int, breadth: int = 0) -> dict[str, object]:
    from pinakes.vectors import approximate_search, engine, open_vector_file, vector_file_path, vectors_of
    from pinakes.vectors.fileformat import read_header

    if breadth:  # a lever measured, not shipped: each piece searched at this breadth
        engine.EXPANSION_SEARCH = breadth

    conn = sqlite3.connect(work / "index.db")
    saved = np.load(work / "queries.npz")
    path = vector_file_path(work / f"pieces-{piece_rows}")
    opened = open_vector_file(path, read_header(path).content_key, IDENTITY, DIM, check_body=False)

    def exact_rows(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return vectors_of(conn, ids.tolist(), DIM)

    for query in saved["queries"]:  # warm: every page a query touches is resident
        approximate_search(opened, query, TOP, exact_rows)
    times: list[float] = []
    recalls: list[float] = []
    for query, exact in zip(saved["queries"], saved["exact"], strict=True):
        started = time.perf_counter()
        found = approximate_search(opened, query, TOP, exact_rows)
        times.append(time.perf_counter() - started)
        recalls.append(len({chunk for chunk, _ in found} & set(exact.tolist())) / TOP)
    return {"p50_ms": round(1000 * float(np.percentile(times, 50)), 2),
            "p95_ms": round(1000 * float(np.percentile(times, 95)), 2),
            "recall_at_10": round(float(np.mean(recalls)), 4), "pieces": len(opened.pieces),
            "breadth": engine.EXPANSION_SEARCH,
            **candidates_loop_against_indexes(opened, saved["queries"])}


def candidates_loop_against_indexes(opened: object, asked: np.ndarray) -> dict[str, object]:
    """The candidate step alone (50 keys a query), as the product asks it (a loop over the pieces,
    merged by distance in NumPy) against usearch's `Indexes` (the pieces merged, searched in C++),
    both on one thread, each first on every other query; and whether they return the same keys."""
    from usearch.index import Indexes

    from pinakes.vectors.approximate import MIN_CANDIDATES, OpenVectorFile

    assert isinstance(opened, OpenVectorFile)
    merged = cast(Any, Indexes(indexes=opened.pieces))  # pyright: ignore[reportArgumentType]  # usearch takes the pieces as they are
    loop_times: list[float] = []
    merged_times: list[float] = []
    same = 0
    def loop(query: np.ndarray) -> np.ndarray:
        started = time.perf_counter()
        found = opened.search(query, MIN_CANDIDATES)
        loop_times.append(time.perf_counter() - started)
        return found

    def indexes(query: np.ndarray) -> np.ndarray:
        started = time.perf_counter()
        found = np.asarray(merged.search(query, MIN_CANDIDATES, threads=1).keys, dtype=np.int64).reshape(-1)
        merged_times.append(time.perf_counter() - started)
        return found

    for number, query in enumerate(asked):  # the second of a pair finds the first's pages in the caches
        if number % 2:
            theirs, mine = indexes(query), loop(query)
        else:
            mine, theirs = loop(query), indexes(query)
        same += set(mine.tolist()) == set(theirs.tolist())
    return {"candidates_loop_p50_ms": round(1000 * float(np.percentile(loop_times, 50)), 2),
            "candidates_indexes_p50_ms": round(1000 * float(np.percentile(merged_times, 50)), 2),
            "candidates_same_keys": f"{same}/{len(asked)}"}


def child_update(work: Path, piece_rows: int, threads: int) -> dict[str, object]:
    """An update in place (run last: it rewrites the file): 10 documents in the middle of the rows
    leave (1,000 rows) and 2,000 new rows come after the last, in a transaction rolled back after."""
    from pinakes.vectors import build

    build.PIECE_ROWS = piece_rows or ONE_PIECE
    conn = sqlite3.connect(work / "index.db", isolation_level=None)
    (rows,) = conn.execute("SELECT max(chunk_id) FROM embeddings").fetchone()
    rng = np.random.default_rng(7)
    added = rng.standard_normal((2_000, DIM)).astype(np.float32)
    added /= np.linalg.norm(added, axis=1, keepdims=True)
    conn.execute("BEGIN")
    try:
        middle = rows // 2 // ROWS_PER_DOCUMENT
        conn.execute("UPDATE documents SET state = 'deleted' WHERE id BETWEEN ? AND ?", (middle, middle + 9))
        conn.executemany("INSERT INTO chunks VALUES (?, 1)", [(rows + 1 + row,) for row in range(len(added))])
        conn.executemany("INSERT INTO embeddings VALUES (?, ?, ?)",
                         [(rows + 1 + row, added[row].tobytes(), (rows + 1 + row).to_bytes(8, "little"))
                          for row in range(len(added))])
        before = memory()
        started = time.perf_counter()
        report = build.refresh_vector_file(conn, work / f"pieces-{piece_rows}", IDENTITY, DIM, min_rows=0,
                                           threads=threads)
        seconds = time.perf_counter() - started
    finally:
        conn.execute("ROLLBACK")
    return {"update_before": before, "update_after": memory(), "update_mode": report.mode,
            "update_seconds": round(seconds, 1), "update_pieces_written": report.pieces_written}


def child_load(work: Path, piece_rows: int, method: str) -> dict[str, object]:
    """The file's largest piece into memory to be updated, by `method`: `temp-copy` (the product's:
    its bytes copied by the kernel to a temp file the library loads from its path) or `view-copy`
    (viewed in a mapping of the file, then copied by the library)."""
    import mmap

    from pinakes.vectors import engine
    from pinakes.vectors.build import _load_piece  # pyright: ignore[reportPrivateUsage]  # the bench drives the private part
    from pinakes.vectors.fileformat import read_header, vector_file_path

    path = vector_file_path(work / f"pieces-{piece_rows}")
    header = read_header(path)
    piece = max(header.pieces, key=lambda item: item.rows)
    engine.load_library()
    before = memory()
    index = engine.new_index(header.dim, header.params)
    if method == "temp-copy":
        _load_piece(index, path, piece)
    else:
        with open(path, "rb") as handle:
            mapping = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        view = memoryview(mapping)[piece.offset:piece.offset + piece.size]
        index.view(view)
        index = cast("engine.AnnIndex", cast(Any, index).copy())  # the library's index has copy(); the protocol not
    loaded = memory()
    return {"method": method, "piece_rows": piece.rows, "before": before, "loaded": loaded, "rows_held": len(index)}


def run_child(kind: str, work: Path, piece_rows: int, threads: int) -> dict[str, object]:
    done = subprocess.run([sys.executable, __file__, "--child", kind, "--work", str(work), "--piece-rows",
                           str(piece_rows), "--threads", str(threads)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{kind} child for {piece_rows} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--real", type=Path, help="bench/real_vectors.py's cache; seeded random vectors without it")
    parser.add_argument("--piece-rows", type=int, nargs="*", default=[0, 1 << 19, 1 << 18], help="0: one piece")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench-vector-pieces"))
    parser.add_argument("--skip-search", action="store_true")
    parser.add_argument("--update", action="store_true", help="then an update in place, in a fresh process")
    parser.add_argument("--child", choices=("build", "search", "update", "load"))
    parser.add_argument("--breadth", type=int, default=0, help="search child: each piece's breadth (0: the product's)")
    parser.add_argument("--load-method", choices=("temp-copy", "view-copy"), default="temp-copy")
    args = parser.parse_args()
    if args.child == "build":
        print(json.dumps(child_build(args.work, args.piece_rows[0], args.threads)))
        return
    if args.child == "search":
        print(json.dumps(child_search(args.work, args.piece_rows[0], args.breadth)))
        return
    if args.child == "load":
        print(json.dumps(child_load(args.work, args.piece_rows[0], args.load_method)))
        return
    if args.child == "update":
        print(json.dumps(child_update(args.work, args.piece_rows[0], args.threads)))
        return
    made = make_index(args.work, args.real, args.rows, args.queries)
    print(f"rows: {made['what']}; {made['queries']} queries", flush=True)
    results: list[dict[str, object]] = []
    for piece_rows in args.piece_rows:
        built = run_child("build", args.work, piece_rows, args.threads)
        searched = {} if args.skip_search else run_child("search", args.work, piece_rows, args.threads)
        updated = run_child("update", args.work, piece_rows, args.threads) if args.update else {}
        row = {"piece_rows": piece_rows or "one", **built, **searched, **updated}
        results.append(row)
        print(json.dumps(row), flush=True)

    def memory_of(row: dict[str, object], key: str) -> dict[str, int]:
        return cast("dict[str, int]", row[key])  # a child's memory(), read back from its JSON

    def ms(row: dict[str, object], key: str) -> float:
        return float(cast(float, row[key]))  # a child's timing, read back from its JSON

    first = results[0]
    for row in results:
        peak = memory_of(row, "after")["VmHWM"]
        ratios = {"peak": round(peak / memory_of(first, "after")["VmHWM"], 3)}
        if not args.skip_search:
            ratios.update(p50=round(ms(row, "p50_ms") / ms(first, "p50_ms"), 3),
                          p95=round(ms(row, "p95_ms") / ms(first, "p95_ms"), 3))
        print(f"piece_rows {row['piece_rows']}: {row['pieces']} pieces, peak VmHWM {peak} MB "
              f"(before the build {memory_of(row, 'before')['VmRSS']} MB), "
              f"build {row['seconds']} s ({row['cpu_s']} CPU s); "
              + ("" if args.skip_search else f"p50 {row['p50_ms']} ms, p95 {row['p95_ms']} ms, "
                 f"recall@10 {row['recall_at_10']}; ")
              + ("" if not args.update else f"update peak VmHWM {memory_of(row, 'update_after')['VmHWM']} MB "
                 f"({row['update_pieces_written']} pieces written, {row['update_seconds']} s); ")
              + f"ratios to {first['piece_rows']}: {ratios}")


if __name__ == "__main__":
    main()
