"""Han, kana and Hangul in the keyword index: shadow text, query segmentation, blind vectors."""

from __future__ import annotations

import sqlite3
import unicodedata
from pathlib import Path
from typing import Any, cast

import pytest

from pinakes.index import schema
from pinakes.init import init_kb
from pinakes.lexical.scripts import SEGMENTED_RUN, bigrams, segmented_parts, shadow
from pinakes.lexical.tokenizer import Tokenizer
from pinakes.search.bm25 import KeywordOptions, SegmentedPlan
from pinakes.search.core import Searcher, SearchSettings
from pinakes.search.query import analyze
from pinakes.search.scripts import vectors_blind_to
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.fakes import FakeEmbedder

# One document per script: a two-character word stands inside a sentence of the same script,
# with no space or punctuation around it; the other sentences share none of its characters.
DOCUMENTS = {
    "zh": ("docs/zh.md", "# 说明\n\n这个工具可以把多个文件打包成一个归档然后压缩。\n\n另一段讲网络连接和端口。\n", "归档"),
    "ja": ("docs/ja.md", "# 説明\n\nこのツールは複数のファイルを圧縮して保存します。\n\n別の段落はネットワークの話です。\n",
           "圧縮"),
    "ko": ("docs/ko.md", "# 설명\n\n이 도구는여러파일을압축하여보관합니다.\n\n다른 단락은 네트워크 연결입니다.\n", "압축"),
}


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cjk") / "kb"
    init_kb(root, name="cjk")
    for path, text, _ in DOCUMENTS.values():
        (root / path).write_text(text, encoding="utf-8")
    (root / "docs" / "en.md").write_text("# Notes\n\nCompress many files into one archive.\n", encoding="utf-8")
    run_sync(root, SyncOptions(), embedder=FakeEmbedder())
    return root


def searcher(kb: Path, **keyword: object) -> Searcher:
    settings = SearchSettings(rerank=False, keyword=KeywordOptions(**cast("dict[str, Any]", keyword)))
    return Searcher(kb / ".pinakes" / "index.db", settings, embedder=FakeEmbedder())


@pytest.mark.parametrize("script", sorted(DOCUMENTS))
def test_a_two_character_word_inside_a_sentence_is_found_and_cited_at_its_characters(kb: Path, script: str) -> None:
    path, text, word = DOCUMENTS[script]
    with searcher(kb) as s:
        result = s.search(word, mode="bm25")
    assert result.passages, f"{script}: keyword search found nothing for {word}"
    top = result.passages[0]
    assert top.path == path
    # The citation addresses the original characters, not the shadow text FTS5 indexed.
    source = (kb / path).read_text(encoding="utf-8")
    assert source[top.char_start : top.char_end] == top.text
    assert word in top.text
    assert top.citation == f"{path}:{top.char_start}-{top.char_end}"
    sentence_start = text.index(word) - text[: text.index(word)].rfind("\n") - 1
    assert top.text.index(word) >= sentence_start >= 0


@pytest.mark.parametrize("script", sorted(DOCUMENTS))
def test_unicode61_alone_would_not_find_the_word(kb: Path, script: str) -> None:
    """The control: against the chunk's own text, the word is inside one whole-run token."""
    _, _, word = DOCUMENTS[script]
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5 (text, tokenize = '{schema.FTS_TOKENIZE}')")
    conn.executemany("INSERT INTO t (text) VALUES (?)", [(text,) for _, text, _ in DOCUMENTS.values()])
    assert conn.execute("SELECT count(*) FROM t WHERE t MATCH ?", (f'"{word}"',)).fetchone()[0] == 0


def test_only_chunks_with_these_scripts_store_a_shadow(kb: Path) -> None:
    conn = sqlite3.connect(kb / ".pinakes" / "index.db")
    try:
        rows = dict(conn.execute("SELECT d.path, max(c.fts_text IS NOT NULL) FROM chunks c "
                                 "JOIN documents d ON d.id = c.doc_id GROUP BY d.path"))
        conn.execute("INSERT INTO chunks_fts (chunks_fts, rank) VALUES ('integrity-check', 1)")
    finally:
        conn.close()
    assert rows == {"docs/zh.md": 1, "docs/ja.md": 1, "docs/ko.md": 1, "docs/en.md": 0}


