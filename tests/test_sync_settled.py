"""The settled mark (`pinakes.pipeline.settled`): a no-op sync of a settled index skips pairing, and
nothing that could make the mark false survives with it."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

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
from tests.kb_helpers import active_paths


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    init_kb(root, name="test")
    docs = root / "docs"
    docs.mkdir(exist_ok=True)
    (docs / "alpha.md").write_text("# Alpha\n\nAeroplanes and wings.\n", encoding="utf-8")
    (docs / "beta.md").write_text("# Beta\n\nBoats and harbours.\n", encoding="utf-8")
    return root


def sync(root: Path, **options: Any) -> SyncReport:
    return run_sync(root, SyncOptions(**options), embedder=FakeEmbedder())


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

    def recorded(*args: Any):
        return calls.append(args) or real(*args)

    monkeypatch.setattr(pair, "compute_plan", recorded)
    assert sync(kb).ok
    assert calls


def test_a_pending_failure_keeps_the_index_unsettled(kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (kb / "docs" / "broken.md").write_bytes(b"\xff\xfe not utf-8 \x00")
    report = sync(kb)
    assert report.failures and settled_mark(kb) is None
    calls: list[object] = []
    real = pair.compute_plan

    def recorded(*args: Any):
        return calls.append(args) or real(*args)

    monkeypatch.setattr(pair, "compute_plan", recorded)
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


def count_cache_loads(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Each load of the walk cache this process makes from now on (a settled no-op makes none)."""
    loads: list[object] = []
    real = walk.load_walk_cache

    def recorded(conn: sqlite3.Connection | None):
        return loads.append(conn) or real(conn)

    monkeypatch.setattr(walk, "load_walk_cache", recorded)
    return loads



