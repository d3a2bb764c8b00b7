"""Temp files a killed write leaves (#24 item 12): one naming rule (`pinakes.atomic`), never taken for
a document by the walk, reported by doctor, removed by the next command that writes into the same
folder, and never removed while a live writer holds one. The kills are real: `pnk link`, `pnk link
--add-kb` and `pnk upgrade --apply` SIGKILL themselves at the `atomic.before-rename` fault point."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pinakes import atomic
from pinakes.doctor import DoctorContext, run_checks
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.test_serve_helpers import make_kb, manifest_fake_embedder, offline_env, sync_kb


def pnk(kb: Path, *args: str, fault: str | None = None, scratch: Path) -> subprocess.CompletedProcess[str]:
    env = offline_env(scratch, **({"PNK_FAULT": fault} if fault else {}))
    return subprocess.run([sys.executable, "-m", "pinakes", "-C", str(kb), *args], env=env,
                          capture_output=True, text=True, timeout=120)


def temp_files(folder: Path) -> list[Path]:
    return sorted(path for path in folder.iterdir() if atomic.is_temp_name(path.name))


def age(paths: list[Path], seconds: float = 60) -> None:
    """Make the leftovers as old as they would be by the next command a person runs."""
    past = time.time() - seconds
    for path in paths:
        os.utime(path, (past, past))


def temp_check(kb: Path) -> tuple[str, str]:
    return next((c.status, c.detail) for c in run_checks(DoctorContext(kb)) if c.name == "temp files")


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    root = make_kb(tmp_path / "kb", "leftovers", {"a.md": "# A\n\nAlpha.\n", "b.md": "# B\n\nBeta.\n"})
    sync_kb(root)
    return root


def test_a_temp_file_has_the_one_name_and_a_live_writers_is_never_swept(tmp_path: Path) -> None:
    target = tmp_path / "x.md.pnk.yaml"
    temp, fd = atomic._create_temp(target)  # pyright: ignore[reportPrivateUsage] -- a writer before its rename
    try:
        assert temp.parent == tmp_path and atomic.is_temp_name(temp.name)
        assert temp.name.startswith(".x.md.pnk.yaml.") and temp.name.endswith(atomic.TEMP_SUFFIX)
        age([temp])
        swept = atomic._swept_directories  # pyright: ignore[reportPrivateUsage] -- the per-process sweep memory
        swept.discard(str(tmp_path))
        assert atomic.sweep_stale_temps(tmp_path) == [] and temp.exists()  # its writer holds the lock
    finally:
        os.close(fd)
    swept.discard(str(tmp_path))
    assert atomic.sweep_stale_temps(tmp_path) == [temp.name] and not temp.exists()  # the writer is gone
    assert atomic.is_temp_name(".x.md.pnk.yaml.0a1b2c3d.tmp")  # an earlier build's name, also a leftover
    assert not atomic.is_temp_name("notes.tmp") and not atomic.is_temp_name(".x.md.pnk.yaml")


@pytest.mark.heavy
def test_a_killed_link_leaves_a_temp_file_no_sync_indexes_doctor_reports_and_the_next_link_removes(
        kb: Path, tmp_path: Path) -> None:
    sidecar = kb / "docs/a.md.pnk.yaml"
    before = sidecar.read_bytes()
    killed = pnk(kb, "link", "docs/a.md", "docs/b.md", "--rel", "cites", fault="atomic.before-rename",
                 scratch=tmp_path)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert sidecar.read_bytes() == before  # the old file, whole
    [left] = temp_files(kb / "docs")
    assert left.name.startswith(".a.md.pnk.yaml.")

    report = run_sync(kb, SyncOptions(), embedder=manifest_fake_embedder(kb))
    assert report.ok and all(left.name not in path for path, _why in report.skipped), report.skipped
    status, detail = temp_check(kb)
    assert status == "WARN" and "docs/" + left.name in detail

    age([left])
    done = pnk(kb, "link", "docs/a.md", "docs/b.md", "--rel", "cites", scratch=tmp_path)
    assert done.returncode == 0, done.stderr
    assert temp_files(kb / "docs") == [] and b"cites" in sidecar.read_bytes()
    assert temp_check(kb)[0] == "OK"


@pytest.mark.heavy
def test_a_killed_add_kb_leaves_the_manifest_whole_and_the_next_write_removes_its_temp(
        kb: Path, tmp_path: Path) -> None:
    partner = make_kb(tmp_path / "partner", "partner", {"p.md": "# P\n"})
    manifest = kb / "pinakes.toml"
    before = manifest.read_bytes()
    killed = pnk(kb, "link", "--add-kb", "partner", str(partner), fault="atomic.before-rename", scratch=tmp_path)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert manifest.read_bytes() == before
    [left] = temp_files(kb)
    assert left.name.startswith(".pinakes.toml.")
    status, detail = temp_check(kb)
    assert status == "WARN" and left.name in detail

    age([left])
    done = pnk(kb, "link", "--add-kb", "partner", str(partner), scratch=tmp_path)
    assert done.returncode == 0, done.stderr
    assert temp_files(kb) == [] and b'alias = "partner"' in manifest.read_bytes()
    assert temp_check(kb)[0] == "OK"


@pytest.mark.heavy
@pytest.mark.parametrize("nth", [1, 2])  # 1: writing the backup (`*.bak.<hex>` temp), 2: the manifest
def test_a_killed_upgrade_leaves_the_manifest_whole_and_the_next_apply_removes_its_temp(
        tmp_path: Path, nth: int) -> None:
    from tests.test_upgrade import FIRST, stamp_from_archive

    kb = stamp_from_archive(tmp_path / "kb", "research-papers", FIRST)
    manifest = kb / "pinakes.toml"
    before = manifest.read_bytes()
    killed = pnk(kb, "upgrade", "--apply", "--yes", fault=f"atomic.before-rename:{nth}", scratch=tmp_path)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert manifest.read_bytes() == before
    [left] = temp_files(kb)
    assert (".bak." in left.name) == (nth == 1)
    assert temp_check(kb)[0] == "WARN"

    age([left])
    done = pnk(kb, "upgrade", "--apply", "--yes", scratch=tmp_path)
    assert done.returncode == 0, done.stderr
    assert temp_files(kb) == [] and manifest.read_bytes() != before
    assert temp_check(kb)[0] == "OK"


def test_doctor_names_the_temps_a_killed_vector_build_leaves_in_pinakes_and_the_next_sync_sweeps_them(
        kb: Path) -> None:
    """A sync killed while writing the vector file leaves, in .pinakes/, a temp as large as the file
    and a piece's temp (named as pinakes.atomic names every writer's; the kill itself:
    tests/test_vectors_file.py). Doctor names them with the remedy; the next sync sweeps them."""
    state = kb / ".pinakes"
    left = [state / atomic.temp_name_for("vectors.ann"), state / atomic.temp_name_for("vectors.ann-piece")]
    for path in left:
        path.write_bytes(b"\0" * 4096)
    [check] = [c for c in run_checks(DoctorContext(kb)) if c.name == "temp files"]
    assert check.status == "WARN" and all(f".pinakes/{path.name}" in check.detail for path in left), check.detail
    assert check.remedy is not None and "pnk sync" in check.remedy and "rm" in check.remedy

    age(left)
    atomic._swept_directories.discard(str(state))  # pyright: ignore[reportPrivateUsage] -- the next sync: a new process
    assert run_sync(kb, SyncOptions(), embedder=manifest_fake_embedder(kb)).ok
    assert temp_files(state) == [] and temp_check(kb)[0] == "OK"


def test_doctor_leaves_out_a_temp_a_running_sync_is_writing(kb: Path) -> None:
    """A temp whose writer holds its lock (a sync or `pnk watch` running now) is being written: doctor
    counts it apart and never lists it for `rm` (deleting it would break that sync's rename); once
    its writer is gone it is a killed write's leftover again (review11 F3)."""
    from pinakes.vectors.fileformat import piece_temp, vector_file_path

    state = kb / ".pinakes"
    with piece_temp(vector_file_path(state)) as live:  # as a running sync's vectors step holds it
        age([live])
        [check] = [c for c in run_checks(DoctorContext(kb)) if c.name == "temp files"]
        assert check.status == "OK" and live.name not in check.detail, check.detail
        assert "1 temp file being written by a `pnk` running now" in check.detail
        left = state / atomic.temp_name_for("vectors.ann")
        left.write_bytes(b"\0" * 4096)  # and one a killed sync left
        [check] = [c for c in run_checks(DoctorContext(kb)) if c.name == "temp files"]
        assert check.status == "WARN" and left.name in check.detail and live.name not in check.detail, check.detail
        assert check.remedy is not None and live.name not in check.remedy
