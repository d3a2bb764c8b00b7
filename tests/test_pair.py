"""Every row of the pairing table (spec §6.4), against the pure planner `plan_changes`."""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace
from typing import cast

import pytest

from pinakes.errors import SidecarError
from pinakes.ids import is_ulid
from pinakes.pipeline.context import context_naming
from pinakes.pipeline.pair import BuildKeys, IndexedDoc, Plan, SidecarReader, plan_changes
from pinakes.sidecar import Sidecar
from pinakes.sources.walk import FileState, WalkResult

KEYS = BuildKeys({"markdown": "fp"}, {"markdown": "text"}, "chunking", "model")
ID_A, ID_B, ID_C = "01M8P0000000000000000000AA", "01M8P0000000000000000000BB", "01M8P0000000000000000000CC"


def indexed(doc_id: str, path: str, content: str, *, sidecar: str | None = "s-" + "x",
            state: str = "active") -> IndexedDoc:
    return IndexedDoc(doc_id, path, content, sidecar, KEYS.key(content, "markdown", context_naming(None, path)),
                      state, "{}")


def disk(docs: dict[str, str], sidecars: dict[str, str] | None = None,
         orphans: list[str] | None = None) -> WalkResult:
    """docs: path -> content hash; sidecars: doc path -> sidecar hash."""
    result = WalkResult()
    states: dict[str, FileState] = {}
    source_types: dict[str, str] = {}
    for path, digest in docs.items():
        states[path] = FileState(path, 10, 1, 1, digest)
        source_types[path] = "markdown"
    result.docs, result.source_types = states, source_types
    for path, digest in (sidecars or {}).items():
        result.sidecars[path] = FileState(path + ".pnk.yaml", 10, 1, 1, digest)
    result.orphan_sidecars = orphans or []
    return result


def reader(ids: Mapping[str, str | Exception]) -> SidecarReader:
    def read(path: str) -> Sidecar:
        value = ids[path]
        if isinstance(value, Exception):
            raise value
        # the sidecar's fields plan_changes reads, and nothing else
        return cast(Sidecar, SimpleNamespace(id=value, raw_hash="new", title=None, links=(), metadata_json=lambda: "{}"))
    return read


def plan(before: list[IndexedDoc], after: WalkResult, ids: Mapping[str, str | Exception] | None = None, *,
         may_write: bool = True) -> Plan:
    return plan_changes(before, after, reader(ids or {}), KEYS, may_write_sidecars=may_write)


def test_unchanged_path_and_hash_is_skipped() -> None:
    result = plan([indexed(ID_A, "a.md", "h1", sidecar="s1")], disk({"a.md": "h1"}, {"a.md": "s1"}))
    assert result.is_empty


def test_changed_content_reembeds_keeping_the_id() -> None:
    result = plan([indexed(ID_A, "a.md", "h1", sidecar="s1")], disk({"a.md": "h2"}, {"a.md": "s1"}))
    assert [(w.doc_id, w.reason) for w in result.work] == [(ID_A, "changed")]
    assert not result.deletes and not result.sidecar_writes


def test_rename_on_a_unique_hash_match_keeps_the_id_and_moves_the_sidecar() -> None:
    before = [indexed(ID_A, "notes/old.md", "h1", sidecar="s1")]
    result = plan(before, disk({"archive/old.md": "h1"}, orphans=["notes/old.md.pnk.yaml"]))
    assert result.renamed == [("notes/old.md", "archive/old.md")]
    assert [(w.kind, w.doc_id, w.from_path) for w in result.sidecar_writes] == [
        ("move", ID_A, "notes/old.md.pnk.yaml")]
    # Same content, same file name's words: the context is unchanged, so nothing is re-embedded.
    assert not result.deletes and not result.work and result.refresh == [(ID_A, "archive/old.md")]


