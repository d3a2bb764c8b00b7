"""Sync benchmarks (issues: sync as a build system; sync at real scale). One command:

    python bench/bench_sync.py [--docs 10000] [--cold-docs 300] [--repeat 5] [--cold-repeat 2]

Every measurement is printed next to the baseline the issue names, measured in the same run:

1. no-op `pnk sync` of a ~10k-document KB (whole process, median of --repeat) vs a bare Python
   process that walks and stats the same tree (target <= 3x); `git status` on the tree for reference.
2. one edited document: the whole `pnk sync` process after appending a line to one document, vs
   no-op (1) + 2 x that document's PURE embedding time (in this process, model already loaded,
   its chunk texts as the index stored them) + graph derivation (`derive_graph` on the index, timed
   in this process).
3. cold sync of --cold-docs tldr pages with the real default model, run IN THIS PROCESS
   (`run_sync(..., embedder=...)`, the model loaded and warmed up before the clock starts), vs pure
   `embedder.embed_documents` over exactly the chunk texts that sync stored (read back from the
   index's `chunks` table, at the manifest's batch_size), in the same process: target sync <= 1.15 x
   pure embed. Both wall and process CPU time are reported (the machine is shared; CPU time is the
   steadier figure; the sync's counts its child processes', the chunk-ahead worker's). Sidecars are minted first by `pnk sync --sidecars-only` (a process, timed
   separately), as in a fresh clone or before --rebuild. With --cold-repeat > 1 the index is
   deleted and the sync and the embedding are re-run, interleaved; medians are reported. Every
   sample is the first sync a user meets: its self-calibration (#41, calibration/on_sync.py) runs
   in each (its stored file is deleted with the index) and is timed on its own as well
   (`self_calibration_*`: wall and CPU of `after_sync`), so the pipeline's share is reported beside
   the whole sync's. --skip-bare-texts leaves out the pre-#28 baseline (the bare chunk texts).

4. vectors reused by content (#29), each operation measured with reuse and again with
   `--no-reuse` on an identical copy of the KB, in this process, no embedder injected (the sync
   takes the manifest's packaged model and loads its weights only on a miss; loads are counted):
   one paragraph edited in a ~1,000-chunk Markdown document (Python "What's New" pages, --edit-bytes),
   a PDF whose free extractor changed version but reads the same text, `--rebuild` of the demo KB
   (tests/demo-kb) against its cold sync, and a duplicated folder of the demo KB. The starting
   indexes of the first two are built with the packaged model's tokenizer and identity and
   placeholder unit vectors (only what is measured runs the model). --skip-reuse leaves it out;
   --only-reuse runs nothing else.

--base REV (with the cold benchmark): REV's `src/pinakes` (git archive, as bench/compare_noop.py
takes it) and the working tree's are each run for the cold benchmark (3), one sample a child process
of this script, the two versions taking turns --cold-repeat times, so both share the machine's
moods: each version's ratios, its self-calibration's seconds, and the working tree's calibration
and sync against REV's, sample by sample.

The 10k-document index for (1) and (2) is built once with the test suite's fake embedder (vectors do
not matter to a no-op; the edit re-embeds one document with the real model). Results go to
bench/results/sync.json. Scaling and memory: bench/bench_sync_scaling.py, bench/bench_sync_memory.py.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from collections.abc import Callable

    from pinakes.embed.base import Embedder
    from tests.fakes import FakeEmbedder

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared" / "corpora"
WORK = Path(os.environ.get("PNK_BENCH_DIR", "/tmp/pnk-bench-sync"))
PNK = [sys.executable, "-m", "pinakes"]

BARE_WALK = """
import os, sys
n = 0
for dirpath, dirnames, filenames in os.walk(sys.argv[1]):
    for name in filenames:
        os.stat(os.path.join(dirpath, name)); n += 1
print(n)
"""


def freeze_source() -> dict[str, object]:
    """Run this benchmark against a snapshot of src/pinakes (with rules/, mapped in as the build maps
    it) taken now, in this process and in every
    child (PYTHONPATH): others edit the tree while a long benchmark runs, and every case of one run
    must measure the same code. Returns what the snapshot was (commit, uncommitted files, digest)."""
    import hashlib

    reuse = os.environ.get("PNK_BENCH_SNAPSHOT")  # a snapshot an earlier run took (its "snapshot" path)
    snapshot = Path(reuse) if reuse else WORK / f"src-snapshot-{os.getpid()}"
    if not reuse:
        if snapshot.exists():
            shutil.rmtree(snapshot)
        shutil.copytree(REPO / "src" / "pinakes", snapshot / "pinakes",
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        if (REPO / "rules").is_dir():  # the doit adapters, mapped into the package by the build
            shutil.copytree(REPO / "rules", snapshot / "pinakes" / "rules", dirs_exist_ok=True,  # a worktree's link
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    # Byte-compiled as pip compiles an installed package: otherwise, where the environment sets
    # PYTHONDONTWRITEBYTECODE, every timed process compiles every module it imports (~0.1 s of a
    # no-op sync, measured 2026-12-02) and the benchmark times the compiler.
    compileall.compile_dir(snapshot / "pinakes", quiet=1)
    digest = hashlib.sha256()
    for path in sorted((snapshot / "pinakes").rglob("*.py")):
        digest.update(path.relative_to(snapshot).as_posix().encode() + b"\0" + path.read_bytes())
    sys.path.insert(0, str(snapshot))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(snapshot), os.environ.get("PYTHONPATH")]))

    def git(*argv: str) -> str:
        return subprocess.run(["git", *argv], cwd=REPO, capture_output=True, text=True).stdout.strip()

    return {"commit": git("log", "--oneline", "-1")[:100], "reused_snapshot": bool(reuse), "uncommitted_src": git("status", "--short", "src", "rules"),
            "snapshot": str(snapshot), "snapshot_sha256": digest.hexdigest()[:16]}


def _child_run(cmd: list[str]) -> tuple[float, float, str]:
    """One child process: its wall seconds, its CPU seconds (user + system, every thread), its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), out.stdout


def timed(cmd: list[str], repeat: int, **kwargs: Any) -> tuple[float, list[float]]:
    samples: list[float] = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, **kwargs)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples), samples


def timed_alternately(first: list[str], second: list[str], repeat: int) -> tuple[tuple[float, list[float]], ...]:
    """Both commands `repeat` times, taking turns: a burst of load on this shared machine then
    slows both sides of the ratio instead of one."""
    runs = [timed(cmd, 1) for _ in range(repeat) for cmd in (first, second)]
    samples = [[seconds for _, [seconds] in runs[side::2]] for side in (0, 1)]
    return tuple((statistics.median(side), side) for side in samples)


