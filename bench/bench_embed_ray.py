"""The embed stage on Ray against the local executor, and the single writer's ceiling, in one run.

    nice -n 10 python bench/bench_embed_ray.py [--chunks 320] [--rounds 2] [--json out.json]
    nice -n 10 python bench/bench_embed_ray.py --equivalence tldr [--json out.json]

Throughput (default): chunk texts cut by the product chunker (the manifest defaults) from the
first pages of the tldr-nl2bash-dev corpus, embedded in calls of EMBED_SLICE_CHUNKS texts as a sync
makes them, by the packaged default model (fastembed int8 MiniLM):

  local        the model in this process (every core: what `pnk sync` does by default)
  ray-1        one worker on a one-node loopback Ray cluster holding both CPUs (the same threads)
  ray-2        two workers on a two-node loopback cluster, one CPU each

local and ray-1 alternate `--rounds` times on the same texts (paired: the ratio is the executor's
per-chunk overhead); ray-2 and local then alternate on a fresh two-node cluster. Rates time the
embedding calls only (model load, cluster start and warm-up excluded) and the best round is kept.
Vectors are compared with the local ones (max abs difference).

Single-writer ceiling: a cold `run_sync` of `--ceiling-pages` pages whose embedder returns vectors
instantly (the real tokenizer still counts for the chunker): chunks/s of everything the driver does
per chunk (extract, chunk, commit), the most any cluster can feed one index. It runs on the local
path and on `--ceiling-workers` counts of instant workers reached through the dispatch-ahead path a
Ray cluster takes (InstantWorkers: N workers that answer at once), with `--ceiling-ray N` also on the
Ray executor itself (a loopback cluster of N one-CPU nodes, the product's workers with an `embed`
that answers at once: the driver's Ray overhead counted), and the projections for 1M and
10M chunks on 1-32 workers of 4 cores follow from the best ceiling (wall clock, and per CPU second:
what one quiet core would write). `--ceiling-only` runs just that (no Ray unless `--ceiling-ray`):

    nice -n 10 python bench/bench_embed_ray.py --ceiling-only [--ceiling-pages 3000] [--ceiling-corpus DIR]
        [--ceiling-stride K] [--ceiling-ray 2] [--base REV[,REV...]] [--rounds 2]

`cpu_seconds` is the sync process's own CPU (the driver), `worker_cpu_seconds` its reaped
children's (the chunk-ahead workers, pipeline/chunk_ahead.py, which a cluster sync's driver runs
beside it as a local one does). With `--base`, every ceiling run is a cold sync in a child process
under a snapshot of the code (`git archive`, as bench/bench_writer.py takes it; the working tree's
too), each base and the working tree alternating `--rounds` times per worker count: a same-run
baseline on a shared machine.

--equivalence tldr: the done-when check of issue #30. The whole corpus (7,425 pages) is synced cold
twice through `pnk sync`, once with `--executor local` and once on a two-node loopback cluster with
`--executor ray`; both indexes answer the corpus's questions (nDCG@10 as `pnk eval --questions`
scores it, and each question's top-10 documents), then a local sync of the Ray-built KB must be a
no-op. Expensive on 2 shared cores: about 2 x 15 minutes.

Every Ray process here binds to loopback (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 and node_ip_address).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Generator, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # read when Ray is imported
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import numpy as np

# The shared corpora beside the checkout (PNK_CORPORA overrides, e.g. for a copy of the tree elsewhere).
CORPORA = Path(os.environ.get("PNK_CORPORA") or Path(__file__).resolve().parents[2] / "shared" / "corpora")
TLDR = CORPORA / "tldr-nl2bash-dev"


def _pages(count: int | None) -> list[Path]:
    pages = sorted((TLDR / "docs").rglob("*.md"))
    if not pages:
        raise SystemExit(f"no tldr pages under {TLDR / 'docs'}: set PNK_CORPORA to the corpora directory")
    return pages if count is None else pages[:count]


def _section() -> Any:
    from pinakes.manifest.sections import EmbeddingSection

    return EmbeddingSection(provider="fastembed", model="sentence-transformers/all-MiniLM-L6-v2", dim=384)


def _chunk_texts(embedder: Any, wanted: int) -> list[str]:
    from pinakes.chunking import chunk_text
    from pinakes.manifest.sections import ChunkingSection

    chunking = ChunkingSection()
    texts: list[str] = []
    for page in _pages(None):
        chunks = chunk_text(page.read_text(encoding="utf-8"), "markdown", max_tokens=chunking.max_tokens,
                            overlap=chunking.overlap, headings=chunking.headings,
                            count_tokens=embedder.count_tokens)
        texts.extend(chunk.text for chunk in chunks)
        if len(texts) >= wanted:
            return texts[:wanted]
    return texts


def _rate(embedder: Any, texts: Sequence[str]) -> tuple[float, np.ndarray]:
    from pinakes.pipeline.embed import EMBED_SLICE_CHUNKS

    embedder.embed_documents(list(texts[:EMBED_SLICE_CHUNKS]), batch_size=32)  # warm-up
    parts: list[np.ndarray] = []
    started = time.perf_counter()
    for start in range(0, len(texts), EMBED_SLICE_CHUNKS):
        parts.append(embedder.embed_documents(list(texts[start:start + EMBED_SLICE_CHUNKS]), batch_size=32))
    return len(texts) / (time.perf_counter() - started), np.vstack(parts)


def _ray() -> Any:
    """The `ray` module, imported when called, as Any: Ray's annotations leave its functions partly
    unknown (src/pinakes/embed/untyped.py holds it the same way)."""
    import ray

    return ray


def _cluster(cpus_per_node: Sequence[int]) -> Any:
    from ray.cluster_utils import Cluster

    cluster: Any = Cluster(initialize_head=True, head_node_args={
        "num_cpus": cpus_per_node[0], "include_dashboard": False, "node_ip_address": "127.0.0.1"})
    for cpus in cpus_per_node[1:]:
        cluster.add_node(num_cpus=cpus, node_ip_address="127.0.0.1")
    cluster.wait_for_nodes()
    return cluster


def _ray_embedder(address: str) -> Any:
    ray = _ray()
    from pinakes.embed.executor_ray import connect_ray_embedder

    ray.init(address=address, _node_ip_address="127.0.0.1", log_to_driver=False,
             runtime_env={"py_modules": [str(Path(__import__("pinakes").__file__).parent)]})
    nodes = {node["NodeManagerAddress"] for node in ray.nodes() if node["Alive"]}
    assert nodes == {"127.0.0.1"}, f"a node left loopback: {nodes}"
    return connect_ray_embedder(_section(), address=address, offline=True)


def _paired(local: Any, texts: Sequence[str], cpus_per_node: Sequence[int], rounds: int,
            reference: np.ndarray) -> dict[str, Any]:
    ray = _ray()
    cluster = _cluster(cpus_per_node)
    try:
        remote = _ray_embedder(cluster.address)
        local_rates: list[float] = []
        ray_rates: list[float] = []
        vectors = reference
        for _ in range(rounds):
            local_rates.append(_rate(local, texts)[0])
            rate, vectors = _rate(remote, texts)
            ray_rates.append(rate)
        remote.close()
    finally:
        ray.shutdown()
        cluster.shutdown()
    return {"workers": len(cpus_per_node), "cpus_per_worker": list(cpus_per_node),
            "local_chunks_per_s": max(local_rates), "ray_chunks_per_s": max(ray_rates),
            "ray_over_local_time": max(local_rates) / max(ray_rates),
            "max_abs_vector_difference": float(np.abs(vectors - reference).max())}


class InstantEmbedder:
    """The real model's identity and token counts, and a vector for every text at no cost."""

    def __init__(self, real: Any) -> None:
        self.identity = real.identity
        self.max_input_tokens = real.max_input_tokens
        self._real = real
        # The counter the real model counts with, as the product's embedder exposes it: the chunk
        # stage proves from it that counts add up (pipeline/chunk.py `counts_add_up`).
        self.token_counter = getattr(real, "token_counter", None)
        vector = np.ones(real.identity.dim, dtype=np.float32)
        self._vector = vector / np.linalg.norm(vector)

    def count_tokens(self, text: str) -> int:
        return self._real.count_tokens(text)

    def count_tokens_batch(self, texts: Sequence[str]) -> list[int]:
        return self._real.count_tokens_batch(texts)

    def embed_documents(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        return np.tile(self._vector, (len(texts), 1))

    def embed_query(self, text: str) -> np.ndarray:
        return self._vector


class InstantWorkers(InstantEmbedder):
    """`workers` cluster workers that answer at once, reached the way a Ray cluster is: through the
    embed stage's dispatch-ahead path (`DispatchAhead`, 2 x workers calls outstanding)."""

    def __init__(self, real: Any, workers: int) -> None:
        super().__init__(real)
        self.workers = workers

    @property
    def calls_ahead(self) -> int:
        return max(2, 2 * self.workers)

    def embed_documents_async(self, texts: Sequence[str], batch_size: int | None = None, *,
                              known_counts: Mapping[str, int] | None = None) -> object:
        return self.embed_documents(texts)

    def collect(self, call: object) -> np.ndarray:
        assert isinstance(call, np.ndarray)
        return cast("np.ndarray[Any, Any]", call)  # the isinstance leaves its type arguments unknown

    def cancel(self) -> None:
        pass


def _kb_with_pages(root: Path, pages: Sequence[Path], docs: Path = TLDR / "docs") -> Path:
    from pinakes.init import init_kb

    init_kb(root, name=root.name)
    for page in pages:
        target = root / "docs" / page.relative_to(docs)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(page, target)
    return root


# What one worker of 4 dedicated cores embeds (the model's 62 ms of CPU a chunk, docs/perf/embedding.md).
WORKER_CHUNKS_PER_S = 4 / 0.062


def _ceiling(real: Any, pages: int, scratch: Path, workers: int = 0, corpus: Path | None = None,
             stride: int = 1, ray_nodes: int = 0) -> dict[str, Any]:
    """A cold sync of `pages` pages whose vectors cost nothing: on the local path (workers 0), on
    `workers` instant workers through the dispatch-ahead path, or (`ray_nodes`) on the Ray executor
    itself, a loopback cluster of that many one-CPU nodes whose workers answer at once. Self-calibration
    after it is left out."""
    docs = corpus or TLDR / "docs"
    files = sorted(path for path in docs.rglob("*") if path.suffix in {".md", ".txt", ".rst"})[::stride][:pages]
    root = _kb_with_pages(scratch / f"ceiling-{workers}-{ray_nodes}", files, docs)
    if ray_nodes:
        with _instant_cluster(ray_nodes) as embedder:
            return {**_timed_ceiling(root, embedder), "pages": len(files), "ray_nodes": ray_nodes}
    embedder = InstantWorkers(real, workers) if workers else InstantEmbedder(real)
    return {**_timed_ceiling(root, embedder), "pages": len(files), "workers": workers}


@contextlib.contextmanager
def _instant_cluster(nodes: int) -> Generator[Any, None, None]:
    """The Ray executor's own embedder (`RayEmbedder`) on a loopback cluster of `nodes` one-CPU nodes,
    each worker the product's `EmbedWorker` (the real model loaded, identity and tokenizer checked)
    except that `embed` answers at once: what is left is the driver's side of the executor."""
    ray = _ray()
    from pinakes.embed import executor_ray

    class InstantEmbedWorker(executor_ray.EmbedWorker):
        def embed(self, texts: list[str], batch_size: int) -> np.ndarray:
            assert self._embedder is not None, "start() loads the model first"
            dim = self._embedder.identity.dim
            return np.full((len(texts), dim), 1 / np.sqrt(dim), dtype=np.float32)

    real_worker = executor_ray.EmbedWorker
    executor_ray.EmbedWorker = InstantEmbedWorker
    cluster = _cluster([1] * nodes)
    try:
        embedder = _ray_embedder(cluster.address)
        yield embedder
    finally:
        executor_ray.EmbedWorker = real_worker
        ray.shutdown()
        cluster.shutdown()


def _timed_ceiling(root: Path, embedder: Any) -> dict[str, Any]:
    """One cold sync of `root` on `embedder`, timed: the driver's CPU and its chunk-ahead workers'."""
    import pinakes.calibration.on_sync as on_sync
    from pinakes.sync import SyncOptions
    from pinakes.sync.engine import run_sync

    def no_calibration(*_args: object, **_kwargs: object) -> None:
        return None

    calibrate, on_sync.after_sync = on_sync.after_sync, no_calibration
    cpu = time.process_time()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        report = run_sync(root, SyncOptions(quiet=True), embedder=embedder)
    finally:
        on_sync.after_sync = calibrate
    cpu = time.process_time() - cpu
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the chunk-ahead workers, reaped with the sync
    helper = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    seconds = report.timings.get("pipeline") or report.wall_seconds
    return {"chunks": report.chunks_embedded, "pipeline_seconds": seconds,
            "cpu_seconds": cpu, "worker_cpu_seconds": helper, "chunks_per_s": report.chunks_embedded / seconds,
            "chunks_per_cpu_s": report.chunks_embedded / cpu,
            "chunks_per_worker_cpu_s": report.chunks_embedded / helper if helper else None,
            "load": os.getloadavg()}


def projections(ceiling: float, workers: Sequence[int] = (1, 2, 4, 8, 32)) -> list[dict[str, Any]]:
    """Hours for 1M and 10M chunks on W workers of 4 cores when the driver writes `ceiling`
    chunks/s and overlaps its writes with the workers' embedding (dispatch ahead): min(W x worker
    rate, ceiling)."""
    rows: list[dict[str, Any]] = []
    for count in workers:
        rate = min(count * WORKER_CHUNKS_PER_S, ceiling)
        rows.append({"workers": count, "chunks_per_s": round(rate, 1), "hours_1m": round(1e6 / rate / 3600, 2),
                     "hours_10m": round(1e7 / rate / 3600, 1),
                     "bound_by": "writer" if ceiling < count * WORKER_CHUNKS_PER_S else "workers"})
    return rows


def throughput(args: argparse.Namespace) -> dict[str, Any]:
    from pinakes.embed.loader import load_embedder

    local = load_embedder(_section(), offline=True)
    texts = _chunk_texts(local, args.chunks)
    _rate_local, reference = _rate(local, texts)
    results: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "machine": f"{os.cpu_count()} cores",
                               "chunks": len(texts),
                               "mean_tokens": float(np.mean(local.count_tokens_batch(texts)))}
    results["ray_1"] = _paired(local, texts, [os.cpu_count() or 1], args.rounds, reference)
    results["ray_2"] = _paired(local, texts, [1, 1], args.rounds, reference)
    results.update(ceilings(local, args))
    return results


