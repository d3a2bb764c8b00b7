"""No sidecar is written outside the KB (#24 item 5), with real symbolic links: a source root reached
through a link is refused with a clear error by sync, `--sidecars-only` and doctor, and nothing is
written where it leads; a linked folder below a root is reported, never entered; a folder swapped for
a link between the walk and the sidecar writes gets no sidecar; `pnk adopt` refuses a path through
a link that leaves the KB."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest

from pinakes.doctor import DoctorContext, run_checks
from pinakes.errors import EXIT_CONFIG, UsageError
from pinakes.sources import walk as walk_module
from pinakes.sources.walk import SKIP_SYMLINK, SourceRootError
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.test_serve_helpers import make_kb, manifest_fake_embedder, offline_env, sync_kb


def files_under(folder: Path) -> dict[str, bytes]:
    return {path.relative_to(folder).as_posix(): path.read_bytes()
            for path in sorted(folder.rglob("*")) if path.is_file()}


def sync(kb: Path, **options: Any):
    return run_sync(kb, SyncOptions(**options), embedder=manifest_fake_embedder(kb))


@pytest.fixture
def other(tmp_path: Path) -> Path:
    """Another KB, synced: its documents have sidecars and IDs of their own."""
    root = make_kb(tmp_path / "other", "other", {"theirs.md": "# Theirs\n\nTheir text.\n"})
    (root / "docs/unpaired.md").write_text("# Unpaired\n\nNo sidecar yet.\n", encoding="utf-8")
    sync_kb(root)
    (root / "docs/new.md").write_text("# New\n\nWritten since their last sync.\n", encoding="utf-8")
    return root


@pytest.fixture
def mine(tmp_path: Path, other: Path) -> Path:
    """A KB whose `docs` is a symbolic link to the other KB's `docs`."""
    root = make_kb(tmp_path / "mine", "mine", {})
    (root / "docs").rmdir()
    (root / "docs").symlink_to(other / "docs", target_is_directory=True)
    return root


def test_a_symlinked_source_root_is_refused_and_nothing_is_written_where_it_leads(mine: Path, other: Path) -> None:
    theirs = files_under(other / "docs")
    with pytest.raises(SourceRootError) as caught:
        sync(mine)
    error = caught.value
    assert error.exit_code == EXIT_CONFIG
    assert "'docs' is reached through a symbolic link" in error.message and "outside this KB" in error.message
    assert error.remedy is not None and "pnk sync" in error.remedy
    with pytest.raises(SourceRootError):
        sync(mine, sidecars_only=True)
    assert files_under(other / "docs") == theirs  # no sidecar minted for new.md, none rewritten
    assert not (mine / ".pinakes" / "index.db").exists()
    checks = {c.name: (c.status, c.detail, c.remedy) for c in run_checks(DoctorContext(mine))}
    status, detail, remedy = checks["source roots"]
    assert status == "FAIL" and "symbolic link" in detail and remedy and "pnk sync" in remedy


def test_a_refused_sync_creates_nothing_and_doctor_names_the_link_not_a_missing_sync(mine: Path) -> None:
    """The roots are checked before the lock or the index is created (#24 item 5): an empty index
    left by a refused sync made doctor report "no sync has completed" instead of the link."""
    before = files_under(mine)
    for options in ({}, {"rebuild": True}, {"index_only": True}):
        with pytest.raises(SourceRootError):
            sync(mine, **options)
    assert not (mine / ".pinakes").exists()
    assert files_under(mine) == before
    checks = {c.name: (c.status, c.detail) for c in run_checks(DoctorContext(mine))}
    assert checks["source roots"][0] == "FAIL"
    assert not any("no sync has completed" in detail for _status, detail in checks.values()), checks


def test_doctor_never_calls_a_symlinked_root_fine_beside_the_check_that_refuses_it(mine: Path) -> None:
    """One finding for the link: the manifest area no longer says "every [sources] root exists"
    while the `source roots` check fails it; a missing root beside it is still its FAIL."""
    results = run_checks(DoctorContext(mine))
    about_sources = [(c.name, c.status) for c in results if c.name in ("manifest.sources", "source roots")]
    assert about_sources == [("source roots", "FAIL")]
    manifest = mine / "pinakes.toml"
    manifest.write_text(manifest.read_text(encoding="utf-8").replace('roots = ["docs"]', 'roots = ["docs", "papers"]'),
                        encoding="utf-8")
    results = run_checks(DoctorContext(mine))
    about_sources = [(c.name, c.status, c.detail) for c in results if c.name in ("manifest.sources", "source roots")]
    assert [(name, status) for name, status, _detail in about_sources] == [("manifest.sources", "FAIL"),
                                                                          ("source roots", "FAIL")]
    assert "'papers' is not a directory" in about_sources[0][2] and "'docs'" in about_sources[1][2]


