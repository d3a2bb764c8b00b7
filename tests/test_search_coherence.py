"""Refusals before answering (spec §4.4) and reloading when the index changes under a Searcher.

Every index is built by the sync (tests/kb_helpers.py); a change under an open Searcher is a file
edit, deletion or `--rebuild` followed by a sync, as a person makes it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pinakes.errors import IndexMissingError, IndexSchemaError, ModelMismatchError, StaleExtractionError
from pinakes.index import schema
from pinakes.kb import KBPaths
from pinakes.manifest import EmbeddingSection
from pinakes.search.core import Searcher, SearchSettings
from tests.fakes import HashEmbedder
from tests.kb_helpers import (
    KAFKA_TEXT,
    Doc,
    build_kb,
    build_search_kb,
    delete_documents,
    newer_extractor,
    searchable,
    sync,
    sync_claude_vision,
    write_documents,
)

if TYPE_CHECKING:
    from tests.fake_anthropic import FakeAnthropic

NO_RERANK = SearchSettings(rerank=False)


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The search corpus, synced once, for the tests that only read it."""
    return build_search_kb(tmp_path_factory.mktemp("coherence") / "kb", HashEmbedder())


def test_missing_index_names_pnk_sync(tmp_path: Path) -> None:
    with (Searcher(tmp_path / ".pinakes" / "index.db", NO_RERANK, embedder=HashEmbedder()) as searcher,
          pytest.raises(IndexMissingError) as caught):
        searcher.search("kafka")
    assert "pnk sync" in (caught.value.remedy or "")


def test_searcher_starts_working_once_the_index_appears(tmp_path: Path) -> None:
    embedder = HashEmbedder()
    root = tmp_path / "kb"
    with Searcher(KBPaths(root).index_db, NO_RERANK, embedder=embedder) as searcher:
        with pytest.raises(IndexMissingError):
            searcher.search("kafka")
        build_search_kb(root, embedder)
        assert searcher.search("kafka").passages


def test_other_schema_version_is_refused(tmp_path: Path) -> None:
    """An index another Pinakes wrote, simulated by its schema_version row."""
    path = build_search_kb(tmp_path / "kb", HashEmbedder())
    conn = schema.open_writer(path)
    with schema.transaction(conn):
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    conn.close()
    with Searcher(path, NO_RERANK, embedder=HashEmbedder()) as searcher, pytest.raises(IndexSchemaError):
        searcher.search("kafka")


def test_index_built_by_another_model_refuses_vector_search(index: Path) -> None:
    other = HashEmbedder(model="another-model")
    with Searcher(index, NO_RERANK, embedder=other) as searcher:
        with pytest.raises(ModelMismatchError) as caught:
            searcher.search("kafka")
        assert "pnk sync --rebuild" in (caught.value.remedy or "")
        assert caught.value.path == index


def test_manifest_naming_another_model_refuses_even_keyword_search(index: Path) -> None:
    """The cheap check runs before any weights load, in every mode."""
    def never():
        raise AssertionError("the embedder was loaded before the manifest check")

    section = EmbeddingSection(provider="sentence-transformers", model="another-model", dim=64)
    with Searcher(index, NO_RERANK, embedder_loader=never, embedding_section=section) as searcher:
        for mode in ("bm25", "hybrid"):
            with pytest.raises(ModelMismatchError):
                searcher.search("kafka", mode=mode)


def test_manifest_naming_the_index_model_passes(index: Path) -> None:
    embedder = HashEmbedder()
    identity = embedder.identity
    section = EmbeddingSection(provider=identity.provider, model=identity.model, dim=identity.dim)
    with Searcher(index, NO_RERANK, embedder=embedder, embedding_section=section) as searcher:
        assert searcher.search("kafka").passages