def corpus_files(limit: int) -> list[tuple[Path, str]]:
    """(source file, KB-relative target) pairs: English tldr pages, then translations."""
    picked: list[tuple[Path, str]] = []
    if limit <= 0:
        return picked
    for base, prefix in ((SHARED / "tldr-nl2bash-dev" / "docs", "en"),
                         (SHARED / "tldr-pages-translations" / "docs", "tr")):
        for path in sorted(base.rglob("*.md")):
            picked.append((path, f"docs/{prefix}/{path.relative_to(base).as_posix()}"))
            if len(picked) >= limit:
                return picked
    return picked


def make_kb(root: Path, files: list[tuple[Path, str]]) -> None:
    if root.exists():
        shutil.rmtree(root)
    subprocess.run([*PNK, "init", str(root), "--name", root.name], check=True, capture_output=True)
    for source, rel in files:
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


def _import_pinakes() -> None:
    if str(REPO) not in sys.path:
        sys.path.append(str(REPO))  # tests.fakes (after the snapshot, which must win for pinakes)


def build_with_fake_embedder(root: Path) -> float:
    _import_pinakes()
    from pinakes.sync import SyncOptions
    from pinakes.sync.engine import run_sync
    from tests.fakes import FakeEmbedder

    started = time.perf_counter()
    report = run_sync(root, SyncOptions(quiet=True), embedder=FakeEmbedder())
    assert report.ok, report.render_text()
    return time.perf_counter() - started


def load_real_embedder(root: Path) -> tuple[Embedder, int]:
    """The KB's default model, loaded and warmed up (one short text), and the manifest's batch size."""
    from pinakes.embed import load_embedder
    from pinakes.manifest import load_manifest

    manifest = load_manifest(root / "pinakes.toml")
    embedder = load_embedder(manifest.embedding)
    embedder.embed_documents(["warm up the model"], batch_size=manifest.embedding.batch_size)
    return embedder, manifest.embedding.batch_size


def stored_chunk_texts(root: Path, path: str | None = None) -> list[str]:
    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    try:
        if path is None:
            rows = conn.execute("SELECT text FROM chunks ORDER BY id").fetchall()
        else:
            rows = conn.execute("SELECT c.text FROM chunks c JOIN documents d ON d.id = c.doc_id "
                                "WHERE d.path = ? AND d.state = 'active' ORDER BY c.ordinal", (path,)).fetchall()
    finally:
        conn.close()
    return [text for (text,) in rows]


def stored_model_inputs(root: Path) -> list[str]:
    """What the sync gave the model for every chunk (its context, then its text: pipeline/context.py)."""
    from pinakes.pipeline.context import embedding_input

    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    try:
        rows = conn.execute("SELECT text, context FROM chunks ORDER BY id").fetchall()
    finally:
        conn.close()
    return [embedding_input(context or "", text) for text, context in rows]


def stored_embedding_inputs(root: Path, path: str) -> dict[str, str]:
    """Chunk text -> what the sync gave the model for it (its context, then its text)."""
    from pinakes.pipeline.context import embedding_input

    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    try:
        rows = conn.execute("SELECT c.text, c.context FROM chunks c JOIN documents d ON d.id = c.doc_id "
                            "WHERE d.path = ? AND d.state = 'active'", (path,)).fetchall()
    finally:
        conn.close()
    return {text: embedding_input(context or "", text) for text, context in rows}


def pure_embed(embedder: Embedder, texts: list[str], batch_size: int) -> tuple[float, float]:
    """(wall, process CPU) seconds of embed_documents over `texts`."""
    wall, cpu = time.perf_counter(), time.process_time()
    embedder.embed_documents(texts, batch_size=batch_size)
    return time.perf_counter() - wall, time.process_time() - cpu


