"""End-to-end sync behaviour on real files, with a deterministic fake embedder (fast)."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from pinakes.errors import LockHeldError, SidecarError, UsageError
from pinakes.index import schema
from pinakes.init import init_kb
from pinakes.pipeline.report import SyncReport
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.fakes import FakeEmbedder


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    init_kb(root, name="test")
    docs = root / "docs"
    (docs / "notes").mkdir(parents=True)
    (docs / "alpha.md").write_text("# Alpha\n\nThe alpha document talks about aeroplanes.\n\n"
                                   "## Wings\n\nWings generate lift.\n", encoding="utf-8")
    (docs / "notes" / "beta.md").write_text("# Beta\n\nBeta is about boats and harbours.\n", encoding="utf-8")
    (docs / "gamma.txt").write_text("Gamma is plain text about gardens.\n", encoding="utf-8")
    return root


def sync(root: Path, **options: Any) -> SyncReport:
    return run_sync(root, SyncOptions(**options), embedder=FakeEmbedder())


def rows(root: Path, sql: str, *args: object) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def doc_ids(root: Path) -> dict[str, str]:
    return dict(rows(root, "SELECT path, id FROM documents WHERE state = 'active'"))


def test_first_sync_mints_sidecars_and_indexes_everything(kb: Path) -> None:
    report = sync(kb)
    assert report.ok
    assert sorted(report.added) == ["docs/alpha.md", "docs/gamma.txt", "docs/notes/beta.md"]
    for path in report.added:
        assert (kb / (path + ".pnk.yaml")).is_file()
    ids = doc_ids(kb)
    assert len(set(ids.values())) == 3
    chunks = rows(kb, "SELECT c.text, c.char_start, c.char_end, d.path FROM chunks c "
                      "JOIN documents d ON d.id = c.doc_id")
    for text, start, end, path in chunks:
        assert (kb / path).read_text(encoding="utf-8")[start:end] == text  # the span invariant
    assert rows(kb, "SELECT COUNT(*) FROM embeddings")[0][0] == len(chunks)
    assert rows(kb, "SELECT COUNT(*) FROM chunks_fts WHERE chunks_fts MATCH 'aeroplanes'")[0][0] == 1


def test_a_second_sync_is_a_noop_that_hashes_nothing(kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pinakes.sources import walk

    monkeypatch.setattr(walk, "RACY_WINDOW_NS", 0)  # the files were written just now; see test_walk
    sync(kb)
    before = rows(kb, "SELECT id, build_key, indexed_at FROM documents ORDER BY id")
    report = sync(kb)
    # Only the sidecars the first sync wrote after its walk began are read again (racily clean): at
    # most those 3, never the documents. Fewer when the kernel's coarse file clock stamped one a tick
    # before the walk's own fine-grained start time.
    assert report.noop and report.files_hashed <= 3
    report = sync(kb)
    assert report.noop and report.files_hashed == 0
    assert "pipeline" not in report.timings  # doit was never started
    assert rows(kb, "SELECT id, build_key, indexed_at FROM documents ORDER BY id") == before


def test_an_edit_reindexes_only_that_document_and_keeps_its_id(kb: Path) -> None:
    sync(kb)
    ids = doc_ids(kb)
    untouched = rows(kb, "SELECT id FROM chunks WHERE doc_id = ?", ids["docs/gamma.txt"])
    (kb / "docs/alpha.md").write_text("# Alpha\n\nNow about helicopters.\n", encoding="utf-8")
    report = sync(kb)
    assert report.changed == ["docs/alpha.md"] and not report.added
    assert doc_ids(kb) == ids
    assert rows(kb, "SELECT id FROM chunks WHERE doc_id = ?", ids["docs/gamma.txt"]) == untouched
    assert rows(kb, "SELECT COUNT(*) FROM chunks_fts WHERE chunks_fts MATCH 'helicopters'")[0][0] == 1
    assert rows(kb, "SELECT COUNT(*) FROM chunks_fts WHERE chunks_fts MATCH 'aeroplanes'")[0][0] == 0


def test_an_edit_keeps_the_sidecars_metadata(kb: Path) -> None:
    sync(kb)
    sidecar = kb / "docs/alpha.md.pnk.yaml"
    sidecar.write_text(sidecar.read_text(encoding="utf-8").replace("tags: []", "tags: [aviation]"),
                       encoding="utf-8")
    sync(kb)
    (kb / "docs/alpha.md").write_text("# Alpha\n\nEdited.\n", encoding="utf-8")
    assert sync(kb).changed == ["docs/alpha.md"]
    (metadata,) = rows(kb, "SELECT metadata FROM documents WHERE path = 'docs/alpha.md'")[0]
    assert json.loads(metadata)["tags"] == ["aviation"]


def test_a_rename_with_its_sidecar_keeps_the_id_without_reembedding(kb: Path) -> None:
    sync(kb)
    ids = doc_ids(kb)
    chunk_ids = rows(kb, "SELECT id FROM chunks WHERE doc_id = ?", ids["docs/alpha.md"])
    (kb / "docs/alpha.md").rename(kb / "docs/notes/alpha.md")  # the same file name: the same context
    (kb / "docs/alpha.md.pnk.yaml").rename(kb / "docs/notes/alpha.md.pnk.yaml")
    report = sync(kb)
    assert report.renamed == [("docs/alpha.md", "docs/notes/alpha.md")] and not report.reembedded
    assert doc_ids(kb)["docs/notes/alpha.md"] == ids["docs/alpha.md"]
    assert rows(kb, "SELECT id FROM chunks WHERE doc_id = ?", ids["docs/alpha.md"]) == chunk_ids
    # A new file name's words are in every chunk's context: rebuilt, under the same ID.
    (kb / "docs/notes/alpha.md").rename(kb / "docs/notes/alpha-renamed.md")
    (kb / "docs/notes/alpha.md.pnk.yaml").rename(kb / "docs/notes/alpha-renamed.md.pnk.yaml")
    report = sync(kb)
    assert report.renamed == [("docs/notes/alpha.md", "docs/notes/alpha-renamed.md")]
    assert report.reembedded == ["docs/notes/alpha-renamed.md"] and not report.changed
    assert doc_ids(kb)["docs/notes/alpha-renamed.md"] == ids["docs/alpha.md"]
    contexts = rows(kb, "SELECT context FROM chunks WHERE doc_id = ?", ids["docs/alpha.md"])
    assert contexts and all("alpha renamed" in context for (context,) in contexts)


def test_a_rename_without_its_sidecar_is_found_by_hash_and_the_sidecar_follows(kb: Path) -> None:
    sync(kb)
    ids = doc_ids(kb)
    sidecar_text = (kb / "docs/alpha.md.pnk.yaml").read_bytes()
    (kb / "docs/alpha.md").rename(kb / "docs/moved.md")
    report = sync(kb)
    assert report.renamed == [("docs/alpha.md", "docs/moved.md")]
    assert doc_ids(kb)["docs/moved.md"] == ids["docs/alpha.md"]
    assert (kb / "docs/moved.md.pnk.yaml").read_bytes() == sidecar_text
    assert not (kb / "docs/alpha.md.pnk.yaml").exists()


def test_a_deleted_document_is_soft_deleted_and_its_sidecar_kept(kb: Path) -> None:
    sync(kb)
    ids = doc_ids(kb)
    (kb / "docs/gamma.txt").unlink()
    report = sync(kb)
    assert report.deleted == ["docs/gamma.txt"]
    assert report.orphaned_sidecars == ["docs/gamma.txt.pnk.yaml"]
    assert (kb / "docs/gamma.txt.pnk.yaml").exists()
    gamma = ids["docs/gamma.txt"]
    assert rows(kb, "SELECT state FROM documents WHERE id = ?", gamma) == [("deleted",)]
    assert rows(kb, "SELECT COUNT(*) FROM chunks WHERE doc_id = ?", gamma) == [(0,)]
    assert rows(kb, "SELECT COUNT(*) FROM chunks_fts WHERE chunks_fts MATCH 'gardens'")[0][0] == 0


def test_a_sidecar_only_edit_refreshes_metadata_without_reembedding(kb: Path) -> None:
    sync(kb)
    ids = doc_ids(kb)
    chunk_ids = rows(kb, "SELECT id FROM chunks ORDER BY id")
    sidecar = kb / "docs/alpha.md.pnk.yaml"
    sidecar.write_text(sidecar.read_text(encoding="utf-8").replace("tags: []", "tags: [aviation]"),
                       encoding="utf-8")
    report = sync(kb)
    assert report.metadata_refreshed == ["docs/alpha.md"] and not report.changed
    assert rows(kb, "SELECT id FROM chunks ORDER BY id") == chunk_ids
    (metadata,) = rows(kb, "SELECT metadata FROM documents WHERE id = ?", ids["docs/alpha.md"])[0]
    assert json.loads(metadata)["tags"] == ["aviation"]


def test_a_broken_document_fails_alone_and_is_listed(kb: Path) -> None:
    (kb / "docs/broken.md").write_bytes(b"# Broken\n\nbad byte \xff here\n")
    report = sync(kb)
    assert not report.ok
    (failure,) = report.failures
    assert failure.path == "docs/broken.md" and failure.stage == "unextractable"
    assert len(doc_ids(kb)) == 3  # the others are indexed
    assert rows(kb, "SELECT path, stage FROM failures") == [("docs/broken.md", "unextractable")]
    (kb / "docs/broken.md").write_text("# Fixed\n", encoding="utf-8")
    assert sync(kb).ok
    assert rows(kb, "SELECT COUNT(*) FROM failures") == [(0,)]


def test_an_unparseable_sidecar_is_never_minted_over(kb: Path) -> None:
    bad = kb / "docs/notes/beta.md.pnk.yaml"
    bad.write_bytes(b"id: [unclosed\n")
    report = sync(kb)
    assert [f.path for f in report.failures] == ["docs/notes/beta.md"]
    assert "line" in report.failures[0].error
    assert bad.read_bytes() == b"id: [unclosed\n"
    assert "docs/notes/beta.md" not in doc_ids(kb)


def test_the_same_id_in_two_sidecars_is_a_hard_error_naming_both(kb: Path) -> None:
    sync(kb)
    (kb / "docs/copy.md").write_text("# Copy\n", encoding="utf-8")
    (kb / "docs/copy.md.pnk.yaml").write_bytes((kb / "docs/alpha.md.pnk.yaml").read_bytes())
    with pytest.raises(SidecarError) as raised:
        sync(kb)
    assert "docs/alpha.md.pnk.yaml" in raised.value.message and "docs/copy.md.pnk.yaml" in raised.value.message


def test_index_only_never_writes_into_the_source_tree(kb: Path) -> None:
    report = sync(kb, index_only=True)
    assert not report.sidecars_written and not list((kb / "docs").rglob("*.pnk.yaml"))
    assert any("no sidecar" in note for note in report.notes)


def test_the_graph_census_names_every_kind(kb: Path) -> None:
    report = sync(kb)
    assert report.graph_census is not None
    assert set(report.graph_census) == {"membership", "sibling", "parent-child", "in-section",
                                        "co-located", "shared-tag", "authored", "cross-kb-out",
                                        "cross-kb-in", "links-to", "links-to-cross-kb",
                                        "links-to-unresolved", "links-to-ambiguous"}
    assert report.graph_census["membership"] == rows(kb, "SELECT COUNT(*) FROM chunks")[0][0]


def test_rebuild_swaps_in_a_fresh_index_and_keeps_the_ledger(kb: Path) -> None:
    sync(kb)
    ledger = kb / ".pinakes" / "ledger.jsonl"
    ledger.write_text('{"kind": "reservation"}\n', encoding="utf-8")
    reader = schema.open_reader(kb / ".pinakes" / "index.db")
    old_build = schema.read_meta(reader)["build_id"]
    report = sync(kb, rebuild=True)
    assert report.ok and report.mode == "rebuild"
    assert ledger.read_text(encoding="utf-8") == '{"kind": "reservation"}\n'
    assert schema.read_meta(reader)["build_id"] != old_build  # an old reader's next read sees it
    reader.close()
    fresh = schema.open_reader(kb / ".pinakes" / "index.db")
    assert schema.read_meta(fresh)["build_id"] != old_build
    assert fresh.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    fresh.close()
    assert not (kb / ".pinakes" / "index.db.new").exists()


def test_a_reader_mid_transaction_keeps_its_snapshot_across_a_rebuild(kb: Path) -> None:
    sync(kb)
    index = kb / ".pinakes" / "index.db"
    old = schema.open_reader(index)
    old.execute("BEGIN")
    old_build = old.execute("SELECT value FROM meta WHERE key = 'build_id'").fetchone()[0]
    old_chunks = old.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    (kb / "docs/extra.md").write_text("# Extra\n\nMore text.\n", encoding="utf-8")
    assert sync(kb, rebuild=True).ok
    # inside its transaction the old reader still sees one whole, old generation
    assert old.execute("SELECT value FROM meta WHERE key = 'build_id'").fetchone()[0] == old_build
    assert old.execute("SELECT COUNT(*) FROM chunks").fetchone()[0] == old_chunks
    old.execute("COMMIT")
    # its next transaction, and every new reader, see the new one
    new_build = old.execute("SELECT value FROM meta WHERE key = 'build_id'").fetchone()[0]
    assert new_build != old_build
    fresh = schema.open_reader(index)
    assert fresh.execute("SELECT value FROM meta WHERE key = 'build_id'").fetchone()[0] == new_build
    assert fresh.execute("SELECT COUNT(*) FROM documents WHERE path = 'docs/extra.md'").fetchone() == (1,)
    old.close()
    fresh.close()
    # and after every old connection is gone, the new generation stays (no stale WAL replayed over it)
    final = schema.open_reader(index)
    assert final.execute("SELECT value FROM meta WHERE key = 'build_id'").fetchone()[0] == new_build
    final.close()


def test_clear_cache_asks_and_yes_keeps_paid_entries(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pinakes.extract.cache import ExtractCache
    from pinakes.extract.types import ExtractedText
    from pinakes.sync.clear_cache import clear_extract_cache

    cache = ExtractCache(kb / ".pinakes" / "cache" / "extract")
    cache.put("aaa", ExtractedText("free text", ((0, 9),), "pypdfium2", "fp1"), paid=False)
    cache.put("bbb", ExtractedText("paid text", ((0, 9),), "claude-vision", "fp2"), paid=True)
    with pytest.raises(UsageError):  # no terminal to confirm on, and no --yes
        clear_extract_cache(kb, include_paid=False, assume_yes=False, quiet=True)
    assert cache.stats().entries == 2
    removed, _ = clear_extract_cache(kb, include_paid=False, assume_yes=True, quiet=True)
    assert removed == 1 and cache.get("bbb", "fp2") is not None and cache.get("aaa", "fp1") is None
    removed, _ = clear_extract_cache(kb, include_paid=True, assume_yes=True, quiet=True)
    assert removed == 1 and cache.stats().entries == 0


def test_a_live_lock_on_this_host_skips_quietly(kb: Path) -> None:
    lock = kb / ".pinakes" / "sync.lock"
    lock.parent.mkdir(exist_ok=True)
    lock.write_text(json.dumps({"pid": os.getppid(), "hostname": socket.gethostname(),
                                "started": "2026-11-30T00:00:00+00:00"}), encoding="utf-8")
    report = sync(kb)
    assert report.skipped_reason and "pid" in report.skipped_reason
    assert lock.exists()


def test_a_dead_pid_lock_is_reclaimed_with_a_warning(kb: Path) -> None:
    lock = kb / ".pinakes" / "sync.lock"
    lock.parent.mkdir(exist_ok=True)
    lock.write_text(json.dumps({"pid": 2**22 + 12345, "hostname": socket.gethostname(),
                                "started": "2026-11-30T00:00:00+00:00"}), encoding="utf-8")
    report = sync(kb)
    assert report.ok and any("stale" in w for w in report.warnings)
    assert not lock.exists()


def test_another_hosts_lock_is_refused_naming_force_unlock(kb: Path) -> None:
    lock = kb / ".pinakes" / "sync.lock"
    lock.parent.mkdir(exist_ok=True)
    lock.write_text(json.dumps({"pid": 1, "hostname": "elsewhere.example",
                                "started": "2026-11-30T00:00:00+00:00"}), encoding="utf-8")
    with pytest.raises(LockHeldError) as raised:
        sync(kb)
    assert "elsewhere.example" in raised.value.message and "--force-unlock" in (raised.value.remedy or "")
    assert sync(kb, force_unlock=True).ok


def test_changing_chunking_settings_reembeds_every_document(kb: Path) -> None:
    sync(kb)
    manifest = kb / "pinakes.toml"
    manifest.write_text(manifest.read_text(encoding="utf-8").replace("max_tokens = 250", "max_tokens = 120"),
                        encoding="utf-8")
    report = sync(kb)
    assert sorted(report.reembedded) == sorted(doc_ids(kb))


def test_a_model_change_rebuilds_the_whole_index(kb: Path) -> None:
    sync(kb)
    manifest = kb / "pinakes.toml"
    manifest.write_text(manifest.read_text(encoding="utf-8").replace(
        "model = \"sentence-transformers/all-MiniLM-L6-v2\"", "model = \"org/other-model\""), encoding="utf-8")
    report = run_sync(kb, SyncOptions(), embedder=FakeEmbedder(model="org/other-model"))
    assert report.mode == "rebuild"
    conn = schema.open_reader(kb / ".pinakes" / "index.db")
    assert schema.read_meta(conn)["embedding_model"] == "org/other-model"
    conn.close()


def test_a_pdf_is_extracted_once_cached_and_its_cache_entry_swept_when_gone(kb: Path) -> None:
    pytest.importorskip("pypdfium2", reason="PDF extraction needs the [pdf] extra")
    from tests.paid_gate_harness import minimal_pdf

    (kb / "docs/report.pdf").write_bytes(minimal_pdf("Quarterly report about harbour dredging").encode("latin-1"))
    report = sync(kb)
    assert report.ok and "docs/report.pdf" in report.added
    pages = rows(kb, "SELECT c.page_start, c.page_end, d.extraction_backend FROM chunks c "
                     "JOIN documents d ON d.id = c.doc_id WHERE d.path = 'docs/report.pdf'")
    assert pages and all(p[0] == 1 and p[1] == 1 and p[2] == "pypdfium2" for p in pages)
    cache_dir = kb / ".pinakes" / "cache" / "extract"
    assert len(list(cache_dir.glob("*.json"))) == 1
    assert rows(kb, "SELECT COUNT(*) FROM chunks_fts WHERE chunks_fts MATCH 'dredging'")[0][0] == 1
    (kb / "docs/report.pdf").unlink()
    assert sync(kb).deleted == ["docs/report.pdf"]
    assert list(cache_dir.glob("*.json")) == []  # free orphans go after a fully successful sync


def test_an_in_place_edit_that_keeps_size_mtime_and_inode_is_seen(kb: Path) -> None:
    sync(kb)
    target = kb / "docs/gamma.txt"
    before = target.stat()
    target.write_text("Gamma is plain text about GARDENS.\n", encoding="utf-8")  # same length
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert target.stat().st_size == before.st_size and target.stat().st_ino == before.st_ino
    report = sync(kb)
    assert report.changed == ["docs/gamma.txt"]
    assert rows(kb, "SELECT COUNT(*) FROM chunks_fts WHERE chunks_fts MATCH 'GARDENS'")[0][0] == 1


def test_front_matter_names_the_document_and_is_never_indexed_as_text(kb: Path) -> None:
    (kb / "docs/fm.md").write_text("---\ntitle: Harbour  dredging plan\nowner: ops\n---\n# Plan\n\n"
                                   "Dredging starts in May.\n", encoding="utf-8")
    assert sync(kb).ok
    assert rows(kb, "SELECT title FROM documents WHERE path = 'docs/fm.md'") == [("Harbour dredging plan",)]
    texts = [text for (text,) in rows(kb, "SELECT c.text FROM chunks c JOIN documents d ON d.id = c.doc_id "
                                          "WHERE d.path = 'docs/fm.md'")]
    assert texts and not any("owner" in text or "---" in text for text in texts)
    assert rows(kb, "SELECT COUNT(*) FROM chunks_fts WHERE chunks_fts MATCH 'owner'")[0][0] == 0
    # A sidecar title wins; removing it brings the front matter's back. The title is in every
    # chunk's context, so each change rebuilds the document (under the same ID).
    sidecar = kb / "docs/fm.md.pnk.yaml"
    sidecar.write_text(sidecar.read_text(encoding="utf-8") + "title: From the sidecar\n", encoding="utf-8")
    assert sync(kb).reembedded == ["docs/fm.md"]
    assert rows(kb, "SELECT title FROM documents WHERE path = 'docs/fm.md'") == [("From the sidecar",)]
    sidecar.write_text(sidecar.read_text(encoding="utf-8").replace("title: From the sidecar\n", ""),
                       encoding="utf-8")
    assert sync(kb).reembedded == ["docs/fm.md"]
    assert rows(kb, "SELECT title FROM documents WHERE path = 'docs/fm.md'") == [("Harbour dredging plan",)]


def test_a_move_plus_edit_without_its_sidecar_names_the_pair_and_adopt_keeps_the_id(kb: Path) -> None:
    from pinakes.pipeline.adopt import adopt_sidecar

    body = "\n\n".join(f"Paragraph {n} about the harbour dredging schedule and its permits." for n in range(8))
    (kb / "docs/plan.md").write_text(f"# Plan\n\n{body}\n", encoding="utf-8")
    sync(kb)
    old_id = doc_ids(kb)["docs/plan.md"]
    (kb / "docs/plan.md").unlink()
    (kb / "docs/notes/renamed-plan.md").write_text(f"# Plan, revised\n\n{body}\n\nOne more line at the end.\n",
                                                   encoding="utf-8")
    report = sync(kb)
    hint = [note for note in report.notes if "likely moved without its sidecar" in note]
    assert len(hint) == 1 and "docs/plan.md -> docs/notes/renamed-plan.md" in hint[0]
    assert "pnk adopt docs/plan.md.pnk.yaml docs/notes/renamed-plan.md" in hint[0]
    assert doc_ids(kb)["docs/notes/renamed-plan.md"] != old_id  # never guessed
    adopted = adopt_sidecar(kb, kb / "docs/plan.md.pnk.yaml", kb / "docs/notes/renamed-plan.md")
    assert adopted.doc_id == old_id and adopted.replaced_id == doc_ids(kb)["docs/notes/renamed-plan.md"]
    again = sync(kb)
    assert doc_ids(kb)["docs/notes/renamed-plan.md"] == old_id
    assert again.deleted == [] and again.renamed == [("docs/plan.md", "docs/notes/renamed-plan.md")]
    assert not (kb / "docs/plan.md.pnk.yaml").exists()


def test_adopt_refuses_what_it_cannot_do_safely(kb: Path) -> None:
    from pinakes.errors import PinakesError
    from pinakes.pipeline.adopt import adopt_sidecar

    sync(kb)
    with pytest.raises(PinakesError, match="not an orphaned sidecar"):
        adopt_sidecar(kb, kb / "docs/alpha.md.pnk.yaml", kb / "docs/gamma.txt")  # its document is there
    (kb / "docs/alpha.md").rename(kb / "docs/alpha-moved.md")
    with pytest.raises(PinakesError, match="no document"):
        adopt_sidecar(kb, kb / "docs/alpha.md.pnk.yaml", kb / "docs/missing.md")
    with pytest.raises(PinakesError, match="not a sidecar"):
        adopt_sidecar(kb, kb / "docs/gamma.txt", kb / "docs/alpha-moved.md")