def _arms(args: argparse.Namespace) -> list[tuple[str, int, int]]:
    """Each ceiling run asked for: (its name, instant workers, instant Ray nodes)."""
    return ([(f"{workers} workers", workers, 0) for workers in args.ceiling_workers]
            + [(f"Ray, {nodes} instant nodes", 0, nodes) for nodes in args.ceiling_ray])


def ceilings(real: Any, args: argparse.Namespace) -> dict[str, Any]:
    """The single writer's ceiling on the local path, on each `--ceiling-workers` count of instant
    workers and on each `--ceiling-ray` loopback cluster, and the projections from the best of them."""
    found: dict[str, Any] = {"single_writer_ceiling": []}
    with tempfile.TemporaryDirectory(prefix="pnk-bench-ray-") as scratch:
        for _name, workers, nodes in _arms(args):
            found["single_writer_ceiling"].append(_ceiling(real, args.ceiling_pages, Path(scratch), workers,
                                                           args.ceiling_corpus, args.ceiling_stride, nodes))
    best = max(run["chunks_per_s"] for run in found["single_writer_ceiling"])
    best_cpu = max(run["chunks_per_cpu_s"] for run in found["single_writer_ceiling"])
    found["projections_wall"] = projections(best)
    found["projections_one_quiet_core"] = projections(best_cpu)
    return found