def bench_noop_and_edit(docs: int, repeat: int) -> dict[str, Any]:
    root = WORK / "kb10k"
    files = corpus_files(docs)
    make_kb(root, files)
    build_seconds = build_with_fake_embedder(root)
    subprocess.run([*PNK, "-C", str(root), "sync", "-q"], check=True)  # settle the walk cache
    (noop, noop_samples), (bare, bare_samples) = timed_alternately(
        [*PNK, "-C", str(root), "sync", "-q"], [sys.executable, "-c", BARE_WALK, str(root / "docs")], repeat)
    git_status = None
    if shutil.which("git"):
        subprocess.run(["git", "init", "-q"], cwd=root, check=True)
        subprocess.run(["git", "add", "-A"], cwd=root, check=True)
        subprocess.run(["git", "-c", "user.email=b@x", "-c", "user.name=b", "commit", "-qm", "bench"],
                       cwd=root, check=True)
        git_status, _ = timed(["git", "status", "--porcelain"], repeat, cwd=root)

    # One edited document: the whole `pnk sync` process (it loads the real model itself).
    edited_rel = files[len(files) // 2][1]
    edited = root / edited_rel
    edited.write_text(edited.read_text(encoding="utf-8") + "\n- An added example line for the benchmark:\n\n"
                      "`echo benchmark`\n", encoding="utf-8")
    started = time.perf_counter()
    out = subprocess.run([*PNK, "-C", str(root), "sync", "--json"], check=True, capture_output=True, text=True)
    edit_seconds = time.perf_counter() - started
    report = json.loads(out.stdout)
    assert report["counts"]["indexed"] == 1, report["counts"]

    # The baseline's parts, in this process: the model loaded before the clock starts.
    from pinakes.index import schema
    from pinakes.manifest import load_manifest
    from pinakes.pipeline.graph import derive_graph

    embedder, batch_size = load_real_embedder(root)
    texts = stored_chunk_texts(root, edited_rel)
    embed_samples = [pure_embed(embedder, texts, batch_size)[0] for _ in range(max(3, repeat))]
    embed_seconds = statistics.median(embed_samples)
    kb_id = load_manifest(root / "pinakes.toml").kb.id
    graph_samples: list[float] = []
    for _ in range(max(3, repeat)):
        conn = schema.open_writer(root / ".pinakes" / "index.db")
        started = time.perf_counter()
        derive_graph(conn, kb_id)
        graph_samples.append(time.perf_counter() - started)
        conn.close()
    graph_seconds = statistics.median(graph_samples)
    edit_target = noop + 2 * embed_seconds + graph_seconds
    return {
        "documents": len(files), "initial_build_seconds_fake_embedder": build_seconds,
        "noop_sync_seconds": noop, "noop_samples": noop_samples,
        "bare_walk_stat_seconds": bare, "bare_samples": bare_samples,
        "noop_ratio_to_bare_walk": noop / bare, "noop_target_ratio": 3.0, "noop_met": noop / bare <= 3.0,
        # Fastest against fastest: the least disturbed sample of each, beside the medians' ratio (the
        # target's statistic) on a machine whose bare walk alone varies by half between samples.
        "noop_ratio_of_fastest": min(noop_samples) / min(bare_samples),
        "git_status_seconds": git_status,
        "edit": {"path": edited_rel, "chunks": len(texts), "sync_seconds": edit_seconds,
                 "sync_report_timings": report.get("timings"),
                 "sync_report_graph_seconds": report.get("graph_seconds"),
                 "pure_embed_seconds": embed_seconds, "pure_embed_samples": embed_samples,
                 "graph_seconds": graph_seconds, "graph_samples": graph_samples,
                 "target_seconds": edit_target, "ratio_to_target": edit_seconds / edit_target,
                 "met": edit_seconds <= edit_target},
    }


def children_cpu() -> float:
    """CPU seconds of this process's reaped children."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


class _CalibrationClock:
    """Wraps the sync's self-calibration (`pinakes.calibration.on_sync.after_sync`, which the engine
    imports when it calls it) and keeps the wall and CPU seconds of its last call."""

    def __init__(self) -> None:
        from pinakes.calibration import on_sync

        real = on_sync.after_sync
        self.wall, self.cpu = 0.0, 0.0

        def after_sync(*args: Any, **kwargs: Any) -> None:
            wall, cpu = time.perf_counter(), time.process_time() + children_cpu()
            try:
                real(*args, **kwargs)
            finally:
                # with the CPU of the child it forks for half its questions (calibration/two_processes.py)
                self.wall, self.cpu = time.perf_counter() - wall, time.process_time() + children_cpu() - cpu

        on_sync.after_sync = after_sync

    def take(self) -> tuple[float, float]:
        taken, self.wall, self.cpu = (self.wall, self.cpu), 0.0, 0.0
        return taken


# What a sync keeps under .pinakes/ (the sidecars stay beside their documents): deleted before each
# cold sample after the first, so every sample is a first sync, its self-calibration included.
SYNC_STATE = ("index.db", "index.db-wal", "index.db-shm", "doit.sqlite", "self-calibration.json")


def bench_cold(cold_docs: int, repeat: int, bare_texts: bool = True) -> dict[str, object]:
    """The in-process pipeline against the model's floor on the same chunks, same process."""
    _import_pinakes()
    from pinakes.sync import SyncOptions
    from pinakes.sync.engine import run_sync

    clock = _CalibrationClock()

    root = WORK / "kbcold"
    files = corpus_files(cold_docs)
    make_kb(root, files)
    started = time.perf_counter()
    subprocess.run([*PNK, "-C", str(root), "sync", "-q", "--sidecars-only"], check=True, capture_output=True)
    mint_seconds = time.perf_counter() - started
    embedder, batch_size = load_real_embedder(root)
    sync_wall: list[float] = []
    sync_cpu: list[float] = []
    embed_wall: list[float] = []
    embed_cpu: list[float] = []
    bare_wall: list[float] = []
    bare_cpu: list[float] = []
    calibration_wall: list[float] = []
    calibration_cpu: list[float] = []
    loads: list[float] = []
    child_cpu: list[float] = []
    timings: list[dict[str, float]] = []
    chunks = 0
    for attempt in range(repeat):
        if attempt:  # a cold index again (the sidecars stay): delete everything the sync keeps
            for name in SYNC_STATE:
                (root / ".pinakes" / name).unlink(missing_ok=True)
            shutil.rmtree(root / ".pinakes" / "cache", ignore_errors=True)
        loadavg = os.getloadavg()[0]
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall, cpu = time.perf_counter(), time.process_time()
        report = run_sync(root, SyncOptions(quiet=True), embedder=embedder)
        sync_wall.append(time.perf_counter() - wall)
        # The sync's CPU counts its children's (the chunk-ahead worker, the calibration's forked asker):
        # work moved to another process is still work this machine did for the sync.
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        child_cpu.append((after.ru_utime - children.ru_utime) + (after.ru_stime - children.ru_stime))
        sync_cpu.append(time.process_time() - cpu + child_cpu[-1])
        assert report.ok and report.indexed == len(files), report.render_text()
        assert not report.sidecars_written, "sidecars should have been minted beforehand"
        calibrated = [note for note in report.notes if note.startswith("confidence self-calibrated")]
        assert calibrated, f"sample {attempt + 1} did not self-calibrate: {report.notes} {report.warnings}"
        seconds, cpu_seconds = clock.take()
        calibration_wall.append(seconds)
        calibration_cpu.append(cpu_seconds)
        loads.append(loadavg)
        timings.append(dict(report.timings))
        # The baseline is the model's own work: every chunk's input as the sync gave it (since #28
        # its context, then its text). The bare chunk texts, shorter, are the pre-#28 baseline,
        # reported beside it for comparison with older runs.
        inputs = stored_model_inputs(root)
        chunks = len(inputs)
        assert chunks == report.chunks_embedded + report.chunks_reused, (chunks, report.chunks_embedded)
        seconds, cpu_seconds = pure_embed(embedder, inputs, batch_size)
        embed_wall.append(seconds)
        embed_cpu.append(cpu_seconds)
        if bare_texts:
            seconds, cpu_seconds = pure_embed(embedder, stored_chunk_texts(root), batch_size)
            bare_wall.append(seconds)
            bare_cpu.append(cpu_seconds)
    sync_s, embed_s = statistics.median(sync_wall), statistics.median(embed_wall)
    sync_c, embed_c = statistics.median(sync_cpu), statistics.median(embed_cpu)
    # Each sample's pipeline alone (the sync less its self-calibration), against the same sample's
    # pure embedding: what the ratio was before #41, and what the calibration adds on top.
    pipeline_wall = [whole - part for whole, part in zip(sync_wall, calibration_wall, strict=True)]
    pipeline_cpu = [whole - part for whole, part in zip(sync_cpu, calibration_cpu, strict=True)]
    result: dict[str, object] = {
        "documents": len(files), "chunks": chunks, "batch_size": batch_size,
        "mint_sidecars_process_seconds": mint_seconds, "load_average_1min": loads,
        "sync_seconds": sync_s, "sync_samples": sync_wall, "sync_cpu_seconds": sync_c,
        "sync_cpu_samples": sync_cpu, "sync_timings": timings, "sync_children_cpu_samples": child_cpu,
        "self_calibration_seconds": statistics.median(calibration_wall), "self_calibration_samples": calibration_wall,
        "self_calibration_cpu_seconds": statistics.median(calibration_cpu),
        "self_calibration_cpu_samples": calibration_cpu,
        "pipeline_seconds": statistics.median(pipeline_wall), "pipeline_cpu_seconds": statistics.median(pipeline_cpu),
        "pipeline_ratio_wall": statistics.median(pipeline_wall) / embed_s,
        "pipeline_ratio_cpu": statistics.median(pipeline_cpu) / embed_c,
        "pure_embed_seconds": embed_s, "pure_embed_samples": embed_wall,
        "pure_embed_cpu_seconds": embed_c, "pure_embed_cpu_samples": embed_cpu,
        # Each sync against the embedding that ran right after it: the ratio a burst of load moves least.
        "paired_ratios_wall": [s / e for s, e in zip(sync_wall, embed_wall, strict=True)],
        "paired_ratios_cpu": [s / e for s, e in zip(sync_cpu, embed_cpu, strict=True)],
        "ratio_wall": sync_s / embed_s, "ratio_cpu": sync_c / embed_c, "target_ratio": 1.15,
        "met_wall": sync_s / embed_s <= 1.15, "met_cpu": sync_c / embed_c <= 1.15}
    if bare_texts:
        bare_s, bare_c = statistics.median(bare_wall), statistics.median(bare_cpu)
        result.update({"bare_texts_embed_seconds": bare_s, "bare_texts_embed_cpu_seconds": bare_c,
                       "ratio_wall_bare_texts": sync_s / bare_s, "ratio_cpu_bare_texts": sync_c / bare_c})
    return result


