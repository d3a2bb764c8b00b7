"""Every pairing row of spec §6.4 decides the same identity under a plain sync, `--rebuild`, and the
automatic rebuild a model change triggers: a rebuild never re-mints an ID a plain sync would keep."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from pinakes.errors import SidecarError
from pinakes.ids import new_ulid
from pinakes.init import init_kb
from pinakes.pipeline.report import SyncReport
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.fakes import FakeEmbedder

OTHER_MODEL = "org/other-model"
MODES = ["sync", "rebuild", "model-change"]


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    init_kb(root, name="identity")
    docs = root / "docs"
    (docs / "a.md").write_text("# A\n\nAlpha text.\n", encoding="utf-8")
    (docs / "b.md").write_text("# B\n\nBeta text.\n", encoding="utf-8")
    assert run_sync(root, SyncOptions(), embedder=FakeEmbedder()).ok
    return root


def run(root: Path, mode: str) -> SyncReport:
    if mode == "model-change":
        manifest = root / "pinakes.toml"
        manifest.write_text(manifest.read_text(encoding="utf-8").replace(
            'model = "sentence-transformers/all-MiniLM-L6-v2"', f'model = "{OTHER_MODEL}"'), encoding="utf-8")
        report = run_sync(root, SyncOptions(), embedder=FakeEmbedder(model=OTHER_MODEL))
        assert report.mode == "rebuild"
        return report
    return run_sync(root, SyncOptions(rebuild=mode == "rebuild"), embedder=FakeEmbedder())


def sidecar_id(root: Path, doc: str) -> str:
    for line in (root / "docs" / f"{doc}.pnk.yaml").read_text(encoding="utf-8").splitlines():
        if line.startswith("id: "):
            return line[4:].strip()
    raise AssertionError(f"no id in {doc}.pnk.yaml")


def rows(root: Path) -> dict[str, tuple[str, str]]:
    """id -> (path, state) for every documents row."""
    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    try:
        return {doc_id: (path, state) for doc_id, path, state in conn.execute(
            "SELECT id, path, state FROM documents")}
    finally:
        conn.close()


def active(root: Path) -> dict[str, str]:
    return {path: doc_id for doc_id, (path, state) in rows(root).items() if state == "active"}


Mutation = Callable[[Path], None]


@pytest.mark.parametrize("mode", MODES)
def test_unchanged_and_edited_documents_keep_their_ids(kb: Path, mode: str) -> None:
    ids = active(kb)
    (kb / "docs/b.md").write_text("# B\n\nBeta, rewritten.\n", encoding="utf-8")
    report = run(kb, mode)
    assert report.ok and active(kb) == ids


@pytest.mark.parametrize("mode", MODES)
def test_a_rename_without_its_sidecar_keeps_the_id(kb: Path, mode: str) -> None:
    old = active(kb)["docs/a.md"]
    (kb / "docs/a.md").rename(kb / "docs/renamed.md")
    report = run(kb, mode)
    assert report.ok
    assert active(kb)["docs/renamed.md"] == old == sidecar_id(kb, "renamed.md")
    assert not (kb / "docs/a.md.pnk.yaml").exists()  # the sidecar travelled with the document
    assert report.renamed == [("docs/a.md", "docs/renamed.md")]
    assert report.orphaned_sidecars == []


@pytest.mark.parametrize("mode", MODES)
def test_a_rename_with_its_sidecar_keeps_the_id(kb: Path, mode: str) -> None:
    old = active(kb)["docs/a.md"]
    (kb / "docs/a.md").rename(kb / "docs/moved.md")
    (kb / "docs/a.md.pnk.yaml").rename(kb / "docs/moved.md.pnk.yaml")
    (kb / "docs/moved.md").write_text("# A\n\nAlpha, edited while moving.\n", encoding="utf-8")
    assert run(kb, mode).ok
    assert active(kb)["docs/moved.md"] == old


@pytest.mark.parametrize("mode", MODES)
def test_a_deleted_sidecar_is_restored_with_the_indexed_id(kb: Path, mode: str) -> None:
    old = active(kb)["docs/b.md"]
    (kb / "docs/b.md.pnk.yaml").unlink()
    assert run(kb, mode).ok
    assert sidecar_id(kb, "b.md") == old == active(kb)["docs/b.md"]


@pytest.mark.parametrize("mode", MODES)
def test_duplicate_content_is_never_guessed(kb: Path, mode: str) -> None:
    old = active(kb)["docs/a.md"]
    for copy in ("c.md", "d.md"):
        shutil.copy(kb / "docs/a.md", kb / "docs" / copy)
    (kb / "docs/a.md").unlink()
    report = run(kb, mode)
    ids = active(kb)
    assert old not in (ids["docs/c.md"], ids["docs/d.md"]) and ids["docs/c.md"] != ids["docs/d.md"]
    assert rows(kb)[old] == ("docs/a.md", "deleted")  # the identity survives, soft-deleted
    assert any("not guessing" in note for note in report.notes)


@pytest.mark.parametrize("mode", MODES)
def test_new_documents_adopt_a_sidecar_or_get_a_new_id(kb: Path, mode: str) -> None:
    adopted = new_ulid()
    (kb / "docs/adopted.md").write_text("# Adopted\n", encoding="utf-8")
    (kb / "docs/adopted.md.pnk.yaml").write_text(f"id: {adopted}\ntags: []\nlinks: []\n", encoding="utf-8")
    (kb / "docs/fresh.md").write_text("# Fresh\n", encoding="utf-8")
    assert run(kb, mode).ok
    ids = active(kb)
    assert ids["docs/adopted.md"] == adopted
    assert ids["docs/fresh.md"] == sidecar_id(kb, "fresh.md") and ids["docs/fresh.md"] not in (adopted,)


@pytest.mark.parametrize("mode", MODES)
def test_a_broken_sidecar_is_never_minted_over(kb: Path, mode: str) -> None:
    broken = kb / "docs/new.md.pnk.yaml"
    (kb / "docs/new.md").write_text("# New\n", encoding="utf-8")
    broken.write_text("id: [unclosed\n", encoding="utf-8")
    before = broken.read_bytes()
    report = run(kb, mode)
    assert [f.path for f in report.failures] == ["docs/new.md"]
    assert broken.read_bytes() == before and "docs/new.md" not in active(kb)


@pytest.mark.parametrize("mode", MODES)
def test_a_deleted_document_stays_a_soft_deleted_identity(kb: Path, mode: str) -> None:
    old = active(kb)["docs/b.md"]
    (kb / "docs/b.md").unlink()
    report = run(kb, mode)
    assert report.deleted == ["docs/b.md"]
    assert rows(kb)[old] == ("docs/b.md", "deleted")
    assert (kb / "docs/b.md.pnk.yaml").exists()  # never removed automatically
    # and it can come back under its ID
    (kb / "docs/b.md").write_text("# B\n\nBack again.\n", encoding="utf-8")
    assert run_sync(kb, SyncOptions(), embedder=FakeEmbedder(
        model=OTHER_MODEL if mode == "model-change" else "sentence-transformers/all-MiniLM-L6-v2")).ok
    assert active(kb)["docs/b.md"] == old


@pytest.mark.parametrize("mode", MODES)
def test_one_id_in_two_sidecars_stops_the_run(kb: Path, mode: str) -> None:
    (kb / "docs/copy.md").write_text("# Copy\n", encoding="utf-8")
    shutil.copy(kb / "docs/a.md.pnk.yaml", kb / "docs/copy.md.pnk.yaml")
    before = rows(kb)
    with pytest.raises(SidecarError, match="more than one sidecar"):
        run(kb, mode)
    assert rows(kb) == before and not (kb / ".pinakes/index.db.new").exists()
