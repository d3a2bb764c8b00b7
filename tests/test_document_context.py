"""Document context (issue #28): each chunk's document context and heading trail, stored beside the
chunk, searched by the keyword side as its own field, embedded ahead of the chunk by the vector side;
citations and spans stay the document's own characters."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from pinakes.pipeline import keys
from pinakes.pipeline.context import (
    CONTEXT_TOKENS,
    chunk_context,
    document_context,
    embedding_input,
    file_name_words,
    fit_context,
    is_identifier,
    running_head_words,
)
from pinakes.search.core import Searcher, SearchSettings
from tests.fakes import HashEmbedder
from tests.kb_helpers import Doc, build_kb, sync

SECTION = ("The {n} step copies the source tree into the target directory, keeps the file metadata "
           "and reports every skipped file to the caller.\n\n")


class RecordingEmbedder(HashEmbedder):
    """HashEmbedder that keeps every text it was asked to embed."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed_documents(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        self.texts.extend(texts)
        return super().embed_documents(texts, batch_size)


def search_paths(index: Path, query: str, mode: str = "bm25") -> list[str]:
    with Searcher(index, SearchSettings(rerank=False, final_k=10), embedder=HashEmbedder()) as searcher:
        return [passage.path for passage in searcher.search(query, mode=mode).passages]


def corpus() -> list[Doc]:
    """Two manuals sharing their vocabulary; only the title and file name say which is which."""
    def manual(title: str) -> str:
        return f"# {title}\n\n" + "".join(f"## Part {n}\n\n" + SECTION.format(n=n) for n in range(1, 4))
    return [Doc("docs/quokka-sync.md", manual("Quokka backup tool")),
            Doc("docs/wombat-mirror.md", manual("Wombat mirroring tool"))]


def test_the_rules_of_a_context() -> None:
    assert is_identifier("0000320193-22-000070") and is_identifier("01J9Z8Q4K2M3N4P5Q6R7S8T9V0")
    assert not is_identifier("Apple Inc. Form 10-Q") and not is_identifier("shutil")
    assert file_name_words("filings/apple-10q_2022-Q3.pdf") == "apple 10q 2022 Q3"
    assert file_name_words("library/shutil.rst.txt") == "shutil"
    assert file_name_words("docs/0042.txt") == "" and file_name_words("0000320193-22-000070.pdf") == ""
    assert running_head_words(["Apple Inc. | Q3 2022 Form 10-Q | 2", "Apple Inc. | Q3 2022 Form 10-Q | 3", "17"]) \
        == ["Apple Inc. | Q3 2022 Form 10-Q"]
    lines = document_context("0000320193-22-000070", "apple-q3.pdf", running_heads=["ACME Corp | 4"])
    assert lines == ["apple q3", "ACME Corp"]  # an identifier title is no context
    assert document_context(None, "docs/0042.txt") == []
    assert chunk_context(["Guide", "guide v2"], ("Guide", "Install", "Linux")) == "Guide\nInstall > Linux\nguide v2"


def test_the_context_is_cut_to_the_models_input_never_past_it() -> None:
    def words(text: str) -> int:
        return len(text.split())
    text = " ".join(["body"] * 240)
    context = " ".join(f"c{n}" for n in range(40))
    fitted = fit_context(context, text, words(text), 254, words)
    assert words(embedding_input(fitted, text)) <= 254 and fitted and context.startswith(fitted)
    short = " ".join(["body"] * (254 - CONTEXT_TOKENS))
    assert fit_context("Quokka backup tool", short, words(short), 254, words) == "Quokka backup tool"


def test_context_is_stored_beside_the_chunk_and_spans_are_unchanged(tmp_path: Path) -> None:
    index = build_kb(tmp_path / "kb", corpus(), HashEmbedder())
    root = tmp_path / "kb"
    with sqlite3.connect(index) as conn:
        rows = conn.execute("SELECT d.path, c.text, c.char_start, c.char_end, c.context FROM chunks c "
                            "JOIN documents d ON d.id = c.doc_id").fetchall()
    assert rows
    for path, text, start, end, context in rows:
        assert text == (root / path).read_text(encoding="utf-8")[start:end]
        assert context.startswith("Quokka backup tool" if "quokka" in path else "Wombat mirroring tool")
        assert ("quokka sync" if "quokka" in path else "wombat mirror") in context  # the file name's words
    assert any("Part 2" in context for *_, context in rows)  # the heading trail