# -- 4. vectors reused by content ---------------------------------------------------------------------

class _LoadCounter:
    """Wraps the packaged loader (`pinakes.embed.loader.load_embedder`, which the sync's deferral
    recognises by identity) and counts the weights loads; `seconds` is the time they took."""

    def __init__(self) -> None:
        from pinakes.embed import loader

        self.loader, self.real = loader, loader.load_embedder
        self.count, self.seconds, self.cpu_seconds = 0, 0.0, 0.0

        def load(*args: Any, **kwargs: Any) -> object:
            started, cpu = time.perf_counter(), time.process_time()
            try:
                return self.real(*args, **kwargs)
            finally:
                self.count += 1
                self.seconds += time.perf_counter() - started
                self.cpu_seconds += time.process_time() - cpu

        loader.load_embedder = load


def _timed_sync(root: Path, loads: _LoadCounter, **options: Any) -> dict[str, Any]:
    """One in-process sync with no embedder injected: wall seconds, the report's counts, loads."""
    from pinakes.sync import SyncOptions
    from pinakes.sync.engine import run_sync

    before, load_seconds, load_cpu = loads.count, loads.seconds, loads.cpu_seconds
    started, cpu = time.perf_counter(), time.process_time()
    report = run_sync(root, SyncOptions(quiet=True, **options))
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu
    assert report.ok, report.render_text()
    return {"seconds": seconds, "cpu_seconds": cpu_seconds,
            "chunks_embedded": report.chunks_embedded, "chunks_reused": report.chunks_reused,
            "model_loads": loads.count - before, "model_load_seconds": loads.seconds - load_seconds,
            "model_load_cpu_seconds": loads.cpu_seconds - load_cpu,
            "indexed": report.indexed, "vector_reuse": report.vector_reuse}


def _placeholder_model(root: Path) -> FakeEmbedder:
    """The KB's packaged model as the sync sees it before a miss (identity and tokenizer, no weights),
    giving placeholder unit vectors: a starting index whose keys are the real model's, cheaply."""
    from pinakes.embed import loader
    from pinakes.embed.deferred import embedder_for
    from pinakes.manifest import load_manifest
    from tests.fakes import FakeEmbedder

    deferred = embedder_for(load_manifest(root / "pinakes.toml").embedding, offline=None, load=loader.load_embedder)
    fake = FakeEmbedder(dim=deferred.identity.dim)
    fake.identity, fake.max_input_tokens = deferred.identity, deferred.max_input_tokens
    fake.count_tokens = deferred.count_tokens
    fake.count_tokens_batch = deferred.count_tokens_batch
    # The tokenizer itself too, so the starting sync remembers its token counts as a real one does
    # (pipeline/token_counts.py). Not declared on the fake: the pipeline reads it by getattr.
    counter = getattr(deferred, "token_counter", None)  # (None: a snapshot before it)
    fake.token_counter = counter  # pyright: ignore[reportAttributeAccessIssue]  # undeclared on purpose
    return fake


def _fresh_copy(root: Path, suffix: str) -> Path:
    """A copy of the KB at `root`, index included."""
    copy = root.with_name(root.name + suffix)
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(root, copy, symlinks=True)
    return copy


def _both(root: Path, loads: _LoadCounter, change: Callable[[Path], object], repeat: int = 3,
          **options: Any) -> dict[str, Any]:
    """`change(copy)` applied to fresh copies of the KB, then the sync with reuse (`repeat` times,
    each on its own fresh copy: the short side is the one the machine's load moves) and once the sync
    without; medians of wall and process CPU (every thread of this process, the model's included)."""
    samples: list[dict[str, Any]] = []
    for _ in range(repeat):
        copy = _fresh_copy(root, "-reuse")
        change(copy)
        samples.append(_timed_sync(copy, loads, **options))
    reused = dict(samples[-1])
    reused["seconds"] = statistics.median(float(sample["seconds"]) for sample in samples)
    reused["cpu_seconds"] = statistics.median(float(sample["cpu_seconds"]) for sample in samples)
    reused["samples"] = [sample["seconds"] for sample in samples]
    reused["model_load_samples"] = [sample["model_load_seconds"] for sample in samples]
    reused["model_load_cpu_samples"] = [sample["model_load_cpu_seconds"] for sample in samples]
    without = _fresh_copy(root, "-noreuse")
    change(without)
    baseline = _timed_sync(without, loads, no_reuse=True, **options)
    return {"reuse": reused, "no_reuse": baseline,
            "speedup": baseline["seconds"] / reused["seconds"],
            "speedup_cpu": baseline["cpu_seconds"] / reused["cpu_seconds"]}


