"""A sync that completes records its completion whatever an earlier one left (#24 item 6): after a
sync died past its commits (kill -9 before the graph; a reverse scan that stopped the run), the next
sync, even one with no document to process, finishes what was left, updates `last_sync_at`, clears
`sync_started_at`, and doctor stops saying "a sync started at ... did not finish"."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from pinakes.doctor import DoctorContext, run_checks
from pinakes.errors import PinakesError
from pinakes.init import init_kb
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.conftest import REPO_ROOT
from tests.fakes import FakeEmbedder

SCRIPT = """
import sys
sys.path.insert(0, {repo!r})
from tests.fakes import FakeEmbedder
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
sys.exit(0 if run_sync({kb!r}, SyncOptions(), embedder=FakeEmbedder()).ok else 1)
"""


def sync_in_child(kb: Path, fault: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "PNK_FAULT"}
    if fault:
        env["PNK_FAULT"] = fault
    return subprocess.run([sys.executable, "-c", SCRIPT.format(repo=str(REPO_ROOT), kb=str(kb))],
                          env=env, capture_output=True, text=True, timeout=120)


def meta(kb: Path) -> dict[str, str]:
    conn = sqlite3.connect(kb / ".pinakes" / "index.db")
    try:
        return dict(conn.execute("SELECT key, value FROM meta"))
    finally:
        conn.close()


def graph_members(kb: Path) -> set[str]:
    """The documents the derived graph holds a node for."""
    conn = sqlite3.connect(kb / ".pinakes" / "index.db")
    try:
        return {row[0] for row in conn.execute("SELECT key FROM nodes WHERE kind = 'doc'")}
    finally:
        conn.close()


def active_ids(kb: Path) -> set[str]:
    conn = sqlite3.connect(kb / ".pinakes" / "index.db")
    try:
        return {row[0] for row in conn.execute("SELECT id FROM documents WHERE state = 'active'")}
    finally:
        conn.close()


def last_sync_check(kb: Path) -> tuple[str, str]:
    return next((c.status, c.detail) for c in run_checks(DoctorContext(kb)) if c.name == "last sync")


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    init_kb(root, name="completion")
    for name in ("alpha", "beta"):
        (root / "docs" / f"{name}.md").write_text(f"# {name}\n\nText about {name}.\n", encoding="utf-8")
    assert run_sync(root, SyncOptions(), embedder=FakeEmbedder()).ok
    return root


@pytest.mark.heavy
def test_a_sync_killed_before_the_graph_is_finished_by_the_next_no_op_sync(kb: Path) -> None:
    (kb / "docs/gamma.md").write_text("# gamma\n\nA new document.\n", encoding="utf-8")
    before = meta(kb)["last_sync_at"]
    killed = sync_in_child(kb, fault="sync.before-graph")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    pending = meta(kb)
    assert pending["sync_started_at"] > pending["last_sync_at"] == before  # committed, never finished
    assert len(active_ids(kb)) == 3 and graph_members(kb) != active_ids(kb)  # gamma is not in the graph
    status, detail = last_sync_check(kb)
    assert status == "WARN" and "did not finish" in detail

    again = sync_in_child(kb)  # nothing left to index: a no-op as far as documents go
    assert again.returncode == 0, again.stderr
    done = meta(kb)
    assert "sync_started_at" not in done and done["last_sync_at"] > pending["sync_started_at"]
    assert graph_members(kb) == active_ids(kb)  # what the killed sync left undone was done
    assert last_sync_check(kb)[0] == "OK"
    stamp = done["last_sync_at"]
    assert sync_in_child(kb).returncode == 0
    assert meta(kb)["last_sync_at"] == stamp  # a plain no-op after that writes nothing


def test_a_sync_stopped_in_the_reverse_scan_is_completed_by_the_next_sync(
        kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pinakes.links import reverse

    def failing(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("the partner's disk went away")

    # The reverse scan runs after every commit of the run; a failure there stops the sync.
    monkeypatch.setattr(reverse, "scan_partner", failing)
    with (kb / "pinakes.toml").open("a", encoding="utf-8") as manifest:
        manifest.write('\n[[links.kb]]\nalias = "elsewhere"\nid = "01J9ZX7K3M4N5P6Q7R8S9T0VWX"\n'
                       'path = "../elsewhere"\n')
    (kb / "docs/gamma.md").write_text("# gamma\n\nA new document.\n", encoding="utf-8")
    with pytest.raises(PinakesError, match="partner's disk went away"):
        run_sync(kb, SyncOptions(), embedder=FakeEmbedder())
    assert last_sync_check(kb)[0] == "WARN"
    with pytest.raises(PinakesError, match=r"pipeline stopped.*partner's disk"):  # still failing: still not complete
        run_sync(kb, SyncOptions(), embedder=FakeEmbedder())
    assert "sync_started_at" in meta(kb) and last_sync_check(kb)[0] == "WARN"

    monkeypatch.undo()
    report = run_sync(kb, SyncOptions(), embedder=FakeEmbedder())
    assert report.ok and report.indexed == 0  # a no-op for documents
    assert "sync_started_at" not in meta(kb)
    status, detail = last_sync_check(kb)
    assert status == "OK", detail
