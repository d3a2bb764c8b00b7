"""Real filesystem faults, driven through the CLI in a fresh process: a full disk (a small tmpfs), a
read-only mount, and a `.pinakes/` or index the user cannot write or read (as an unprivileged user).
Each must end in a clear `pnk: error:` naming the file and a remedy, a non-zero exit, no traceback,
nothing lost, and a later sync that converges once the fault is gone.

Mounting needs root, and so does running without the capabilities that let root ignore file modes
(setpriv drops CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH, so modes apply to root as to anyone): where
the machine cannot, the tests say so and skip (CI runs them as root)."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from pinakes.init import init_kb
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.heavy  # subprocesses and mounts; CI runs them

CLI = """
import sys
sys.path.insert(0, {repo!r})
from tests.fakes import FakeEmbedder, substitute_embedder
substitute_embedder(None, lambda section, offline=None, threads=None: FakeEmbedder())
from pinakes.cli import main
sys.exit(main(sys.argv[1:]))
"""
# Run as root without the capabilities that bypass file permissions.
WITHOUT_OVERRIDE = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner", "--"]


def pnk(*args: str, modes_apply: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    prefix = WITHOUT_OVERRIDE if modes_apply else []
    return subprocess.run(
        [*prefix, sys.executable, "-c", CLI.format(repo=str(REPO_ROOT)), *args], capture_output=True,
        text=True, timeout=120, env=env)


def assert_clean_error(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert done.returncode not in (0, None), done.stdout
    assert "Traceback" not in done.stderr and "Traceback" not in done.stdout, done.stderr
    assert "pnk: error:" in done.stderr and "remedy:" in done.stderr, done.stderr
    for needle in needles:
        assert needle in done.stderr, done.stderr


def make_kb(root: Path, count: int, start: int = 0) -> None:
    if not (root / "pinakes.toml").exists():
        init_kb(root, name="faults")
    for number in range(start, start + count):
        (root / "docs" / f"d{number:03d}.md").write_text(f"# D{number}\n\nText {number}.\n", encoding="utf-8")


def index_paths(root: Path) -> dict[str, str]:
    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        return dict(conn.execute("SELECT path, id FROM documents WHERE state = 'active'"))
    finally:
        conn.close()


@contextlib.contextmanager
def tmpfs(size: str) -> Generator[Path, None, None]:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs to fill needs root (CI runs as root)")
    point = Path(tempfile.mkdtemp(prefix="pnk-tmpfs-"))
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        point.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)
        point.rmdir()


def fill(directory: Path, leave: int = 0) -> Path:
    """Take every free byte of the filesystem holding `directory`, but about `leave` bytes."""
    filler = directory / "filler.bin"
    with open(filler, "wb", buffering=0) as handle:
        for size in (65536, 512, 1):
            with contextlib.suppress(OSError):
                while True:
                    handle.write(b"\0" * size)
    if leave:
        os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler


def test_a_full_disk_before_the_index_exists_is_a_clear_error() -> None:
    with tmpfs("4m") as mount:
        kb = mount / "kb"
        make_kb(kb, 3)
        filler = fill(mount)
        done = pnk("-C", str(kb), "sync")
        assert_clean_error(done, "No space left on device")
        assert done.returncode == 74
        assert not (kb / ".pinakes" / "sync.lock").exists()  # no half-written lock left to block
        filler.unlink()
        again = pnk("-C", str(kb), "sync")
        assert again.returncode == 0, again.stderr
        assert len(index_paths(kb)) == 3


def test_a_full_disk_mid_sync_stops_clearly_and_keeps_what_was_done() -> None:
    with tmpfs("4m") as mount:
        kb = mount / "kb"
        make_kb(kb, 2)
        assert pnk("-C", str(kb), "sync").returncode == 0
        before = index_paths(kb)
        make_kb(kb, 40, start=2)
        filler = fill(mount, leave=48 * 1024)  # room for the lock and a few sidecars, not for all
        done = pnk("-C", str(kb), "sync")
        assert done.returncode in (1, 74), done.stderr
        assert "Traceback" not in done.stderr and "Traceback" not in done.stdout, done.stderr
        assert "No space left on device" in done.stderr or "disk is full" in done.stderr
        assert "remedy: free some disk space" in done.stderr
        assert not (kb / ".pinakes" / "sync.lock").exists()
        assert all(index_paths(kb)[path] == doc_id for path, doc_id in before.items())  # nothing lost
        filler.unlink()
        again = pnk("-C", str(kb), "sync")
        assert again.returncode == 0, again.stderr
        assert len(index_paths(kb)) == 42 and all(index_paths(kb)[p] == i for p, i in before.items())


def test_a_read_only_mount_refuses_sync_clearly_and_search_still_answers() -> None:
    with tmpfs("16m") as mount:
        kb = mount / "kb"
        make_kb(kb, 3)
        assert pnk("-C", str(kb), "sync").returncode == 0
        remount = subprocess.run(["mount", "-o", "remount,ro", str(mount)], capture_output=True, text=True)
        if remount.returncode != 0:
            pytest.skip(f"cannot remount the tmpfs read-only: {remount.stderr.strip()}")
        try:
            done = pnk("-C", str(kb), "sync")
            assert_clean_error(done, "sync.lock", "read-only")
            assert done.returncode == 74
            search = pnk("-C", str(kb), "search", "text")
            assert "Traceback" not in search.stderr
            assert search.returncode == 0 or "pnk: error:" in search.stderr
        finally:
            subprocess.run(["mount", "-o", "remount,rw", str(mount)], check=False)
        assert pnk("-C", str(kb), "sync").returncode == 0


@pytest.fixture
def shared_kb(tmp_path: Path) -> Iterator[Path]:
    """A synced KB, and file modes that will apply to the next commands."""
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("root ignores file modes and setpriv (util-linux) is not installed to drop that")
    kb = tmp_path / "kb"
    make_kb(kb, 3)
    done = pnk("-C", str(kb), "sync")
    assert done.returncode == 0, done.stderr
    yield kb
    for path in [kb, *kb.rglob("*")]:  # let pytest clean up
        path.chmod(0o755 if path.is_dir() else 0o644)


def test_sidecars_that_cannot_be_written_are_each_listed_and_nothing_else_stops(shared_kb: Path) -> None:
    docs = shared_kb / "docs" / "locked"
    docs.mkdir()
    for name in ("x.md", "y.md"):
        (docs / name).write_text(f"# {name}\n", encoding="utf-8")
    (shared_kb / "docs" / "open.md").write_text("# open\n", encoding="utf-8")
    docs.chmod(0o555)  # no sidecar can be minted beside x.md and y.md
    done = pnk("-C", str(shared_kb), "sync", modes_apply=True)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    for name in ("docs/locked/x.md", "docs/locked/y.md"):
        assert f"{name} [sidecar]: could not write the sidecar" in done.stderr
    assert "Permission denied" in done.stderr
    assert "docs/open.md" in index_paths(shared_kb)  # the other documents went on
    docs.chmod(0o755)
    again = pnk("-C", str(shared_kb), "sync")
    assert again.returncode == 0 and {"docs/locked/x.md", "docs/locked/y.md"} <= set(index_paths(shared_kb))


def test_a_state_dir_the_user_cannot_write_refuses_sync_clearly(shared_kb: Path) -> None:
    state = shared_kb / ".pinakes"
    state.chmod(0o555)
    done = pnk("-C", str(shared_kb), "sync", modes_apply=True)
    assert_clean_error(done, "sync.lock", "Permission denied")
    assert done.returncode == 74


def test_an_index_the_user_cannot_write_refuses_sync_clearly(shared_kb: Path) -> None:
    (shared_kb / "docs" / "new.md").write_text("# New\n", encoding="utf-8")
    (shared_kb / "docs" / "new.md").chmod(0o666)
    (shared_kb / ".pinakes" / "index.db").chmod(0o444)
    done = pnk("-C", str(shared_kb), "sync", modes_apply=True)
    assert_clean_error(done, "index.db")
    assert done.returncode == 74


def test_an_unreadable_index_is_a_clear_error_for_search_sync_and_doctor(shared_kb: Path) -> None:
    (shared_kb / ".pinakes" / "index.db").chmod(0o000)
    for command in (["search", "text"], ["sync"]):
        done = pnk("-C", str(shared_kb), *command, modes_apply=True)
        assert_clean_error(done, "index.db")
    doctor = pnk("-C", str(shared_kb), "doctor", modes_apply=True)
    assert "Traceback" not in doctor.stderr and "Pinakes bug" not in doctor.stdout
    assert "FAIL" in doctor.stdout and "index" in doctor.stdout
