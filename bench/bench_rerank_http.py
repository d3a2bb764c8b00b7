"""The HTTP reranker's own cost, against the stub endpoint (tests/fake_rerank_server.py).

    python bench/bench_rerank_http.py [--rounds 150] [--delay-ms 40] [--passages 20]

The stub runs in its own process (its work and the client's never share a GIL), answering `/rerank`
after `--delay-ms` (a stand-in for the model's compute: ~40 ms is a small cross-encoder on a GPU
for 20 passages) in either dialect.

One search's rerank: the query and `--passages` passages of about 250 words (the default chunk),
as one request. For each dialect, the provider's `score` (search/rerank_remote.py: the request body,
the deadline-bounded transport, the answer's checks, the identity state) against a bare request to
the same stub (http.client on a kept-alive connection, the same JSON body, `json.loads` of the
answer and the scores put in input order: the cheapest client that still uses the answer). Paired
rounds, the order alternating; medians. ratio = provider / bare (wall), pair ratio = the median of
each round's provider / bare, cpu_ratio = (bare wall + the provider's extra client CPU per request) /
bare wall, which other load on a shared machine disturbs far less. The issue's target: ratio <= 1.05.

`priced` repeats the TEI rounds with a price, so every request is also reserved and reconciled in
a throwaway KB's budget ledger (two appended, fsynced records per request): the budget's cost,
reported beside the provider's, not part of it.

Prints the figures and one JSON line (for docs/perf/search.md). Default run: about 1 minute.
"""

from __future__ import annotations

import argparse
import datetime
import http.client
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from pinakes.search.rerank_remote import HTTPReranker

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # tests/ (the stub) and src/ when not installed
sys.path.insert(0, str(REPO / "src"))

WORDS = ("harbour", "lighthouse", "keeper", "ship", "night", "ledger", "tide", "anchor", "rope", "sail",
         "captain", "storm", "compass", "chart", "island", "reef", "beacon", "signal", "watch", "dock",
         "crane", "cargo", "manifest", "pilot", "channel", "buoy")
MODEL = "stub-reranker"
QUERY = "which signal does the lighthouse keeper show a ship entering the channel at night"


def passages(count: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(250)) + f" #{n}" for n in range(count)]


def start_stub(delay_ms: float) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "fake_rerank_server.py"), "--delay-ms", str(delay_ms)],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    if not url.startswith("http://"):
        process.kill()
        raise SystemExit(f"the stub did not start: {url!r}")
    return process, url


class BareClient:
    """The cheapest client: one kept-alive connection, the request body, json.loads of the answer."""

    def __init__(self, url: str, api: str) -> None:
        parts = urlsplit(url)
        self.api = api
        self.path = parts.path + "/rerank"
        self.connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port)
        self.connection.connect()  # http.client sets TCP_NODELAY, as for the provider

    def score(self, query: str, texts: list[str]) -> list[float]:
        if self.api == "tei":
            body = {"query": query, "texts": texts, "truncate": True, "raw_scores": False, "return_text": False}
        else:
            body = {"model": MODEL, "query": query, "documents": texts, "top_n": len(texts)}
        self.connection.request("POST", self.path, json.dumps(body), {"content-type": "application/json"})
        answer = json.loads(self.connection.getresponse().read())
        items = answer if self.api == "tei" else answer["results"]
        scores = [0.0] * len(texts)
        for item in items:
            scores[item["index"]] = item["score" if self.api == "tei" else "relevance_score"]
        return scores


def provider(url: str, api: str, kb_root: Path | None = None) -> HTTPReranker:
    from pinakes.manifest.sections import BudgetSection, RerankSection
    from pinakes.search.rerank import RerankRequest
    from pinakes.search.rerank_remote import HTTPReranker, load

    section = RerankSection(provider="http", model=MODEL, base_url=url, api=api, batch_size=64, timeout_s=30,
                            input_usd_per_mtok=Decimal("0.02") if kb_root is not None else None)
    budget = BudgetSection(confirm_above_eur=Decimal("100"), per_operation_eur=Decimal("100"),
                           daily_eur=Decimal("1000"), monthly_eur=Decimal("1000"))
    reranker = load(section, RerankRequest(kb_root=kb_root, budget=budget if kb_root else None,
                                           kb_id="01J9Z8Y7X6W5V4T3S2R1Q0P9N8" if kb_root else None))
    assert isinstance(reranker, HTTPReranker)
    return reranker


def paired(clients: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Paired rounds, each one bare request and one provider request, the order alternating from
    round to round (neither always follows the other's cache or scheduler state)."""
    for _ in range(3):  # warm both connections and both code paths (the provider's identity probe too)
        for client in clients.values():
            client()
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
            "bare_cpu_ms": round(bare_cpu_ms, 3), "provider_cpu_ms": round(provider_cpu_ms, 3),
            "cpu_ratio": round((bare_ms + provider_cpu_ms - bare_cpu_ms) / bare_ms, 4)}


def measure(url: str, api: str, texts: list[str], rounds: int, kb_root: Path | None = None) -> dict[str, float]:
    base = url + ("/v1" if api == "cohere" else "")
    bare, remote = BareClient(base, api), provider(base, api, kb_root)
    expected = bare.score(QUERY, texts)
    got = remote.score(QUERY, texts)
    assert max(abs(a - b) for a, b in zip(expected, got, strict=True)) < 1e-12, "the two clients disagree"
    try:
        return paired({"bare": lambda: bare.score(QUERY, texts), "provider": lambda: remote.score(QUERY, texts)},
                      rounds)
    finally:
        remote.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=150)
    parser.add_argument("--delay-ms", type=float, default=40.0)
    parser.add_argument("--passages", type=int, default=20)
    args = parser.parse_args()
    texts = passages(args.passages)

    stub, url = start_stub(args.delay_ms)
    try:
        results = {api: measure(url, api, texts, args.rounds) for api in ("tei", "cohere")}
        with tempfile.TemporaryDirectory() as kb:
            (Path(kb) / ".pinakes").mkdir()
            results["tei priced"] = measure(url, "tei", texts, args.rounds, kb_root=Path(kb))
    finally:
        stub.kill()
        stub.wait()
    body_kb = len(json.dumps({"query": QUERY, "texts": texts})) / 1024
    print(f"stub: +{args.delay_ms:g} ms per answer; {args.passages} passages of 250 words ({body_kb:.0f} KiB "
          f"request); {os.cpu_count()} cpus, Python {platform.python_version()}; load {os.getloadavg()[0]:.2f}")
    for name, cost in results.items():
        print(f"{name:>11}: bare {cost['bare_ms']} ms, provider {cost['provider_ms']} ms (medians of {args.rounds} "
              f"paired rounds): ratio {cost['ratio']:.3f} ({(cost['ratio'] - 1) * 100:+.1f}%), pairs' median "
              f"{cost['pair_ratio']:.3f}; client CPU bare {cost['bare_cpu_ms']} ms, provider "
              f"{cost['provider_cpu_ms']} ms: cpu_ratio {cost['cpu_ratio']:.3f}")
    print(json.dumps({"date": datetime.date.today().isoformat(), "load_average": round(os.getloadavg()[0], 2),
                      "delay_ms": args.delay_ms, "passages": args.passages, "rounds": args.rounds,
                      "results": results}))


if __name__ == "__main__":
    main()