def _indexed(kb: Path) -> list[str]:
    import sqlite3

    conn = sqlite3.connect(kb / ".pinakes" / "index.db")
    try:
        return [row[0] for row in conn.execute("SELECT path FROM documents")]
    finally:
        conn.close()


@pytest.mark.heavy
def test_the_cli_says_so_without_a_traceback(mine: Path, tmp_path: Path) -> None:
    for args in (["sync"], ["sync", "--sidecars-only"]):
        done = subprocess.run([sys.executable, "-m", "pinakes", "-C", str(mine), *args], capture_output=True,
                              text=True, env=offline_env(tmp_path), timeout=120)
        assert done.returncode == EXIT_CONFIG, done.stderr
        assert "symbolic link" in done.stderr and "remedy:" in done.stderr and "Traceback" not in done.stderr


def test_a_root_reached_through_a_link_inside_the_kb_is_refused_too(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", "inner", {"a.md": "# A\n"})
    (kb / "real").mkdir()
    (kb / "real" / "b.md").write_text("# B\n", encoding="utf-8")
    (kb / "content").symlink_to(kb / "real", target_is_directory=True)
    manifest = kb / "pinakes.toml"
    manifest.write_text(manifest.read_text(encoding="utf-8").replace('roots = ["docs"]', 'roots = ["docs", "content"]'),
                        encoding="utf-8")
    with pytest.raises(SourceRootError, match="elsewhere in this KB"):
        sync(kb)
    assert not (kb / "real" / "b.md.pnk.yaml").exists()


def test_a_linked_folder_below_a_root_is_reported_and_never_entered(tmp_path: Path, other: Path) -> None:
    kb = make_kb(tmp_path / "kb", "below", {"a.md": "# A\n"})
    (kb / "docs" / "borrowed").symlink_to(other / "docs", target_is_directory=True)
    theirs = files_under(other / "docs")
    report = sync(kb)
    assert report.ok and ("docs/borrowed", SKIP_SYMLINK) in report.skipped
    assert _indexed(kb) == ["docs/a.md"]
    assert files_under(other / "docs") == theirs


def test_a_folder_swapped_for_a_link_after_the_walk_gets_no_sidecar(
        tmp_path: Path, other: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kb = make_kb(tmp_path / "kb", "race", {"a.md": "# A\n", "sub/new.md": "# New\n\nSame name as theirs.\n"})
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "new.md").write_bytes((kb / "docs/sub/new.md").read_bytes())
    real_walk = walk_module.walk

    def walk_then_swap(*args: Any, **kwargs: Any) -> walk_module.WalkResult:
        found = real_walk(*args, **kwargs)
        (kb / "docs/sub/new.md").unlink()
        (kb / "docs/sub").rmdir()
        (kb / "docs/sub").symlink_to(outside, target_is_directory=True)  # between walk and pair
        return found

    monkeypatch.setattr(walk_module, "walk", walk_then_swap)
    report = sync(kb)
    assert not (outside / "new.md.pnk.yaml").exists()
    assert [(f.path, f.stage) for f in report.failures] == [("docs/sub/new.md", "sidecar")]
    assert "resolves outside the KB" in report.failures[0].error
    assert (kb / "docs/a.md.pnk.yaml").exists()  # the rest of the run went on


def test_adopt_refuses_a_document_reached_through_a_link_out_of_the_kb(tmp_path: Path, other: Path) -> None:
    from pinakes.pipeline.adopt import adopt_sidecar

    kb = make_kb(tmp_path / "kb", "adopt", {"gone.md": "# Gone\n"})
    sync_kb(kb)
    (kb / "docs/gone.md").unlink()
    (kb / "docs/borrowed").symlink_to(other / "docs", target_is_directory=True)
    theirs = files_under(other / "docs")
    with pytest.raises(UsageError, match="outside the KB"):
        adopt_sidecar(kb, "docs/gone.md.pnk.yaml", "docs/borrowed/new.md")
    assert files_under(other / "docs") == theirs and (kb / "docs/gone.md.pnk.yaml").exists()


def test_a_partner_whose_source_root_is_a_link_is_a_partner_problem_not_a_failed_sync(
        tmp_path: Path, mine: Path) -> None:
    from pinakes.manifest import load_manifest

    kb = make_kb(tmp_path / "kb", "linking", {"a.md": "# A\n"})
    partner_id = load_manifest(mine / "pinakes.toml").kb.id
    with (kb / "pinakes.toml").open("a", encoding="utf-8") as manifest:
        manifest.write(f'\n[[links.kb]]\nalias = "mine"\nid = "{partner_id}"\npath = "{mine}"\n')
    report = sync(kb, scan_links=True)
    assert report.ok
    [scan] = report.link_scans
    assert [problem["kind"] for problem in cast(list[dict[str, str]], scan["problems"])] == ["unreachable"]
    assert "symbolic link" in cast(list[dict[str, str]], scan["problems"])[0]["message"]
