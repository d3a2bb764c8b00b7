"""A connected KB that is not on this machine never blocks a commit (spec §6.2): the hooks run
`pnk sync`, the scan of the missing partner fails with a report, and the commit goes through with
the index refreshed. Runs the real hooks (and so the packaged model), like tests/test_sync_git.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pinakes.cli import main
from pinakes.init import init_kb
from tests.test_links_helpers import THIRD_KB, rows
from tests.test_sync_git import commit, git, indexed_paths, with_pnk_on_path

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def test_hooks_keep_committing_when_a_partner_is_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kb = tmp_path / "kb"
    init_kb(kb, name="hooked")
    with (kb / "pinakes.toml").open("a", encoding="utf-8") as manifest:
        manifest.write(f'\n[[links.kb]]\nid = "{THIRD_KB}"\nalias = "away"\npath = "../not-cloned-here"\n')
    git(kb, "init", "-q")
    git(kb, "config", "user.email", "t@example.com")
    git(kb, "config", "user.name", "t")
    assert main(["-C", str(kb), "install-hooks"]) == 0
    (kb / "docs/first.md").write_text("# First\n\nA note written while the partner is away.\n", encoding="utf-8")
    git(kb, "add", "-A")

    committed = commit(kb, "first", env=with_pnk_on_path())

    assert committed.returncode == 0, committed.stderr
    assert "docs/first.md.pnk.yaml" in git(kb, "show", "--name-only", "--format=", "HEAD")
    assert indexed_paths(kb) == {"docs/first.md"}  # post-commit indexed it despite the missing partner
    assert rows(kb, "SELECT * FROM kb_refs") == []  # a failed scan stamps nothing
    # a person running sync sees the partner reported, and the run still succeeds
    capsys.readouterr()
    assert main(["-C", str(kb), "sync", "--scan-links"]) == 0
    out = capsys.readouterr().out
    assert "links from away: failed" in out and "no KB at" in out and "remedy:" in out