def test_a_rename_that_changes_the_file_names_words_rebuilds_keeping_the_id() -> None:
    before = [indexed(ID_A, "old.md", "h1", sidecar="s1")]
    result = plan(before, disk({"new.md": "h1"}, orphans=["old.md.pnk.yaml"]))
    assert result.renamed == [("old.md", "new.md")]
    assert [(w.kind, w.doc_id) for w in result.sidecar_writes] == [("move", ID_A)]
    assert [(w.doc_id, w.path, w.reason) for w in result.work] == [(ID_A, "new.md", "rekeyed")]
    assert not result.deletes and not result.refresh


def test_duplicate_content_prefers_the_candidate_whose_sidecar_carries_the_old_id() -> None:
    before = [indexed(ID_A, "old.md", "h1", sidecar="s1")]
    after = disk({"copy1.md": "h1", "copy2.md": "h1"}, {"copy2.md": "s-moved"})
    result = plan(before, after, {"copy2.md": ID_A})
    assert result.renamed == [("old.md", "copy2.md")]
    minted = [w for w in result.sidecar_writes if w.kind == "mint"]
    assert [w.doc_path for w in minted] == ["copy1.md"] and minted[0].doc_id != ID_A


def test_duplicate_content_without_sidecars_mints_for_all_and_reports_the_ambiguity() -> None:
    before = [indexed(ID_A, "old.md", "h1", sidecar="s1")]
    result = plan(before, disk({"c1.md": "h1", "c2.md": "h1"}))
    assert [d.id for d in result.deletes] == [ID_A]
    minted = {w.doc_path: w.doc_id for w in result.sidecar_writes if w.kind == "mint"}
    assert set(minted) == {"c1.md", "c2.md"} and ID_A not in minted.values()
    assert any("not guessing" in note for note in result.notes)


def test_a_new_path_with_an_adjacent_sidecar_adopts_its_id() -> None:
    result = plan([], disk({"a.md": "h1"}, {"a.md": "s1"}), {"a.md": ID_B})
    assert [(w.doc_id, w.reason) for w in result.work] == [(ID_B, "added")]
    assert not result.sidecar_writes


def test_a_new_path_without_a_sidecar_gets_a_minted_ulid() -> None:
    result = plan([], disk({"a.md": "h1"}))
    (write,) = result.sidecar_writes
    assert write.kind == "mint" and is_ulid(write.doc_id)
    assert [w.doc_id for w in result.work] == [write.doc_id]


def test_never_mints_over_an_unparseable_sidecar() -> None:
    broken = SidecarError("bad indentation at line 3, column 2")
    result = plan([], disk({"a.md": "h1"}, {"a.md": "s1"}), {"a.md": broken})
    assert not result.sidecar_writes and not result.work
    (failure,) = result.failures
    assert failure[0] == "a.md" and "line 3" in failure[1]


def test_an_indexed_document_whose_sidecar_stops_parsing_is_held_and_reported() -> None:
    before = [indexed(ID_A, "a.md", "h1", sidecar="s1")]
    result = plan(before, disk({"a.md": "h2"}, {"a.md": "s2"}), {"a.md": SidecarError("line 1")})
    assert [f[0] for f in result.failures] == ["a.md"]
    assert not result.work and not result.deletes and not result.sidecar_writes


def test_a_gone_path_with_no_hash_match_is_soft_deleted_and_its_sidecar_left() -> None:
    before = [indexed(ID_A, "a.md", "h1", sidecar="s1")]
    result = plan(before, disk({}, orphans=["a.md.pnk.yaml"]))
    assert [d.id for d in result.deletes] == [ID_A]
    assert not result.sidecar_writes


def test_the_same_id_in_two_sidecars_is_a_collision_naming_both_paths() -> None:
    after = disk({"a.md": "h1", "b.md": "h2"}, {"a.md": "s1", "b.md": "s2"})
    result = plan([], after, {"a.md": ID_A, "b.md": ID_A})
    assert result.collisions == [(ID_A, ["a.md", "b.md"])]
    assert not result.work


