"""The git side of freshness: --sidecars-only --stage (pre-commit) and `pnk install-hooks`."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from pinakes.cli import main
from pinakes.hooks import HOOK_COMMANDS, MARKER, install_hooks
from pinakes.init import init_kb
from pinakes.sync.context import SyncOptions
from pinakes.sync.engine import run_sync

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    init_kb(root, name="git-kb")
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    return root


def test_sidecars_only_stage_mints_for_staged_documents_and_stages_them(repo: Path) -> None:
    (repo / "docs/staged.md").write_text("# Staged\n", encoding="utf-8")
    (repo / "docs/unstaged.md").write_text("# Not staged\n", encoding="utf-8")
    git(repo, "add", "docs/staged.md")
    report = run_sync(repo, SyncOptions(sidecars_only=True, stage=True))
    assert report.sidecars_written == ["docs/staged.md.pnk.yaml"]
    assert not (repo / "docs/unstaged.md.pnk.yaml").exists()
    assert "docs/staged.md.pnk.yaml" in git(repo, "diff", "--cached", "--name-only")
    assert not (repo / ".pinakes" / "index.db").exists()  # never opens the index


def test_a_staged_rename_carries_its_sidecar_so_the_id_survives(repo: Path) -> None:
    (repo / "docs/a.md").write_text("# A document long enough for rename detection\n" * 5, encoding="utf-8")
    run_sync(repo, SyncOptions(sidecars_only=True))
    sidecar = (repo / "docs/a.md.pnk.yaml").read_bytes()
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "one")
    git(repo, "mv", "docs/a.md", "docs/b.md")
    report = run_sync(repo, SyncOptions(sidecars_only=True, stage=True))
    assert (repo / "docs/b.md.pnk.yaml").read_bytes() == sidecar
    assert not (repo / "docs/a.md.pnk.yaml").exists()
    assert any("ID travels" in note for note in report.notes)


def test_install_hooks_is_idempotent_and_keeps_a_users_hook(repo: Path) -> None:
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    user_hook = hooks / "pre-commit"
    user_hook.write_text("#!/bin/sh\necho user hook\n", encoding="utf-8")
    user_hook.chmod(0o755)
    first = install_hooks(repo)
    second = install_hooks(repo)
    assert [h.name for h in first] == list(HOOK_COMMANDS) == [h.name for h in second]
    assert (hooks / "pre-commit.local").read_text(encoding="utf-8") == "#!/bin/sh\necho user hook\n"
    for name in HOOK_COMMANDS:
        text = (hooks / name).read_text(encoding="utf-8")
        assert MARKER in text and "--extract=pypdfium2" in text
    assert "sidecars-only --stage" in (hooks / "pre-commit").read_text(encoding="utf-8")
    assert "--index-only --quiet" in (hooks / "post-commit").read_text(encoding="utf-8")


def test_the_pre_commit_hook_puts_a_new_documents_id_in_the_same_commit(repo: Path) -> None:
    assert main(["-C", str(repo), "install-hooks"]) == 0
    (repo / "docs/new.md").write_text("# New\n", encoding="utf-8")
    git(repo, "add", "docs/new.md")
    # post-commit would index with the real model; keep this test about the pre-commit half
    (repo / ".git/hooks/post-commit").unlink()
    git(repo, "commit", "-qm", "add new")
    assert "docs/new.md.pnk.yaml" in git(repo, "show", "--name-only", "--format=", "HEAD")


def test_install_hooks_outside_git_names_the_remedy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "plain"
    init_kb(root, name="plain")
    assert main(["-C", str(root), "install-hooks"]) != 0
    assert "git init" in capsys.readouterr().err
