"""The single writer's ceiling: chunks/s of a sync's driver when the model costs nothing, against a
baseline revision in the same run (issue #45). One command:

    nice -n 10 python bench/bench_writer.py [--corpus DIR] [--docs N] [--base main[,REV...]] [--rounds 2]
    nice -n 10 python bench/bench_writer.py --first-sync --base none --corpus DIR   # no sidecars yet
    nice -n 10 python bench/bench_writer.py --noop --base none --corpus DIR         # no-op vs walk+stat

A KB of the corpus's first `--docs` files (default: the tldr-nl2bash-dev pages; a corpus from
bench/corpora/make_million.py for the large runs) is made once under $PNK_BENCH_DIR
(/tmp/pnk-bench-writer), its sidecars minted by `pnk sync --sidecars-only`, so the measured sync does
what a cluster's driver does: pair, extract, chunk and count tokens, write every chunk (FTS through
its trigger, term counts, vector) and derive the graph. Each round syncs it cold (index deleted)
under `--base`'s code (`git archive`, as bench/compare_noop.py snapshots it) and under the working
tree's, alternately, each in a fresh child process; the chunks/s reported is chunks written over
the sync's `pipeline` seconds (the pair stage, which reads every sidecar, is reported beside it), and
chunks over the sync process's CPU seconds (`chunks_per_cpu_s`): on a shared machine the wall-clock
rate says how much CPU the other tenants left, the CPU rate what the writer costs.

The embedder (`FastEmbedder`) is deterministic and costs next to nothing: the packaged model's
identity and its real tokenizer (the chunker's counts are the product's own work), and for each text
a unit vector drawn from a generator seeded by the text's xxh64. What is left is the writer.

--first-sync: the KB has no sidecars (every document is new, as a tree the first `pnk sync` meets);
reported: seconds until the first chunk is committed, the whole sync, peak RSS. --noop: after one
sync, a no-op `pnk sync` (a process) alternated with a bare walk + stat of the same tree (a process).
--one-edit: one paragraph appended to one document, then a sync in a child process under each
version in turn (its wall seconds: walk, pair, the document's chunks, graph). --off-driver: each
round also times the working tree with every `chunk_text` result and term-count probe handed over
from an untimed sync of the same tree just before (in the same process): what the driver costs
once the chunk stage and the term probe run on workers (docs/perf/writer.md).
--inline-too: each round also times the working tree with its chunk-ahead worker off
(PINAKES_CHUNK_AHEAD=0); --ahead 0|1 forces it for the working tree's own runs; --cpus pins every
timed sync (and its worker) with taskset, e.g. `--cpus 0` for a one-core machine. `cpu_seconds` is
the sync process's own CPU (the driver), `worker_cpu_seconds` its reaped children's (the chunk-ahead
worker), `chunks_per_all_cpu_s` chunks over both.
Results print as JSON (and go to --json).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sync import BARE_WALK, REPO
from compare_noop import snapshot

WORK = Path(os.environ.get("PNK_BENCH_DIR", "/tmp/pnk-bench-writer"))
CORPORA = Path(os.environ.get("PNK_CORPORA") or REPO.parent / "shared" / "corpora")
SUFFIXES = {".md", ".txt", ".rst", ".markdown", ".html", ".htm"}


class FastEmbedder:
    """The packaged model's identity and tokenizer; a deterministic unit vector per text at no cost."""

    def __init__(self) -> None:
        from pinakes.embed.deferred import embedder_for
        from pinakes.manifest.sections import EmbeddingSection

        section = EmbeddingSection(provider="fastembed", model="sentence-transformers/all-MiniLM-L6-v2", dim=384)
        model = embedder_for(section, offline=True, load=_no_weights)
        self.identity = model.identity
        self.max_input_tokens = model.max_input_tokens
        self.token_counter = getattr(model, "token_counter", None)
        self.count_tokens = model.count_tokens
        self.count_tokens_batch = model.count_tokens_batch

    def embed_documents(self, texts: Any, batch_size: int | None = None) -> np.ndarray:
        import xxhash

        rows = np.empty((len(texts), self.identity.dim), dtype=np.float32)
        for position, text in enumerate(texts):
            rows[position] = np.random.default_rng(xxhash.xxh64_intdigest(text.encode())).standard_normal(
                self.identity.dim, dtype=np.float32)
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        return rows

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


