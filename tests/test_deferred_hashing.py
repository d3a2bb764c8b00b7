"""The first sync of an index that never held a document hashes each new document with its group
(`pipeline.walk`), not all of them before the first chunk; what it indexes and records is what a
sync hashing everything up front would: every content hash and build key right, the walk cache
without a placeholder, an edit on the way seen, a file gone on the way failed and minted by no one."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest

from pinakes.pipeline import walk as walk_stage
from pinakes.pipeline.report import SyncReport
from pinakes.pipeline.run import SyncContext, SyncOptions
from pinakes.pipeline.types import DocWork
from pinakes.sources import walk as source_walk
from pinakes.sources.walk import hash_file
from pinakes.sync import loader
from pinakes.sync.engine import run_sync
from tests.fakes import FakeEmbedder
from tests.test_sync_streaming import make_kb, sidecar_ids


def sync(root: Path) -> SyncReport:
    return run_sync(root, SyncOptions(), embedder=FakeEmbedder())


def indexed(root: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(document path -> indexed content hash, file path -> walk cache hash)."""
    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    try:
        documents = dict(conn.execute("SELECT path, content_hash FROM documents WHERE state = 'active'").fetchall())
        cached = dict(conn.execute("SELECT path, content_hash FROM walk_cache").fetchall())
    finally:
        conn.close()
    return documents, cached


def on_disk(root: Path, paths: Sequence[str]) -> dict[str, str]:
    return {path: hash_file(root / path) for path in paths}


def unsettle_and_resync(root: Path) -> SyncReport:
    """A sync that pairs every document again (the settled mark removed): keys computed from the
    deferred hashes must equal those a full pairing computes, or it rebuilds documents."""
    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    try:
        with conn:
            conn.execute("DELETE FROM meta WHERE key = 'settled'")
    finally:
        conn.close()
    return sync(root)


def test_a_first_sync_hashes_each_group_after_the_one_before_is_committed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_kb(tmp_path / "kb", 7)
    monkeypatch.setattr(loader, "GROUP_MAX_DOCUMENTS", 3)
    hashed_with: list[tuple[str, int]] = []  # (path hashed, documents committed by then)
    real_hash = source_walk.hash_file

    def spying(path: str | Path) -> str:
        if str(path).endswith(".md"):
            conn = sqlite3.connect(root / ".pinakes" / "index.db")
            try:
                committed = conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
            finally:
                conn.close()
            hashed_with.append((Path(path).name, committed))
        return real_hash(path)

    monkeypatch.setattr(source_walk, "hash_file", spying)
    report = sync(root)
    assert report.ok and len(report.added) == 7 and report.files_hashed == 7
    assert hashed_with == [(f"doc{n:02d}.md", n - n % 3) for n in range(7)]  # group by group
    documents, cached = indexed(root)
    paths = [f"docs/doc{n:02d}.md" for n in range(7)]
    assert documents == on_disk(root, paths)
    sidecars = [path + ".pnk.yaml" for path in paths]
    assert cached == on_disk(root, paths) | on_disk(root, sidecars)
    monkeypatch.setattr(source_walk, "hash_file", real_hash)
    again = unsettle_and_resync(root)
    assert again.ok and not again.added and not again.changed and not again.reembedded
    assert sync(root).noop


def test_a_cloned_kb_with_sidecars_is_paired_by_them_and_hashed_by_the_walk(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", 4)
    assert sync(root).ok
    ids = sidecar_ids(root)
    for leftover in (root / ".pinakes").glob("index.db*"):  # a clone: the sidecars, no index
        leftover.unlink()
    (root / "docs" / "new.md").write_text("# New\n\nA page added since.\n", encoding="utf-8")
    report = sync(root)
    assert report.ok and len(report.added) == 5
    documents, _ = indexed(root)
    assert documents == on_disk(root, sorted(documents)) and len(documents) == 5
    assert {path: ids[path] for path in ids} == {path: sidecar_ids(root)[path] for path in ids}
    again = unsettle_and_resync(root)
    assert again.ok and not again.added and not again.changed and not again.reembedded


def test_an_edit_before_its_group_is_indexed_as_edited_and_the_next_sync_agrees(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_kb(tmp_path / "kb", 6)
    monkeypatch.setattr(loader, "GROUP_MAX_DOCUMENTS", 2)
    edited = root / "docs" / "doc04.md"
    real = walk_stage.hash_deferred

    def editing_first(ctx: SyncContext, items: Sequence[DocWork]) -> tuple[list[DocWork], list[source_walk.FileState],
                                                                           set[str]]:
        if any(item.path == "docs/doc04.md" for item in items):  # after the walk, before its group
            edited.write_text("# Document 4\n\nRewritten after the walk about zebras.\n", encoding="utf-8")
        return real(ctx, items)

    monkeypatch.setattr(walk_stage, "hash_deferred", editing_first)
    assert sync(root).ok
    documents, cached = indexed(root)
    assert documents["docs/doc04.md"] == cached["docs/doc04.md"] == hash_file(edited)
    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    try:
        (text,) = conn.execute("SELECT group_concat(c.text, ' ') FROM chunks c JOIN documents d ON d.id = c.doc_id "
                               "WHERE d.path = 'docs/doc04.md'").fetchone()
    finally:
        conn.close()
    assert "zebras" in text
    monkeypatch.setattr(walk_stage, "hash_deferred", real)
    again = sync(root)  # the walk's stat of doc04 is older than the file: hashed again, found as indexed
    assert again.ok and not again.added and not again.changed and not again.reembedded
    assert sync(root).noop


def test_a_file_gone_before_its_group_fails_is_not_minted_and_the_next_sync_indexes_what_is_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_kb(tmp_path / "kb", 6)
    monkeypatch.setattr(loader, "GROUP_MAX_DOCUMENTS", 2)
    parked = tmp_path / "parked.md"
    real = walk_stage.hash_deferred

    def moving_away(ctx: SyncContext, items: Sequence[DocWork]) -> tuple[list[DocWork], list[source_walk.FileState],
                                                                         set[str]]:
        if any(item.path == "docs/doc03.md" for item in items):
            shutil.move(root / "docs" / "doc03.md", parked)
        return real(ctx, items)

    monkeypatch.setattr(walk_stage, "hash_deferred", moving_away)
    report = sync(root)
    assert [(failure.path, failure.stage) for failure in report.failures] == [("docs/doc03.md", "read")]
    assert "docs/doc03.md" not in sidecar_ids(root)
    documents, cached = indexed(root)
    assert "docs/doc03.md" not in documents and "docs/doc03.md" not in cached and len(documents) == 5
    assert "" not in cached.values()
    monkeypatch.setattr(walk_stage, "hash_deferred", real)
    shutil.move(parked, root / "docs" / "doc03.md")
    again = sync(root)
    assert again.ok and again.added == ["docs/doc03.md"]
    assert indexed(root)[0] == on_disk(root, [f"docs/doc{n:02d}.md" for n in range(6)])
