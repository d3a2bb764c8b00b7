"""Peak memory and throughput of embedding many texts in one call, by configuration.

    python bench/bench_embed_memory.py [--quick] [--mixed 5000] [--only fastembed]

Every configuration runs each workload in a fresh subprocess (so each peak RSS is that
configuration's alone) on the packaged offline all-MiniLM-L6-v2:

  workload uniform: 256 texts of 254 tokens (MiniLM's limit), in one embed_documents call
  workload mixed:   --mixed texts (default 1,000) of mixed length in one call, as the chunks of one
                    big file reach embed_documents: half 200-254 tokens, half 8-199

Configurations (fastembed: int8 ONNX through ONNX Runtime; st: fp32 through sentence-transformers):

  fastembed-today        what embed_documents did before token-capped batches: every text to one
                         passage_embed call, sorted by length, batch_size 32, ONNX Runtime defaults
  fastembed-capped       token-capped batches (MAX_BATCH_TOKENS), ONNX Runtime defaults
  fastembed-capped-noarena   the same with enable_cpu_mem_arena = False
  fastembed-capped-nopattern the same with enable_mem_pattern = False (what Pinakes ships)
  fastembed-cap4096-nopattern   as above with a 4,096-token cap (--all only)
  st-today               every text to one SentenceTransformer.encode call, batch_size 32
  st-capped              token-capped batches (what Pinakes ships)

With --rounds N every configuration runs N times, interleaved: the best texts/s, the median CPU
time and the highest peak are reported. Peak RSS is the child's VmHWM (/proc/self/status); texts/s times the embed_documents call only
(model loading, warm-up and text generation excluded); CPU ms/text is the child's process time per
text, which other load on a shared machine disturbs less than wall time. Ratios are to the same
provider's "today" configuration measured in the same run. Texts are generated deterministically
(seeded RNG over a fixed vocabulary of words the tokenizer counts as one token each). Default run:
about 5 minutes on 2 quiet cores; --quick (64 uniform, 300 mixed texts) under 2.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

WORDS = """
the of and to in is that for it as was with be by on not he this are or his from at which but have
an they you were her she there been one all we their has would when who will more no if out so
said what up its about into than them can only other new some could time these two may then do
first any my now such like our over man me even most made after also did many before must through
back years where much your way well down should because each just those people how too little state
good very make world still own see men work long get here between both life being under never day
same another know while last might us great old year off come since against go came right used take
three states himself few house use during without again place around however home small found thought
went say part once general high upon school every does got united left number course war until always
away something fact though water less public put think almost hand enough far took head yet government
system better set told nothing night end why called didn find look asked going later knew point next
program city business give group toward young days let room president side social present given several
order national possible rather second face per among form important often things early white case john
become large big need four within felt along children saw best church ever least power development light
"""
VOCABULARY = WORDS.split()
SEED = 20261201


def generate_texts(counter: Any, workload: str, count: int) -> list[str]:
    """Deterministic texts of a known token count: words the tokenizer counts as one token each,
    with a full stop (one token) every 8 to 15 words."""
    words = [word for word in VOCABULARY if counter.count_tokens(word) == 1]
    rng = random.Random(f"{SEED}-{workload}-{count}")
    texts: list[str] = []
    for _ in range(count):
        if workload == "uniform":
            target = 254
        else:
            target = rng.randint(200, 254) if rng.random() < 0.5 else rng.randint(8, 199)
        tokens: list[str] = []
        until_stop = rng.randint(8, 15)
        while len(tokens) < target:
            if until_stop == 0 and len(tokens) < target - 1:
                tokens[-1] += "."
                until_stop = rng.randint(8, 15)
                target -= 1  # the full stop is a token of its own
                continue
            tokens.append(rng.choice(words))
            until_stop -= 1
        texts.append(" ".join(tokens))
    return texts


def memory_mb() -> tuple[float, float]:
    """(VmRSS, VmHWM) of this process, in MB."""
    values: dict[str, float] = {}
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0]) / 1024
    return values["VmRSS"], values["VmHWM"]


# --- the child: one configuration, one workload ----------------------------------------------------

def rebuild_session(embedder: Any, **options: bool) -> None:
    """fastembed's session rebuilt with `options` set on its SessionOptions (enable_cpu_mem_arena
    has a public fastembed kwarg too; rebuilding keeps every configuration's loading identical)."""
    import onnxruntime as ort  # pyright: ignore[reportMissingTypeStubs] -- onnxruntime ships no stubs

    session = embedder._model.model.model
    session_options = session.get_session_options()
    for name, value in options.items():
        setattr(session_options, name, value)
    embedder._model.model.model = ort.InferenceSession(session._model_path, sess_options=session_options,
                                                       providers=session.get_providers())


