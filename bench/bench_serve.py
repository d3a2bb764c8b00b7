"""`pnk serve` latency: warm `pinakes_search` through the official MCP client, next to the same
searches run in-process by `Searcher.search()` in the same run. One command:

    python bench/bench_serve.py [--queries 200] [--chunks 10000] [--modes bm25,hybrid] [--rebuild]

The KB is the tldr-nl2bash dev corpus (7,425 English Markdown pages, one chunk each), topped up to
--chunks (default 10,000) with pages from the tldr translations corpus, which also puts non-Latin
scripts into the index. Embedding it with the real model would dwarf the measurement on two cores,
so the index is built by a real sync with the test suite's fake embedder (hashed bag of words),
stamped with the identity of the model the manifest names: hybrid
queries then embed with the real packaged model and multiply against a real-sized float32 matrix,
so their *timings* are real while their rankings are meaningless (the report says so). BM25 is
entirely real.

Measured per mode, over the dev questions (the first --queries of them), after one warm-up call:
  - in-process: `Searcher.search()` on a Searcher built exactly as the server builds it, in a fresh
    process, once before and once after the MCP run (the machine is shared: the two runs bracket
    any drift, and the overhead ratio uses their mean). Each run times the searches on a worker
    thread, which is where the server runs them, and again on the main thread, which is where
    `pnk search` runs them (with the torch provider, query embedding was measured many times
    slower on the main thread of a busy machine, so only the worker-thread figure isolates the
    server's own overhead; see docs/perf/serve.md);
  - through MCP: `ClientSession.call_tool("pinakes_search")` against `python -m pinakes serve`
    over stdio, i.e. JSON-RPC, argument validation, evidence envelopes and budget fitting included;
and `pinakes_get` of each top passage's character span through MCP. The ratio MCP/in-process is
the server's overhead. Results are printed and written as JSON beside the KB.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO.parent / "shared" / "corpora" / "tldr-nl2bash-dev"
TRANSLATIONS = REPO.parent / "shared" / "corpora" / "tldr-pages-translations" / "docs"
WORK = Path(os.environ.get("PNK_BENCH_DIR", "/tmp/pnk-bench-serve"))

sys.path.insert(0, str(REPO))


def corpus_files(chunks: int) -> list[tuple[Path, str]]:
    """(source, KB-relative target): every English page, then translations up to `chunks` pages."""
    english = sorted((CORPUS / "docs").rglob("*.md"))
    picked = [(path, path.relative_to(CORPUS / "docs").as_posix()) for path in english]
    if len(picked) < chunks and TRANSLATIONS.is_dir():
        for path in sorted(TRANSLATIONS.rglob("*.md"))[: chunks - len(picked)]:
            picked.append((path, "translations/" + path.relative_to(TRANSLATIONS).as_posix()))
    return picked


def build_kb(root: Path, chunks: int, rebuild: bool) -> dict[str, Any]:
    """The benchmark KB, built once (reused while its marker matches the file selection)."""
    marker = root / ".bench-built.json"
    files = corpus_files(chunks)
    if marker.exists() and not rebuild:
        built = json.loads(marker.read_text())
        if built.get("files") == len(files):
            return built
    if root.exists():
        shutil.rmtree(root)
    from pinakes.embed import load_embedder
    from pinakes.init import init_kb
    from pinakes.manifest import load_manifest
    from pinakes.sync import SyncOptions
    from pinakes.sync.engine import run_sync
    from tests.fakes import FakeEmbedder

    init_kb(root, name="tldr")
    for source, relative in files:
        target = root / "docs" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    real = load_embedder(load_manifest(root / "pinakes.toml").embedding, offline=True)
    timing_only = FakeEmbedder(dim=real.identity.dim)
    timing_only.identity = real.identity  # vectors are for timing only; see the module docstring
    started = time.perf_counter()
    report = run_sync(root, SyncOptions(), embedder=timing_only)
    if not report.ok:
        raise SystemExit(f"the benchmark KB did not sync: {report}")
    built = {"files": len(files), "sync_seconds": round(time.perf_counter() - started, 1), **index_counts(root)}
    marker.write_text(json.dumps(built))
    return built


def index_counts(root: Path) -> dict[str, int]:
    import sqlite3

    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    try:
        documents = conn.execute("SELECT count(*) FROM documents WHERE state = 'active'").fetchone()[0]
        chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    finally:
        conn.close()
    return {"documents": documents, "chunks": chunks}


def load_queries(limit: int) -> list[str]:
    lines = (CORPUS / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["query"] for line in lines[:limit]]


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50_ms": round(statistics.median(ordered) * 1000, 2), "p95_ms": round(p95 * 1000, 2),
            "mean_ms": round(statistics.fmean(ordered) * 1000, 2), "n": len(ordered)}


def bench_in_process(root: Path, queries: list[str], modes: list[str]) -> dict[str, Any]:
    """Searcher.search() timings on a worker thread (as the server runs it) and on the main thread."""
    from pinakes.manifest import load_manifest
    from pinakes.search.core import Searcher

    manifest = load_manifest(root / "pinakes.toml")
    results: dict[str, Any] = {"worker_thread": {}, "main_thread": {}}
    with Searcher.for_kb(root, manifest) as searcher:
        for mode in modes:
            started = time.perf_counter()
            searcher.search(queries[0], mode=mode)  # warm-up: opens the index, loads matrix and model
            warm_up = round((time.perf_counter() - started) * 1000, 1)

            def measure(mode: str = mode) -> dict[str, float]:
                samples: list[float] = []
                for query in queries:
                    started = time.perf_counter()
                    searcher.search(query, mode=mode)
                    samples.append(time.perf_counter() - started)
                return summary(samples)

            on_worker: list[dict[str, float]] = []

            def on_thread(sink: list[dict[str, float]] = on_worker,
                          run: Callable[[], dict[str, float]] = measure) -> None:
                sink.append(run())

            worker = threading.Thread(target=on_thread)
            worker.start()
            worker.join()
            results["worker_thread"][mode] = {**on_worker[0], "warm_up_ms": warm_up}
            results["main_thread"][mode] = measure()
    return results


def bench_mcp(root: Path, queries: list[str], modes: list[str]) -> dict[str, Any]:
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", str(WORK)), "PNK_OFFLINE": "1",
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    params = StdioServerParameters(command=sys.executable, args=["-m", "pinakes", "serve", "--kb", str(root)],
                                   env=env)
    results: dict[str, Any] = {}

    async def run() -> None:
        started = time.perf_counter()
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            results["startup_ms"] = round((time.perf_counter() - started) * 1000, 1)
            spans: list[dict[str, Any]] = []
            for mode in modes:
                started = time.perf_counter()
                await call(session, "pinakes_search", {"query": queries[0], "mode": mode})
                warm_up = time.perf_counter() - started
                samples: list[float] = []
                sizes: list[int] = []
                for query in queries:
                    started = time.perf_counter()
                    reply = await call(session, "pinakes_search", {"query": query, "mode": mode})
                    samples.append(time.perf_counter() - started)
                    sizes.append(reply["usage"]["tokens_estimated"])
                    if mode == modes[0] and reply["passages"]:
                        top = reply["passages"][0]
                        spans.append({"doc_id": top["doc_id"], "char_start": max(0, top["char_start"] - 500),
                                      "char_end": top["char_end"] + 500})
                results[mode] = {**summary(samples), "warm_up_ms": round(warm_up * 1000, 1),
                                 "response_tokens_p50": statistics.median(sizes)}
            samples = []
            for span in spans:
                started = time.perf_counter()
                await call(session, "pinakes_get", span)
                samples.append(time.perf_counter() - started)
            results["get"] = summary(samples)

    anyio.run(run)
    return results


async def call(session: Any, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    reply = await session.call_tool(tool, arguments)
    if reply.is_error:
        raise SystemExit(f"{tool} failed: {reply.content[0].text}")
    return reply.structured_content


def in_fresh_process(stage: str, *arguments: str) -> Any:
    """Run one stage in a new interpreter, so neither the sync's nor the client's memory and threads
    (torch, doit) weigh on what is measured; the stage prints its result as JSON."""
    completed = subprocess.run([sys.executable, __file__, "--stage", stage, *arguments], check=True,
                               stdout=subprocess.PIPE, text=True)
    return json.loads(completed.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--chunks", type=int, default=10_000, help="pages (one chunk each) in the KB")
    parser.add_argument("--modes", default="bm25,hybrid")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the benchmark KB")
    parser.add_argument("--stage", choices=("build", "in-process"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    modes = [mode.strip() for mode in args.modes.split(",") if mode.strip()]
    root = WORK / "kb"
    WORK.mkdir(parents=True, exist_ok=True)
    queries = load_queries(args.queries)
    if args.stage == "build":
        print(json.dumps(build_kb(root, args.chunks, args.rebuild)))
        return
    if args.stage == "in-process":
        print(json.dumps(bench_in_process(root, queries, modes)))
        return
    common = ["--queries", str(args.queries), "--chunks", str(args.chunks), "--modes", ",".join(modes)]
    built = in_fresh_process("build", *common, *(["--rebuild"] if args.rebuild else []))
    before = in_fresh_process("in-process", *common)
    over_mcp = bench_mcp(root, queries, modes)
    after = in_fresh_process("in-process", *common)
    report = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": f"{os.cpu_count()}-core {platform.machine()}, Python {platform.python_version()}",
        "kb": built,
        "queries": len(queries),
        "in_process_search": {"before": before, "after": after},
        "mcp": over_mcp,
        "overhead_p50_ratio": {
            mode: round(over_mcp[mode]["p50_ms"] / statistics.fmean(
                [before["worker_thread"][mode]["p50_ms"], after["worker_thread"][mode]["p50_ms"]]), 2)
            for mode in modes
        },
        "note": "index vectors are a hash bag of words stamped with the real model's identity: hybrid timings "
                "are real (real query embedding, real-sized matrix), hybrid rankings are not",
    }
    (WORK / "results.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