def test_the_mark_carries_the_walk_caches_digest_and_a_noop_loads_no_cache(
        kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settle(kb)
    mark = settled_mark(kb)
    conn = sqlite3.connect(kb / ".pinakes" / "index.db")
    try:
        assert mark is not None and mark.split(" ")[1] == walk.walk_cache_digest(conn)
    finally:
        conn.close()
    index_bytes = (kb / ".pinakes" / "index.db").read_bytes()
    loads = count_cache_loads(monkeypatch)
    forbid_pairing(monkeypatch)
    again = sync(kb)
    assert again.ok and again.unchanged == 2 and again.indexed == 0 and again.files_hashed == 0
    assert loads == []  # the stat digest stood for the cache
    assert (kb / ".pinakes" / "index.db").read_bytes() == index_bytes


def keep_stamps(path: Path, text: str) -> None:
    """Write `text` (the file's length) and put its mtime back: only its ctime tells."""
    before = path.stat()
    assert len(text.encode()) == before.st_size
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def test_an_edit_that_keeps_size_and_mtime_is_indexed(kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settle(kb)
    alpha = kb / "docs" / "alpha.md"
    keep_stamps(alpha, alpha.read_text(encoding="utf-8").replace("Aeroplanes", "Helicopter"))
    loads = count_cache_loads(monkeypatch)
    report = sync(kb)
    assert loads and report.changed == ["docs/alpha.md"]
    assert indexed_hash(kb, "docs/alpha.md") == walk.hash_file(alpha)


def test_a_touch_is_rehashed_and_changes_nothing(kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settle(kb)
    alpha = kb / "docs" / "alpha.md"
    before = alpha.stat()
    os.utime(alpha, ns=(before.st_atime_ns, before.st_mtime_ns - 10_000_000_000))  # in the past: not racy
    loads = count_cache_loads(monkeypatch)
    report = sync(kb)
    assert loads and report.files_hashed == 1 and report.indexed == 0 and report.unchanged == 2
    assert sync(kb).files_hashed == 0  # the new stat is recorded...
    loads.clear()
    assert sync(kb).unchanged == 2 and loads == []  # ...and settled again with it


@pytest.mark.parametrize("change", ["add", "remove", "rename"])
def test_an_added_removed_or_renamed_file_is_seen(kb: Path, monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    settle(kb)
    docs = kb / "docs"
    if change == "add":
        (docs / "gamma.md").write_text("# Gamma\n\nGondolas.\n", encoding="utf-8")
        expected = {"docs/alpha.md", "docs/beta.md", "docs/gamma.md"}
    elif change == "remove":
        (docs / "beta.md").unlink()
        expected = {"docs/alpha.md"}
    else:
        (docs / "beta.md").rename(docs / "gamma.md")
        expected = {"docs/alpha.md", "docs/gamma.md"}
    loads = count_cache_loads(monkeypatch)
    assert sync(kb).ok and loads
    assert active_paths(kb) == expected


def test_a_stat_recorded_in_the_tick_of_an_edit_is_racy_and_hashed(kb: Path) -> None:
    """git's racily-clean case: the cache recorded a stat the edited file still has (the edit came
    in the same timestamp tick as the walk that stat it; here made by writing that row and a mark
    for it directly). Its stamp is within the racy window of that walk, so the digest is not trusted."""
    settle(kb)
    alpha = kb / "docs" / "alpha.md"
    keep_stamps(alpha, alpha.read_text(encoding="utf-8").replace("Aeroplanes", "Helicopter"))
    st = alpha.stat()
    conn = sqlite3.connect(kb / ".pinakes" / "index.db")
    try:
        with conn:
            conn.execute("UPDATE walk_cache SET size = ?, mtime_ns = ?, ctime_ns = ?, inode = ? WHERE path = ?",
                         (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, "docs/alpha.md"))
            mark = settled_mark(kb)
            assert mark is not None
            conn.execute("UPDATE meta SET value = ? WHERE key = ?",
                         (f"{mark.split(' ')[0]} {walk.walk_cache_digest(conn)}", META_KEY))
            conn.execute("UPDATE meta SET value = ? WHERE key = 'walk_started_ns'", (str(st.st_ctime_ns),))
    finally:
        conn.close()
    report = sync(kb)
    assert report.files_hashed >= 1 and report.changed == ["docs/alpha.md"]
    assert indexed_hash(kb, "docs/alpha.md") == walk.hash_file(alpha)


def test_a_kill_between_the_cache_and_the_mark_leaves_no_mark_and_later_edits_are_seen(
        kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settle(kb)
    alpha = kb / "docs" / "alpha.md"
    alpha.write_text("# Alpha\n\nGliders now.\n", encoding="utf-8")
    env = {**os.environ, "PNK_FAULT": "sync.before-settle"}
    killed = subprocess.run([sys.executable, "-c", SYNC_SCRIPT.format(repo=str(REPO_ROOT), kb=str(kb))],
                            env=env, capture_output=True, text=True, timeout=120)
    assert killed.returncode == -9, killed.stderr
    assert settled_mark(kb) is None
    assert indexed_hash(kb, "docs/alpha.md") == walk.hash_file(alpha)  # indexed before the kill
    keep_stamps(alpha, alpha.read_text(encoding="utf-8").replace("Gliders", "Balloon"))
    loads = count_cache_loads(monkeypatch)
    assert sync(kb).changed == ["docs/alpha.md"] and loads
    assert indexed_hash(kb, "docs/alpha.md") == walk.hash_file(alpha)


def test_a_mark_without_the_caches_digest_is_written_again_once(kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A mark an earlier version wrote carries no cache digest: the next no-op walks with the cache
    (still skipping pairing) and writes the mark again with it; the one after loads no cache."""
    settle(kb)
    mark = settled_mark(kb)
    assert mark is not None
    conn = sqlite3.connect(kb / ".pinakes" / "index.db")
    try:
        with conn:
            conn.execute("UPDATE meta SET value = ? WHERE key = ?", (mark.split(" ")[0], META_KEY))
    finally:
        conn.close()
    loads = count_cache_loads(monkeypatch)
    forbid_pairing(monkeypatch)
    assert sync(kb).unchanged == 2 and loads
    assert settled_mark(kb) == mark
    loads.clear()
    assert sync(kb).unchanged == 2 and loads == []