def _no_weights(*_args: object, **_kwargs: object) -> NoReturn:
    raise RuntimeError("the writer bench never loads the model's weights")


def corpus_files(corpus: Path, limit: int | None, stride: int = 1) -> list[Path]:
    files = sorted(path for path in corpus.rglob("*") if path.suffix.lower() in SUFFIXES and path.is_file())[::stride]
    return files if limit is None else files[:limit]


def make_kb(root: Path, corpus: Path, files: list[Path], *, sidecars: bool) -> None:
    """The KB at `root` (made once per corpus, size and sidecar choice; reused when it exists)."""
    if (root / "pinakes.toml").exists():
        return
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    subprocess.run([sys.executable, "-m", "pinakes", "init", str(root), "--name", "writer-bench"], check=True,
                   env=env, capture_output=True)
    for source in files:
        target = root / "docs" / source.relative_to(corpus)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    if sidecars:
        subprocess.run([sys.executable, "-m", "pinakes", "-C", str(root), "sync", "--sidecars-only", "-q"],
                       check=True, env=env)


def _off_driver(root: Path) -> None:
    """What the driver costs once chunking (with its token counts) and term extraction run elsewhere
    (issue #45's "move them to the workers"): one untimed cold sync remembers every `chunk_text`
    result and every term-count probe by their inputs, and the timed sync that follows is handed
    them. The timed sync still does everything else a driver does (extraction, contexts, every
    write, the graph); the lookups cost a hash of the text."""
    import pinakes.chunking
    from pinakes.lexical.tokenizer import Tokenizer
    from pinakes.sync import SyncOptions
    from pinakes.sync.engine import run_sync

    chunked: dict[tuple[Any, ...], Any] = {}
    chunker = pinakes.chunking.chunk_text

    def chunk_text(text: str, source_type: str, **options: Any) -> Any:
        key = (text, source_type, *sorted((name, repr(value)) for name, value in options.items()
                                          if not name.startswith("count_tokens")))
        if key not in chunked:
            chunked[key] = chunker(text, source_type, **options)
        return chunked[key]

    pinakes.chunking.chunk_text = chunk_text
    for name in ("paired_counts", "paired_frequencies"):  # the working tree's, a baseline's
        probe = getattr(Tokenizer, name, None)
        if probe is None:
            continue
        counted: dict[tuple[Any, ...], Any] = {}

        def remembered(self: Any, rows: Any, _probe: Any = probe, _counted: dict[tuple[Any, ...], Any] = counted) -> Any:
            key = tuple(rows)
            if key not in _counted:
                _counted[key] = _probe(self, rows)
            return _counted[key]

        setattr(Tokenizer, name, remembered)
    report = run_sync(root, SyncOptions(quiet=True), embedder=FastEmbedder())
    assert report.ok, report.render_text()
    for leftover in (root / ".pinakes").glob("index.db*"):
        leftover.unlink()


def child(root: Path) -> None:
    """One cold sync of `root` in this process (PYTHONPATH names the code under test); prints JSON."""
    import pinakes.pipeline.embed as embed_stage
    from pinakes.sync import SyncOptions
    from pinakes.sync.engine import run_sync

    try:  # the KB's self-calibration after a sync is not the writer (and costs ~30 s)
        import pinakes.calibration.on_sync as on_sync

        def no_calibration(*_args: object, **_kwargs: object) -> None:
            return None

        on_sync.after_sync = no_calibration
    except ImportError:
        pass
    if os.environ.get("PNK_BENCH_OFF_DRIVER"):
        _off_driver(root)
    started = time.perf_counter()
    first: list[float] = []
    write = embed_stage.write_document

    def timed_write(*args: Any, **kwargs: Any) -> Any:
        kept = write(*args, **kwargs)
        if not first and kept is not None:
            first.append(time.perf_counter() - started)
        return kept

    embed_stage.write_document = timed_write
    cpu = time.process_time()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    report = run_sync(root, SyncOptions(quiet=True), embedder=FastEmbedder())
    cpu = time.process_time() - cpu
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the chunk-ahead worker, reaped with the sync
    helper = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert report.ok, report.render_text()
    chunks = report.chunks_embedded + report.chunks_reused
    pipeline = report.timings.get("pipeline") or report.wall_seconds
    print(json.dumps({"documents": report.indexed, "chunks": chunks, "pipeline_seconds": round(pipeline, 2),
                      "pair_seconds": round(report.timings.get("pair", 0.0), 2),
                      "wall_seconds": round(time.perf_counter() - started, 2), "cpu_seconds": round(cpu, 2),
                      "worker_cpu_seconds": round(helper, 2),
                      "chunks_per_all_cpu_s": round(chunks / (cpu + helper), 1),
                      "first_chunk_seconds": round(first[0], 2) if first else None,
                      "chunks_per_s": round(chunks / pipeline, 1), "chunks_per_cpu_s": round(chunks / cpu, 1),
                      "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
                      "sidecars_written": len(report.sidecars_written)}))


