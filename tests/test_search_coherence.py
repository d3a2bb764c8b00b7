"""Refusals before answering (spec §4.4) and reloading when the index changes under a Searcher."""

from __future__ import annotations

import pytest

from pinakes.errors import IndexMissingError, IndexSchemaError, ModelMismatchError, StaleExtractionError
from pinakes.index import schema
from pinakes.manifest import EmbeddingSection
from pinakes.search import Searcher, SearchSettings
from tests.helpers_index import (
    DocSpec,
    HashEmbedder,
    build_index,
    build_search_index,
    fake_identity,
    search_corpus,
    write_documents,
)

NO_RERANK = SearchSettings(rerank=False)


def test_missing_index_names_pnk_sync(tmp_path):
    with (Searcher(tmp_path / ".pinakes" / "index.db", NO_RERANK, embedder=HashEmbedder()) as searcher,
          pytest.raises(IndexMissingError) as caught):
        searcher.search("kafka")
    assert "pnk sync" in (caught.value.remedy or "")


def test_searcher_starts_working_once_the_index_appears(tmp_path):
    embedder = HashEmbedder()
    with Searcher(tmp_path / "index.db", NO_RERANK, embedder=embedder) as searcher:
        with pytest.raises(IndexMissingError):
            searcher.search("kafka")
        build_search_index(tmp_path / "index.db", embedder)
        assert searcher.search("kafka").passages


def test_other_schema_version_is_refused(tmp_path):
    path = build_search_index(tmp_path / "index.db")
    conn = schema.open_writer(path)
    with schema.transaction(conn):
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    conn.close()
    with Searcher(path, NO_RERANK, embedder=HashEmbedder()) as searcher, pytest.raises(IndexSchemaError):
        searcher.search("kafka")


def test_index_built_by_another_model_refuses_vector_search(tmp_path):
    build_search_index(tmp_path / "index.db", HashEmbedder())
    other = HashEmbedder(identity=fake_identity(64, model="another-model"))
    with Searcher(tmp_path / "index.db", NO_RERANK, embedder=other) as searcher:
        with pytest.raises(ModelMismatchError) as caught:
            searcher.search("kafka")
        assert "pnk sync --rebuild" in (caught.value.remedy or "")
        assert caught.value.path == tmp_path / "index.db"


def test_manifest_naming_another_model_refuses_even_keyword_search(tmp_path):
    """The cheap check runs before any weights load, in every mode."""
    build_search_index(tmp_path / "index.db", HashEmbedder())

    def never():
        raise AssertionError("the embedder was loaded before the manifest check")

    section = EmbeddingSection(provider="fake", model="another-model", dim=64)
    with Searcher(tmp_path / "index.db", NO_RERANK, embedder_loader=never, embedding_section=section) as searcher:
        for mode in ("bm25", "hybrid"):
            with pytest.raises(ModelMismatchError):
                searcher.search("kafka", mode=mode)


def test_manifest_naming_the_index_model_passes(tmp_path):
    embedder = HashEmbedder()
    build_search_index(tmp_path / "index.db", embedder)
    identity = embedder.identity
    section = EmbeddingSection(provider=identity.provider, model=identity.model, dim=identity.dim)
    with Searcher(tmp_path / "index.db", NO_RERANK, embedder=embedder, embedding_section=section) as searcher:
        assert searcher.search("kafka").passages


def _with_extraction(backend: str, fingerprint: str) -> list[DocSpec]:
    docs = search_corpus()
    for doc in docs:
        if doc.path == "reports/annual.pdf":
            doc.extraction_backend, doc.extraction_fingerprint = backend, fingerprint
    return docs


def test_stale_free_extraction_refuses_the_query_naming_the_path(tmp_path):
    embedder = HashEmbedder()
    build_search_index(tmp_path / "index.db", embedder, _with_extraction("pypdfium2", "an-old-fingerprint"))
    with (Searcher(tmp_path / "index.db", NO_RERANK, embedder=embedder) as searcher,
          pytest.raises(StaleExtractionError) as caught):
        searcher.search("tomatoes")  # refuses even though no stale document would match
    assert "reports/annual.pdf" in caught.value.message


def test_stale_paid_extraction_is_served_and_marked(tmp_path):
    embedder = HashEmbedder()
    build_search_index(tmp_path / "index.db", embedder, _with_extraction("claude-vision", "an-old-prompt"))
    with Searcher(tmp_path / "index.db", NO_RERANK, embedder=embedder) as searcher:
        result = searcher.search("revenue quarter kafka")
    marks = {passage.path: passage.stale_extraction for passage in result.passages}
    assert marks["reports/annual.pdf"] == "claude-vision"
    assert marks["docs/kafka.md"] is None
    assert any("reports/annual.pdf" in note for note in result.notes)


