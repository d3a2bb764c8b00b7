"""The remote embedding provider's own cost, against the stub endpoint (tests/fake_openai_embeddings.py).

    python bench/bench_remote_embed.py [--rounds 200] [--dim 768] [--delay-ms 20] [--concurrency 1,4,8]

The stub runs in its own process (its work and the client's never share a GIL), answering
`/v1/embeddings` after `--delay-ms` (a stand-in for the model's compute) with real JSON vectors.

  overhead    one batch of 64 texts (about 40 words each), as one request: the provider's
              `embed_documents` (its request path, embed/plain_http.py; base64 decoding, the
              response checks, unit rows in NumPy, token counting) against a bare request to the
              same stub (http.client on a kept-alive connection, the same JSON body, `json.loads` of
              the answer: the stub's response time as the cheapest client sees it). Paired rounds,
              the order alternating; medians. ratio = provider / bare (wall), pair ratio = the
              median of each round's provider / bare, and cpu_ratio = (bare wall + the provider's
              extra client CPU per request) / bare wall, which other load on a shared machine
              disturbs far less.
  throughput  `--texts` texts (default 2,048: 32 requests of 64) through `embed_documents` with each
              `--concurrency`: texts/s, and the speed-up over one request in flight.

Prints the figures and one JSON line (for docs/perf/embedding.md). Default run: about 1 minute.
"""

from __future__ import annotations

import argparse
import datetime
import http.client
import json
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from pinakes.embed.provider_openai import RemoteEmbedder

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # tests/ (the stub) and src/ when not installed
sys.path.insert(0, str(REPO / "src"))

WORDS = ("harbour", "lighthouse", "keeper", "ship", "night", "ledger", "tide", "anchor", "rope", "sail",
         "captain", "storm", "compass", "chart", "island", "reef", "beacon", "signal", "watch", "dock",
         "crane", "cargo", "manifest", "pilot", "channel", "buoy")
MODEL = "stub-embed"
BATCH = 64


def texts(count: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(40)) + f" #{n}" for n in range(count)]


def start_stub(dim: int, delay_ms: float) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "fake_openai_embeddings.py"), "--dim", str(dim),
         "--delay-ms", str(delay_ms)],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    if not url.startswith("http://"):
        process.kill()
        raise SystemExit(f"the stub did not start: {url!r}")
    return process, url