def cold_sync(source: Path, root: Path, *, off_driver: bool = False, ahead: str | None = None,
              cpus: str | None = None) -> dict[str, Any]:
    """One cold sync in a child process; `ahead` sets PINAKES_CHUNK_AHEAD ("0", "1"; None: the
    product decides by core count), `cpus` pins the child (and its worker) with taskset."""
    for leftover in (root / ".pinakes").glob("index.db*"):
        leftover.unlink()
    env = {**os.environ, "PYTHONPATH": str(source), **({"PNK_BENCH_OFF_DRIVER": "1"} if off_driver else {})}
    env.pop("PINAKES_CHUNK_AHEAD", None)
    if ahead is not None:
        env["PINAKES_CHUNK_AHEAD"] = ahead
    pin = ["taskset", "-c", cpus] if cpus else []
    done = subprocess.run([*pin, sys.executable, __file__, "--child", str(root)], env=env, check=True,
                          capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _seconds(cmd: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=env)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=CORPORA / "tldr-nl2bash-dev" / "docs")
    parser.add_argument("--docs", type=int, default=None, help="only the first N files of the corpus")
    parser.add_argument("--stride", type=int, default=1, help="every K-th file (a sample across the corpus's sources)")
    parser.add_argument("--base", default="main",
                        help="the baseline revision, several separated by commas (each timed in every round), or 'none'")
    parser.add_argument("--rounds", type=int, default=2, help="alternations of base and working tree")
    parser.add_argument("--first-sync", action="store_true", help="no sidecars: time to the first chunk, RSS")
    parser.add_argument("--noop", action="store_true", help="no-op sync against walk+stat (after one sync)")
    parser.add_argument("--skip-sync", action="store_true", help="reuse the KB an earlier run synced")
    parser.add_argument("--one-edit", action="store_true", help="one document edited, then a sync, per version")
    parser.add_argument("--off-driver", action="store_true",
                        help="also time the working tree with chunking and term counts done elsewhere (handed "
                             "over from an untimed sync): the driver's cost once they move to workers")
    parser.add_argument("--inline-too", action="store_true",
                        help="also the working tree with the chunk-ahead worker off (PINAKES_CHUNK_AHEAD=0)")
    parser.add_argument("--ahead", choices=("0", "1"), help="PINAKES_CHUNK_AHEAD for the working tree's runs "
                        "(default: the product decides by core count)")
    parser.add_argument("--cpus", help="taskset -c CPUS for every timed sync (e.g. 0: one core)")
    parser.add_argument("--repeat", type=int, default=5, help="with --noop / --one-edit: samples of each")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    files = corpus_files(args.corpus, args.docs, args.stride)
    kind = "first" if args.first_sync else "minted"
    root = WORK / f"{args.corpus.name}-{len(files)}-{args.stride}-{kind}"
    began = time.perf_counter()
    make_kb(root, args.corpus, files, sidecars=not args.first_sync)
    # Each run its own snapshots: two runs at once never import from a folder the other rewrites.
    versions = {"working tree": snapshot(None, WORK / f"code-head-{os.getpid()}")}
    bases: list[str] = [] if args.base == "none" else args.base.split(",")
    versions = {**{base: snapshot(base, WORK / f"code-base-{number}-{os.getpid()}") for number, base in enumerate(bases)},
                **versions}
    results: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cores": os.cpu_count(),
                               "load_before": os.getloadavg(), "corpus": str(args.corpus), "files": len(files),
                               "kb_setup_seconds": round(time.perf_counter() - began, 1)}
    if args.skip_sync:  # only --noop / --one-edit, on the KB an earlier run of the same options synced
        root = root.with_name(root.name + "-run") if args.first_sync else root
    elif args.first_sync:  # each version on its own copy of the tree, which has no sidecar yet
        results["first_sync"] = dict[str, Any]()
        copy = root.with_name(root.name + "-run")
        for name, source in versions.items():
            if copy.exists():
                shutil.rmtree(copy)
            shutil.copytree(root, copy)
            results["first_sync"][name] = cold_sync(source, copy)
            print(name, results["first_sync"][name], file=sys.stderr, flush=True)
        root = copy  # the no-op below runs on the working tree's KB
    else:
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in versions}
        inline = "working tree, chunk-ahead worker off"
        if args.inline_too:
            runs[inline] = []
        if args.off_driver:
            runs["working tree, chunks and terms off the driver"] = []
        results["cpus"], results["ahead"] = args.cpus, args.ahead
        for _ in range(args.rounds):
            for name, source in versions.items():
                runs[name].append(cold_sync(source, root, ahead=args.ahead if name == "working tree" else None,
                                            cpus=args.cpus))
                print(name, runs[name][-1], file=sys.stderr, flush=True)
            if args.inline_too:
                runs[inline].append(cold_sync(versions["working tree"], root, ahead="0", cpus=args.cpus))
                print(inline, runs[inline][-1], file=sys.stderr, flush=True)
            if args.off_driver:
                name = "working tree, chunks and terms off the driver"
                runs[name].append(cold_sync(versions["working tree"], root, off_driver=True))
                print(name, runs[name][-1], file=sys.stderr, flush=True)
        results["runs"] = runs
        for measure in ("chunks_per_s", "chunks_per_cpu_s", "chunks_per_all_cpu_s"):
            best = {name: max(run[measure] for run in samples) for name, samples in runs.items()}
            results[f"best_{measure}"] = best
            for base in bases:  # the first base keeps the key it always had
                key = f"speedup_{measure}" if base == bases[0] else f"speedup_{measure}_over_{base}"
                results[key] = round(best["working tree"] / best[base], 2)
    if args.one_edit:  # one paragraph appended to one document, then a sync (in a child, this bench's embedder)
        edited = sorted((root / "docs").rglob("*.md"))[len(files) // 2]
        edits: dict[str, list[float]] = {name: [] for name in versions}
        for round_number in range(args.repeat):
            for name, source in versions.items():
                with edited.open("a", encoding="utf-8") as handle:
                    handle.write(f"\n\nAn edit, number {round_number} under {name}: one more paragraph.\n")
                env = {**os.environ, "PYTHONPATH": str(source)}
                done = subprocess.run([sys.executable, __file__, "--child", str(root)], env=env, check=True,
                                      capture_output=True, text=True)
                edits[name].append(json.loads(done.stdout.strip().splitlines()[-1])["wall_seconds"])
        results["one_edit"] = {"document": str(edited.relative_to(root)), "seconds": edits,
                               "median": {name: round(statistics.median(values), 2) for name, values in edits.items()}}
    if args.noop:
        env = {**os.environ, "PYTHONPATH": str(versions["working tree"])}
        noop = [sys.executable, "-m", "pinakes", "-C", str(root), "sync", "-q"]
        _seconds(noop, env)  # whatever the last sync left (the settled mark) is written once
        samples: dict[str, list[float]] = {"noop_sync": [], "walk_stat": []}
        for _ in range(args.repeat):
            samples["noop_sync"].append(_seconds(noop, env))
            samples["walk_stat"].append(_seconds([sys.executable, "-c", BARE_WALK, str(root / "docs")], env))
        noop_s, walk_s = statistics.median(samples["noop_sync"]), statistics.median(samples["walk_stat"])
        results["noop"] = {"samples": samples, "noop_seconds": round(noop_s, 3), "walk_stat_seconds": round(walk_s, 3),
                           "ratio": round(noop_s / walk_s, 2)}
    results["load_after"] = os.getloadavg()
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