def ceilings_against(args: argparse.Namespace) -> dict[str, Any]:
    """`ceilings`, each run a child process under a snapshot of the code: every `--base` revision
    and the working tree, alternating per run, `--rounds` times."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from compare_noop import snapshot

    work = Path(tempfile.mkdtemp(prefix="pnk-bench-ray-code-"))
    try:
        bases = args.base.split(",")
        versions = {**{base: snapshot(base, work / f"base-{number}") for number, base in enumerate(bases)},
                    "working tree": snapshot(None, work / "head")}
        runs: dict[str, list[dict[str, Any]]] = {f"{name}, {arm}": [] for arm, _w, _n in _arms(args)
                                                 for name in versions}
        for _ in range(args.rounds):
            for arm, workers, nodes in _arms(args):
                for name, source in versions.items():
                    run = _ceiling_child(source, workers, nodes, args)
                    runs[f"{name}, {arm}"].append(run)
                    print(name, run, file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    found: dict[str, Any] = {"bases": bases, "rounds": args.rounds, "runs": runs}
    for measure in ("chunks_per_s", "chunks_per_cpu_s", "chunks_per_worker_cpu_s"):
        found[f"best_{measure}"] = {key: max((run[measure] or 0.0) for run in samples) for key, samples in runs.items()}
    mine = [f"working tree, {arm}" for arm, _w, _n in _arms(args)]
    found["projections_wall"] = projections(max(found["best_chunks_per_s"][key] for key in mine))
    found["projections_one_quiet_core"] = projections(max(found["best_chunks_per_cpu_s"][key] for key in mine))
    return found


def _ceiling_child(source: Path, workers: int, nodes: int, args: argparse.Namespace) -> dict[str, Any]:
    """One `_ceiling` run in a child process importing pinakes from `source`."""
    command = [sys.executable, __file__, "--ceiling-child", str(workers), "--ceiling-child-ray", str(nodes),
               "--ceiling-pages", str(args.ceiling_pages), "--ceiling-stride", str(args.ceiling_stride)]
    if args.ceiling_corpus:
        command += ["--ceiling-corpus", str(args.ceiling_corpus)]
    done = subprocess.run(command, env={**os.environ, "PYTHONPATH": str(source)}, check=True,
                          capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _sync(root: Path, *args: str, env: dict[str, str]) -> tuple[dict[str, Any], float]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pinakes", "-C", str(root), "sync", "--json", *args],
                          capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"pnk sync {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout), time.perf_counter() - started


def _answers(root: Path) -> tuple[float, dict[str, list[str]]]:
    from pinakes.eval.corpus import (
        NDCG_DEPTH,
        PASSAGES_PER_QUESTION,
        document_ranking,
        load_corpus_questions,
        ndcg,
    )
    from pinakes.eval.runner import open_searcher
    from pinakes.manifest import load_manifest

    manifest = load_manifest(root / "pinakes.toml")
    questions = load_corpus_questions(TLDR / "questions.jsonl", root, manifest.sources.roots)
    scores: list[float] = []
    tops: dict[str, list[str]] = {}
    with open_searcher(root, manifest) as searcher:
        for question in questions:
            if not question.relevant:
                continue
            result = searcher.search(question.query, final_k=PASSAGES_PER_QUESTION)
            ranking = document_ranking([passage.path for passage in result.passages])
            scores.append(ndcg(ranking, question.relevant, NDCG_DEPTH))
            tops[question.id] = ranking[:10]
    return float(np.mean(scores)), tops


def equivalence(args: argparse.Namespace) -> dict[str, Any]:
    env = {**os.environ, "RAY_ADDRESS": ""}
    with tempfile.TemporaryDirectory(prefix="pnk-bench-ray-eq-") as scratch:
        pages = _pages(args.pages)
        local_kb = _kb_with_pages(Path(scratch) / "local", pages)
        ray_kb = _kb_with_pages(Path(scratch) / "ray", pages)
        cluster = _cluster([1, 1])
        try:
            ray_report, ray_seconds = _sync(ray_kb, "--ray-address", cluster.address, env=env)
            # The only child waited for so far (the nodes are still running): the driver's peak.
            driver_peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        finally:
            cluster.shutdown()
        local_report, local_seconds = _sync(local_kb, "--executor", "local", env=env)
        after, _ = _sync(ray_kb, "--executor", "local", env=env)
        local_ndcg, local_tops = _answers(local_kb)
        ray_ndcg, ray_tops = _answers(ray_kb)
    differing = sorted(key for key in local_tops if local_tops[key] != ray_tops.get(key))
    return {"date": time.strftime("%Y-%m-%d"), "pages": len(pages),
            "chunks": {"local": local_report["chunks_embedded"], "ray": ray_report["chunks_embedded"]},
            "cold_sync_seconds": {"local": local_seconds, "ray_2_workers": ray_seconds},
            "ray_driver_peak_rss_mb": round(driver_peak_mb),
            "ndcg@10": {"local": round(local_ndcg, 4), "ray": round(ray_ndcg, 4)},
            "questions": len(local_tops), "top10_differ": differing,
            "local_sync_after_ray_is_noop": bool(after.get("noop")) and after["chunks_embedded"] == 0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=320, help="chunk texts per measured pass")
    parser.add_argument("--rounds", type=int, default=2, help="paired rounds per cluster (best kept); with --base, alternations of each "
                        "ceiling run")
    parser.add_argument("--ceiling-pages", type=int, default=3000, help="pages the ceiling run syncs")
    parser.add_argument("--ceiling-workers", type=lambda text: [int(part) for part in text.split(",")],
                        default=[0, 8, 32], help="instant workers per ceiling run (0: the local path)")
    parser.add_argument("--ceiling-corpus", type=Path, help="the ceiling's pages from this folder, not tldr")
    parser.add_argument("--ceiling-stride", type=int, default=1,
                        help="every K-th file of the ceiling's corpus (a sample across its sources)")
    parser.add_argument("--ceiling-ray", type=lambda text: [int(part) for part in text.split(",")], default=[],
                        help="also a ceiling run on the Ray executor itself, a loopback cluster of N one-CPU "
                             "nodes whose workers answer at once (comma-separated counts)")
    parser.add_argument("--ceiling-only", action="store_true",
                        help="only the ceiling and its projections (no Ray unless --ceiling-ray)")
    parser.add_argument("--equivalence", choices=("tldr",), help="run the done-when equivalence instead")
    parser.add_argument("--pages", type=int, default=None, help="with --equivalence: only the first N pages")
    parser.add_argument("--base", help="with --ceiling-only: baseline revisions (comma-separated), each ceiling "
                        "run a child process under its code and the working tree's, alternating --rounds times")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--ceiling-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--ceiling-child-ray", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ceiling_child is not None:
        from pinakes.embed.loader import load_embedder

        with tempfile.TemporaryDirectory(prefix="pnk-bench-ray-") as scratch:
            print(json.dumps(_ceiling(load_embedder(_section(), offline=True), args.ceiling_pages, Path(scratch),
                                      args.ceiling_child, args.ceiling_corpus, args.ceiling_stride,
                                      args.ceiling_child_ray)))
        return
    if args.ceiling_only and args.base:
        results = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": f"{os.cpu_count()} cores",
                   "load_before": os.getloadavg(), **ceilings_against(args), "load_after": os.getloadavg()}
    elif args.ceiling_only:
        from pinakes.embed.loader import load_embedder

        results = {"date": time.strftime("%Y-%m-%d"), "machine": f"{os.cpu_count()} cores",
                   **ceilings(load_embedder(_section(), offline=True), args)}
    else:
        results = equivalence(args) if args.equivalence else throughput(args)
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