def _manual_text(limit: int) -> str:
    parts, size = ["# Python: what's new, all releases\n"], 0
    for page in sorted((SHARED / "python-3.11-docs-rst" / "docs" / "whatsnew").glob("*.rst.txt"), reverse=True):
        text = page.read_text(encoding="utf-8")
        parts.append(text)
        size += len(text.encode())
        if size >= limit:
            break
    return "\n\n".join(parts)


def _edit_one_paragraph(path: Path) -> None:
    """Append a sentence to the first long prose paragraph past the middle of the document."""
    text = path.read_text(encoding="utf-8")
    paragraphs = text.split("\n\n")
    middle = len(paragraphs) // 2
    target = next(n for n in range(middle, len(paragraphs))
                  if len(paragraphs[n]) > 300 and not paragraphs[n].startswith((" ", ".."))
                  and paragraphs[n][:1].isalpha())
    paragraphs[target] += " This sentence was added by the reuse benchmark."
    path.write_text("\n\n".join(paragraphs), encoding="utf-8")


def _model_load_as_process(manifest: Path) -> tuple[float, float]:
    """What readying the model costs a fresh process (wall, CPU; medians of 3): importing the
    provider and its runtime, loading the weights and the first call, less a process that starts
    and reads the manifest the same way (the part a no-op process already pays)."""
    read = f"from pinakes.manifest import load_manifest; section = load_manifest({str(manifest)!r}).embedding"
    load = (f"{read}; from pinakes.embed import load_embedder; "
            "load_embedder(section).embed_documents(['warm up the model'], batch_size=section.batch_size)")
    samples: list[tuple[float, float]] = []
    for _ in range(3):
        loaded, bare = _child_run([sys.executable, "-c", load]), _child_run([sys.executable, "-c", read])
        samples.append((loaded[0] - bare[0], loaded[1] - bare[1]))
    return statistics.median(wall for wall, _ in samples), statistics.median(cpu for _, cpu in samples)


def bench_reuse_one_edit(loads: _LoadCounter, edit_bytes: int) -> dict[str, object]:
    from pinakes.index import schema
    from pinakes.manifest import load_manifest
    from pinakes.pipeline.graph import derive_graph
    from pinakes.sync import SyncOptions
    from pinakes.sync.engine import run_sync

    root = WORK / "reuse-edit"
    make_kb(root, [])
    (root / "docs" / "manual.md").write_text(_manual_text(edit_bytes), encoding="utf-8")
    report = run_sync(root, SyncOptions(quiet=True), embedder=_placeholder_model(root))
    assert report.ok, report.render_text()
    before = set(stored_chunk_texts(root, "docs/manual.md"))
    result = _both(root, loads, lambda copy: _edit_one_paragraph(copy / "docs" / "manual.md"))
    after = stored_chunk_texts(root.with_name(root.name + "-reuse"), "docs/manual.md")
    changed = [text for text in after if text not in before]
    # The target's terms (issue #29): no-op + model load (only if needed) + 2 x pure embed of the
    # changed chunks + graph, each measured here.
    noop_sample = _timed_sync(root.with_name(root.name + "-reuse"), loads)
    noop, noop_cpu = float(noop_sample["seconds"]), float(noop_sample["cpu_seconds"])
    # Model load is what readying the model costs once, whatever the number of chunks: the weights
    # (the loads the syncs above counted) and the first call's fixed cost (fastembed's session is
    # rebuilt without ONNX Runtime's memory pattern, provider_fastembed.rebuild_session_for_documents, then
    # runs once). The pure-embed term is timed on a warmed model, so that cost belongs here.
    from pinakes.embed import load_embedder

    batch_size = load_manifest(root / "pinakes.toml").embedding.batch_size
    embedder = load_embedder(load_manifest(root / "pinakes.toml").embedding)
    started, cpu = time.perf_counter(), time.process_time()
    embedder.embed_documents(["warm up the model"], batch_size=batch_size)
    first_call, first_call_cpu = time.perf_counter() - started, time.process_time() - cpu
    # What the sync embedded for them: each changed chunk with its context ahead of it.
    inputs = stored_embedding_inputs(root.with_name(root.name + "-reuse"), "docs/manual.md")
    changed_inputs = [inputs[text] for text in changed]
    pure_samples = [pure_embed(embedder, changed_inputs, batch_size) for _ in range(3)]
    pure = statistics.median(wall for wall, _ in pure_samples)
    pure_cpu = statistics.median(cpu for _, cpu in pure_samples)
    conn = schema.open_writer(root.with_name(root.name + "-reuse") / ".pinakes" / "index.db")
    started, cpu = time.perf_counter(), time.process_time()
    derive_graph(conn, load_manifest(root / "pinakes.toml").kb.id)
    graph, graph_cpu = time.perf_counter() - started, time.process_time() - cpu
    conn.close()
    load_samples = cast("list[float]", result["reuse"]["model_load_samples"])
    model_load = statistics.median(load_samples) + first_call
    target = noop + model_load + 2 * pure + graph
    # The same sum in process CPU time (every thread): on a shared machine the wall terms are taken
    # at different moments under different load; CPU time is the steadier comparison.
    load_cpu_samples = cast("list[float]", result["reuse"]["model_load_cpu_samples"])
    model_load_cpu = statistics.median(load_cpu_samples) + first_call_cpu
    target_cpu = noop_cpu + model_load_cpu + 2 * pure_cpu + graph_cpu
    # The same edit once more as a user runs it: whole `pnk sync` processes (start-up, imports, the
    # doit pipeline), against a no-op process; its model load term is what readying the model
    # costs a fresh process (the runtime's imports, numpy's included, the weights, the first call).
    copy = root.with_name(root.name + "-reuse")
    subprocess.run([*PNK, "-C", str(copy), "sync", "-q"], check=True, capture_output=True)
    noop_runs = [_child_run([*PNK, "-C", str(copy), "sync", "-q"]) for _ in range(3)]
    edit_runs: list[tuple[float, float, str]] = []
    for _ in range(3):  # one more edit each time (the paragraph grows by a sentence)
        _edit_one_paragraph(copy / "docs" / "manual.md")
        edit_runs.append(_child_run([*PNK, "-C", str(copy), "sync", "--json"]))
    noop_process = statistics.median(run[0] for run in noop_runs)
    noop_process_cpu = statistics.median(run[1] for run in noop_runs)
    edit_process = statistics.median(run[0] for run in edit_runs)
    edit_process_cpu = statistics.median(run[1] for run in edit_runs)
    process_report = json.loads(edit_runs[-1][2])
    model_load_process, model_load_process_cpu = _model_load_as_process(root / "pinakes.toml")
    target_process = noop_process + model_load_process + 2 * pure + graph
    target_process_cpu = noop_process_cpu + model_load_process_cpu + 2 * pure_cpu + graph_cpu
    result.update({"document_bytes": (root / "docs" / "manual.md").stat().st_size, "chunks": len(after),
                   "chunks_changed": len(changed), "noop_seconds": noop, "pure_embed_changed_seconds": pure,
                   "graph_seconds": graph, "model_load_seconds": model_load, "first_call_seconds": first_call,
                   "cpu": {"edit": result["reuse"]["cpu_seconds"], "noop": noop_cpu,
                           "model_load": model_load_cpu, "pure_embed_changed": pure_cpu, "graph": graph_cpu,
                           "target": target_cpu,
                           "target_met": result["reuse"]["cpu_seconds"] <= target_cpu},
                   "target_seconds": target,
                   "target_met": result["reuse"]["seconds"] <= target,
                   "process": {"edit_seconds": edit_process, "noop_seconds": noop_process,
                               "edit_samples": [run[0] for run in edit_runs],
                               "chunks_embedded": process_report["chunks_embedded"],
                               "chunks_reused": process_report["chunks_reused"],
                               "model_load_seconds": model_load_process,
                               "target_seconds": target_process, "target_met": edit_process <= target_process,
                               "cpu": {"edit": edit_process_cpu, "noop": noop_process_cpu,
                                       "model_load": model_load_process_cpu, "target": target_process_cpu,
                                       "target_met": edit_process_cpu <= target_process_cpu}}})
    return result


