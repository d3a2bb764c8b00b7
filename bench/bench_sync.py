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
   steadier figure). Sidecars are minted first by `pnk sync --sidecars-only` (a process, timed
   separately), as in a fresh clone or before --rebuild. With --cold-repeat > 1 the index is
   deleted and the sync and the embedding are re-run, interleaved; medians are reported.

The 10k-document index for (1) and (2) is built once with the test suite's fake embedder (vectors do
not matter to a no-op; the edit re-embeds one document with the real model). Results go to
bench/results/sync.json. Scaling and memory: bench/bench_sync_scaling.py, bench/bench_sync_memory.py.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

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
    """Run this benchmark against a snapshot of src/pinakes taken now, in this process and in every
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
    digest = hashlib.sha256()
    for path in sorted((snapshot / "pinakes").rglob("*.py")):
        digest.update(path.relative_to(snapshot).as_posix().encode() + b"\0" + path.read_bytes())
    sys.path.insert(0, str(snapshot))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(snapshot), os.environ.get("PYTHONPATH")]))

    def git(*argv: str) -> str:
        return subprocess.run(["git", *argv], cwd=REPO, capture_output=True, text=True).stdout.strip()

    return {"commit": git("log", "--oneline", "-1")[:100], "reused_snapshot": bool(reuse), "uncommitted_src": git("status", "--short", "src"),
            "snapshot": str(snapshot), "snapshot_sha256": digest.hexdigest()[:16]}


def timed(cmd: list[str], repeat: int, **kwargs: object) -> tuple[float, list[float]]:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, **kwargs)  # type: ignore[call-overload]
        samples.append(time.perf_counter() - started)
    return statistics.median(samples), samples


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


def load_real_embedder(root: Path) -> tuple[object, int]:
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


def pure_embed(embedder: object, texts: list[str], batch_size: int) -> tuple[float, float]:
    """(wall, process CPU) seconds of embed_documents over `texts`."""
    wall, cpu = time.perf_counter(), time.process_time()
    embedder.embed_documents(texts, batch_size=batch_size)  # type: ignore[attr-defined]
    return time.perf_counter() - wall, time.process_time() - cpu


def bench_noop_and_edit(docs: int, repeat: int) -> dict[str, object]:
    root = WORK / "kb10k"
    files = corpus_files(docs)
    make_kb(root, files)
    build_seconds = build_with_fake_embedder(root)
    subprocess.run([*PNK, "-C", str(root), "sync", "-q"], check=True)  # settle the walk cache
    noop, noop_samples = timed([*PNK, "-C", str(root), "sync", "-q"], repeat)
    bare, bare_samples = timed([sys.executable, "-c", BARE_WALK, str(root / "docs")], repeat)
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
    graph_samples = []
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
        "git_status_seconds": git_status,
        "edit": {"path": edited_rel, "chunks": len(texts), "sync_seconds": edit_seconds,
                 "sync_report_timings": report.get("timings"),
                 "sync_report_graph_seconds": report.get("graph_seconds"),
                 "pure_embed_seconds": embed_seconds, "pure_embed_samples": embed_samples,
                 "graph_seconds": graph_seconds, "graph_samples": graph_samples,
                 "target_seconds": edit_target, "ratio_to_target": edit_seconds / edit_target,
                 "met": edit_seconds <= edit_target},
    }


def bench_cold(cold_docs: int, repeat: int) -> dict[str, object]:
    """The in-process pipeline against the model's floor on the same chunks, same process."""
    _import_pinakes()
    from pinakes.sync import SyncOptions
    from pinakes.sync.engine import run_sync

    root = WORK / "kbcold"
    files = corpus_files(cold_docs)
    make_kb(root, files)
    started = time.perf_counter()
    subprocess.run([*PNK, "-C", str(root), "sync", "-q", "--sidecars-only"], check=True, capture_output=True)
    mint_seconds = time.perf_counter() - started
    embedder, batch_size = load_real_embedder(root)
    sync_wall, sync_cpu, embed_wall, embed_cpu = [], [], [], []
    timings: list[dict[str, float]] = []
    chunks = 0
    for attempt in range(repeat):
        if attempt:  # a cold index again (the sidecars stay): delete everything the sync keeps
            for name in ("index.db", "index.db-wal", "index.db-shm", "doit.sqlite"):
                (root / ".pinakes" / name).unlink(missing_ok=True)
            shutil.rmtree(root / ".pinakes" / "cache", ignore_errors=True)
        wall, cpu = time.perf_counter(), time.process_time()
        report = run_sync(root, SyncOptions(quiet=True), embedder=embedder)  # type: ignore[arg-type]
        sync_wall.append(time.perf_counter() - wall)
        sync_cpu.append(time.process_time() - cpu)
        assert report.ok and report.indexed == len(files), report.render_text()
        assert not report.sidecars_written, "sidecars should have been minted beforehand"
        timings.append(dict(report.timings))
        texts = stored_chunk_texts(root)
        chunks = len(texts)
        assert chunks == report.chunks_embedded, (chunks, report.chunks_embedded)
        seconds, cpu_seconds = pure_embed(embedder, texts, batch_size)
        embed_wall.append(seconds)
        embed_cpu.append(cpu_seconds)
    sync_s, embed_s = statistics.median(sync_wall), statistics.median(embed_wall)
    sync_c, embed_c = statistics.median(sync_cpu), statistics.median(embed_cpu)
    return {"documents": len(files), "chunks": chunks, "batch_size": batch_size,
            "mint_sidecars_process_seconds": mint_seconds,
            "sync_seconds": sync_s, "sync_samples": sync_wall, "sync_cpu_seconds": sync_c,
            "sync_cpu_samples": sync_cpu, "sync_timings": timings,
            "pure_embed_seconds": embed_s, "pure_embed_samples": embed_wall,
            "pure_embed_cpu_seconds": embed_c, "pure_embed_cpu_samples": embed_cpu,
            "ratio_wall": sync_s / embed_s, "ratio_cpu": sync_c / embed_c, "target_ratio": 1.15,
            "met_wall": sync_s / embed_s <= 1.15, "met_cpu": sync_c / embed_c <= 1.15}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--cold-docs", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cold-repeat", type=int, default=2)
    parser.add_argument("--skip-noop", action="store_true", help="only the cold benchmark")
    parser.add_argument("--skip-cold", action="store_true", help="only the no-op and edit benchmarks")
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    source = freeze_source()
    print(f"source: {source}", flush=True)
    results: dict[str, object] = {"date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "source": source,
                                  "machine": f"{os.cpu_count()} cores, Python {sys.version.split()[0]}"}
    if not args.skip_cold:
        cold = bench_cold(args.cold_docs, args.cold_repeat)
        results["cold"] = cold
        print(f"cold sync in-process, {cold['documents']} docs / {cold['chunks']} chunks: "
              f"{cold['sync_seconds']:.1f}s wall ({cold['sync_cpu_seconds']:.1f}s CPU) vs pure embed of the "
              f"same chunks {cold['pure_embed_seconds']:.1f}s wall ({cold['pure_embed_cpu_seconds']:.1f}s CPU) "
              f"= {cold['ratio_wall']:.3f}x wall, {cold['ratio_cpu']:.3f}x CPU (target <= 1.15x: "
              f"{'met' if cold['met_wall'] else 'NOT met'} wall, {'met' if cold['met_cpu'] else 'NOT met'} CPU); "
              f"minting the sidecars beforehand (process) took {cold['mint_sidecars_process_seconds']:.1f}s",
              flush=True)
    if not args.skip_noop:
        noop = bench_noop_and_edit(args.docs, args.repeat)
        results["noop_and_edit"] = noop
        print(f"no-op sync, {noop['documents']} docs: {noop['noop_sync_seconds']:.3f}s vs bare walk+stat "
              f"{noop['bare_walk_stat_seconds']:.3f}s = {noop['noop_ratio_to_bare_walk']:.2f}x (target <= 3x: "
              f"{'met' if noop['noop_met'] else 'NOT met'}); git status {noop['git_status_seconds']}")
        edit = noop["edit"]
        print(f"one edit ({edit['chunks']} chunk(s)): pnk sync process {edit['sync_seconds']:.2f}s vs target "
              f"{edit['target_seconds']:.2f}s (no-op {noop['noop_sync_seconds']:.3f}s + 2 x pure embed "
              f"{edit['pure_embed_seconds'] * 1000:.1f}ms + graph {edit['graph_seconds']:.3f}s) = "
              f"{edit['ratio_to_target']:.2f}x: {'met' if edit['met'] else 'NOT met'}")
    out_dir = REPO / "bench" / "results"
    out_dir.mkdir(exist_ok=True)
    (out_dir / "sync.json").write_text(json.dumps(results, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
