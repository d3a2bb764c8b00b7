"""The settled mark (`pinakes.pipeline.settled`): a no-op sync of a settled index skips pairing, and
nothing that could make the mark false survives with it."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from pinakes.init import init_kb
from pinakes.pipeline import pair
from pinakes.pipeline.report import SyncReport
from pinakes.pipeline.settled import META_KEY
from pinakes.sources import walk
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.conftest import REPO_ROOT
from tests.fakes import FakeEmbedder


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    init_kb(root, name="test")
    docs = root / "docs"
    docs.mkdir(exist_ok=True)
    (docs / "alpha.md").write_text("# Alpha\n\nAeroplanes and wings.\n", encoding="utf-8")
    (docs / "beta.md").write_text("# Beta\n\nBoats and harbours.\n", encoding="utf-8")
    return root


def sync(root: Path, **options: object) -> SyncReport:
    return run_sync(root, SyncOptions(**options), embedder=FakeEmbedder())  # type: ignore[arg-type]


def settled_mark(root: Path) -> str | None:
    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (META_KEY,)).fetchone()
    finally:
        conn.close()
    return row[0] if row else None


def indexed_hash(root: Path, path: str) -> str:
    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    try:
        return conn.execute("SELECT content_hash FROM documents WHERE path = ? AND state = 'active'",
                            (path,)).fetchone()[0]
    finally:
        conn.close()


def forbid_pairing(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: object) -> object:
        raise AssertionError("pairing ran although the index is settled")

    monkeypatch.setattr(pair, "compute_plan", refuse)


@pytest.fixture(autouse=True)
def no_racy_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Trust a stat from the instant the previous walk started, instead of 2 s before it: the files
    a sync writes (sidecars) are then hashed once more by the next sync only, not for 2 s."""
    monkeypatch.setattr(walk, "RACY_WINDOW_NS", 0)


def settle(root: Path) -> None:
    """Sync until a walk hashes nothing: the second sync re-hashes the sidecars the first wrote."""
    assert sync(root).ok
    assert sync(root).ok
    assert sync(root).files_hashed == 0


def test_a_complete_sync_settles_and_the_next_noop_skips_pairing(kb: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    settle(kb)
    assert settled_mark(kb) is not None
    index_bytes = (kb / ".pinakes" / "index.db").read_bytes()
    forbid_pairing(monkeypatch)
    again = sync(kb)
    assert again.ok and again.unchanged == 2 and again.indexed == 0
    assert (kb / ".pinakes" / "index.db").read_bytes() == index_bytes  # a no-op writes nothing


def test_an_edit_is_paired_and_indexed_although_the_index_was_settled(kb: Path) -> None:
    settle(kb)
    (kb / "docs" / "alpha.md").write_text("# Alpha\n\nGliders now.\n", encoding="utf-8")
    report = sync(kb)
    assert report.indexed == 1
    assert "Gliders" in (kb / "docs" / "alpha.md").read_text(encoding="utf-8")


def test_a_manifest_edit_voids_the_mark(kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settle(kb)
    manifest = kb / "pinakes.toml"
    manifest.write_text(manifest.read_text(encoding="utf-8") + "\n# a comment changes the bytes\n",
                        encoding="utf-8")
    calls: list[object] = []
    real = pair.compute_plan
    monkeypatch.setattr(pair, "compute_plan", lambda *args: calls.append(args) or real(*args))
    assert sync(kb).ok
    assert calls


def test_a_pending_failure_keeps_the_index_unsettled(kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (kb / "docs" / "broken.md").write_bytes(b"\xff\xfe not utf-8 \x00")
    report = sync(kb)
    assert report.failures and settled_mark(kb) is None
    calls: list[object] = []
    real = pair.compute_plan
    monkeypatch.setattr(pair, "compute_plan", lambda *args: calls.append(args) or real(*args))
    assert sync(kb).failures  # retried, not skipped
    assert calls and settled_mark(kb) is None


def test_an_index_only_sync_never_settles(kb: Path) -> None:
    report = sync(kb, index_only=True)
    assert report.ok and settled_mark(kb) is None


SYNC_SCRIPT = """
import sys
sys.path.insert(0, {repo!r})
from tests.fakes import FakeEmbedder
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
run_sync({kb!r}, SyncOptions(), embedder=FakeEmbedder())
"""


def test_a_kill_after_the_walk_cache_saw_an_edit_leaves_it_to_the_next_sync(kb: Path) -> None:
    """The walk cache records the edit's hash before anything is indexed: the mark must go in the
    same transaction, or the next walk would find every file as cached and skip the edit forever."""
    settle(kb)
    before = indexed_hash(kb, "docs/alpha.md")
    (kb / "docs" / "alpha.md").write_text("# Alpha\n\nGliders now.\n", encoding="utf-8")
    env = {**os.environ, "PNK_FAULT": "sync.after-walk"}
    killed = subprocess.run([sys.executable, "-c", SYNC_SCRIPT.format(repo=str(REPO_ROOT), kb=str(kb))],
                            env=env, capture_output=True, text=True, timeout=120)
    assert killed.returncode == -9
    assert settled_mark(kb) is None
    report = sync(kb)
    assert report.indexed == 1
    assert indexed_hash(kb, "docs/alpha.md") != before
