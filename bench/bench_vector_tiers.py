"""Vector tiers at scale (issue #45): exact float32 in memory (what search/vectors.py does, the
same-run baseline) against quantized exact scans and approximate indexes, on real all-MiniLM-L6-v2
vectors, by recall@10 against exact float search, p50/p95 query latency, build time, incremental
update cost, file size and the searching process's RSS.

    python bench/real_vectors.py --minutes 45     # first: real vectors into the cache (see there)
    python bench/bench_vector_tiers.py             # real vectors, every arm
    python bench/bench_vector_tiers.py --million 1000000 --arms exact-f32 int8-mmap usearch-i8
    python bench/bench_vector_tiers.py --json out.json

Arms (each builds in one subprocess and searches in another, so each search process's RSS is its own):

- `exact-f32`: the product's own `vector_search` over a `VectorMatrix` loaded into memory. Baseline.
- `int8-mmap`: per-dimension symmetric int8 codes in a file, memory-mapped, scanned exactly in
  blocks; the top 50 rescored with the exact float vectors.
- `binary-mmap`: sign bits (48 bytes a vector), Hamming distance over a memory-mapped file with
  NumPy's popcount; the top `--binary-candidates` rescored with int8 codes, then the top 50 with
  float vectors.
- `usearch-i8`: usearch HNSW (M 16, ef_add 128, ef_search per --ef-search) with int8 storage, saved, then
  memory-mapped (`view`); its 50 candidates rescored with float vectors.
- `faiss-hnsw-sq8`: faiss IndexHNSWSQ (SQ8, M 16, efConstruction 128, efSearch per --ef-search), read into memory.
- `hnswlib`: hnswlib float32 HNSW (M 16, ef_construction 128, ef per --ef-search), read into memory.
- `sqlite-vec`: a vec0 float[384] table with cosine distance, `MATCH ... AND k = 10`: exhaustive KNN
  inside SQLite, not an approximate index (through apsw: this venv's Python is built without
  `enable_load_extension`).

"Rescored with float vectors" reads the candidates' float32 rows from a SQLite table shaped like the
index's `embeddings` (chunk_id primary key, vector blob), as a searching process would: the scores
returned are exact cosines, only the candidate set is approximate.

Updates: each arm builds from 99% of the rows, then adds the last 1% (timed) and deletes 0.5% of the
rows (timed; "rebuild" where the library cannot delete). Recall is against exact float search over
the rows that remain.

Queries: real questions of the development corpora (cranfield, tldr-nl2bash-dev) embedded by the
packaged model, and passages held out of the base (each query's own vector is not in the index).
Latency is one query at a time on one thread (what a search gives the vector side on this machine,
search/threads.py), after 10 warm-up queries.

`--million N` extends the real vectors to N rows for latency, build, size and RSS only: copy c is
every real vector rotated by its own random orthogonal matrix (copy 0 is the real set), so each copy
keeps the real set's geometry exactly and copies do not collapse onto each other. Recall there is
printed as a sanity check on synthetic rows, never as the claim.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))

import real_vectors  # noqa: E402

ARMS = ("exact-f32", "int8-mmap", "binary-mmap", "usearch-i8", "faiss-hnsw-sq8", "hnswlib", "sqlite-vec")
TOP = 10
CANDIDATES = 50
WARMUP = 10
BLOCK_ROWS = 32_768
HNSW_M, EF_ADD = 16, 128
NOISE_SIGMA = 0.03  # per component: a noisy copy keeps cosine ~0.86 with its original (real MiniLM rows)
ANN_ARMS = ("usearch-i8", "faiss-hnsw-sq8", "hnswlib")


# ---- shared by the driver and the arms ---------------------------------------------------------

def rss_kib() -> dict[str, int]:
    fields: dict[str, int] = {}
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                fields[name] = int(value.split()[0])
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss across exec, so a child would report the driver's.
    fields["peak"] = fields["VmHWM"]
    return fields


def file_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*")) if path.is_dir() else path.stat().st_size


class FloatRows:
    """Exact float32 rows by id from a SQLite table shaped like the index's `embeddings`."""

    def __init__(self, db: Path):
        self.conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)

    def rescore(self, ids: np.ndarray, query: np.ndarray, top: int = TOP) -> np.ndarray:
        wanted = [int(i) for i in ids]
        rows = self.conn.execute(
            f"SELECT chunk_id, vector FROM embeddings WHERE chunk_id IN ({','.join('?' * len(wanted))})", wanted
        ).fetchall()
        found = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
        matrix = np.frombuffer(b"".join(row[1] for row in rows), dtype=np.float32).reshape(len(rows), -1)
        scores = matrix @ query
        order = np.lexsort((found, -scores))[:top]
        return found[order]