def test_stale_free_extraction_refuses_the_query_naming_the_path(index: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The PDF was synced by the free extractor as it was; this Pinakes declares a newer one."""
    newer_extractor(monkeypatch, "pypdfium2")
    with (Searcher(index, NO_RERANK, embedder=HashEmbedder()) as searcher,
          pytest.raises(StaleExtractionError) as caught):
        searcher.search("tomatoes")  # refuses even though no stale document would match
    assert "reports/annual.pdf" in caught.value.message


@pytest.fixture
def anthropic_server() -> Iterator[FakeAnthropic]:
    pytest.importorskip("anthropic", reason="the [claude] extra is not installed: the paid path cannot run")
    pytest.importorskip("pypdfium2", reason="the [pdf] extra is not installed: nothing renders pages")
    from tests.fake_anthropic import FakeAnthropic

    with FakeAnthropic() as server:
        yield server


def test_stale_paid_extraction_is_served_and_marked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    anthropic_server: FakeAnthropic) -> None:
    """A scan extracted by claude-vision through the sync (the local Messages API stands in for the
    vendor); then this Pinakes declares a newer request shape."""
    from tests.fake_anthropic import scanned_pdf

    anthropic_server.page_texts = {1: "Revenue grew strongly in the third quarter.",
                                   2: "Costs rose across the quarter boundary."}
    embedder = HashEmbedder()
    root = tmp_path / "kb"
    build_kb(root, [Doc("docs/kafka.md", KAFKA_TEXT)], embedder)
    write_documents(root, [Doc("reports/annual.pdf", scanned_pdf(2))])
    text = (root / "pinakes.toml").read_text(encoding="utf-8").replace('roots = ["docs"]', 'roots = ["docs", "reports"]')
    (root / "pinakes.toml").write_text(text, encoding="utf-8")
    sync_claude_vision(root, embedder, anthropic_server.url, monkeypatch)
    newer_extractor(monkeypatch, "claude-vision")
    with Searcher(KBPaths(root).index_db, NO_RERANK, embedder=embedder) as searcher:
        result = searcher.search("revenue quarter kafka")
    marks = {passage.path: passage.stale_extraction for passage in result.passages}
    assert marks["reports/annual.pdf"] == "claude-vision"
    assert marks["docs/kafka.md"] is None
    assert any("reports/annual.pdf" in note for note in result.notes)


def test_unknown_extraction_backend_is_skipped(index: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An index whose PDF was extracted by a backend this build does not declare (here: the
    registry without pypdfium2) can be neither computed nor compared: served unmarked."""
    from pinakes.extract.registry import EXTRACTORS

    monkeypatch.delitem(EXTRACTORS, "pypdfium2")
    with Searcher(index, NO_RERANK, embedder=HashEmbedder()) as searcher:
        result = searcher.search("revenue")
    assert result.passages[0].path == "reports/annual.pdf"
    assert result.passages[0].stale_extraction is None


# -- reloading ------------------------------------------------------------------------------------


def test_searcher_sees_a_commit_made_after_it_loaded(tmp_path: Path) -> None:
    embedder = HashEmbedder()
    root = tmp_path / "kb"
    path = build_search_kb(root, embedder)
    with Searcher(path, NO_RERANK, embedder=embedder) as searcher:
        searcher.search("zebra stripes", mode="vector")
        assert searcher._generation is not None  # pyright: ignore[reportPrivateUsage]  # the reload under test
        first_matrix = searcher._generation.matrix  # pyright: ignore[reportPrivateUsage]  # the reload under test
        write_documents(root, [Doc("docs/zebra.md", "Zebra stripes confuse flies.\n")])
        sync(root, embedder)
        for mode in ("bm25", "vector", "hybrid"):
            result = searcher.search("zebra stripes", mode=mode)
            assert [passage.path for passage in result.passages][:1] == ["docs/zebra.md"], mode
        assert (searcher._generation is not None  # pyright: ignore[reportPrivateUsage]  # the reload under test
                and searcher._generation.matrix is not first_matrix)  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose


def test_document_frequencies_are_recounted_for_a_new_generation(tmp_path: Path) -> None:
    embedder = HashEmbedder()
    root = tmp_path / "kb"
    path = build_kb(root, searchable({"a.md": "archive tarball\n", "b.md": "reading room\n",
                                      "c.md": "courier loans\n"}), embedder)
    with Searcher(path, NO_RERANK) as searcher:
        first = searcher.search("archive tarball", mode="bm25")
        write_documents(root, searchable({"d.md": "archive boxes\n", "e.md": "archive shelf\n"}))
        sync(root, embedder)
        second = searcher.search("archive tarball", mode="bm25")
    # 1 of 3 chunks holds "archive", then 3 of 5: weightless only in the second generation.
    assert not any("without keyword weight" in note for note in first.notes)
    assert any("without keyword weight" in note and "archive" in note for note in second.notes)
    assert [passage.path for passage in second.passages] == ["docs/a.md"]


def test_searcher_forgets_a_deleted_document(tmp_path: Path) -> None:
    embedder = HashEmbedder()
    root = tmp_path / "kb"
    path = build_search_kb(root, embedder)
    with Searcher(path, NO_RERANK, embedder=embedder) as searcher:
        assert "notes/garden.txt" in {p.path for p in searcher.search("tomatoes sun").passages}
        delete_documents(root, ["notes/garden.txt"], embedder)
        for mode in ("bm25", "vector", "hybrid"):
            assert "notes/garden.txt" not in {p.path for p in searcher.search("tomatoes sun", mode=mode).passages}


def test_searcher_follows_an_installed_rebuild(tmp_path: Path) -> None:
    """`pnk sync --rebuild` installs a new generation under the open Searcher."""
    embedder = HashEmbedder()
    root = tmp_path / "kb"
    live = build_search_kb(root, embedder)
    with Searcher(live, NO_RERANK, embedder=embedder) as searcher:
        assert searcher.search("tomatoes").passages
        (root / "notes" / "garden.txt").unlink()
        write_documents(root, [Doc("docs/only.md", "Nothing but tomatoes.\n")])
        sync(root, embedder, rebuild=True)
        for mode in ("bm25", "vector"):
            assert [p.path for p in searcher.search("tomatoes", mode=mode).passages] == ["docs/only.md"]


def test_the_reader_never_writes_the_index(tmp_path: Path) -> None:
    embedder = HashEmbedder()
    path = build_search_kb(tmp_path / "kb", embedder)
    before = path.read_bytes()
    with Searcher(path, NO_RERANK, embedder=embedder) as searcher:
        for mode in ("bm25", "vector", "hybrid"):
            searcher.search("kafka replication", mode=mode)
        assert searcher._generation is not None  # pyright: ignore[reportPrivateUsage]  # the test reads its connection
        with pytest.raises(Exception, match="readonly"):
            searcher._generation.conn.execute("DELETE FROM chunks")  # pyright: ignore[reportPrivateUsage]  # probes read-only
    assert path.read_bytes() == before
