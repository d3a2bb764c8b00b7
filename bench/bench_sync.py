"""Sync benchmarks (issue: sync as a build system). One command:

    python bench/bench_sync.py [--docs 10000] [--cold-docs 300] [--repeat 5]

Each number is printed next to a baseline measured in the same run:

1. no-op `pnk sync` of a ~10k-document KB (whole process) vs a bare Python process that walks and
   stats the same tree (target <= 3x); `git status` on the same tree for reference.
2. one edited document: `pnk sync` (whole process, real model) vs no-op + 2x that document's embed
   time (a fresh process loading the model and embedding the document's chunks) + graph derivation.
3. cold sync of a smaller KB with the real model vs the embedding-only time of the same chunks in the
   same process setup (the model's floor): target pipeline overhead <= 15%. Sidecars are minted
   first (`--sidecars-only`, timed separately), as they are in a fresh clone or before --rebuild.

The 10k-document index for (1) and (2) is built once with the test suite's fake embedder (vectors do
not matter to a no-op); (3) uses the real default model. Results go to bench/results/ as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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

EMBED_ONLY = """
import sys, json, time
sys.path.insert(0, {repo!r})
from pathlib import Path
from pinakes.manifest import load_manifest
from pinakes.embed import load_embedder
from pinakes.extract.text import extract
from pinakes.extract.source_types import source_type_for
from pinakes.chunking import chunk_text
kb = Path({kb!r}); manifest = load_manifest(kb / "pinakes.toml")
paths = json.loads({paths!r})
embedder = load_embedder(manifest.embedding)
texts = []
for rel in paths:
    st = source_type_for(rel); ex = extract(kb / rel, st)
    c = manifest.chunking
    texts += [ch.text for ch in chunk_text(ex.text, st, max_tokens=c.max_tokens, overlap=c.overlap,
              headings=c.headings, count_tokens=embedder.count_tokens, pages=ex.pages)]
started = time.perf_counter()
embedder.embed_documents(texts, batch_size=manifest.embedding.batch_size)
print(json.dumps({{"chunks": len(texts), "embed_seconds": time.perf_counter() - started}}))
"""


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


def build_with_fake_embedder(root: Path) -> float:
    sys.path.insert(0, str(REPO))
    from pinakes.sync.context import SyncOptions
    from pinakes.sync.engine import run_sync
    from tests.fakes import FakeEmbedder

    started = time.perf_counter()
    report = run_sync(root, SyncOptions(quiet=True), embedder=FakeEmbedder())
    assert report.ok, report.render_text()
    return time.perf_counter() - started


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

    # One edited document, real model.
    edited_rel = files[len(files) // 2][1]
    edited = root / edited_rel
    edited.write_text(edited.read_text(encoding="utf-8") + "\n- An added example line for the benchmark.\n",
                      encoding="utf-8")
    started = time.perf_counter()
    out = subprocess.run([*PNK, "-C", str(root), "sync", "--json"], check=True, capture_output=True, text=True)
    edit_seconds = time.perf_counter() - started
    report = json.loads(out.stdout)
    started = time.perf_counter()
    embed_only = json.loads(subprocess.run(
        [sys.executable, "-c", EMBED_ONLY.format(repo=str(REPO), kb=str(root), paths=json.dumps([edited_rel]))],
        check=True, capture_output=True, text=True).stdout)
    embed_process_seconds = time.perf_counter() - started
    graph_seconds = report.get("graph_seconds") or 0.0
    edit_target = noop + 2 * embed_process_seconds + graph_seconds
    return {
        "documents": len(files), "initial_build_seconds_fake_embedder": build_seconds,
        "noop_sync_seconds": noop, "noop_samples": noop_samples,
        "bare_walk_stat_seconds": bare, "bare_samples": bare_samples,
        "noop_ratio_to_bare_walk": noop / bare, "noop_target_ratio": 3.0,
        "git_status_seconds": git_status,
        "edit": {"path": edited_rel, "sync_seconds": edit_seconds,
                 "embed_process_seconds": embed_process_seconds,
                 "embed_only_seconds": embed_only["embed_seconds"], "chunks": embed_only["chunks"],
                 "graph_seconds": graph_seconds, "target_seconds": edit_target,
                 "met": edit_seconds <= edit_target},
    }


def bench_cold(cold_docs: int) -> dict[str, object]:
    """The pipeline against the model's floor. Minting sidecars (a fresh document's first sync, two
    fsyncs each) is timed on its own first, so the comparison is the index pipeline's; a fresh clone
    or a --rebuild starts from committed sidecars exactly like this."""
    root = WORK / "kbcold"
    files = corpus_files(cold_docs)
    make_kb(root, files)
    started = time.perf_counter()
    subprocess.run([*PNK, "-C", str(root), "sync", "-q", "--sidecars-only"], check=True, capture_output=True)
    mint_seconds = time.perf_counter() - started
    started = time.perf_counter()
    subprocess.run([*PNK, "-C", str(root), "sync", "-q"], check=True, capture_output=True)
    sync_seconds = time.perf_counter() - started
    rels = [rel for _, rel in files]
    started = time.perf_counter()
    floor = json.loads(subprocess.run(
        [sys.executable, "-c", EMBED_ONLY.format(repo=str(REPO), kb=str(root), paths=json.dumps(rels))],
        check=True, capture_output=True, text=True).stdout)
    floor_process_seconds = time.perf_counter() - started
    return {"documents": len(files), "chunks": floor["chunks"], "mint_sidecars_seconds": mint_seconds,
            "sync_seconds": sync_seconds,
            "embed_only_seconds": floor["embed_seconds"], "embed_process_seconds": floor_process_seconds,
            "overhead_vs_embed_process": sync_seconds / floor_process_seconds - 1,
            "overhead_vs_embed_only": sync_seconds / floor["embed_seconds"] - 1, "target_overhead": 0.15}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--cold-docs", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    results = {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": f"{os.cpu_count()} cores, Python "
               f"{sys.version.split()[0]}", "noop_and_edit": bench_noop_and_edit(args.docs, args.repeat),
               "cold": bench_cold(args.cold_docs)}
    out_dir = REPO / "bench" / "results"
    out_dir.mkdir(exist_ok=True)
    (out_dir / "sync.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    noop = results["noop_and_edit"]
    cold = results["cold"]
    print(f"no-op sync, {noop['documents']} docs: {noop['noop_sync_seconds']:.3f}s vs bare walk+stat "
          f"{noop['bare_walk_stat_seconds']:.3f}s = {noop['noop_ratio_to_bare_walk']:.2f}x (target <= 3x); "
          f"git status {noop['git_status_seconds']}")
    edit = noop["edit"]
    print(f"one edit: {edit['sync_seconds']:.2f}s vs target {edit['target_seconds']:.2f}s (no-op + 2 x "
          f"{edit['embed_process_seconds']:.2f}s embed process + graph {edit['graph_seconds']:.3f}s): "
          f"{'met' if edit['met'] else 'NOT met'}")
    print(f"cold sync, {cold['documents']} docs / {cold['chunks']} chunks: {cold['sync_seconds']:.1f}s vs "
          f"embed-only process {cold['embed_process_seconds']:.1f}s = overhead "
          f"{cold['overhead_vs_embed_process']:+.1%} (target <= 15%); vs pure embed time "
          f"{cold['embed_only_seconds']:.1f}s = {cold['overhead_vs_embed_only']:+.1%}; minting the "
          f"{cold['documents']} sidecars beforehand took {cold['mint_sidecars_seconds']:.1f}s")


if __name__ == "__main__":
    main()
