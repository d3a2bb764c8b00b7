"""`pnk doctor --prune` (spec §6.4): the only command that deletes sidecars — the orphaned ones it lists,
after an explicit yes, never one whose ID the index still holds as active."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from pinakes.cli import main
from pinakes.doctor.prune import delete_orphans, find_orphans
from pinakes.errors import EXIT_CONFIG, EXIT_FAILURE, EXIT_LOCKED, EXIT_UNAVAILABLE
from pinakes.ids import new_ulid
from pinakes.init import init_kb
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.fakes import FakeEmbedder

SIDE = ".pnk.yaml"


def sync(root: Path) -> None:
    assert run_sync(root, SyncOptions(), embedder=FakeEmbedder()).ok


def make_kb(root: Path) -> Path:
    init_kb(root, name="prune")
    docs = root / "docs"
    docs.mkdir(exist_ok=True)
    for name, text in (("alpha", "Aeroplanes and wings."), ("beta", "Boats and harbours."),
                       ("gamma", "Gardens and greenhouses.")):
        (docs / f"{name}.md").write_text(f"# {name.title()}\n\n{text}\n", encoding="utf-8")
    sync(root)
    return root


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    return make_kb(tmp_path / "kb")


def sidecar_id(path: Path) -> str:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("id:"):
            return line.split(":", 1)[1].strip().strip("'\"")
    raise AssertionError(f"no id in {path}")


def index_row(root: Path, doc_id: str) -> tuple[str, str] | None:
    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    try:
        return conn.execute("SELECT state, path FROM documents WHERE id = ?", (doc_id,)).fetchone()
    finally:
        conn.close()


def pnk(capsys: pytest.CaptureFixture[str], root: Path, *args: str) -> tuple[int, str, str]:
    code = main(["-C", str(root), "doctor", "--prune", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(autouse=True)
def no_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests run without a terminal unless one says otherwise (pytest's stdin may be anything)."""
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)


def delete_and_sync(root: Path, name: str) -> str:
    """Delete docs/<name>.md, sync (soft delete), and return the ULID its left-behind sidecar holds."""
    doc_id = sidecar_id(root / f"docs/{name}.md{SIDE}")
    (root / f"docs/{name}.md").unlink()
    sync(root)
    assert index_row(root, doc_id) == ("deleted", f"docs/{name}.md")
    return doc_id


