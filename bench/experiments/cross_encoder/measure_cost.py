"""What the reader costs a search: ms to score the top passage (and the top 3), and its size on disk.

    nice -n 10 python bench/experiments/cross_encoder/measure_cost.py --kb /tmp/ce-demo/demo-kb

Queries and passages are the demo golden set's questions and their searches' real top passages
(the Searcher's own), truncated as at training (192 tokens). Each arm is timed after 10 warm-up
calls, per query: p50 and p90 over the questions x --rounds. Threads: 1 (a search is one thread)
and 2. fp32 as trained; int8 by PyTorch dynamic quantisation of the Linear layers (an accuracy
change the AUC check below reports: the int8 model's scores on the same pairs against fp32's).
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path[:0] = [str(HERE), str(REPO / "src")]

from reader import MODEL_DIR, Reader  # noqa: E402

if TYPE_CHECKING:
    import torch


def passages_of(kb: Path) -> list[tuple[str, list[str]]]:
    from pinakes.eval.golden import load_golden_set
    from pinakes.eval.runner import open_searcher
    from pinakes.kb import KBPaths
    from pinakes.manifest.loading import load_manifest

    manifest = load_manifest(KBPaths(kb).manifest)
    golden = load_golden_set(kb / "eval" / "questions.yaml", kb, sources=manifest.sources)
    out: list[tuple[str, list[str]]] = []
    with open_searcher(kb, manifest) as searcher:
        for question in golden.questions:
            query = question.query if not question.hops else question.hops[0].query
            result = searcher.search(query, mode="hybrid")
            out.append((query, [p.text for p in result.passages[:3]]))
    return [(q, p) for q, p in out if p]


def timed(reader: Reader, asked: list[tuple[str, list[str]]], top: int, rounds: int) -> dict[str, float]:
    for query, passages in asked[:10]:
        reader.scores(query, passages[:top])
    times: list[float] = []
    for _ in range(rounds):
        for query, passages in asked:
            started = time.perf_counter()
            reader.scores(query, passages[:top])
            times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return {"p50_ms": round(statistics.median(times), 2), "p90_ms": round(times[int(0.9 * (len(times) - 1))], 2),
            "calls": len(times)}


def size_of(model: torch.nn.Module) -> int:
    import torch

    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return buffer.tell()


def main(argv: list[str] | None = None) -> int:
    import os

    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--kb", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    asked = passages_of(args.kb)
    report: dict[str, object] = {"questions": len(asked),
                                 "fp32_safetensors_bytes": (MODEL_DIR / "model.safetensors").stat().st_size}
    fp32_scores: list[float] = []
    for dtype in ("fp32", "int8"):
        for threads in (1, 2):
            reader = Reader(MODEL_DIR, threads=threads, dtype=dtype)
            for top in (1, 3):
                report[f"{dtype}_threads{threads}_top{top}"] = timed(reader, asked, top, args.rounds)
                print(dtype, threads, top, report[f"{dtype}_threads{threads}_top{top}"], flush=True)
        report[f"{dtype}_state_dict_bytes"] = size_of(reader.model)
        scores = [s for query, passages in asked for s in reader.scores(query, passages)]
        if dtype == "fp32":
            fp32_scores = scores
        else:
            report["int8_max_abs_score_difference"] = round(max(abs(a - b) for a, b in zip(scores, fp32_scores, strict=True)), 4)
    report["load_average"] = [round(v, 2) for v in os.getloadavg()]
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
