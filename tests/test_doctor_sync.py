"""Doctor's sync checks: lock holder, failures, orphaned sidecars, ID collisions, git hooks."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from pinakes.doctor import DoctorContext, run_checks
from pinakes.errors import PinakesError
from pinakes.hooks import install_hooks
from pinakes.init import init_kb
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.fakes import FakeEmbedder


def by_name(root: Path) -> dict[str, tuple[str, str]]:
    return {c.name: (c.status, c.detail) for c in run_checks(DoctorContext(root))}


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    init_kb(root, name="doc")
    (root / "docs/a.md").write_text("# A\n", encoding="utf-8")
    (root / "docs/b.md").write_text("# B\n", encoding="utf-8")
    assert run_sync(root, SyncOptions(), embedder=FakeEmbedder()).ok
    return root


def test_a_clean_kb_reports_ok_sync_state(kb: Path) -> None:
    checks = by_name(kb)
    for name in ("sync lock", "sync failures", "orphaned sidecars", "ID collisions"):
        assert checks[name][0] == "OK", checks[name]
    assert checks["git hooks"][0] == "WARN" and "not a git repository" in checks["git hooks"][1]


def test_a_held_lock_names_its_holder_and_time(kb: Path) -> None:
    (kb / ".pinakes/sync.lock").write_text(json.dumps(
        {"pid": 4242, "hostname": socket.gethostname(), "started": "2026-11-30T10:00:00+00:00"}), encoding="utf-8")
    status, detail = by_name(kb)["sync lock"]
    assert status == "WARN" and f"pid 4242 on {socket.gethostname()}, since 2026-11-30T10:00:00+00:00" in detail


def test_failures_orphans_and_collisions_are_reported(kb: Path) -> None:
    (kb / "docs/bad.md").write_bytes(b"\xff\xfe broken")
    run_sync(kb, SyncOptions(), embedder=FakeEmbedder())
    (kb / "docs/b.md").unlink()
    (kb / "docs/copy.md").write_text("# Copy\n", encoding="utf-8")
    shutil.copyfile(kb / "docs/a.md.pnk.yaml", kb / "docs/copy.md.pnk.yaml")
    checks = by_name(kb)
    assert checks["sync failures"][0] == "FAIL" and "docs/bad.md" in checks["sync failures"][1]
    assert checks["orphaned sidecars"][0] == "WARN" and "docs/b.md.pnk.yaml" in checks["orphaned sidecars"][1]
    assert checks["ID collisions"][0] == "FAIL"
    assert "docs/a.md.pnk.yaml" in checks["ID collisions"][1] and "docs/copy.md.pnk.yaml" in checks["ID collisions"][1]


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_installed_hooks_are_reported(kb: Path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=kb, check=True)
    assert by_name(kb)["git hooks"][0] == "WARN"
    install_hooks(kb)
    assert by_name(kb)["git hooks"][0] == "OK"


def test_coverage_compares_the_files_on_disk_with_the_index(kb: Path) -> None:
    assert by_name(kb)["coverage"] == ("OK", "2 of 2 documents on disk are indexed")
    (kb / "docs/c.md").write_text("# C\n", encoding="utf-8")  # not synced yet
    (kb / "docs/sheet.xlsx").write_text("x", encoding="utf-8")
    (kb / "docs/a.md").unlink()  # indexed, gone from disk
    status, detail = by_name(kb)["coverage"]
    assert status == "WARN"
    assert "1 of 2 documents on disk are indexed" in detail
    assert "1 no extractor for this file type" in detail
    assert "not indexed: docs/c.md" in detail and "no longer on disk: docs/a.md" in detail
    assert run_sync(kb, SyncOptions(), embedder=FakeEmbedder()).ok
    status, detail = by_name(kb)["coverage"]
    assert status == "OK" and detail.startswith("2 of 2 documents on disk are indexed; skipped")


def test_after_an_interrupted_sync_doctor_says_what_it_checked(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from pinakes.pipeline import embed as embed_step

    root = tmp_path / "kb"
    init_kb(root, name="crash")
    for number in range(8):
        (root / "docs" / f"d{number}.md").write_text(f"# D{number}\n\nText {number}.\n", encoding="utf-8")
    hits: list[str] = []

    def dying(name: str) -> None:
        if name == "sync.after-document-write":
            hits.append(name)
            if len(hits) == 3:
                raise RuntimeError("the process died here")

    monkeypatch.setattr(embed_step, "faultpoint", dying)
    with pytest.raises(PinakesError, match="the process died here"):
        run_sync(root, SyncOptions(), embedder=FakeEmbedder())
    checks = by_name(root)
    assert checks["last sync"][0] == "WARN" and "did not finish" in checks["last sync"][1]
    assert checks["coverage"][0] == "WARN" and "3 of 8 documents on disk are indexed" in checks["coverage"][1]
    assert checks["model.index"][0] == "OK" and "vectors" in checks["model.index"][1]
    assert checks["sync failures"] == ("OK", "the last completed sync recorded no failures")
    monkeypatch.undo()
    assert run_sync(root, SyncOptions(), embedder=FakeEmbedder()).ok
    checks = by_name(root)
    assert checks["last sync"][0] == "OK" and checks["coverage"][0] == "OK"


def test_rebuild_leftovers_are_reported_and_removed_by_the_next_sync(kb: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        (kb / ".pinakes" / f"index.db.new{suffix}").write_bytes(b"partial")
    status, detail = by_name(kb)["rebuild leftovers"]
    assert status == "WARN" and "index.db.new, index.db.new-wal, index.db.new-shm" in detail
    report = run_sync(kb, SyncOptions(), embedder=FakeEmbedder())
    assert any("interrupted rebuild" in note for note in report.notes)
    assert not list((kb / ".pinakes").glob("index.db.new*"))
    assert "rebuild leftovers" not in by_name(kb)


def test_content_drift_is_found_by_rehashing(kb: Path) -> None:
    import os

    assert by_name(kb)["content drift"][0] == "OK"
    target = kb / "docs/a.md"
    before = target.stat()
    target.write_text("# Z\n", encoding="utf-8")  # same size, then the mtime put back
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    status, detail = by_name(kb)["content drift"]
    assert status == "WARN" and "docs/a.md" in detail
    verified = {c.name: c for c in run_checks(DoctorContext(kb, verify=True))}["content drift"]
    assert verified.status == "WARN" and "all 2" in verified.detail
