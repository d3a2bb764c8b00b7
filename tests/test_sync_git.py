"""The git side of freshness: --sidecars-only --stage (pre-commit) and `pnk install-hooks`: hooks that
survive a moved KB, a new environment and a fresh clone, and say one line when they cannot run."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from pinakes.cli import main
from pinakes.hooks import FORMAT_MARKER, HOOK_COMMANDS, MARKER, STRICT_CONFIG, install_hooks
from pinakes.init import init_kb
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.hook_helpers import old_style_hook

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


# --- hooks that survive a moved KB, a new environment and a fresh clone ---------------------------


def commit(root: Path, message: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`git commit` as a person runs it: hooks included, the outcome returned rather than raised."""
    return subprocess.run(["git", "commit", "-qm", message], cwd=root, capture_output=True, text=True, env=env)


def with_pnk_on_path() -> dict[str, str]:
    """The environment of a shell where pinakes' environment is active: `pnk` is on PATH."""
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def path_with(tmp_path: Path, **programs: str | None) -> dict[str, str]:
    """An environment whose PATH holds git and the `programs` given (name -> script text), nothing else:
    no pnk and no python3 to fall back on."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    git_path = shutil.which("git")
    assert git_path is not None
    (bin_dir / "git").symlink_to(git_path)
    for name, text in programs.items():
        assert text is not None
        (bin_dir / name).write_text(text, encoding="utf-8")
        (bin_dir / name).chmod(0o755)
    return {**os.environ, "PATH": str(bin_dir)}


def indexed_paths(kb: Path) -> set[str]:
    conn = sqlite3.connect(kb / ".pinakes" / "index.db")
    try:
        return {row[0] for row in conn.execute("SELECT path FROM documents WHERE state = 'active'")}
    finally:
        conn.close()


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


def test_hooks_hold_no_absolute_kb_path_and_find_pnk_at_commit_time(tmp_path: Path) -> None:
    top = tmp_path / "repo"
    kb = top / "notes" / "kb"
    init_kb(kb, name="sub-kb")
    git(top, "init", "-q")
    install_hooks(kb)
    for name in HOOK_COMMANDS:
        text = (top / ".git/hooks" / name).read_text(encoding="utf-8")
        assert "kb_rel=notes/kb\n" in text
        assert str(kb) not in text and str(top) not in text
        assert "command -v pnk" in text and "git rev-parse --show-toplevel" in text
        assert FORMAT_MARKER in text


@pytest.mark.parametrize("where", [".", "notes/kb"])
def test_a_moved_kb_commits_cleanly_with_its_index_refreshed(tmp_path: Path, where: str) -> None:
    """Done-when of the issue: install the hooks, move the whole repository, commit a new document."""
    top = tmp_path / "before" / "repo"
    kb = top / where
    init_kb(kb, name="moving-kb")
    git(top, "init", "-q")
    git(top, "config", "user.email", "t@example.com")
    git(top, "config", "user.name", "t")
    assert main(["-C", str(kb), "install-hooks"]) == 0
    (kb / "docs/first.md").write_text("# First\n\nWritten before the move.\n", encoding="utf-8")
    git(top, "add", "-A")
    first = commit(top, "first", env=with_pnk_on_path())
    assert first.returncode == 0, first.stderr
    assert indexed_paths(kb) == {"docs/first.md"}

    moved_top = tmp_path / "after" / "elsewhere"
    moved_top.parent.mkdir()
    shutil.move(top, moved_top)
    moved_kb = moved_top / where
    (moved_kb / "docs/second.md").write_text("# Second\n\nWritten after the move.\n", encoding="utf-8")
    git(moved_top, "add", "-A")
    second = commit(moved_top, "second", env=with_pnk_on_path())

    assert second.returncode == 0, second.stderr
    # git shows the hooks' output on stderr: the pre-commit report, and no error or warning
    assert "wrote sidecar docs/second.md.pnk.yaml" in second.stderr
    assert "does not exist" not in second.stderr and "pinakes:" not in second.stderr, second.stderr
    prefix = "" if where == "." else f"{where}/"
    assert f"{prefix}docs/second.md.pnk.yaml" in git(moved_top, "show", "--name-only", "--format=", "HEAD")
    assert indexed_paths(moved_kb) == {"docs/first.md", "docs/second.md"}  # post-commit refreshed it


def test_a_fresh_clone_with_hooks_installed_works_on_the_first_commit(repo: Path, tmp_path: Path) -> None:
    (repo / "docs/shared.md").write_text("# Shared\n\nCommitted upstream with its sidecar.\n", encoding="utf-8")
    run_sync(repo, SyncOptions(sidecars_only=True))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "upstream")
    clone = tmp_path / "elsewhere" / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True, capture_output=True)
    git(clone, "config", "user.email", "c@example.com")
    git(clone, "config", "user.name", "c")
    assert not (clone / ".pinakes" / "index.db").exists()

    assert main(["-C", str(clone), "install-hooks"]) == 0
    (clone / "docs/mine.md").write_text("# Mine\n\nThe clone's first document.\n", encoding="utf-8")
    git(clone, "add", "docs/mine.md")
    result = commit(clone, "first commit in the clone", env=with_pnk_on_path())

    assert result.returncode == 0, result.stderr
    assert "docs/mine.md.pnk.yaml" in git(clone, "show", "--name-only", "--format=", "HEAD")
    assert indexed_paths(clone) == {"docs/shared.md", "docs/mine.md"}


def test_without_pnk_each_hook_says_one_line_and_the_commit_goes_through(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The environment that installed the hooks is gone, and nothing on PATH provides pnk."""
    monkeypatch.setattr(sys, "executable", str(tmp_path / "deleted-venv" / "bin" / "python"))
    install_hooks(repo)
    (repo / "docs/new.md").write_text("# New\n", encoding="utf-8")
    git(repo, "add", "docs/new.md")
    env = path_with(tmp_path)

    result = commit(repo, "without pinakes", env=env)

    assert result.returncode == 0, result.stderr
    pre, post = [line for line in result.stderr.splitlines() if line.strip()]
    assert pre.startswith("pinakes: pnk not found on PATH") and "activate the environment" in pre
    assert "no sidecar in this commit" in pre
    assert post.startswith("pinakes: pnk not found on PATH") and "the index was not refreshed" in post
    assert git(repo, "show", "--name-only", "--format=", "HEAD").split() == ["docs/new.md"]