class BareClient:
    """The cheapest client: one kept-alive connection, the request body, json.loads of the answer."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.path = parts.path + "/embeddings"
        self.connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port)
        self.connection.connect()  # with TCP_NODELAY, as the provider's: Nagle must not slow either
        assert self.connection.sock is not None
        self.connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def embed(self, batch: list[str]) -> list[str]:
        body = json.dumps({"input": batch, "model": MODEL, "encoding_format": "base64"})  # the provider's
        self.connection.request("POST", self.path, body, {"content-type": "application/json"})
        answer = json.loads(self.connection.getresponse().read())
        return [item["embedding"] for item in answer["data"]]


def provider(url: str, dim: int, concurrency: int = 1) -> RemoteEmbedder:
    from pinakes.embed.loader import load_embedder
    from pinakes.embed.provider_openai import RemoteEmbedder
    from pinakes.manifest.sections import EmbeddingSection

    section = EmbeddingSection(provider="openai-compatible", model=MODEL, dim=dim, batch_size=BATCH,
                               base_url=url, concurrency=concurrency, max_input_tokens=4096)
    embedder = load_embedder(section)  # the probe request happens here, outside every timing
    assert isinstance(embedder, RemoteEmbedder)
    return embedder


def overhead(url: str, dim: int, rounds: int) -> dict[str, float]:
    """Paired rounds, each one bare request and one provider request, the order alternating from
    round to round (neither always follows the other's cache or scheduler state)."""
    batch = texts(BATCH)
    bare, remote = BareClient(url), provider(url, dim)
    for _ in range(3):  # warm both connections and both code paths
        bare.embed(batch)
        remote.embed_documents(batch)
    clients = {"bare": lambda: bare.embed(batch), "provider": lambda: remote.embed_documents(batch)}
    wall: dict[str, list[float]] = {"bare": [], "provider": []}
    cpu: dict[str, list[float]] = {"bare": [], "provider": []}
    for round_ in range(rounds):
        for name in (("bare", "provider") if round_ % 2 == 0 else ("provider", "bare")):
            started, cpu_started = time.perf_counter(), time.process_time()
            clients[name]()
            wall[name].append(time.perf_counter() - started)
            cpu[name].append(time.process_time() - cpu_started)
    bare_ms, provider_ms = (statistics.median(wall[name]) * 1000 for name in ("bare", "provider"))
    bare_cpu_ms, provider_cpu_ms = (statistics.median(cpu[name]) * 1000 for name in ("bare", "provider"))
    pair_ratio = statistics.median(p / b for p, b in zip(wall["provider"], wall["bare"], strict=True))
    return {"bare_ms": round(bare_ms, 2), "provider_ms": round(provider_ms, 2),
            "ratio": round(provider_ms / bare_ms, 4), "pair_ratio": round(pair_ratio, 4),
            "overhead_ms": round(provider_ms - bare_ms, 2),
            "bare_cpu_ms": round(bare_cpu_ms, 2), "provider_cpu_ms": round(provider_cpu_ms, 2),
            "cpu_ratio": round((bare_ms + provider_cpu_ms - bare_cpu_ms) / bare_ms, 4)}


def throughput(url: str, dim: int, count: int, levels: list[int]) -> dict[int, float]:
    corpus = texts(count, seed=11)
    results: dict[int, float] = {}
    for level in levels:
        remote = provider(url, dim, concurrency=level)
        remote.embed_documents(corpus[:BATCH * level])  # warm the pool's connections
        started = time.perf_counter()
        vectors = remote.embed_documents(corpus)
        elapsed = time.perf_counter() - started
        assert vectors.shape == (count, dim)
        results[level] = round(count / elapsed, 1)
        remote.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--texts", type=int, default=2048)
    parser.add_argument("--concurrency", default="1,4,8", help="'' (empty): the overhead alone")
    args = parser.parse_args()
    levels = [int(level) for level in args.concurrency.split(",") if level]

    stub, url = start_stub(args.dim, args.delay_ms)
    try:
        cost = overhead(url, args.dim, args.rounds)
        rates = throughput(url, args.dim, args.texts, levels)
    finally:
        stub.kill()
        stub.wait()
    import openai

    print(f"stub: dim {args.dim}, +{args.delay_ms:g} ms per answer; openai {openai.__version__}; "
          f"{os.cpu_count()} cpus, {platform.python_version()}")
    print(f"batch of {BATCH}: bare request {cost['bare_ms']} ms, provider {cost['provider_ms']} ms "
          f"(medians of {args.rounds} paired rounds): ratio {cost['ratio']:.3f} ({(cost['ratio'] - 1) * 100:+.1f}%), "
          f"median of the pairs' ratios {cost['pair_ratio']:.3f}")
    print(f"client CPU per request: bare {cost['bare_cpu_ms']} ms, provider {cost['provider_cpu_ms']} ms: "
          f"the stub's response time plus the provider's extra CPU is {cost['cpu_ratio']:.3f}x it")
    for level, rate in rates.items():
        print(f"concurrency {level}: {rate} texts/s ({rate / rates[levels[0]]:.2f}x concurrency {levels[0]})")
    print(json.dumps({"date": datetime.date.today().isoformat(), "load_average": os.getloadavg()[0],
                      "dim": args.dim, "delay_ms": args.delay_ms,
                      "batch": BATCH, "rounds": args.rounds, **cost,
                      "texts_per_s": {str(level): rate for level, rate in rates.items()}}))


if __name__ == "__main__":
    main()
