"""A document moved and edited without its sidecar (spec §6.4's "likely moved without its sidecar"):
`pnk status` names the pair and the `pnk adopt` command before the sync that would soft-delete the
old ID, the pre-commit hook warns the same way, and the command as printed keeps the ID, so links to
the document keep resolving. One rule (pipeline/pair.py `likely_moves`) for the three of them."""

from __future__ import annotations

import json
import shlex
import shutil
import sqlite3
from pathlib import Path
from typing import Any, cast

import pytest

from pinakes.cli import main
from pinakes.init import init_kb
from pinakes.pipeline.report import SyncReport
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.fakes import FakeEmbedder
from tests.test_sync_git import commit, git, with_pnk_on_path

BODY = "\n\n".join(f"Paragraph {n} about the harbour dredging schedule and its permits." for n in range(8))
OLD, NEW = "docs/plan.md", "docs/notes/renamed-plan.md"
ADOPT = f"pnk adopt {OLD}.pnk.yaml {NEW}"


def sync(root: Path, **options: bool) -> SyncReport:
    report = run_sync(root, SyncOptions(quiet=True, **cast("dict[str, Any]", options)), embedder=FakeEmbedder())
    assert report.ok, report.render_text()
    return report


def active_ids(root: Path) -> dict[str, str]:
    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    try:
        return dict(conn.execute("SELECT path, id FROM documents WHERE state = 'active'").fetchall())
    finally:
        conn.close()


def write_linked_plan(root: Path) -> None:
    """docs/plan.md, and docs/index.md whose sidecar links to it (added with `pnk link`)."""
    (root / OLD).write_text(f"# Plan\n\n{BODY}\n", encoding="utf-8")
    (root / "docs/index.md").write_text("# Index\n\nThe overview of every plan the harbour keeps.\n",
                                        encoding="utf-8")


def link_index_to_plan(root: Path) -> None:
    assert main(["-C", str(root), "link", "docs/index.md", OLD, "--rel", "cites"]) == 0


def move_and_edit(root: Path) -> None:
    """What a person does in a file manager: the document moves, its sidecar stays behind."""
    (root / OLD).unlink()
    (root / NEW).parent.mkdir(parents=True, exist_ok=True)
    (root / NEW).write_text(f"# Plan, revised\n\n{BODY}\n\nOne more line, added after the move.\n",
                            encoding="utf-8")


def linked_from_index(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, str | None, bool]:
    """The document docs/index.md links to, as `pnk links` shows it: (ID, path, resolves)."""
    capsys.readouterr()
    assert main(["-C", str(root), "links", "docs/index.md", "--direction", "out", "--json"]) == 0
    neighbours = json.loads(capsys.readouterr().out)["neighbours"]
    assert len(neighbours) == 1, neighbours
    return neighbours[0]["doc_id"], neighbours[0]["path"], neighbours[0]["resolved"]


def status(root: Path, capsys: pytest.CaptureFixture[str], *flags: str) -> str:
    capsys.readouterr()
    assert main(["-C", str(root), "status", *flags]) == 0
    return capsys.readouterr().out


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    init_kb(root, name="moves")
    write_linked_plan(root)
    sync(root)
    link_index_to_plan(root)
    sync(root)
    return root