def bench_reuse_extractor_switch(loads: _LoadCounter) -> dict[str, object] | None:
    from pinakes.sync import SyncOptions
    from pinakes.sync.engine import run_sync
    from tests.kb_helpers import older_extractor

    pdf = SHARED / "r-manuals-pdf" / "docs" / "R-data.pdf"
    if not pdf.exists():
        return None
    root = WORK / "reuse-pdf"
    make_kb(root, [(pdf, "docs/R-data.pdf")])
    with older_extractor("pypdfium2"):  # the PDF extracted by the free extractor's previous version
        report = run_sync(root, SyncOptions(quiet=True), embedder=_placeholder_model(root))
    assert report.ok, report.render_text()
    result = _both(root, loads, lambda copy: None)  # today's extractor: a new build key, the same text
    result["chunks"] = len(stored_chunk_texts(root))
    return result


def bench_reuse_demo(loads: _LoadCounter) -> dict[str, object]:
    root = WORK / "reuse-demo"
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(REPO / "tests" / "demo-kb", root, ignore=shutil.ignore_patterns(".pinakes"))
    cold = _timed_sync(root, loads)
    rebuild = _both(root, loads, lambda copy: None, rebuild=True)
    rebuild["cold"] = cold
    rebuild["cold_over_rebuild"] = cold["seconds"] / rebuild["reuse"]["seconds"]
    folder = max((p for p in (root / "docs").iterdir() if p.is_dir()),
                 key=lambda p: sum(f.stat().st_size for f in p.rglob("*") if f.is_file()))

    def duplicate(copy: Path) -> None:
        shutil.copytree(copy / "docs" / folder.name, copy / "docs" / f"{folder.name}-copy",
                        ignore=shutil.ignore_patterns("*.pnk.yaml"))

    duplicated = _both(root, loads, duplicate)
    duplicated["folder"] = f"docs/{folder.name}"
    return {"rebuild": rebuild, "duplicated_folder": duplicated,
            "chunks": len(stored_chunk_texts(root)), "index_bytes": (root / ".pinakes" / "index.db").stat().st_size}


def key_bytes_per_chunk(root: Path) -> dict[str, float | None]:
    """What the text key costs in the index: the column and its index, from SQLite's own page
    accounting (dbstat) when compiled in, else from a VACUUM INTO copy without them."""
    index = root / ".pinakes" / "index.db"
    conn = sqlite3.connect(index)
    chunks = conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0]
    try:
        key_index = conn.execute("SELECT SUM(pgsize) FROM dbstat WHERE name = 'embeddings_text_key'").fetchone()[0]
    except sqlite3.Error:
        key_index = None
    stripped = WORK / "stripped.db"
    stripped.unlink(missing_ok=True)
    conn.execute("VACUUM INTO ?", (str(stripped),))
    conn.close()
    full = stripped.stat().st_size
    copy = sqlite3.connect(stripped)
    copy.execute("DROP INDEX embeddings_text_key")
    copy.execute("UPDATE embeddings SET text_key = NULL")
    copy.commit()
    copy.execute("VACUUM")
    copy.close()
    without = stripped.stat().st_size
    stripped.unlink()
    return {"chunks": chunks, "index_bytes": full, "index_bytes_without_key": without,
            "bytes_per_chunk": (full - without) / chunks,
            "key_index_bytes_per_chunk": (key_index / chunks) if key_index else None}


def bench_reuse(edit_bytes: int, cases: set[str]) -> dict[str, object]:
    _import_pinakes()
    loads = _LoadCounter()
    results: dict[str, object] = {}
    try:
        if "edit" in cases:
            results["one_edit"] = bench_reuse_one_edit(loads, edit_bytes)
        if "pdf" in cases:
            results["extractor_switch"] = bench_reuse_extractor_switch(loads)
        if "demo" in cases:
            results["demo"] = bench_reuse_demo(loads)
            results["key_size"] = key_bytes_per_chunk(WORK / "reuse-demo")
    finally:
        # the packaged loader back (a module attribute _LoadCounter swapped)
        loads.loader.load_embedder = loads.real  # pyright: ignore[reportAttributeAccessIssue]  # restoring the swap
    return results


def _line(name: str, result: dict[str, Any]) -> str:
    reuse, base = result["reuse"], result["no_reuse"]
    return (f"{name}: with reuse {reuse['seconds']:.2f}s ({reuse['chunks_embedded']} embedded, "
            f"{reuse['chunks_reused']} reused, model loaded {reuse['model_loads']}x) vs without "
            f"{base['seconds']:.2f}s ({base['chunks_embedded']} embedded) = {result['speedup']:.1f}x wall, "
            f"{result['speedup_cpu']:.1f}x CPU ({reuse['cpu_seconds']:.2f}s vs {base['cpu_seconds']:.2f}s)")