def test_a_question_naming_the_document_finds_a_chunk_whose_text_lacks_it(tmp_path: Path) -> None:
    index = build_kb(tmp_path / "kb", corpus(), HashEmbedder())
    for mode in ("bm25", "hybrid"):
        with Searcher(index, SearchSettings(rerank=False, final_k=5), embedder=HashEmbedder()) as searcher:
            result = searcher.search("wombat skipped file metadata", mode=mode)
        paths = [passage.path for passage in result.passages]
        assert paths[0] == "docs/wombat-mirror.md", mode
        assert any(p.path == "docs/wombat-mirror.md" and "wombat" not in p.text.lower() for p in result.passages)
        if "docs/quokka-sync.md" in paths:  # every wombat passage ranks above the other manual's
            assert "docs/wombat-mirror.md" not in paths[paths.index("docs/quokka-sync.md"):], mode
    with sqlite3.connect(index) as conn:
        lacking = conn.execute("SELECT count(*) FROM chunks WHERE text NOT LIKE '%ombat%' "
                               "AND context LIKE '%Wombat%'").fetchone()[0]
    assert lacking >= 1


def test_the_vector_side_embeds_context_then_text(tmp_path: Path) -> None:
    embedder = RecordingEmbedder()
    index = build_kb(tmp_path / "kb", corpus(), embedder)
    with sqlite3.connect(index) as conn:
        expected = {embedding_input(context, text) for text, context in
                    conn.execute("SELECT text, context FROM chunks")}
    assert expected <= set(embedder.texts)
    assert all(embedder.count_tokens(text) <= embedder.max_input_tokens for text in embedder.texts)


def test_a_pdf_running_footer_names_the_document(tmp_path: Path) -> None:
    pytest.importorskip("fpdf", reason="the PDF is drawn with fpdf2 (the [dev] extra)")
    pytest.importorskip("pypdfium2", reason="the PDF is read by the [pdf] extra")
    from fpdf import FPDF

    root = tmp_path / "kb"
    build_kb(root, [Doc("docs/notes.md", "# Notes\n\nTotal net sales rose in the quarter.\n")], HashEmbedder())
    pdf = FPDF(unit="pt", format="letter")
    pdf.set_font("Helvetica", size=11)
    for page in range(1, 7):
        pdf.add_page()
        pdf.text(72, 100, f"Total net sales for segment {page} were 82,959 against 81,434 a year before.")
        pdf.text(72, 120, "Operating expenses grew with research and development.")
        pdf.text(72, 760, f"Zanzibar Holdings | Q3 2022 Form 10-Q | {page}")
    pdf.output(str(root / "docs" / "0000320193-22-000070.pdf"))
    sync(root, HashEmbedder())
    index = root / ".pinakes" / "index.db"
    with sqlite3.connect(index) as conn:
        rows = conn.execute("SELECT c.text, c.context FROM chunks c JOIN documents d ON d.id = c.doc_id "
                            "WHERE d.source_type = 'pdf'").fetchall()
    assert rows and all("Zanzibar" not in text for text, _ in rows)  # stripped from the body, as before
    assert all("Zanzibar Holdings | Q3 2022 Form 10-Q" in context for _, context in rows)
    assert search_paths(index, "zanzibar net sales")[0] == "docs/0000320193-22-000070.pdf"


def test_an_index_built_with_the_old_context_re_embeds_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "kb"
    with monkeypatch.context() as patch:
        patch.setattr(keys, "CONTEXT_VERSION", "0")  # the key an older build wrote
        build_kb(root, corpus(), HashEmbedder())
    upgraded = sync(root, HashEmbedder())
    assert sorted(upgraded.reembedded) == ["docs/quokka-sync.md", "docs/wombat-mirror.md"]
    again = sync(root, HashEmbedder())
    assert not again.reembedded and not again.added and not again.changed


def test_a_document_without_context_is_chunked_and_embedded_as_before(tmp_path: Path) -> None:
    embedder = RecordingEmbedder()
    body = " ".join(f"w{n}" for n in range(240))  # one chunk of 240 tokens: above the room a context takes
    index = build_kb(tmp_path / "kb", [Doc("docs/0042.txt", body + "\n")], embedder)
    with sqlite3.connect(index) as conn:
        rows = conn.execute("SELECT text, context, token_count FROM chunks").fetchall()
    assert [(context, tokens) for _, context, tokens in rows] == [(None, 240)]
    assert embedder.texts == [rows[0][0]]  # the chunk's text alone: a stored vector of it is reused