def test_status_names_the_likely_move_and_the_adopt_command_before_any_sync(
        kb: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    old_id = active_ids(kb)[OLD]
    assert linked_from_index(kb, capsys) == (old_id, OLD, True)
    move_and_edit(kb)

    text = status(kb, capsys)
    assert "likely moved without their sidecar" in text and "breaking links" in text
    assert f"  {OLD} -> {NEW} (" in text and text.count(ADOPT) == 1
    assert "run the `pnk adopt` command above to keep that ID, then `pnk sync`" in text
    moves = json.loads(status(kb, capsys, "--json"))["likely_moves"]
    assert len(moves) == 1
    assert moves[0]["from"] == OLD and moves[0]["to"] == NEW and moves[0]["id"] == old_id
    assert moves[0]["adopt"] == ADOPT and moves[0]["why"].endswith("of its lines")
    assert active_ids(kb)[OLD] == old_id and not (kb / (NEW + ".pnk.yaml")).exists()  # status wrote nothing

    # The command exactly as printed, from the KB's folder as a person would paste it.
    monkeypatch.chdir(kb)
    assert main(shlex.split(ADOPT)[1:]) == 0
    after_adopt = json.loads(status(kb, capsys, "--json"))
    assert after_adopt["likely_moves"] == [] and after_adopt["deleted"] == []
    assert after_adopt["moved"] == [{"from": OLD, "to": NEW}]

    report = sync(kb)
    assert report.deleted == [] and report.renamed == [(OLD, NEW)]
    assert active_ids(kb) == {"docs/index.md": active_ids(kb)["docs/index.md"], NEW: old_id}
    assert linked_from_index(kb, capsys) == (old_id, NEW, True)  # the link follows the move


def test_the_sync_names_the_same_pair_status_named_and_the_link_breaks_until_adopt(
        kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old_id = active_ids(kb)[OLD]
    move_and_edit(kb)
    named = json.loads(status(kb, capsys, "--json"))["likely_moves"]

    report = sync(kb)  # nobody ran the command: soft-delete and a new ID, as the spec says
    assert report.deleted == [OLD] and active_ids(kb)[NEW] != old_id
    hints = [note for note in report.notes if note.startswith("likely moved without its sidecar")]
    assert [f"{OLD} -> {NEW} ({named[0]['why']})" in hint and f"{named[0]['adopt']} && pnk sync" in hint
            for hint in hints] == [True]
    assert linked_from_index(kb, capsys) == (old_id, None, False)  # the link now points at a deleted ID

    assert main(["-C", str(kb), *shlex.split(named[0]["adopt"])[1:]]) == 0
    sync(kb)
    assert active_ids(kb)[NEW] == old_id
    assert linked_from_index(kb, capsys) == (old_id, NEW, True)


def test_an_unrelated_deletion_and_addition_are_not_called_a_move(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (kb / OLD).unlink()
    (kb / "docs/recipes.md").write_text("# Recipes\n\nBread, soup and a very good apple crumble.\n",
                                        encoding="utf-8")
    data = json.loads(status(kb, capsys, "--json"))
    assert data["deleted"] == [OLD] and data["new"] == ["docs/recipes.md"]
    assert data["likely_moves"] == []
    assert "pnk adopt" not in status(kb, capsys)


def test_a_move_whose_sidecar_was_deleted_too_is_not_offered_an_adopt_that_cannot_work(
        kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    move_and_edit(kb)
    (kb / (OLD + ".pnk.yaml")).unlink()
    data = json.loads(status(kb, capsys, "--json"))
    assert data["deleted"] == [OLD] and data["likely_moves"] == []


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_pre_commit_hook_warns_with_the_adopt_command_and_lets_the_commit_through(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "kb"
    init_kb(root, name="hooked")
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    assert main(["-C", str(root), "install-hooks"]) == 0
    (root / ".git/hooks/post-commit").unlink()  # it would index with the real model: synced here instead
    write_linked_plan(root)
    git(root, "add", "-A")
    first = commit(root, "plan", env=with_pnk_on_path())
    assert first.returncode == 0, first.stderr
    assert "likely moved" not in first.stdout + first.stderr
    sync(root)
    link_index_to_plan(root)
    git(root, "add", "-A")
    assert commit(root, "link", env=with_pnk_on_path()).returncode == 0
    sync(root)
    old_id = active_ids(root)[OLD]

    # Moved in a file manager, edited, and only the new file staged: git sees an added file, no
    # rename, so the hook mints a new ID for it. Even a team with strict hooks gets a warning, not a
    # blocked commit: the rule is a likelihood, and the command works as well after the commit.
    move_and_edit(root)
    git(root, "add", NEW)
    git(root, "config", "pinakes.strictHooks", "true")
    committed = commit(root, "move the plan", env=with_pnk_on_path())

    assert committed.returncode == 0, committed.stderr
    said = [line for line in (committed.stdout + committed.stderr).splitlines() if "likely moved" in line]
    assert len(said) == 1 and said[0].startswith("warning: likely moved without its sidecar:")
    assert f"{OLD} -> {NEW} (" in said[0] and old_id in said[0] and f"{ADOPT} && pnk sync" in said[0]
    assert f"{NEW}.pnk.yaml" in git(root, "show", "--name-only", "--format=", "HEAD")

    report = sync(root, index_only=True)  # what post-commit runs: the old ID goes, and it says why
    assert report.deleted == [OLD] and any(ADOPT in note for note in report.notes)
    assert linked_from_index(root, capsys)[2] is False

    assert main(["-C", str(root), *shlex.split(ADOPT)[1:]]) == 0
    sync(root)
    assert active_ids(root)[NEW] == old_id
    assert linked_from_index(root, capsys) == (old_id, NEW, True)


def test_a_renamed_pdf_the_hook_minted_for_is_named_by_its_content(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A PDF renamed with only its new path staged: the hook's minting (run here without git) takes
    away the plain sync's exact-content rename, so the rule names it by content, not by lines."""
    from tests.paid_gate_harness import minimal_pdf

    root = tmp_path / "kb"
    init_kb(root, name="pdfs")
    old, new = "docs/report.pdf", "docs/archive/harbour-2025.pdf"
    (root / old).write_text(minimal_pdf("Quarterly report on the harbour dredging."), encoding="latin-1")
    (root / "docs/index.md").write_text("# Index\n\nThe overview of every report.\n", encoding="utf-8")
    sync(root)
    assert main(["-C", str(root), "link", "docs/index.md", old, "--rel", "cites"]) == 0
    sync(root)
    old_id = active_ids(root)[old]
    (root / new).parent.mkdir()
    (root / old).rename(root / new)

    minted = run_sync(root, SyncOptions(sidecars_only=True, quiet=True))
    adopt = f"pnk adopt {old}.pnk.yaml {new}"
    assert minted.sidecars_written == [f"{new}.pnk.yaml"]
    assert [w for w in minted.warnings if "likely moved" in w] == [
        f"likely moved without its sidecar: {old} -> {new} (the same content); {new} got a new ID, and the "
        f"next sync soft-deletes {old}'s ID {old_id}, which breaks links to it. To keep the old ID: "
        f"{adopt} && pnk sync (then commit the sidecar)"]
    moves = json.loads(status(root, capsys, "--json"))["likely_moves"]
    assert moves == [{"from": old, "to": new, "id": old_id, "why": "the same content", "adopt": adopt}]

    assert main(["-C", str(root), *shlex.split(adopt)[1:]]) == 0
    report = sync(root)
    assert report.renamed == [(old, new)] and report.deleted == []
    assert linked_from_index(root, capsys) == (old_id, new, True)