def test_phrase_ranks_the_characters_standing_together_first(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    init_kb(root, name="phrase")
    (root / "docs" / "together.md").write_text("数据压缩工具。\n", encoding="utf-8")
    (root / "docs" / "apart.md").write_text("压缩数据工具。\n", encoding="utf-8")  # the same bigrams but one
    run_sync(root, SyncOptions(), embedder=FakeEmbedder())
    with searcher(root) as s:
        phrase_then_or = s.search("数据压缩", mode="bm25")
    with searcher(root, segmented=SegmentedPlan.PHRASE) as s:
        phrase_only = s.search("数据压缩", mode="bm25")
    assert [p.path for p in phrase_only.passages] == ["docs/together.md"]
    # The relaxation fills the list with the rows holding only some of the pairs, behind the phrase.
    assert [p.path for p in phrase_then_or.passages] == ["docs/together.md", "docs/apart.md"]


def test_a_phrase_found_nowhere_is_relaxed_not_called_unknown(kb: Path) -> None:
    with searcher(kb) as s:
        result = s.search("打包压缩", mode="bm25")  # both words are in zh.md, never side by side
    assert result.passages and result.passages[0].path == "docs/zh.md"
    assert not any("not in this KB" in note for note in result.notes)


def test_hybrid_leaves_out_the_vectors_of_a_model_that_cannot_read_the_query(kb: Path) -> None:
    with searcher(kb) as s:
        hybrid = s.search("归档", mode="hybrid")
        keyword = s.search("归档", mode="bm25")
        english = s.search("archive", mode="hybrid")
    assert [p.citation for p in hybrid.passages] == [p.citation for p in keyword.passages]
    assert all(p.scores.vector_rank is None for p in hybrid.passages)
    assert any("does not read Chinese" in note for note in hybrid.notes)
    assert any(p.scores.vector_rank is not None for p in english.passages)


def test_shadow_rewrites_runs_into_bigrams_and_leaves_other_text_alone() -> None:
    assert shadow("plain English, no change") is None
    assert shadow("gzip压缩文件") == "gzip 压缩 缩文 文件 "
    assert shadow("一") == " 一 "
    assert bigrams("アーカイブ") == ["アー", "ーカ", "カイ", "イブ"]
    assert segmented_parts("gzip压缩x") == [("gzip", False), ("压缩", True), ("x", False)]
    twice = shadow("归档实用程序")
    again = shadow(twice or "")
    assert twice is not None and again is not None and again.split() == twice.split()  # no token changes


def test_every_bigram_is_one_term_of_the_index_tokenizer() -> None:
    tokenizer = Tokenizer(schema.FTS_TOKENIZE)
    try:
        texts = ["归档", "アー", "압축", "々〇", "ｱｲ"]
        assert tokenizer.terms(texts) == [(text,) for text in texts]
        units = analyze("如何 gzip压缩文件", tokenizer).units
    finally:
        tokenizer.close()
    assert [(u.word, u.terms, u.segmented) for u in units] == [
        ("如何", ("如何",), True), ("gzip", ("gzip",), False), ("压缩文件", ("压缩", "缩文", "文件"), True)]


def test_the_character_class_is_the_letters_and_digits_of_the_four_scripts() -> None:
    """Re-derived from unicodedata: the ranges in scripts.py are generated, not hand-typed."""
    blocks = [(0x3005, 0x3007), (0x3021, 0x3029), (0x3038, 0x303B), (0x3400, 0x4DBF), (0x4E00, 0x9FFF),
              (0xF900, 0xFAFF), (0x20000, 0x2FA1F), (0x30000, 0x3134F),  # Han
              (0x3040, 0x30FF), (0x31F0, 0x31FF), (0xFF66, 0xFF9F), (0x1B000, 0x1B16F),  # kana
              (0x1100, 0x11FF), (0x3130, 0x318F), (0xA960, 0xA97F), (0xAC00, 0xD7FF), (0xFFA0, 0xFFDC)]  # Hangul
    for start, end in blocks:
        for code in range(start, end + 1):
            char = chr(code)
            expected = unicodedata.category(char)[0] in "LN"
            assert bool(SEGMENTED_RUN.fullmatch(char)) == expected, f"U+{code:04X}"
    assert not SEGMENTED_RUN.search("・、。「」a1é")  # punctuation, Latin, digits


def test_blindness_is_decided_by_model_and_script() -> None:
    assert vectors_blind_to("압축 파일", "sentence-transformers/all-MiniLM-L6-v2")
    assert vectors_blind_to("docker container 命令的别名", "sentence-transformers/all-MiniLM-L6-v2")
    assert not vectors_blind_to("compress files", "sentence-transformers/all-MiniLM-L6-v2")
    assert not vectors_blind_to("압축 파일", "intfloat/multilingual-e5-small")  # not known English-only


def test_a_query_of_these_scripts_is_ranked_with_the_bigram_k1_and_b(tmp_path: Path) -> None:
    """A query holding Han is its bigrams OR-ed, ranked by BM25 with `segmented_k1`/`segmented_b`;
    the English words' k1 and b never touch it, and a Latin query never reads the bigram ones."""
    root = tmp_path / "kb"
    init_kb(root, name="bigram-bm25")
    (root / "docs" / "short.md").write_text("压缩工具 gzip。\n", encoding="utf-8")
    (root / "docs" / "long.md").write_text(
        "压缩文件以后可以通过网络发送给别人，对方收到以后再解开就能得到原来的内容，压缩 gzip。\n", encoding="utf-8")
    run_sync(root, SyncOptions(), embedder=FakeEmbedder())

    def scores(query: str, **keyword: object) -> dict[str, float | None]:
        with searcher(root, **keyword) as s:
            return {p.path: p.scores.bm25_score for p in s.search(query, mode="bm25").passages}

    bigram = {"segmented_k1": 1.2, "segmented_b": 0.75}
    shipped = scores("压缩工具", **bigram)
    assert set(shipped) == {"docs/short.md", "docs/long.md"}  # the bigrams find the long page too
    assert scores("压缩工具", **bigram, k1=9.0, b=0.0) == shipped
    assert scores("压缩工具", segmented_k1=1.2, segmented_b=0.0) != shipped
    assert scores("gzip", **bigram) == scores("gzip", segmented_k1=9.0, segmented_b=0.0)
    # None leaves such a query to FTS5's bm25() (k1 1.2, b 0.75 fixed): other scores.
    assert scores("压缩工具", segmented_k1=None) != shipped