def today_fastembed(embedder: Any, texts: list[str]) -> Any:
    """embed_documents before token-capped batches (git history of provider_fastembed.py)."""
    import numpy as np

    counts = embedder.count_tokens_batch(texts)
    assert max(counts) <= embedder.max_input_tokens
    order = sorted(range(len(texts)), key=lambda index: len(texts[index]), reverse=True)
    vectors = np.stack(list(embedder._model.passage_embed([texts[index] for index in order],
                                                          batch_size=embedder.batch_size)))
    restored = np.empty_like(vectors)
    restored[order] = vectors
    return embedder._unit_rows(restored, len(texts))


def today_st(embedder: Any, texts: list[str]) -> Any:
    """embed_documents before token-capped batches: the whole list to one encode call."""
    counts = embedder.count_tokens_batch(texts)
    assert max(counts) <= embedder.max_input_tokens
    return embedder._unit_rows(embedder._encode_documents(texts, embedder.batch_size), len(texts))


def child(config: str, workload: str, count: int) -> None:
    from pinakes.embed import load_embedder
    from tests.fakes import default_section

    provider = "fastembed" if config.startswith("fastembed") else "sentence-transformers"
    started = time.perf_counter()
    embedder: Any = load_embedder(default_section(provider), offline=True)
    if provider == "fastembed":
        if config == "fastembed-capped-noarena":
            rebuild_session(embedder, enable_cpu_mem_arena=False)
        elif config in ("fastembed-today", "fastembed-capped"):
            pass  # ONNX Runtime's defaults, as fastembed builds the session
        else:
            rebuild_session(embedder, enable_mem_pattern=False)
        embedder._bounded_session = True  # the configuration above is final
        if config == "fastembed-cap4096-nopattern":
            embedder.max_batch_tokens = 4096
    load_seconds = time.perf_counter() - started
    texts = generate_texts(embedder, workload, count)
    tokens = sum(embedder.count_tokens_batch(texts))
    embedder.embed_query("warm up")  # lazy initialisation, not the batches' memory
    rss_loaded, _ = memory_mb()
    embed = {"fastembed-today": today_fastembed, "st-today": today_st}.get(config)
    wall, cpu = time.perf_counter(), time.process_time()
    vectors = embed(embedder, texts) if embed else embedder.embed_documents(texts)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    rss_after, peak = memory_mb()
    assert vectors.shape == (len(texts), embedder.identity.dim)
    print(json.dumps({"config": config, "workload": workload, "texts": len(texts), "tokens": tokens,
                      "load_s": load_seconds, "rss_loaded_mb": rss_loaded, "rss_after_mb": rss_after,
                      "peak_mb": peak, "seconds": wall, "cpu_seconds": cpu}))


# --- the parent ----------------------------------------------------------------------------------------

CONFIGS = {
    "fastembed": ["fastembed-today", "fastembed-capped", "fastembed-capped-noarena",
                  "fastembed-capped-nopattern"],
    "sentence-transformers": ["st-today", "st-capped"],
}