def test_a_sidecar_only_edit_refreshes_metadata_without_reembedding() -> None:
    before = [indexed(ID_A, "a.md", "h1", sidecar="s1")]
    result = plan(before, disk({"a.md": "h1"}, {"a.md": "s2"}), {"a.md": ID_A})
    assert result.refresh == [(ID_A, "a.md")] and not result.work


def test_rename_plus_edit_keeps_the_id_when_the_sidecar_travelled() -> None:
    before = [indexed(ID_A, "old.md", "h1", sidecar="s1")]
    result = plan(before, disk({"new.md": "h2"}, {"new.md": "s1"}), {"new.md": ID_A})
    assert result.renamed == [("old.md", "new.md")]
    assert [(w.doc_id, w.path, w.reason) for w in result.work] == [(ID_A, "new.md", "changed")]
    assert not result.deletes


def test_rename_plus_edit_without_the_sidecar_reports_moved_without_sidecar() -> None:
    before = [indexed(ID_A, "dir1/note.md", "h1", sidecar="s1")]
    result = plan(before, disk({"dir2/note.md": "h2"}, orphans=["dir1/note.md.pnk.yaml"]))
    assert [d.id for d in result.deletes] == [ID_A]
    assert [(doc.id, new, why) for doc, new, why in result.likely_moves] == [
        (ID_A, "dir2/note.md", "the same file name")]


def test_a_deleted_sidecar_is_rewritten_with_the_indexed_id() -> None:
    before = [indexed(ID_A, "a.md", "h1", sidecar="s1")]
    result = plan(before, disk({"a.md": "h1"}))
    assert [(w.kind, w.doc_id) for w in result.sidecar_writes] == [("restore", ID_A)]


def test_index_only_mode_never_plans_a_sidecar_write() -> None:
    before = [indexed(ID_A, "a.md", "h1", sidecar="s1")]
    result = plan(before, disk({"a.md": "h1", "new.md": "h9"}), may_write=False)
    assert not result.sidecar_writes and not result.work
    assert any("new.md" in note for note in result.notes)


def test_a_changed_key_rekeys_without_content_change() -> None:
    doc = indexed(ID_A, "a.md", "h1", sidecar="s1")
    stale = IndexedDoc(doc.id, doc.path, doc.content_hash, doc.sidecar_hash, "old-key", "active", "{}")
    result = plan([stale], disk({"a.md": "h1"}, {"a.md": "s1"}))
    assert [(w.doc_id, w.reason) for w in result.work] == [(ID_A, "rekeyed")]


def test_a_soft_deleted_document_is_revived_by_its_sidecar() -> None:
    before = [indexed(ID_A, "a.md", "h1", sidecar="s1", state="deleted")]
    result = plan(before, disk({"b.md": "h1"}, {"b.md": "s1"}), {"b.md": ID_A})
    assert [(w.doc_id, w.path) for w in result.work] == [(ID_A, "b.md")]
    assert result.renamed == [("a.md", "b.md")]  # its sidecar followed it late: a move
    assert any("continues" in note and "formerly a.md" in note for note in result.notes)


@pytest.mark.parametrize("count", [2, 3])
def test_swapped_paths_keep_their_ids(count: int) -> None:
    ids = [ID_A, ID_B, ID_C][:count]
    paths = [f"p{i}.md" for i in range(count)]
    before = [indexed(i, p, f"h{n}", sidecar=f"s{n}") for n, (i, p) in enumerate(zip(ids, paths, strict=True))]
    rotated = paths[1:] + paths[:1]
    after = disk({p: f"h{n}" for n, p in enumerate(rotated)}, {p: f"x{n}" for n, p in enumerate(rotated)})
    result = plan(before, after, dict(zip(rotated, ids, strict=True)))
    assert sorted(result.moves) == sorted(zip(ids, paths, rotated, strict=True))
    assert not result.deletes and not result.sidecar_writes