def test_strict_hooks_block_a_commit_without_pnk_in_one_line(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "deleted-venv" / "bin" / "python"))
    install_hooks(repo)
    git(repo, "config", STRICT_CONFIG, "true")
    (repo / "docs/new.md").write_text("# New\n", encoding="utf-8")
    git(repo, "add", "docs/new.md")

    result = commit(repo, "blocked", env=path_with(tmp_path))

    assert result.returncode != 0
    line = one_line(result.stderr)
    assert line.startswith("pinakes: pnk not found on PATH") and "commit blocked" in line
    assert "--no-verify" in line
    assert subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True).returncode != 0


def test_a_pnk_that_does_not_start_is_reported_not_a_blocked_commit(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `pnk` console script left on PATH by a moved virtualenv: its interpreter is gone."""
    monkeypatch.setattr(sys, "executable", str(tmp_path / "deleted-venv" / "bin" / "python"))
    install_hooks(repo)
    (repo / ".git/hooks/post-commit").unlink()
    (repo / "docs/new.md").write_text("# New\n", encoding="utf-8")
    git(repo, "add", "docs/new.md")
    env = path_with(tmp_path, pnk=f"#!{tmp_path / 'moved-venv' / 'bin' / 'python'}\n")

    result = commit(repo, "stale pnk", env=env)

    assert result.returncode == 0, result.stderr
    ours = [line for line in result.stderr.splitlines() if line.startswith("pinakes:")]
    assert len(ours) == 1 and "did not start" in ours[0], result.stderr


def test_a_users_hook_still_runs_first_and_can_block(repo: Path) -> None:
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    (hooks / "pre-commit").write_text("#!/bin/sh\necho 'user hook says no' >&2\nexit 3\n", encoding="utf-8")
    (hooks / "pre-commit").chmod(0o755)
    install_hooks(repo)
    (repo / "docs/new.md").write_text("# New\n", encoding="utf-8")
    git(repo, "add", "docs/new.md")
    result = commit(repo, "blocked by the user's hook", env=with_pnk_on_path())
    assert result.returncode != 0 and "user hook says no" in result.stderr
    assert not (repo / "docs/new.md.pnk.yaml").exists()  # pinakes never ran


def test_reinstalling_upgrades_an_old_absolute_path_hook_in_place(repo: Path, tmp_path: Path) -> None:
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    for name, command in HOOK_COMMANDS.items():
        (hooks / name).write_text(old_style_hook(name, command, tmp_path / "old-venv/bin/python",
                                                 tmp_path / "old-place"), encoding="utf-8")
        (hooks / name).chmod(0o755)

    installed = install_hooks(repo)

    assert all(hook.upgraded and hook.preserved is None for hook in installed)
    assert not list(hooks.glob("*.local"))  # an old Pinakes hook is replaced, not kept as the user's
    for name in HOOK_COMMANDS:
        assert FORMAT_MARKER in (hooks / name).read_text(encoding="utf-8")
    assert not any(hook.upgraded for hook in install_hooks(repo))