def test_a_deleted_documents_sidecar_is_listed_and_yes_deletes_it_and_only_it(
        kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc_id = delete_and_sync(kb, "beta")
    before = sorted(p.name for p in (kb / "docs").iterdir())
    plan = find_orphans(kb)
    assert [(o.sidecar, o.document, o.doc_id, o.index_state) for o in plan.orphans] == [
        (f"docs/beta.md{SIDE}", "docs/beta.md", doc_id, "deleted")]
    assert plan.orphans[0].deleted_since  # when the index recorded the soft delete

    code, out, _err = pnk(capsys, kb, "--yes")
    assert code == 0
    assert f"docs/beta.md{SIDE}  {doc_id}  soft-deleted since" in out
    assert f"deleted docs/beta.md{SIDE}" in out and "pruned 1 sidecar;" in out
    after = sorted(p.name for p in (kb / "docs").iterdir())
    assert sorted(set(before) - set(after)) == [f"beta.md{SIDE}"]
    # The index is left alone: the ID stays a soft-deleted tombstone, never reused.
    assert index_row(kb, doc_id) == ("deleted", "docs/beta.md")
    sync(kb)
    assert index_row(kb, doc_id) == ("deleted", "docs/beta.md")
    assert find_orphans(kb).orphans == []


def test_a_renamed_document_whose_sidecar_travelled_is_not_listed(kb: Path) -> None:
    doc_id = sidecar_id(kb / f"docs/alpha.md{SIDE}")
    (kb / "docs/alpha.md").rename(kb / "docs/renamed.md")
    (kb / f"docs/alpha.md{SIDE}").rename(kb / f"docs/renamed.md{SIDE}")
    assert find_orphans(kb).orphans == []  # before the sync sees the rename
    sync(kb)
    assert index_row(kb, doc_id) == ("active", "docs/renamed.md")
    assert find_orphans(kb).orphans == []


def test_a_sidecar_whose_id_is_active_at_another_path_is_never_listed(kb: Path) -> None:
    """A copy of the sidecar travelled with the file and the original stayed: the ID lives on."""
    doc_id = sidecar_id(kb / f"docs/alpha.md{SIDE}")
    (kb / "docs/alpha.md").rename(kb / "docs/moved.md")
    (kb / f"docs/moved.md{SIDE}").write_bytes((kb / f"docs/alpha.md{SIDE}").read_bytes())
    sync(kb)
    assert index_row(kb, doc_id) == ("active", "docs/moved.md")
    plan = find_orphans(kb)
    assert plan.orphans == []
    assert [k.sidecar for k in plan.kept] == [f"docs/alpha.md{SIDE}"]
    assert "active at docs/moved.md" in plan.kept[0].reason


def test_an_active_document_is_never_listed_even_when_its_file_is_gone_before_a_sync(
        kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (kb / "docs/gamma.md").unlink()  # no sync yet: the index still holds it as active here
    plan = find_orphans(kb)
    assert plan.orphans == []
    assert "still holds" in plan.kept[0].reason and "pnk sync" in plan.kept[0].reason
    code, out, _err = pnk(capsys, kb, "--yes")
    assert code == 0 and "nothing to prune" in out
    assert (kb / f"docs/gamma.md{SIDE}").exists()
    for name in ("alpha", "beta"):  # the live documents' sidecars are not even candidates
        assert not any(k.sidecar.startswith(f"docs/{name}") for k in plan.kept)


def test_without_a_terminal_and_without_yes_nothing_is_deleted(
        kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    delete_and_sync(kb, "beta")
    code, out, err = pnk(capsys, kb)
    assert code == EXIT_CONFIG
    assert f"docs/beta.md{SIDE}" in out  # the list is printed before the refusal
    assert "no terminal" in err and "--yes" in err
    assert (kb / f"docs/beta.md{SIDE}").exists()


def test_on_a_terminal_only_y_deletes(kb: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    delete_and_sync(kb, "beta")
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    prompts: list[str] = []
    answers = iter(["", "y"])

    def answer(prompt: str) -> str:
        prompts.append(prompt)
        return next(answers)

    monkeypatch.setattr("builtins.input", answer)
    code, _out, err = pnk(capsys, kb)
    assert code == EXIT_CONFIG and "nothing was deleted" in err
    assert (kb / f"docs/beta.md{SIDE}").exists()
    code, out, _err = pnk(capsys, kb)
    assert code == 0 and f"deleted docs/beta.md{SIDE}" in out
    assert prompts == ["delete 1 sidecar? [y/N] "] * 2
    assert not (kb / f"docs/beta.md{SIDE}").exists()


def test_json_lists_then_reports_what_was_deleted(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc_id = delete_and_sync(kb, "beta")
    code, out, _err = pnk(capsys, kb, "--json")
    assert code == EXIT_CONFIG  # --json never asks: without --yes it lists and refuses
    refused = json.loads(out)
    assert refused["ok"] is False and refused["error"] == "UsageError" and "--yes" in refused["remedy"]
    assert refused["deleted"] == [] and (kb / f"docs/beta.md{SIDE}").exists()
    orphan = refused["orphans"][0]
    assert set(orphan) == {"sidecar", "document", "doc_id", "index_state", "deleted_since"}
    assert (orphan["sidecar"], orphan["document"], orphan["doc_id"], orphan["index_state"]) == (
        f"docs/beta.md{SIDE}", "docs/beta.md", doc_id, "deleted")

    code, out, _err = pnk(capsys, kb, "--json", "--yes")
    done = json.loads(out)
    assert code == 0
    assert {"ok", "kb_root", "orphans", "kept", "deleted", "skipped", "failed", "warnings"} <= set(done)
    assert done["ok"] is True and done["kb_root"] == str(kb.resolve())
    assert done["deleted"] == [f"docs/beta.md{SIDE}"] and done["failed"] == [] and done["skipped"] == []


def test_nothing_to_prune_says_so_and_exits_0(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = pnk(capsys, kb)
    assert code == 0 and "nothing to prune" in out
    code, out, _err = pnk(capsys, kb, "--json")
    assert code == 0
    data = json.loads(out)
    assert data["ok"] is True and data["orphans"] == [] and data["deleted"] == []


def test_a_dangling_symlink_at_the_document_path_keeps_the_sidecar(
        kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The link's target may be on a drive that is not mounted: the ID must survive its return."""
    delete_and_sync(kb, "beta")
    (kb / "docs/beta.md").symlink_to(kb / "unmounted/beta.md")
    plan = find_orphans(kb)
    assert plan.orphans == []
    assert [k.sidecar for k in plan.kept] == [f"docs/beta.md{SIDE}"]
    assert "symbolic link to nothing" in plan.kept[0].reason
    code, out, _err = pnk(capsys, kb, "--yes")
    assert code == 0 and "nothing to prune" in out and "symbolic link to nothing" in out
    assert (kb / f"docs/beta.md{SIDE}").exists()
    (kb / "docs/beta.md").unlink()  # the link removed, the sidecar becomes prunable
    assert [o.sidecar for o in find_orphans(kb).orphans] == [f"docs/beta.md{SIDE}"]


def test_a_kb_path_with_spaces(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = make_kb(tmp_path / "my notes" / "a kb")
    (root / "docs/sub dir").mkdir()
    (root / "docs/sub dir/one file.md").write_text("# One\n\nA file with spaces.\n", encoding="utf-8")
    sync(root)
    delete_and_sync(root, "sub dir/one file")
    code, out, _err = pnk(capsys, root, "--yes")
    assert code == 0 and f"deleted docs/sub dir/one file.md{SIDE}" in out
    assert not (root / f"docs/sub dir/one file.md{SIDE}").exists()
    assert (root / f"docs/alpha.md{SIDE}").exists()


def test_a_sidecar_never_indexed_is_listed_and_a_broken_one_is_kept(kb: Path) -> None:
    (kb / f"docs/never.md{SIDE}").write_text(f"id: {new_ulid()}\n", encoding="utf-8")
    (kb / f"docs/broken.md{SIDE}").write_text("id: [unclosed\n", encoding="utf-8")
    plan = find_orphans(kb)
    assert [(o.sidecar, o.index_state, o.deleted_since) for o in plan.orphans] == [
        (f"docs/never.md{SIDE}", "not indexed", None)]
    assert [k.sidecar for k in plan.kept] == [f"docs/broken.md{SIDE}"]
    assert "does not parse" in plan.kept[0].reason


def test_a_sidecar_beside_an_existing_unindexed_file_is_kept(kb: Path) -> None:
    (kb / "docs/sheet.xlsx").write_text("no extractor reads this", encoding="utf-8")
    (kb / f"docs/sheet.xlsx{SIDE}").write_text(f"id: {new_ulid()}\n", encoding="utf-8")
    plan = find_orphans(kb)
    assert plan.orphans == [] and "exists but is not indexed" in plan.kept[0].reason


def test_a_listed_sidecar_whose_document_came_back_is_not_deleted(kb: Path) -> None:
    delete_and_sync(kb, "beta")
    plan = find_orphans(kb)
    (kb / "docs/beta.md").write_text("# Beta\n\nBack again.\n", encoding="utf-8")
    outcome = delete_orphans(plan.root, plan.orphans)
    assert outcome.deleted == [] and outcome.ok
    assert [k.sidecar for k in outcome.skipped] == [f"docs/beta.md{SIDE}"]
    assert "no longer orphaned" in outcome.skipped[0].reason
    assert (kb / f"docs/beta.md{SIDE}").exists()


def test_a_failed_deletion_names_the_file_and_the_rest_go_on(
        kb: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    delete_and_sync(kb, "alpha")
    delete_and_sync(kb, "beta")
    real_unlink = os.unlink
    stuck = str(kb.resolve() / f"docs/alpha.md{SIDE}")

    def unlink(path: str | os.PathLike[str], *args: object, **kwargs: object) -> None:
        if os.fspath(path) == stuck:
            raise PermissionError(13, "Permission denied", stuck)
        real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", unlink)
    code, out, err = pnk(capsys, kb, "--yes")
    assert code == EXIT_FAILURE
    assert f"failed to delete docs/alpha.md{SIDE}" in err and "Permission denied" in err
    assert f"deleted docs/beta.md{SIDE}" in out and "1 could not be deleted" in out
    assert (kb / f"docs/alpha.md{SIDE}").exists() and not (kb / f"docs/beta.md{SIDE}").exists()


def test_a_running_sync_makes_prune_refuse_and_delete_nothing(
        kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    delete_and_sync(kb, "beta")
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (kb / ".pinakes/sync.lock").write_text(json.dumps(
            {"pid": holder.pid, "hostname": socket.gethostname(), "started": "2026-01-01T00:00:00+00:00"}),
            encoding="utf-8")
        code, _out, err = pnk(capsys, kb, "--yes")
    finally:
        holder.kill()
        holder.wait()
    assert code == EXIT_LOCKED and "a sync is running" in err and f"pid {holder.pid}" in err
    assert (kb / f"docs/beta.md{SIDE}").exists()
    assert (kb / ".pinakes/sync.lock").exists()  # someone else's lock is left as it was


def test_prune_with_verify_or_yes_alone_is_a_usage_error(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert pnk(capsys, kb, "--verify")[0] == EXIT_CONFIG
    assert main(["-C", str(kb), "doctor", "--yes"]) == EXIT_CONFIG
    assert "--yes only applies with --prune" in capsys.readouterr().err


def test_without_an_index_nothing_is_listed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "fresh"
    init_kb(root, name="fresh")
    (root / "docs").mkdir(exist_ok=True)
    (root / f"docs/gone.md{SIDE}").write_text(f"id: {new_ulid()}\n", encoding="utf-8")
    code, _out, err = pnk(capsys, root, "--yes")
    assert code == EXIT_UNAVAILABLE and "pnk sync" in err
    assert (root / f"docs/gone.md{SIDE}").exists()


def test_a_directory_swapped_for_a_link_out_of_the_kb_is_not_followed(kb: Path, tmp_path: Path) -> None:
    delete_and_sync(kb, "beta")
    plan = find_orphans(kb)
    outside = tmp_path / "outside"
    (kb / "docs").rename(outside)  # after the listing, docs/ becomes a link to a directory elsewhere
    (kb / "docs").symlink_to(outside, target_is_directory=True)
    outcome = delete_orphans(plan.root, plan.orphans)
    assert outcome.deleted == [] and "symbolic link" in outcome.skipped[0].reason
    assert (outside / f"beta.md{SIDE}").exists()