def print_reuse(reuse: dict[str, Any]) -> None:
    if "one_edit" in reuse:
        _print_one_edit(reuse["one_edit"])
    if reuse.get("extractor_switch") is not None:
        print(_line("PDF switched between extractors, same text", reuse["extractor_switch"]), flush=True)
    if "demo" in reuse:
        _print_demo(reuse)


def _print_one_edit(edit: dict[str, Any]) -> None:
    print(_line(f"one paragraph edited, {edit['document_bytes'] / 1e6:.2f} MB / {edit['chunks']} chunks "
                f"({edit['chunks_changed']} changed)", edit) + " (target >= 20x)", flush=True)
    print(f"  one-edit target: {edit['reuse']['seconds']:.2f}s (samples "
          f"{', '.join(f'{x:.2f}' for x in edit['reuse']['samples'])}) vs no-op {edit['noop_seconds']:.2f}s "
          f"+ model load {edit['model_load_seconds']:.2f}s (weights {edit['model_load_seconds'] - edit['first_call_seconds']:.2f}s "
          f"+ first call {edit['first_call_seconds']:.2f}s) + 2 x pure embed {edit['pure_embed_changed_seconds']:.3f}s "
          f"+ graph {edit['graph_seconds']:.3f}s = {edit['target_seconds']:.2f}s: "
          f"{edit['reuse']['seconds'] / edit['target_seconds']:.2f}x the target, "
          f"{'met' if edit['target_met'] else 'NOT met'} (in this process)", flush=True)
    cpu = edit["cpu"]
    print(f"  in CPU time: {cpu['edit']:.2f}s vs no-op {cpu['noop']:.2f}s + model load {cpu['model_load']:.2f}s "
          f"+ 2 x pure embed {cpu['pure_embed_changed']:.3f}s + graph {cpu['graph']:.3f}s = {cpu['target']:.2f}s: "
          f"{cpu['edit'] / cpu['target']:.2f}x the target, {'met' if cpu['target_met'] else 'NOT met'}", flush=True)
    process = edit["process"]
    print(f"  as processes: `pnk sync` after one more edit {process['edit_seconds']:.2f}s "
          f"({process['chunks_embedded']} embedded, {process['chunks_reused']} reused) vs no-op process "
          f"{process['noop_seconds']:.2f}s + model load {process['model_load_seconds']:.2f}s + 2 x pure embed + graph "
          f"= {process['target_seconds']:.2f}s: {process['edit_seconds'] / process['target_seconds']:.2f}x the target, "
          f"{'met' if process['target_met'] else 'NOT met'} (median of 3 edits: "
          f"{', '.join(f'{x:.2f}' for x in process['edit_samples'])})", flush=True)
    pcpu = process["cpu"]
    print(f"  as processes, in CPU time: {pcpu['edit']:.2f}s vs no-op {pcpu['noop']:.2f}s + model load "
          f"{pcpu['model_load']:.2f}s + 2 x pure embed + graph = {pcpu['target']:.2f}s: "
          f"{pcpu['edit'] / pcpu['target']:.2f}x the target, {'met' if pcpu['target_met'] else 'NOT met'}",
          flush=True)


def _print_demo(reuse: dict[str, Any]) -> None:
    demo = reuse["demo"]
    rebuild = demo["rebuild"]
    print(_line("--rebuild of the demo KB, same model", rebuild) +
          f"; cold sync {rebuild['cold']['seconds']:.2f}s = {rebuild['cold_over_rebuild']:.1f}x the rebuild "
          "(target >= 5x)", flush=True)
    print(_line(f"duplicated folder {demo['duplicated_folder']['folder']}", demo["duplicated_folder"]), flush=True)
    size = reuse["key_size"]
    print(f"text key: {size['bytes_per_chunk']:.1f} bytes per chunk in the index ({size['index_bytes']} bytes "
          f"with, {size['index_bytes_without_key']} without, {size['chunks']} vectors)", flush=True)


def print_cold(cold: dict[str, Any]) -> None:
    def listed(key: str) -> str:
        return " / ".join(f"{value:.{3 if key.startswith('paired') else 1}f}" for value in cold[key])

    print(f"cold sync in-process, {cold['documents']} docs / {cold['chunks']} chunks, every sample with its "
          f"self-calibration: {cold['sync_seconds']:.1f}s wall ({cold['sync_cpu_seconds']:.1f}s CPU) vs pure embed "
          f"of the model's inputs for the same chunks {cold['pure_embed_seconds']:.1f}s wall "
          f"({cold['pure_embed_cpu_seconds']:.1f}s CPU) = {cold['ratio_wall']:.3f}x wall, {cold['ratio_cpu']:.3f}x CPU "
          f"(target <= 1.15x: {'met' if cold['met_wall'] else 'NOT met'} wall, "
          f"{'met' if cold['met_cpu'] else 'NOT met'} CPU)", flush=True)
    print(f"  samples: sync {listed('sync_samples')} s wall, {listed('sync_cpu_samples')} s CPU; pure embed "
          f"{listed('pure_embed_samples')} s wall, {listed('pure_embed_cpu_samples')} s CPU; paired ratios "
          f"{listed('paired_ratios_wall')} wall, {listed('paired_ratios_cpu')} CPU; load {listed('load_average_1min')}; "
          f"the sync's CPU includes its child processes' (the chunk-ahead worker, the self-calibration's forked asker): {listed('sync_children_cpu_samples')} s")
    print(f"  of which self-calibration {listed('self_calibration_samples')} s wall, "
          f"{listed('self_calibration_cpu_samples')} s CPU; the pipeline alone {cold['pipeline_ratio_wall']:.3f}x wall, "
          f"{cold['pipeline_ratio_cpu']:.3f}x CPU; minting the sidecars beforehand (process) took "
          f"{cold['mint_sidecars_process_seconds']:.1f}s", flush=True)
    if "ratio_wall_bare_texts" in cold:
        print(f"  against the bare chunk texts (no context, the pre-#28 baseline) {cold['ratio_wall_bare_texts']:.3f}x "
              f"wall, {cold['ratio_cpu_bare_texts']:.3f}x CPU", flush=True)