def run_child(config: str, workload: str, count: int, home: str) -> dict[str, Any]:
    environment = dict(os.environ, HF_HOME=home, PNK_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    result = subprocess.run([sys.executable, __file__, "--child", config, workload, str(count)],
                            capture_output=True, text=True, env=environment, cwd=REPO, check=False)
    if result.returncode != 0:
        sys.exit(f"{config} / {workload} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--child", nargs=3, metavar=("CONFIG", "WORKLOAD", "COUNT"), help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="64 uniform and 300 mixed texts")
    parser.add_argument("--uniform", type=int, default=256, help="texts of 254 tokens (default 256)")
    parser.add_argument("--mixed", type=int, default=1000, help="texts of mixed length (default 1000)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="repeat every configuration, interleaved (default 1)")
    parser.add_argument("--only", choices=sorted(CONFIGS), help="one provider")
    parser.add_argument("--all", action="store_true", help="also fastembed with a 4,096-token cap")
    args = parser.parse_args()
    if args.child:
        config, workload, count = args.child
        child(config, workload, int(count))
        return
    workloads = {"uniform": 64, "mixed": 300} if args.quick else {"uniform": args.uniform, "mixed": args.mixed}
    import fastembed
    import onnxruntime  # pyright: ignore[reportMissingTypeStubs] -- onnxruntime ships no stubs
    import torch

    print(f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, Python {platform.python_version()}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; fastembed {fastembed.__version__}, "
          f"onnxruntime {onnxruntime.__version__}, torch {torch.__version__} ({torch.get_num_threads()} threads)")
    print(f"workloads: {', '.join(f'{name} {count} texts' for name, count in workloads.items())}")
    providers = [args.only] if args.only else list(CONFIGS)
    with tempfile.TemporaryDirectory() as home:
        for provider in providers:
            configs = list(CONFIGS[provider])
            if provider == "fastembed" and args.all:
                configs.append("fastembed-cap4096-nopattern")
            for workload, count in workloads.items():
                runs: dict[str, list[dict[str, Any]]] = {config: [] for config in configs}
                for round_number in range(args.rounds):
                    # Interleaved, the order reversed every other round, so a burst of other load
                    # on a shared machine does not land on one configuration only.
                    for config in configs if round_number % 2 == 0 else reversed(configs):
                        row = run_child(config, workload, count, home)
                        runs[config].append(row)
                        print(f"  round {round_number + 1} {config} / {workload}: {row['seconds']:.1f}s, "
                              f"peak {row['peak_mb']:.0f} MB", file=sys.stderr, flush=True)
                report(provider, workload, [combine(rows) for rows in runs.values()])


def combine(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One figure per configuration over the rounds: the best wall time (the least disturbed round),
    the median CPU time, the highest peak and post-call RSS."""
    import statistics

    combined = dict(min(rows, key=lambda row: row["seconds"]))
    combined["cpu_seconds"] = statistics.median(row["cpu_seconds"] for row in rows)
    for key in ("peak_mb", "rss_after_mb", "rss_loaded_mb"):
        combined[key] = max(row[key] for row in rows)
    combined["rounds"] = len(rows)
    return combined


def report(provider: str, workload: str, results: list[dict[str, Any]]) -> None:
    base = results[0]
    first = base
    print(f"\n{provider}, {workload}: {first['texts']} texts, {first['tokens'] / first['texts']:.0f} tokens "
          f"mean, one embed_documents call; {first['rounds']} round(s): best texts/s, median CPU, "
          f"highest peak (ratios to {base['config']})")
    print(f"  {'config':<30} {'loaded MB':>9} {'peak MB':>8} {'ratio':>6} {'after MB':>8} "
          f"{'texts/s':>8} {'ratio':>6} {'CPU ms/text':>11} {'ratio':>6}")
    for row in results:
        rate = row["texts"] / row["seconds"]
        base_rate = base["texts"] / base["seconds"]
        cpu = row["cpu_seconds"] / row["texts"] * 1000
        base_cpu = base["cpu_seconds"] / base["texts"] * 1000
        print(f"  {row['config']:<30} {row['rss_loaded_mb']:9.0f} {row['peak_mb']:8.0f} "
              f"{row['peak_mb'] / base['peak_mb']:5.2f}x {row['rss_after_mb']:8.0f} {rate:8.1f} "
              f"{rate / base_rate:5.2f}x {cpu:11.1f} {cpu / base_cpu:5.2f}x", flush=True)


if __name__ == "__main__":
    main()
