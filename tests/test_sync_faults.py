"""Kill -9 at every named point of sync and of --rebuild, then sync again: nothing lost, index
consistent. Each run is a fresh subprocess (with the fake embedder) that SIGKILLs itself at the
point named by PNK_FAULT."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from pinakes.init import init_kb
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.heavy  # ~20 s of subprocesses; runs in CI

SYNC_POINTS = ["sync.after-walk", "sync.after-sidecar-write", "sync.after-delete",
               "sync.mid-document-write", "sync.after-document-write", "sync.before-graph"]
REBUILD_POINTS = ["sync.rebuild-created", "sync.mid-document-write", "sync.before-swap", "sync.after-swap"]

SCRIPT = """
import sys
sys.path.insert(0, {repo!r})
from tests.fakes import FakeEmbedder
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
report = run_sync({kb!r}, SyncOptions(rebuild={rebuild}), embedder=FakeEmbedder())
sys.exit(0 if report.ok else 1)
"""


def run(kb: Path, *, rebuild: bool = False, fault: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ}
    env.pop("PNK_FAULT", None)
    if fault:
        env["PNK_FAULT"] = fault
    code = SCRIPT.format(repo=str(REPO_ROOT), kb=str(kb), rebuild=rebuild)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


def sidecar_ids(kb: Path) -> dict[str, str]:
    ids: dict[str, str] = {}
    for sidecar in (kb / "docs").rglob("*.pnk.yaml"):
        for line in sidecar.read_text(encoding="utf-8").splitlines():
            if line.startswith("id: "):
                ids[sidecar.relative_to(kb).as_posix()] = line[4:].strip()
    return ids


def check_consistent(kb: Path) -> None:
    conn = sqlite3.connect(kb / ".pinakes" / "index.db")
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        active = dict(conn.execute("SELECT path, id FROM documents WHERE state = 'active'"))
        on_disk = {p.relative_to(kb).as_posix() for p in (kb / "docs").rglob("*.md")}
        assert set(active) == on_disk
        for path, doc_id in active.items():
            assert sidecar_ids(kb)[path + ".pnk.yaml"] == doc_id
            chunks = conn.execute("SELECT COUNT(*) FROM chunks WHERE doc_id = ?", (doc_id,)).fetchone()[0]
            vectors = conn.execute("SELECT COUNT(*) FROM embeddings e JOIN chunks c ON c.id = e.chunk_id "
                                   "WHERE c.doc_id = ?", (doc_id,)).fetchone()[0]
            assert chunks > 0 and vectors == chunks
        fts = conn.execute("SELECT COUNT(*) FROM chunks_fts").fetchone()[0]
        assert fts == conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    finally:
        conn.close()


@pytest.fixture
def synced_kb(tmp_path: Path) -> Path:
    kb = tmp_path / "kb"
    init_kb(kb, name="faults")
    for name in ("keep", "edit", "remove"):
        (kb / "docs" / f"{name}.md").write_text(f"# {name}\n\nSome text about {name}.\n", encoding="utf-8")
    assert run(kb).returncode == 0
    (kb / "docs/edit.md").write_text("# edit\n\nEdited text.\n", encoding="utf-8")
    (kb / "docs/remove.md").unlink()
    (kb / "docs/remove.md.pnk.yaml").unlink()
    (kb / "docs/new.md").write_text("# new\n\nA new document.\n", encoding="utf-8")
    return kb


@pytest.mark.parametrize("point", SYNC_POINTS)
def test_kill_during_sync_then_resync_is_consistent(synced_kb: Path, point: str) -> None:
    ids_before = sidecar_ids(synced_kb)
    killed = run(synced_kb, fault=point)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    ids_after_crash = sidecar_ids(synced_kb)
    assert all(ids_after_crash[path] == doc_id for path, doc_id in ids_before.items())
    again = run(synced_kb)
    assert again.returncode == 0, again.stderr
    assert all(sidecar_ids(synced_kb)[path] == doc_id for path, doc_id in ids_after_crash.items())
    check_consistent(synced_kb)


@pytest.mark.parametrize("point", REBUILD_POINTS)
def test_kill_during_rebuild_leaves_the_old_or_the_new_index(synced_kb: Path, point: str) -> None:
    assert run(synced_kb).returncode == 0
    ids = sidecar_ids(synced_kb)
    killed = run(synced_kb, rebuild=True, fault=point)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    check_consistent(synced_kb)  # whichever generation is live is whole
    assert run(synced_kb, rebuild=True).returncode == 0
    check_consistent(synced_kb)
    assert sidecar_ids(synced_kb) == ids


@pytest.mark.parametrize("point", [*REBUILD_POINTS, "sync.after-sidecar-write"])
def test_a_killed_rebuild_after_a_rename_without_sidecar_keeps_every_id(synced_kb: Path, point: str) -> None:
    assert run(synced_kb).returncode == 0
    ids = set(sidecar_ids(synced_kb).values())
    (synced_kb / "docs/keep.md").rename(synced_kb / "docs/kept-elsewhere.md")  # the sidecar stays behind
    killed = run(synced_kb, rebuild=True, fault=point)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert set(sidecar_ids(synced_kb).values()) == ids  # moved or not yet, never re-minted
    assert run(synced_kb).returncode == 0
    check_consistent(synced_kb)
    assert set(sidecar_ids(synced_kb).values()) == ids
    assert "docs/kept-elsewhere.md.pnk.yaml" in sidecar_ids(synced_kb)