def bench_cold_against(base: str, cold_docs: int, repeat: int) -> dict[str, object]:
    """The cold benchmark of `base` and of the working tree, one sample a child process, taking turns."""
    from compare_noop import snapshot  # this script's folder is first on sys.path

    versions = {base: snapshot(base, WORK / f"cold-base-{os.getpid()}"),
                "working tree": snapshot(None, WORK / f"cold-head-{os.getpid()}")}
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in versions}
    out = WORK / f"cold-sample-{os.getpid()}.json"
    for _ in range(repeat):
        for name, source in versions.items():
            env = {**os.environ, "PNK_BENCH_SNAPSHOT": str(source), "PYTHONPATH": ""}
            subprocess.run([sys.executable, __file__, "--skip-noop", "--skip-reuse", "--skip-bare-texts",
                            "--cold-repeat", "1", "--cold-docs", str(cold_docs), "--results", str(out)],
                           check=True, capture_output=True, env=env)
            samples[name].append(json.loads(out.read_text(encoding="utf-8"))["cold"])
            (WORK / f"cold-samples-{os.getpid()}.json").write_text(json.dumps(samples), encoding="utf-8")  # so far
    for source in versions.values():
        shutil.rmtree(source, ignore_errors=True)
    result: dict[str, object] = {"base": base, "repeat": repeat}
    for name, runs in samples.items():
        def values(key: str, runs: list[dict[str, Any]] = runs) -> list[float]:
            return [float(run[key]) for run in runs]

        result[name] = {key: values(key) for key in (
            "sync_seconds", "sync_cpu_seconds", "pure_embed_seconds", "pure_embed_cpu_seconds",
            "self_calibration_seconds", "self_calibration_cpu_seconds", "ratio_wall", "ratio_cpu",
            "pipeline_ratio_wall", "pipeline_ratio_cpu")} | {"load_average_1min": [run["load_average_1min"][0] for run in runs],
                                                             "chunks": runs[0]["chunks"]}
    return result


def print_cold_against(compared: dict[str, Any]) -> None:
    base = str(compared["base"])
    head: dict[str, list[float]] = compared["working tree"]
    for name in (base, "working tree"):
        runs: dict[str, list[float]] = compared[name]

        def listed(key: str, runs: dict[str, list[float]] = runs) -> str:
            return " / ".join(f"{value:.3f}" for value in runs[key])

        print(f"{name}: cold sync {statistics.median(runs['ratio_wall']):.3f}x wall, "
              f"{statistics.median(runs['ratio_cpu']):.3f}x CPU of pure embedding (medians of each sample's ratio: "
              f"{listed('ratio_wall')} wall, {listed('ratio_cpu')} CPU); self-calibration "
              f"{listed('self_calibration_seconds')} s wall, {listed('self_calibration_cpu_seconds')} s CPU; "
              f"pipeline alone {statistics.median(runs['pipeline_ratio_wall']):.3f}x wall, "
              f"{statistics.median(runs['pipeline_ratio_cpu']):.3f}x CPU; load {listed('load_average_1min')}", flush=True)
    base_runs: dict[str, list[float]] = compared[base]
    for key, what in (("self_calibration_cpu_seconds", "self-calibration CPU"),
                      ("self_calibration_seconds", "self-calibration wall"), ("ratio_cpu", "cold sync ratio, CPU"),
                      ("ratio_wall", "cold sync ratio, wall")):
        pairs = [h / b for h, b in zip(head[key], base_runs[key], strict=True) if b]
        print(f"working tree / {base}, {what}, turn by turn: {' / '.join(f'{pair:.3f}' for pair in pairs)} "
              f"(median {statistics.median(pairs):.3f})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--cold-docs", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cold-repeat", type=int, default=2)
    parser.add_argument("--skip-bare-texts", action="store_true",
                        help="cold sync: leave out the pre-#28 baseline (embedding the bare chunk texts)")
    parser.add_argument("--skip-noop", action="store_true", help="only the cold benchmark")
    parser.add_argument("--skip-cold", action="store_true", help="only the no-op and edit benchmarks")
    parser.add_argument("--skip-reuse", action="store_true", help="leave out the vector-reuse scenarios (4)")
    parser.add_argument("--only-reuse", action="store_true", help="only the vector-reuse scenarios (4)")
    parser.add_argument("--edit-bytes", type=int, default=620_000,
                        help="size of the one-edit document of (4): ~1,000 chunks at the default chunking")
    parser.add_argument("--base", default=None,
                        help="cold benchmark: this git revision and the working tree, taking turns (see above)")
    parser.add_argument("--results", type=Path, default=REPO / "bench" / "results" / "sync.json")
    parser.add_argument("--reuse-cases", default="edit,pdf,demo",
                        help="which scenarios of (4) to run, comma-separated: edit, pdf, demo")
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    source = freeze_source()
    print(f"source: {source}", flush=True)
    results: dict[str, object] = {"date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "source": source,
                                  "machine": f"{os.cpu_count()} cores, Python {sys.version.split()[0]}"}
    if not args.skip_reuse:
        reuse = bench_reuse(args.edit_bytes, set(args.reuse_cases.split(",")))
        results["reuse"] = reuse
        print_reuse(reuse)
    if args.only_reuse:
        args.skip_cold = args.skip_noop = True
    if not args.skip_cold and args.base:
        compared = bench_cold_against(args.base, args.cold_docs, args.cold_repeat)
        results["cold_against"] = compared
        print_cold_against(compared)
    elif not args.skip_cold:
        cold = bench_cold(args.cold_docs, args.cold_repeat, bare_texts=not args.skip_bare_texts)
        results["cold"] = cold
        print_cold(cold)
    if not args.skip_noop:
        noop = bench_noop_and_edit(args.docs, args.repeat)
        results["noop_and_edit"] = noop
        print(f"no-op sync, {noop['documents']} docs: {noop['noop_sync_seconds']:.3f}s vs bare walk+stat "
              f"{noop['bare_walk_stat_seconds']:.3f}s = {noop['noop_ratio_to_bare_walk']:.2f}x (target <= 3x: "
              f"{'met' if noop['noop_met'] else 'NOT met'}; fastest against fastest "
              f"{noop['noop_ratio_of_fastest']:.2f}x); git status {noop['git_status_seconds']:.3f}s")
        edit = noop["edit"]
        print(f"one edit ({edit['chunks']} chunk(s)): pnk sync process {edit['sync_seconds']:.2f}s vs target "
              f"{edit['target_seconds']:.2f}s (no-op {noop['noop_sync_seconds']:.3f}s + 2 x pure embed "
              f"{edit['pure_embed_seconds'] * 1000:.1f}ms + graph {edit['graph_seconds']:.3f}s) = "
              f"{edit['ratio_to_target']:.2f}x: {'met' if edit['met'] else 'NOT met'}")
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(results, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
