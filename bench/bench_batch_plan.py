"""Model batches filled, or cut by cost, for the packaged model (#45: the cold sync's bar). One command:

    python bench/bench_batch_plan.py [--cold-docs 1000] [--groups 4] [--rounds 3] [--kb PATH]

`plan_batches` sorts a call's texts longest first and, by default, fills every batch up to the row
and padded-token caps; with the provider's `call_tokens` it cuts the sorted run where a shorter batch
saves more padding than one more model call costs. A first sync embeds its documents group by group,
each group's chunks longest first in calls of EMBED_SLICE_CHUNKS (pipeline/embed.py), so each group
pads its sparse stretches of lengths again; the pure embedding it is measured against
(bench_sync.py) sorts every chunk once. Here the KB's stored model inputs (its chunks' contexts and
texts, from a sync with the packaged model: `--kb`, or `--cold-docs` tldr pages synced once) are
embedded four ways, taking turns `--rounds` times: {one call of every input, `--groups` groups in the
sync's calls} x {batches filled, cut by cost}. Printed: each way's padded tokens, model calls, wall
and process CPU (medians), and ratios against filled batches in the same layout.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, cast

from bench_sync import PNK, WORK, corpus_files, load_real_embedder, make_kb, stored_model_inputs

if TYPE_CHECKING:
    from pinakes.embed._common import ProviderEmbedder


def sync_layout(embedder: ProviderEmbedder, counts: list[int], groups: int, slice_chunks: int) -> list[list[int]]:
    """The sync's embedding calls over inputs in index order: `groups` consecutive parts, each in
    calls of at most `slice_chunks` made of whole batches as the embedder now plans them
    (pipeline/embed.py `compute_vectors`)."""
    from pinakes.embed.batching import calls_of_whole_batches

    size = -(-len(counts) // groups)
    calls: list[list[int]] = []
    for start in range(0, len(counts), size):
        part = counts[start:start + size]
        calls.extend([start + index for index in call]
                     for call in calls_of_whole_batches(embedder, part, embedder.batch_size, slice_chunks))
    return calls


def planned(embedder: ProviderEmbedder, counts: list[int], calls: list[list[int]], call_tokens: int | None
            ) -> tuple[int, int]:
    """(padded tokens, model calls) of `calls` as the embedder would plan them."""
    from pinakes.embed.batching import plan_batches

    special = embedder.token_counter.special_tokens
    padded = batches = 0
    for call in calls:
        part = [counts[index] for index in call]
        for batch in plan_batches(part, special, embedder.batch_size,
                                  embedder.max_batch_tokens, call_tokens):
            padded += len(batch) * (max(part[index] for index in batch) + special)
            batches += 1
    return padded, batches


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--cold-docs", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=4, help="the sync's groups (a 1,000-page first sync has 4)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kb", type=Path, help="a KB synced with the packaged model (default: tldr pages, synced once)")
    args = parser.parse_args()

    from pinakes.embed.provider_fastembed import FASTEMBED_CALL_TOKENS
    from pinakes.pipeline.embed import EMBED_SLICE_CHUNKS

    root = args.kb
    if root is None:
        root = WORK / f"kb-batch-plan-{args.cold_docs}"
        if not (root / ".pinakes" / "index.db").exists():
            make_kb(root, corpus_files(args.cold_docs))
            subprocess.run([*PNK, "-C", str(root), "sync", "-q"], check=True)
    inputs = stored_model_inputs(root)
    loaded, _batch = load_real_embedder(root)
    embedder = cast("ProviderEmbedder", loaded)  # the packaged model's provider class: its batching's knobs
    counts = embedder.count_tokens_batch(inputs)
    tokens = {"filled": None, "by cost": FASTEMBED_CALL_TOKENS}
    grouped = f"{args.groups} groups"
    layouts: dict[tuple[str, str], list[list[int]]] = {}
    for planner, call_tokens in tokens.items():
        embedder.call_tokens = call_tokens
        layouts["one call", planner] = [list(range(len(inputs)))]
        layouts[grouped, planner] = sync_layout(embedder, counts, args.groups, EMBED_SLICE_CHUNKS)
    ways = list(layouts)
    exact = sum(counts) + len(counts) * embedder.token_counter.special_tokens
    print(f"{len(inputs)} chunk inputs of {root}, {exact} tokens unpadded; call_tokens {FASTEMBED_CALL_TOKENS}")
    for layout, planner in ways:
        padded, batches = planned(embedder, counts, layouts[layout, planner], tokens[planner])
        print(f"  {layout:>10} {planner:>8}: {batches} model calls, {padded} padded tokens ({padded / exact:.4f}x)")
    samples: dict[tuple[str, str], list[tuple[float, float]]] = {way: [] for way in ways}
    for number in range(args.rounds):
        for layout, planner in random.sample(ways, len(ways)):
            embedder.call_tokens = tokens[planner]
            wall, cpu = time.perf_counter(), time.process_time()
            for call in layouts[layout, planner]:
                embedder.embed_documents([inputs[index] for index in call])
            samples[layout, planner].append((time.perf_counter() - wall, time.process_time() - cpu))
        print(f"round {number + 1}: " + ", ".join(f"{layout} {planner} {got[-1][0]:.1f}/{got[-1][1]:.1f}s"
                                                  for (layout, planner), got in samples.items()), flush=True)
    for layout in ("one call", grouped):
        base_wall = statistics.median(wall for wall, _ in samples[layout, "filled"])
        base_cpu = statistics.median(cpu for _, cpu in samples[layout, "filled"])
        for planner in ("filled", "by cost"):
            wall = statistics.median(value for value, _ in samples[layout, planner])
            cpu = statistics.median(value for _, value in samples[layout, planner])
            print(f"{layout:>10} {planner:>8}: wall {wall:.2f} s ({wall / base_wall:.3f}x), "
                  f"CPU {cpu:.2f} s ({cpu / base_cpu:.3f}x)")


if __name__ == "__main__":
    main()
