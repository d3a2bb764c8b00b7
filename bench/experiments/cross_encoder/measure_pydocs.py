"""The reader feature on pydocs (no pydocs pair was trained on), with bench_confidence.py's seeds.

    nice -n 10 python bench/experiments/cross_encoder/measure_pydocs.py --json /work/cache/ce-minilm/pydocs-report.json

The harness's cached per-seed rows (/work/cache/pnk-conf/seeds/pydocs-<seed>-0.4.json: which
questions were made no-answer, their evidence documents removed, and each search's evidence
features from the product's Searcher) are reused as they are. The cached pydocs index is schema 6,
which this build's Searcher refuses, and a rebuild costs ~20 CPU-minutes; so each row's passages
for the reader are re-ranked here, not by the product: an RRF (k 60) of the index's FTS5 BM25 and the
packaged MiniLM's cosine with the stored vectors, over the chunks of the documents the seed kept.
`reader` is the cross-encoder's sigmoid score of (question, top passage), `reader3` the max over the
top 3. The comparison then runs bench_confidence.evaluate: halves per seed, both ways round, paired
fold by fold against the shipped fit.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, cast

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path[:0] = [str(HERE), str(REPO / "bench"), str(REPO / "src"), str(REPO)]

import bench_confidence as bench  # noqa: E402
import build_data  # noqa: E402
import tune_retrieval  # noqa: E402
from measure_demo import CANDIDATES, CONTROL, paired  # noqa: E402
from reader import MODEL_DIR, Reader  # noqa: E402

from pinakes.eval.outcomes import Outcome  # noqa: E402

SEEDS_DIR = Path("/work/cache/pnk-conf/seeds")
RRF_K = 60
WIDTH = 200


def main(argv: list[str] | None = None) -> int:
    from dataclasses import replace

    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--rows", type=Path, help="where the rows with reader scores are kept (re-used if present)")
    args = parser.parse_args(argv)
    if args.rows and args.rows.exists():
        saved = json.loads(args.rows.read_text())
        runs = {int(seed): [Outcome.from_dict(r, "saved row") for r in rows] for seed, rows in saved["runs"].items()}
        return report_on(runs, tuple(saved["fidelity"]), args.json)
    build = tune_retrieval.build_corpus("pydocs", build_data.CACHE, quiet=True)
    questions = {q.id: q for q in build.questions}
    conn = build_data.open_index(build.root)
    chunks = build_data.chunk_texts(conn)
    ids = [q.id for q in build.questions]
    vector = dict(zip(ids, build_data.vector_rankings(conn, [questions[i].query for i in ids], WIDTH), strict=True))
    bm25 = {qid: build_data.bm25_ranking(conn, questions[qid].query, WIDTH) for qid in ids}
    reader = Reader(MODEL_DIR, threads=2)
    cache: dict[tuple[str, int], float] = {}
    runs: dict[int, list[Outcome]] = {}
    agree = total = 0
    for seed in range(1, args.seeds + 1):
        rows = [Outcome.from_dict(r, "seed row") for r in json.loads((SEEDS_DIR / f"pydocs-{seed}-0.4.json").read_text())]
        removed = {doc for r in rows if r.kind == "no-answer" for doc in questions[r.id].relevant}
        out: list[Outcome] = []
        for row in rows:
            fused: dict[int, float] = {}
            for ranked in (bm25[row.id], vector[row.id]):
                kept = [cid for cid in ranked if cid in chunks and chunks[cid][0] not in removed]
                for rank, cid in enumerate(kept, start=1):
                    fused[cid] = fused.get(cid, 0.0) + 1.0 / (RRF_K + rank)
            top = sorted(fused, key=lambda cid: -fused[cid])[:3]
            for cid in top:
                if (row.id, cid) not in cache:
                    cache[(row.id, cid)] = reader.scores(questions[row.id].query, [chunks[cid][1]])[0]
            scores = [cache[(row.id, cid)] for cid in top]
            if row.kind != "no-answer" and row.hit_rank is not None:
                total += 1
                agree += (chunks[top[0]][0] in questions[row.id].relevant) == (row.hit_rank == 1)
            features = {**(row.features or {}), "reader": scores[0], "reader3": max(scores)} if scores else row.features
            out.append(bench.cosine_signal(replace(row, features=features)))
        runs[seed] = out
        print(f"seed {seed}: {sum(r.kind == 'no-answer' for r in out)} no-answer / {len(out)}, "
              f"{len(removed)} documents removed", flush=True)
    if args.rows:
        args.rows.write_text(json.dumps({"fidelity": [agree, total],
                                         "runs": {seed: [r.to_dict() for r in rows] for seed, rows in runs.items()}}))
    return report_on(runs, (agree, total), args.json)


def report_on(runs: dict[int, list[Outcome]], fidelity: tuple[int, int], json_path: Path | None) -> int:
    agree, total = fidelity
    print(f"fidelity: the re-ranked top passage agrees with the product's (evidence at rank 1 or not) "
          f"on {agree}/{total} answerable questions found by the product")
    bench.CANDIDATES = CANDIDATES
    report = bench.evaluate("pydocs", runs, bench.MAX_FALSE_CONFIDENCE)
    cell = bench._cell  # pyright: ignore[reportPrivateUsage]  # bench_confidence's cell format, shared
    for name, entry in report.items():
        assert isinstance(entry, dict)
        entry = cast("dict[str, Any]", entry)
        versus = entry.get("vs_old")
        print(f"held-out {name:48} FA {cell(entry['false_abstain'])} FC {cell(entry['false_confidence'])} "
              f"AUC {entry['auc_mean']} bal.err {entry['balanced_error_mean']} "
              + (f"vs shipped {versus['better_folds']}/{versus['worse_folds']} p={versus['sign_test_p']} "
                 f"d={versus['mean_difference']}" if versus else ""))
    against_control = {c.name: paired(runs, c, CONTROL) for c in CANDIDATES if "reader" in c.name}
    for name, line in against_control.items():
        print(f"held-out {name} vs {CONTROL.name}: {line}")
    if json_path:
        json_path.write_text(json.dumps({"fidelity": [agree, total], "held_out": report, "vs_control": against_control}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