def write_float_db(db: Path, vectors: np.ndarray, ids: np.ndarray) -> None:
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode=OFF")
    conn.execute("PRAGMA synchronous=OFF")
    conn.execute("CREATE TABLE embeddings (chunk_id INTEGER PRIMARY KEY, vector BLOB NOT NULL)")
    for start in range(0, len(ids), 50_000):
        conn.executemany("INSERT INTO embeddings VALUES (?, ?)",
                         zip(ids[start:start + 50_000].tolist(),
                             (row.tobytes() for row in vectors[start:start + 50_000]), strict=True))
    conn.commit()
    conn.close()


# ---- the arms: build (and update), then open and search -----------------------------------------

def int8_scale(vectors: np.ndarray) -> np.ndarray:
    return (np.abs(vectors).max(axis=0) / 127.0).astype(np.float32) + np.float32(1e-12)


def build_arm(arm: str, work: Path, base: np.ndarray, ids: np.ndarray, deleted: np.ndarray,
              threads: int) -> dict[str, object]:
    """Build from 99% of the rows, add the last 1%, delete `deleted`; write the arm's file(s)."""
    split = len(ids) - max(1, len(ids) // 100)
    out = work / arm
    out.mkdir(parents=True, exist_ok=True)
    timings: dict[str, object] = {}
    started = time.perf_counter()
    if arm == "exact-f32":
        # No derived file: a searching process reads every vector from the index (open_arm), and
        # reads them all again after any change to the index.
        timings.update(build_s=0.0, add_s="a full reload", delete_s="a full reload")
    elif arm in ("int8-mmap", "binary-mmap"):
        bits: np.memmap[Any, Any] | None = None
        scale = int8_scale(base)
        codes = np.lib.format.open_memmap(out / "codes.npy", mode="w+", dtype=np.int8, shape=base.shape)
        for start in range(0, split, BLOCK_ROWS):
            stop = min(split, start + BLOCK_ROWS)
            codes[start:stop] = np.clip(np.rint(base[start:stop] / scale), -127, 127)
        if arm == "binary-mmap":
            bits = np.lib.format.open_memmap(out / "bits.npy", mode="w+", dtype=np.uint8,
                                             shape=(len(ids), base.shape[1] // 8))
            for start in range(0, split, BLOCK_ROWS):
                stop = min(split, start + BLOCK_ROWS)
                bits[start:stop] = np.packbits(base[start:stop] > 0, axis=1)
        timings["build_s"] = time.perf_counter() - started
        started = time.perf_counter()
        codes[split:] = np.clip(np.rint(base[split:] / scale), -127, 127)  # appended rows
        if arm == "binary-mmap":
            assert bits is not None  # opened above for this arm
            bits[split:] = np.packbits(base[split:] > 0, axis=1)
            bits.flush()
        codes.flush()
        np.save(out / "scale.npy", scale)
        np.save(out / "ids.npy", ids)
        timings["add_s"] = time.perf_counter() - started
        started = time.perf_counter()
        alive = np.ones(len(ids), bool)
        alive[np.searchsorted(ids, deleted)] = False  # a tombstone bitmap beside the codes
        np.save(out / "alive.npy", alive)
        timings["delete_s"] = time.perf_counter() - started
    elif arm == "usearch-i8":
        from usearch.index import Index
        index = Index(ndim=base.shape[1], metric="cos", dtype="i8", connectivity=HNSW_M,
                      expansion_add=EF_ADD)
        index.add(ids[:split], base[:split], threads=threads)
        timings["build_s"] = time.perf_counter() - started
        started = time.perf_counter()
        index.add(ids[split:], base[split:], threads=threads)
        timings["add_s"] = time.perf_counter() - started
        started = time.perf_counter()
        index.remove(deleted)
        timings["delete_s"] = time.perf_counter() - started
        cast(Any, index).save(str(out / "index.usearch"))  # usearch's save: partially unknown to pyright
    elif arm == "faiss-hnsw-sq8":
        faiss = untyped_module("faiss")
        faiss.omp_set_num_threads(threads)
        inner = faiss.IndexHNSWSQ(base.shape[1], faiss.ScalarQuantizer.QT_8bit, HNSW_M, faiss.METRIC_INNER_PRODUCT)
        inner.hnsw.efConstruction = EF_ADD
        inner.train(base[:split])
        index = faiss.IndexIDMap2(inner)
        index.add_with_ids(base[:split], ids[:split])
        timings["build_s"] = time.perf_counter() - started
        started = time.perf_counter()
        index.add_with_ids(base[split:], ids[split:])
        timings["add_s"] = time.perf_counter() - started
        try:
            index.remove_ids(deleted)  # pyright: ignore[reportArgumentType]  # faiss's SWIG signatures: its numpy wrapper takes an id array
            timings["delete_s"] = "?"
        except RuntimeError:
            timings["delete_s"] = "unsupported (HNSW cannot remove: rebuild, or filter at query time)"
            np.save(out / "deleted.npy", deleted)
        faiss.write_index(index, str(out / "index.faiss"))
    elif arm == "hnswlib":
        import hnswlib  # pyright: ignore[reportMissingImports]  # measured only: in no extra, absent from CI
        index = hnswlib.Index(space="ip", dim=base.shape[1])
        index.init_index(max_elements=split, M=HNSW_M, ef_construction=EF_ADD)
        index.set_num_threads(threads)
        index.add_items(base[:split], ids[:split])
        timings["build_s"] = time.perf_counter() - started
        started = time.perf_counter()
        index.resize_index(len(ids))
        index.add_items(base[split:], ids[split:])
        timings["add_s"] = time.perf_counter() - started
        started = time.perf_counter()
        for key in deleted.tolist():
            index.mark_deleted(key)
        timings["delete_s"] = time.perf_counter() - started
        index.save_index(str(out / "index.hnsw"))
    elif arm == "sqlite-vec":
        conn = vec_connection(out / "vec.db")
        conn.execute(f"CREATE VIRTUAL TABLE v USING vec0(embedding float[{base.shape[1]}] distance_metric=cosine)")

        def insert(lo: int, hi: int) -> None:
            conn.execute("BEGIN")
            for start in range(lo, hi, 10_000):
                stop = min(hi, start + 10_000)
                conn.executemany("INSERT INTO v(rowid, embedding) VALUES (?, ?)",
                                 zip(ids[start:stop].tolist(), (r.tobytes() for r in base[start:stop]), strict=True))
            conn.execute("COMMIT")

        insert(0, split)
        timings["build_s"] = time.perf_counter() - started
        started = time.perf_counter()
        insert(split, len(ids))
        timings["add_s"] = time.perf_counter() - started
        started = time.perf_counter()
        conn.execute("BEGIN")
        conn.executemany("DELETE FROM v WHERE rowid = ?", ((int(k),) for k in deleted))
        conn.execute("COMMIT")
        timings["delete_s"] = time.perf_counter() - started
        conn.close()
    else:
        raise SystemExit(f"unknown arm {arm}")
    timings["file_bytes"] = file_bytes(out)
    timings["build_rss_mib"] = round(rss_kib()["peak"] / 1024)
    return timings


def untyped_module(name: str) -> Any:  # faiss, apsw, sqlite_vec: measured only, in no extra, absent from CI
    """The module, typed the same whether this environment has it or not (pyright sees no stubs either way)."""
    return importlib.import_module(name)


def vec_connection(path: Path) -> Any:  # an apsw.Connection (apsw: absent from CI)
    apsw, sqlite_vec = untyped_module("apsw"), untyped_module("sqlite_vec")
    conn = apsw.Connection(str(path))
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    return conn


def open_arm(arm: str, work: Path, float_db: Path, binary_candidates: int, ef_search: int):
    """The arm's search function (query -> top-10 ids), opened as a searching process would."""
    out = work / arm
    rows = FloatRows(float_db)
    if arm == "exact-f32":
        from pinakes.search.vectors import VectorMatrix, vector_search
        stored = rows.conn.execute("SELECT chunk_id, vector FROM embeddings ORDER BY chunk_id").fetchall()
        ids = np.fromiter((row[0] for row in stored), dtype=np.int64, count=len(stored))
        vectors = np.frombuffer(b"".join(row[1] for row in stored), dtype=np.float32).reshape(len(stored), -1)
        del stored
        matrix = VectorMatrix(np.ascontiguousarray(vectors), ids, np.zeros(len(ids), np.int32), ("doc",))

        def search(query: np.ndarray) -> np.ndarray:
            return np.array([chunk for chunk, _ in vector_search(matrix, query, TOP)], dtype=np.int64)
        return search
    if arm in ("int8-mmap", "binary-mmap"):
        codes = np.load(out / "codes.npy", mmap_mode="r")
        scale, ids, alive = np.load(out / "scale.npy"), np.load(out / "ids.npy"), np.load(out / "alive.npy")
        bits = np.load(out / "bits.npy", mmap_mode="r") if arm == "binary-mmap" else None

        def int8_scores(query: np.ndarray, rows_at: np.ndarray | None = None) -> np.ndarray:
            scaled = query * scale
            if rows_at is not None:
                return codes[rows_at].astype(np.float32) @ scaled
            scores = np.empty(len(codes), np.float32)
            for start in range(0, len(codes), BLOCK_ROWS):
                scores[start:start + BLOCK_ROWS] = codes[start:start + BLOCK_ROWS].astype(np.float32) @ scaled
            return scores

        def search(query: np.ndarray) -> np.ndarray:
            if bits is None:
                scores = np.where(alive, int8_scores(query), -np.inf)
                top = np.argpartition(-scores, CANDIDATES)[:CANDIDATES]
            else:
                packed = np.packbits(query > 0).view(np.uint64)
                distance = np.bitwise_count(np.asarray(bits).view(np.uint64) ^ packed).sum(axis=1, dtype=np.int32)
                distance = np.where(alive, distance, np.iinfo(np.int32).max)
                rough = np.sort(np.argpartition(distance, binary_candidates)[:binary_candidates])
                top = rough[np.argpartition(-int8_scores(query, rough), CANDIDATES)[:CANDIDATES]]
            return rows.rescore(ids[top], query)
        return search
    if arm == "usearch-i8":
        from usearch.index import Index
        index = cast(Any, Index).restore(str(out / "index.usearch"), view=True)  # partially unknown to pyright
        assert index is not None, out / "index.usearch"  # restore answers None for a file it cannot read
        index.expansion_search = ef_search

        def search(query: np.ndarray) -> np.ndarray:
            return rows.rescore(index.search(query, CANDIDATES, threads=1).keys.astype(np.int64), query)
        return search
    if arm == "faiss-hnsw-sq8":
        faiss = untyped_module("faiss")
        faiss.omp_set_num_threads(1)
        index = faiss.read_index(str(out / "index.faiss"))
        # an IndexIDMap2 around an HNSW index, as saved above (faiss's SWIG types say neither)
        faiss.downcast_index(index.index).hnsw.efSearch = ef_search
        deleted: set[int] = set(np.load(out / "deleted.npy").tolist()) if (out / "deleted.npy").exists() else set()

        def search(query: np.ndarray) -> np.ndarray:
            _, found = index.search(query.reshape(1, -1), CANDIDATES + len(deleted) // 1000 + 8)
            keep = np.array([k for k in found[0] if k >= 0 and k not in deleted][:CANDIDATES], dtype=np.int64)
            return rows.rescore(keep, query)
        return search
    if arm == "hnswlib":
        import hnswlib  # pyright: ignore[reportMissingImports]  # measured only: in no extra, absent from CI
        index = hnswlib.Index(space="ip", dim=int(np.load(work / "dim.npy")))
        index.load_index(str(out / "index.hnsw"))
        index.set_ef(ef_search)
        index.set_num_threads(1)

        def search(query: np.ndarray) -> np.ndarray:
            labels, _ = index.knn_query(query, k=CANDIDATES)
            return rows.rescore(labels[0].astype(np.int64), query)
        return search
    if arm == "sqlite-vec":
        conn = vec_connection(out / "vec.db")

        def search(query: np.ndarray) -> np.ndarray:
            found = conn.execute("SELECT rowid FROM v WHERE embedding MATCH ? AND k = ? ORDER BY distance",
                                 (query.tobytes(), TOP)).fetchall()
            return np.array([row[0] for row in found], dtype=np.int64)
        return search
    raise SystemExit(f"unknown arm {arm}")


def run_arm(args: argparse.Namespace) -> None:
    """One arm in its own process: build, or open and search; prints one JSON line."""
    work = Path(args.work)
    result: dict[str, object]
    if args.phase == "build":
        base = np.load(work / "base.npy", mmap_mode="r")
        result = build_arm(args.arm, work, base, np.load(work / "ids.npy"), np.load(work / "deleted.npy"),
                           args.threads)
    else:
        floor = rss_kib()
        started = time.perf_counter()
        search = open_arm(args.arm, work, work / "float.db", args.binary_candidates, args.ef_search)
        queries = np.load(work / "queries.npy")
        for query in queries[:WARMUP]:
            search(query)
        open_s = time.perf_counter() - started
        latencies: list[float] = []
        found: list[np.ndarray] = []
        for query in queries:
            began = time.perf_counter()
            hits = search(query)
            latencies.append((time.perf_counter() - began) * 1000)
            found.append(np.pad(hits[:TOP], (0, TOP - len(hits[:TOP])), constant_values=-1))
        np.save(work / f"found-{args.arm}.npy", np.stack(found))
        ordered = sorted(latencies)
        rss = rss_kib()
        result = {"open_and_warm_s": round(open_s, 3), "p50_ms": round(ordered[len(ordered) // 2], 3),
                  "p95_ms": round(ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))], 3),
                  "peak_rss_mib": round(rss["peak"] / 1024), "rss_anon_mib": round(rss["RssAnon"] / 1024),
                  "rss_file_mib": round(rss["RssFile"] / 1024), "floor_rss_mib": round(floor["VmRSS"] / 1024)}
    print(json.dumps({key: round(value, 3) if isinstance(value, float) else value for key, value in result.items()}))


# ---- the driver ---------------------------------------------------------------------------------

def question_vectors(cache: Path, count: int) -> np.ndarray:
    """The development corpora's real questions, embedded by the packaged model (cached)."""
    path = cache / f"questions-{count}.npy"
    if path.exists():
        return np.load(path)
    from pinakes.embed import load_embedder
    from tests.fakes import default_section
    asked: list[list[str]] = []
    for corpus in ("cranfield", "tldr-nl2bash-dev"):
        with open(real_vectors.SHARED / corpus / "questions.jsonl", encoding="utf-8") as handle:
            asked.append([json.loads(line)["query"] for line in handle if line.strip()])
    mixed = [text for pair in zip(*asked, strict=False) for text in pair][:count]
    embedder = load_embedder(default_section("fastembed"), offline=True)
    vectors = np.stack([np.asarray(embedder.embed_query(text), np.float32) for text in mixed])
    np.save(path, vectors)
    return vectors


def extend(real: np.ndarray, size: int, seed: int = 45, method: str = "rotation") -> np.ndarray:
    """`size` rows: the real set, then copies of it. "rotation": each copy turned by its own random
    orthogonal matrix (the real geometry exactly, but each copy a cone of its own). "noise": each
    copy the real vectors plus Gaussian noise (sigma NOISE_SIGMA a component, renormalised), which
    stays in the real cone and puts a near neighbour beside every real vector."""
    rng = np.random.default_rng(seed)
    copies = [real]
    while sum(len(c) for c in copies) < size:
        if method == "rotation":
            rotation, _ = np.linalg.qr(rng.standard_normal((real.shape[1], real.shape[1])))
            copies.append((real @ rotation.astype(np.float32)).astype(np.float32))
        else:
            noisy = real + rng.normal(0.0, NOISE_SIGMA, real.shape).astype(np.float32)
            copies.append((noisy / np.linalg.norm(noisy, axis=1, keepdims=True)).astype(np.float32))
    return np.concatenate(copies)[:size]


def exact_truth(base: np.ndarray, keep: np.ndarray, queries: np.ndarray, ids: np.ndarray) -> list[set[int]]:
    """Per query, the ids at or above its 10th best exact float cosine (ties all count)."""
    scores = np.empty((len(queries), len(base)), np.float32)
    for start in range(0, len(base), BLOCK_ROWS * 4):
        scores[:, start:start + BLOCK_ROWS * 4] = queries @ np.asarray(base[start:start + BLOCK_ROWS * 4]).T
    scores[:, ~keep] = -np.inf
    tenth = -np.partition(-scores, TOP - 1, axis=1)[:, TOP - 1]
    return [set(ids[np.flatnonzero(row >= cut - 1e-6)].tolist()) for row, cut in zip(scores, tenth, strict=True)]


def recall(found: np.ndarray, truth: list[set[int]]) -> float:
    return float(np.mean([len(set(row.tolist()) & wanted) / TOP for row, wanted in zip(found, truth, strict=True)]))


def spawn(args: argparse.Namespace, arm: str, phase: str, work: Path, ef_search: int = 0) -> dict[str, object]:
    command = [sys.executable, __file__, "--run-arm", arm, "--phase", phase, "--work", str(work),
               "--threads", str(args.threads), "--binary-candidates", str(args.binary_candidates),
               "--ef-search", str(ef_search)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode:
        print(done.stderr[-2000:], file=sys.stderr)
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(args: argparse.Namespace, label: str, base: np.ndarray, query_sets: dict[str, np.ndarray],
            arms: list[str], real_rows: int) -> dict[str, object]:
    work = args.work / label
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    ids = np.arange(1, len(base) + 1, dtype=np.int64) * 3  # chunk ids: sparse, ascending
    rng = np.random.default_rng(7)
    deleted = np.sort(rng.choice(ids, max(1, len(ids) // 200), replace=False))
    keep = ~np.isin(ids, deleted)
    np.save(work / "base.npy", base)
    np.save(work / "ids.npy", ids)
    np.save(work / "deleted.npy", deleted)
    np.save(work / "dim.npy", np.int64(base.shape[1]))
    write_float_db(work / "float.db", base[keep], ids[keep])
    truths = {name: exact_truth(base, keep, queries, ids) for name, queries in query_sets.items()}
    results: dict[str, object] = {"rows": len(base), "real_rows": real_rows, "deleted": len(deleted)}
    for arm in arms:
        print(f"  [{label}] {arm}: build", file=sys.stderr, flush=True)
        row: dict[str, object] = {"build": spawn(args, arm, "build", work)}
        for ef_search in args.ef_search if arm in ANN_ARMS else [0]:
            for name, queries in query_sets.items():
                np.save(work / "queries.npy", queries)
                searched = spawn(args, arm, "search", work, ef_search)
                if "error" not in searched:
                    searched["recall@10"] = round(recall(np.load(work / f"found-{arm}.npy"), truths[name]), 4)
                row[f"{name}@ef{ef_search}" if ef_search else name] = searched
        print(f"  [{label}] {arm}: {json.dumps(row)}", file=sys.stderr, flush=True)
        results[arm] = row
        shutil.rmtree(work / arm, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, default=real_vectors.DEFAULT_CACHE)
    parser.add_argument("--work", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "pnk-vector-tiers")
    parser.add_argument("--arms", nargs="*", default=list(ARMS), choices=ARMS)
    parser.add_argument("--queries", type=int, default=200, help="per query set")
    parser.add_argument("--million", type=int, default=0, help="also measure at this many rows (extended)")
    parser.add_argument("--million-arms", nargs="*", default=["exact-f32", "int8-mmap", "binary-mmap", "usearch-i8"],
                        choices=ARMS)
    parser.add_argument("--real-rows", type=int, default=0, help="use only the first N real vectors (a quick check)")
    parser.add_argument("--extend-by", choices=("rotation", "noise"), default="rotation")
    parser.add_argument("--skip-real", action="store_true", help="only the extended size")
    parser.add_argument("--threads", type=int, default=2, help="build threads (queries always use one)")
    parser.add_argument("--binary-candidates", type=int, default=2000)
    parser.add_argument("--ef-search", type=int, nargs="*", default=[128, 256, 512],
                        help="HNSW search breadths to try (each a search process over the same build)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--run-arm", help=argparse.SUPPRESS)
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run_arm:
        args.arm = args.run_arm
        args.ef_search = args.ef_search[0]
        run_arm(args)
        return
    _, real = real_vectors.load_cache(args.cache)
    if args.real_rows:
        real = real[:args.real_rows]
    rng = np.random.default_rng(45)
    held = cast(np.ndarray, rng.choice(len(real), args.queries, replace=False))
    in_base = np.ones(len(real), bool)
    in_base[held] = False
    query_sets = {"questions": question_vectors(args.cache, args.queries), "held_out": real[held]}
    base = np.ascontiguousarray(real[in_base])
    print(f"{len(real)} distinct real vectors; base {len(base)}, queries "
          f"{ {name: len(q) for name, q in query_sets.items()} }", file=sys.stderr)
    report: dict[str, object] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                 "load_average": os.getloadavg(), "cpus": os.cpu_count()}
    if not args.skip_real:
        report["real"] = measure(args, "real", base, query_sets, args.arms, len(base))
    if args.million:
        extended = extend(base, args.million, method=args.extend_by)
        report["extended"] = measure(args, "extended", extended, query_sets, args.million_arms, len(base))
    report["load_average_after"] = os.getloadavg()
    print(json.dumps(report, indent=1))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
