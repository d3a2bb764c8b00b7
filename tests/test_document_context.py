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


# --- what the context reads besides the content: a rename or a retitle rebuilds it -----------------

NOTES = "".join(SECTION.format(n=n) for n in ("first", "second", "third"))  # no heading, no title of its own


def stored_contexts(index: Path, word: str) -> dict[str, int]:
    """Where `word` is still held for a context: stored contexts, the FTS context column, the
    context counts of chunk_terms, and the vectors (a chunk whose vector is not the one of its own
    context + text)."""
    embedder = HashEmbedder()
    with sqlite3.connect(index) as conn:
        rows = conn.execute("SELECT c.text, c.context, e.vector FROM chunks c "
                            "JOIN embeddings e ON e.chunk_id = c.id").fetchall()
        return {
            "context": sum(word.casefold() in (context or "").casefold() for _, context, _ in rows),
            "fts": conn.execute("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?",
                                (f"context : {word}",)).fetchone()[0],
            "terms": conn.execute("SELECT count(*) FROM chunk_terms WHERE term = ? AND context_frequency > 0",
                                  (word.casefold(),)).fetchone()[0],
            "vectors": sum(not np.allclose(np.frombuffer(vector, dtype=np.float32),
                                           embedder.embed_documents([embedding_input(context or "", text)])[0])
                           for text, context, vector in rows),
        }


def doc_id_of(index: Path, path: str) -> str:
    with sqlite3.connect(index) as conn:
        return conn.execute("SELECT id FROM documents WHERE path = ? AND state = 'active'", (path,)).fetchone()[0]


def test_a_rename_rebuilds_the_context_and_keeps_the_id(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    index = build_kb(root, [Doc("docs/quokka-notes.md", NOTES), Doc("docs/other.md", "Unrelated gardens.\n")],
                     HashEmbedder())
    doc_id = doc_id_of(index, "docs/quokka-notes.md")
    assert search_paths(index, "quokka")[:1] == ["docs/quokka-notes.md"]
    (root / "docs/quokka-notes.md").rename(root / "docs/numbat-ledger.md")  # its sidecar left behind

    embedder = RecordingEmbedder()
    report = sync(root, embedder)
    assert report.renamed == [("docs/quokka-notes.md", "docs/numbat-ledger.md")]
    assert report.reembedded == ["docs/numbat-ledger.md"] and not report.changed and not report.metadata_refreshed
    assert doc_id_of(index, "docs/numbat-ledger.md") == doc_id  # the same document: its ID and links stay
    assert (root / "docs/numbat-ledger.md.pnk.yaml").exists() and not (root / "docs/quokka-notes.md.pnk.yaml").exists()
    assert embedder.texts and all(text.startswith("numbat ledger") for text in embedder.texts)
    assert stored_contexts(index, "quokka") == {"context": 0, "fts": 0, "terms": 0, "vectors": 0}
    assert stored_contexts(index, "numbat")["fts"] >= 1
    for mode in ("bm25", "hybrid"):
        assert search_paths(index, "numbat ledger", mode)[:1] == ["docs/numbat-ledger.md"], mode
    assert "docs/numbat-ledger.md" not in search_paths(index, "quokka")
    assert sync(root, RecordingEmbedder()).noop  # the key it stored is the one the next sync computes


def test_a_move_that_keeps_the_file_names_words_stays_a_metadata_refresh(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    index = build_kb(root, [Doc("docs/drafts/quokka-notes.md", NOTES)], HashEmbedder())
    with sqlite3.connect(index) as conn:
        before = conn.execute("SELECT id, context FROM chunks ORDER BY id").fetchall()
    (root / "docs/final").mkdir()
    (root / "docs/drafts/quokka-notes.md").rename(root / "docs/final/quokka_notes.md")  # same words

    embedder = RecordingEmbedder()
    report = sync(root, embedder)
    assert report.renamed == [("docs/drafts/quokka-notes.md", "docs/final/quokka_notes.md")]
    assert report.metadata_refreshed == ["docs/final/quokka_notes.md"] and not report.reembedded
    assert embedder.texts == []  # nothing chunked or embedded again
    with sqlite3.connect(index) as conn:
        assert conn.execute("SELECT id, context FROM chunks ORDER BY id").fetchall() == before


def test_a_retitle_in_the_sidecar_rebuilds_the_context(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    index = build_kb(root, [Doc("docs/0042.md", NOTES, title="Quokka field guide"),
                            Doc("docs/other.md", "Unrelated gardens.\n")], HashEmbedder())
    assert search_paths(index, "quokka guide")[:1] == ["docs/0042.md"]
    sidecar = root / "docs/0042.md.pnk.yaml"
    sidecar.write_text(sidecar.read_text(encoding="utf-8").replace("Quokka field guide", "Numbat ledger"),
                       encoding="utf-8")

    embedder = RecordingEmbedder()
    report = sync(root, embedder)
    assert report.reembedded == ["docs/0042.md"] and not report.metadata_refreshed and not report.changed
    assert embedder.texts and all(text.startswith("Numbat ledger") for text in embedder.texts)
    assert stored_contexts(index, "quokka") == {"context": 0, "fts": 0, "terms": 0, "vectors": 0}
    assert search_paths(index, "numbat ledger")[:1] == ["docs/0042.md"]
    # A sidecar edit that leaves the title alone is still a metadata refresh.
    sidecar.write_text(sidecar.read_text(encoding="utf-8") + "tags: [fauna]\n", encoding="utf-8")
    tagged = sync(root, RecordingEmbedder())
    assert tagged.metadata_refreshed == ["docs/0042.md"] and not tagged.reembedded


# --- Han, kana and Hangul in the context: indexed as the text is, through the bigram shadow ----------

def test_a_cjk_title_or_file_name_is_found_by_a_part_of_it(tmp_path: Path) -> None:
    from pinakes.index.schema import FTS_TOKENIZE
    from pinakes.lexical.scripts import shadow
    from pinakes.lexical.tokenizer import Tokenizer

    root = tmp_path / "kb"
    index = build_kb(root, [Doc("docs/minutes.md", NOTES, title="東京支店の営業会議"),
                            Doc("docs/年度予算計画.md", NOTES),
                            Doc("docs/other.md", NOTES.replace("source", "origin"))], HashEmbedder())
    assert search_paths(index, "営業会議")[:1] == ["docs/minutes.md"]  # a part of the title only
    assert search_paths(index, "予算")[:1] == ["docs/年度予算計画.md"]  # a word inside the file name
    assert search_paths(index, "支店 skipped file")[:1] == ["docs/minutes.md"]
    with sqlite3.connect(index) as conn:
        rows = conn.execute("SELECT id, context, fts_context FROM chunks WHERE context LIKE '%営業%'").fetchall()
        assert rows and all(fts_context == shadow(context) for _, context, fts_context in rows)
        # chunk_terms counts the context exactly as FTS5 indexes it.
        chunk_id, context, _ = rows[0]
        counted = dict(conn.execute("SELECT term, context_frequency FROM chunk_terms "
                                    "WHERE chunk_id = ? AND context_frequency > 0", (chunk_id,)).fetchall())
        assert counted == Tokenizer(FTS_TOKENIZE).frequencies([context])[0]
        assert "営業" in counted and "東京支店の営業会議" not in counted
        assert conn.execute("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?",
                            ('context : "営業 業会 会議"',)).fetchone()[0] == len(rows)
        # The FTS index agrees with its content view (what a rebuild of it would read).
        conn.execute("INSERT INTO chunks_fts (chunks_fts, rank) VALUES ('integrity-check', 1)")