def test_unknown_extraction_backend_is_skipped(tmp_path):
    embedder = HashEmbedder()
    build_search_index(tmp_path / "index.db", embedder, _with_extraction("future-backend", "whatever"))
    with Searcher(tmp_path / "index.db", NO_RERANK, embedder=embedder) as searcher:
        result = searcher.search("revenue")
    assert result.passages[0].stale_extraction is None


# -- reloading ------------------------------------------------------------------------------------


def test_searcher_sees_a_commit_made_after_it_loaded(tmp_path):
    embedder = HashEmbedder()
    path = build_search_index(tmp_path / "index.db", embedder)
    with Searcher(path, NO_RERANK, embedder=embedder) as searcher:
        searcher.search("zebra stripes", mode="vector")
        assert searcher._generation is not None
        first_matrix = searcher._generation.matrix
        writer = schema.open_writer(path)
        with schema.transaction(writer):
            write_documents(writer, [DocSpec("docs/zebra.md", "Zebra stripes confuse flies.")],
                            embedder.embed_documents)
        writer.close()
        for mode in ("bm25", "vector", "hybrid"):
            result = searcher.search("zebra stripes", mode=mode)
            assert [passage.path for passage in result.passages][:1] == ["docs/zebra.md"], mode
        assert searcher._generation is not None and searcher._generation.matrix is not first_matrix


def test_document_frequencies_are_recounted_for_a_new_generation(tmp_path):
    path = build_index(tmp_path / "index.db", [
        DocSpec("docs/a.md", "archive tarball"), DocSpec("docs/b.md", "reading room"),
        DocSpec("docs/c.md", "courier loans"),
    ])
    with Searcher(path, NO_RERANK) as searcher:
        first = searcher.search("archive tarball", mode="bm25")
        writer = schema.open_writer(path)
        with schema.transaction(writer):
            write_documents(writer, [DocSpec("docs/d.md", "archive boxes"), DocSpec("docs/e.md", "archive shelf")])
        writer.close()
        second = searcher.search("archive tarball", mode="bm25")
    # 1 of 3 chunks holds "archive", then 3 of 5: weightless only in the second generation.
    assert not any("without keyword weight" in note for note in first.notes)
    assert any("without keyword weight" in note and "archive" in note for note in second.notes)
    assert [passage.path for passage in second.passages] == ["docs/a.md"]


def test_searcher_forgets_a_deleted_document(tmp_path):
    embedder = HashEmbedder()
    path = build_search_index(tmp_path / "index.db", embedder)
    with Searcher(path, NO_RERANK, embedder=embedder) as searcher:
        assert "notes/garden.txt" in {p.path for p in searcher.search("tomatoes sun").passages}
        writer = schema.open_writer(path)
        with schema.transaction(writer):
            writer.execute("UPDATE documents SET state = 'deleted' WHERE path = 'notes/garden.txt'")
        writer.close()
        for mode in ("bm25", "vector", "hybrid"):
            assert "notes/garden.txt" not in {p.path for p in searcher.search("tomatoes sun", mode=mode).passages}


def test_searcher_follows_an_installed_rebuild(tmp_path):
    embedder = HashEmbedder()
    live = build_search_index(tmp_path / "index.db", embedder)
    with Searcher(live, NO_RERANK, embedder=embedder) as searcher:
        assert searcher.search("tomatoes").passages
        rebuilt = build_index(tmp_path / "index.db.new", [DocSpec("docs/only.md", "Nothing but tomatoes.")],
                              embed=embedder.embed_documents, meta=embedder.meta())
        schema.install_rebuilt(rebuilt, live)
        for mode in ("bm25", "vector"):
            assert [p.path for p in searcher.search("tomatoes", mode=mode).passages] == ["docs/only.md"]


def test_the_reader_never_writes_the_index(tmp_path):
    embedder = HashEmbedder()
    path = build_search_index(tmp_path / "index.db", embedder)
    before = path.read_bytes()
    with Searcher(path, NO_RERANK, embedder=embedder) as searcher:
        for mode in ("bm25", "vector", "hybrid"):
            searcher.search("kafka replication", mode=mode)
        assert searcher._generation is not None
        with pytest.raises(Exception, match="readonly"):
            searcher._generation.conn.execute("DELETE FROM chunks")
    assert path.read_bytes() == before
