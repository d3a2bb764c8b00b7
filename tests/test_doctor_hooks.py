"""Doctor's git-hooks check runs each hook in probe mode: "OK" means the hooks execute, are current,
resolve this KB from the repository and find a pnk, not merely that a file with our marker exists."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pinakes.doctor import Check, DoctorContext
from pinakes.doctor.checks_sync import _hooks  # pyright: ignore[reportPrivateUsage] -- the test pins the private check
from pinakes.hooks import HOOK_COMMANDS, PROBE_ENV, hooks_status, install_hooks
from pinakes.init import init_kb
from tests.hook_helpers import old_style_hook

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def hooks_check(kb: Path) -> Check:
    (check,) = _hooks(DoctorContext(kb))
    return check


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    root = tmp_path / "repo" / "kb"
    init_kb(root, name="hooked")
    subprocess.run(["git", "init", "-q"], cwd=root.parent, check=True)
    return root


def hooks_dir(kb: Path) -> Path:
    return kb.parent / ".git" / "hooks"


def test_installed_hooks_are_probed_and_name_what_they_run(kb: Path) -> None:
    assert hooks_check(kb).status == "WARN" and "not installed" in hooks_check(kb).detail
    install_hooks(kb)
    check = hooks_check(kb)
    assert check.status == "OK", check
    assert "probed" in check.detail and "pnk" in check.detail
    status = hooks_status(kb)
    assert status is not None and all(state.ok for state in status.values())


def test_probing_runs_nothing_not_even_the_users_hook(kb: Path, tmp_path: Path) -> None:
    witness = tmp_path / "ran"
    hooks = hooks_dir(kb)
    hooks.mkdir(parents=True, exist_ok=True)
    (hooks / "pre-commit").write_text(f"#!/bin/sh\ntouch {witness}\n", encoding="utf-8")
    (hooks / "pre-commit").chmod(0o755)
    install_hooks(kb)
    (kb / "docs/new.md").write_text("# New\n", encoding="utf-8")
    subprocess.run(["git", "add", "-A"], cwd=kb, check=True)
    assert hooks_check(kb).status == "OK"
    assert not witness.exists()
    assert not (kb / "docs/new.md.pnk.yaml").exists()
    assert not (kb / ".pinakes" / "index.db").exists()


def test_a_moved_repository_still_checks_ok(kb: Path, tmp_path: Path) -> None:
    install_hooks(kb)
    moved = tmp_path / "moved" / "repo"
    moved.parent.mkdir()
    shutil.move(kb.parent, moved)
    assert hooks_check(moved / "kb").status == "OK"


def test_a_kb_moved_inside_its_repository_is_a_warning_naming_the_remedy(kb: Path) -> None:
    install_hooks(kb)
    renamed = kb.parent / "renamed-kb"
    kb.rename(renamed)
    check = hooks_check(renamed)
    assert check.status == "WARN"
    assert f"syncs {kb}, not this KB" in check.detail
    assert check.remedy is not None and check.remedy.startswith("pnk install-hooks")
    install_hooks(renamed)
    assert hooks_check(renamed).status == "OK"


def test_old_absolute_path_hooks_pointing_elsewhere_fail_until_reinstalled(kb: Path, tmp_path: Path) -> None:
    hooks = hooks_dir(kb)
    hooks.mkdir(parents=True, exist_ok=True)
    for name, command in HOOK_COMMANDS.items():  # written before the KB was moved here
        (hooks / name).write_text(old_style_hook(name, command, Path(sys.executable), tmp_path / "old-place"),
                                  encoding="utf-8")
        (hooks / name).chmod(0o755)

    check = hooks_check(kb)

    assert check.status == "FAIL", check
    assert f"an older hook syncs {tmp_path / 'old-place'}, which no longer exists" in check.detail
    assert check.remedy is not None and check.remedy.startswith("pnk install-hooks")
    assert all(hook.upgraded for hook in install_hooks(kb))
    assert hooks_check(kb).status == "OK"


def test_old_hooks_that_still_work_are_a_warning(kb: Path) -> None:
    hooks = hooks_dir(kb)
    hooks.mkdir(parents=True, exist_ok=True)
    for name, command in HOOK_COMMANDS.items():
        (hooks / name).write_text(old_style_hook(name, command, Path(sys.executable), kb), encoding="utf-8")
        (hooks / name).chmod(0o755)
    check = hooks_check(kb)
    assert check.status == "WARN" and "breaks when the KB or its environment moves" in check.detail


def test_old_hooks_whose_interpreter_is_gone_fail(kb: Path, tmp_path: Path) -> None:
    hooks = hooks_dir(kb)
    hooks.mkdir(parents=True, exist_ok=True)
    gone = tmp_path / "old-venv" / "bin" / "python"
    (hooks / "pre-commit").write_text(old_style_hook("pre-commit", HOOK_COMMANDS["pre-commit"], gone, kb),
                                      encoding="utf-8")
    (hooks / "pre-commit").chmod(0o755)
    check = hooks_check(kb)
    assert check.status == "FAIL" and f"runs {gone}, which no longer exists" in check.detail


def test_a_hook_that_is_not_executable_is_reported(kb: Path) -> None:
    install_hooks(kb)
    (hooks_dir(kb) / "post-merge").chmod(0o644)
    check = hooks_check(kb)
    assert check.status == "WARN" and "post-merge: not executable" in check.detail


def test_a_hook_that_cannot_start_fails(kb: Path) -> None:
    install_hooks(kb)
    hook = hooks_dir(kb) / "pre-commit"
    hook.write_text(hook.read_text(encoding="utf-8").replace("#!/bin/sh", "#!/nonexistent/sh", 1),
                    encoding="utf-8")
    check = hooks_check(kb)
    assert check.status == "FAIL" and "pre-commit: does not run" in check.detail


def test_a_hook_that_finds_no_pnk_is_a_warning(kb: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "deleted-venv" / "bin" / "python"))
    install_hooks(kb)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    git_path = shutil.which("git")
    assert git_path is not None
    (bin_dir / "git").symlink_to(git_path)
    monkeypatch.setenv("PATH", str(bin_dir))  # no pnk, no python3

    check = hooks_check(kb)

    assert check.status == "WARN", check
    assert "finds no pnk from this environment" in check.detail
    assert check.remedy is not None and "activate the environment" in check.remedy


def test_a_foreign_hook_is_not_counted_as_installed(kb: Path) -> None:
    install_hooks(kb)
    (hooks_dir(kb) / "post-commit").write_text("#!/bin/sh\necho mine\n", encoding="utf-8")
    check = hooks_check(kb)
    assert check.status == "WARN" and "post-commit: a hook Pinakes did not write" in check.detail


def test_the_probe_is_read_only_and_says_where_the_kb_is(kb: Path) -> None:
    install_hooks(kb)
    probe = subprocess.run([str(hooks_dir(kb) / "post-commit")], cwd=kb.parent, capture_output=True, text=True,
                           env={**os.environ, PROBE_ENV: "1"}, check=True)
    lines = dict(line.split("=", 1) for line in probe.stdout.splitlines())
    assert Path(lines["kb"]).resolve() == kb.resolve()
    assert lines["pnk"]
