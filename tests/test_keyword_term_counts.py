"""The keyword side's own BM25 (k1 2.5, b 0.4) over each chunk's term counts (`chunk_terms`,
pinakes.index.terms), every index built by the sync."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pinakes.index import schema
from pinakes.index.schema import FTS_TOKENIZE
from pinakes.init import init_kb
from pinakes.lexical.tokenizer import Tokenizer
from pinakes.search import bm25 as keyword
from pinakes.search.core import Searcher, SearchSettings
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.fakes import FakeEmbedder


def make_kb(root: Path, documents: dict[str, str]) -> Path:
    init_kb(root, name="terms")
    for name, text in documents.items():
        path = root / "docs" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    sync(root)
    return root / ".pinakes" / "index.db"


def sync(root: Path) -> None:
    report = run_sync(root, SyncOptions(), embedder=FakeEmbedder())
    assert not report.failures, report.failures


def counts_from_fts5(index: Path) -> set[tuple[int, str, str, int]]:
    """What FTS5 itself holds, per column (the text, the document context): every posting walked
    through fts5vocab 'instance'."""
    conn = sqlite3.connect(index)
    try:
        conn.execute("CREATE VIRTUAL TABLE temp.instances USING fts5vocab (main, chunks_fts, 'instance')")
        return set(conn.execute("SELECT doc, term, col, count(*) FROM temp.instances GROUP BY doc, term, col"))
    finally:
        conn.close()


def counts_recorded(index: Path) -> set[tuple[int, str, str, int]]:
    """chunk_terms as (chunk, term, column, count): `frequency` counts the text, `context_frequency`
    the context."""
    conn = sqlite3.connect(index)
    try:
        return set(conn.execute(
            "SELECT chunk_id, term, 'text', frequency FROM chunk_terms WHERE frequency > 0 "
            "UNION ALL SELECT chunk_id, term, 'context', context_frequency FROM chunk_terms "
            "WHERE context_frequency > 0"))
    finally:
        conn.close()


def test_the_sync_records_exactly_the_counts_fts5_holds(tmp_path: Path) -> None:
    """Porter stems, folded case and diacritics, and a CJK run's bigrams (the shadow text) alike."""
    index = make_kb(tmp_path / "kb", {
        "a.md": "# Running\n\nRunners ran; the runner runs. Café CAFE cafe.\n",
        "b.md": "# 压缩工具\n\n使用 gzip 压缩文件。压缩很快。\n",
        "c/d.md": "# Kafka\n\n" + "Kafka brokers replicate partitions. " * 40 + "\n\n## More\n\n" + "Zookeeper. " * 30,
    })
    recorded = counts_recorded(index)
    assert recorded == counts_from_fts5(index)
    assert any(term == "压缩" and column == "text" and frequency >= 3 for _, term, column, frequency in recorded)
    assert any(term == "cafe" and frequency == 3 for _, term, _, frequency in recorded)
    # b.md's title is in its context: counted there as FTS5 holds it, as bigrams (no whole run).
    assert any(term == "压缩" and column == "context" for _, term, column, _ in recorded)


def test_counts_follow_edits_and_deletions(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    index = make_kb(root, {"a.md": "alpha beta beta\n", "b.md": "gamma\n"})
    (root / "docs" / "a.md").write_text("alpha alpha delta\n", encoding="utf-8")
    (root / "docs" / "b.md").unlink()
    sync(root)
    recorded = counts_recorded(index)
    assert recorded == counts_from_fts5(index)
    assert {(term, frequency) for _, term, column, frequency in recorded if column == "text"} == {
        ("alpha", 2), ("delta", 1)}


def test_its_own_k1_and_b_outrank_fts5s(tmp_path: Path) -> None:
    """FTS5's bm25() (k1 1.2, b 0.75) prefers the one-word chunk; k1 2.5 and b 0.4 saturate term
    frequency later and normalise length less, so the chunk saying it six times wins (by hand:
    1.443 vs 1.333 under bm25(), 1.273 vs 1.826 under k1 2.5, b 0.4 with Lucene's IDF)."""
    index = make_kb(tmp_path / "kb", {
        "1.md": "kafka\n",  # numbered names: no document context, the text alone is scored
        "2.md": "kafka kafka kafka kafka kafka kafka lorem ipsum dolor sit amet consectetur adipiscing elit sed do\n",
        "a.md": "room\n", "b.md": "courier\n", "c.md": "loans\n",
    })
    fixed = SearchSettings(rerank=False, keyword=keyword.KeywordOptions(k1=None))
    with Searcher(index, fixed) as by_fts5, Searcher(index, SearchSettings(rerank=False)) as by_default:
        first = by_fts5.search("kafka", mode="bm25")
        second = by_default.search("kafka", mode="bm25")
    assert [p.path for p in first.passages] == ["docs/1.md", "docs/2.md"]
    assert [p.path for p in second.passages] == ["docs/2.md", "docs/1.md"]
    long_score, short_score = (p.scores.bm25_score for p in second.passages)
    assert long_score is not None and short_score is not None
    assert long_score / short_score == pytest.approx(1.826 / 1.273, rel=0.05)


def test_a_row_without_counts_is_ranked_by_fts5_not_dropped(tmp_path: Path) -> None:
    """A chunk rewritten in place (the sync never does; the update trigger then drops its counts)
    still comes back: the query falls back to FTS5's bm25() order."""
    index = make_kb(tmp_path / "kb", {
        "1.md": "kafka\n",  # numbered names: no document context, the text alone is scored
        "2.md": "kafka kafka kafka kafka kafka kafka lorem ipsum dolor sit amet consectetur adipiscing elit sed do\n",
        "a.md": "room\n", "b.md": "courier\n", "c.md": "loans\n",
    })
    conn = sqlite3.connect(index)
    with conn:
        conn.execute("UPDATE chunks SET text = text || ' ' WHERE text LIKE 'kafka kafka%'")
    assert not conn.execute("SELECT 1 FROM chunk_terms WHERE term = 'lorem'").fetchall()
    conn.close()
    with Searcher(index, SearchSettings(rerank=False)) as searcher:
        result = searcher.search("kafka", mode="bm25")
    assert [p.path for p in result.passages] == ["docs/1.md", "docs/2.md"]


def test_an_index_without_term_counts_asks_for_a_rebuild(tmp_path: Path) -> None:
    index = make_kb(tmp_path / "kb", {"a.md": "alpha\n"})
    conn = sqlite3.connect(index)
    with conn:
        conn.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
    conn.close()
    with pytest.raises(Exception) as raised:
        schema.open_reader(index)
    assert "schema_version 5" in str(raised.value)
    assert "pnk sync --rebuild" in getattr(raised.value, "remedy", "")


def test_one_paired_pass_counts_what_two_passes_count():
    """The writer counts text and context in one pass of the tokenizer (index/terms.py): the same
    counts as the text and the context counted apart, shadowed CJK and empty contexts included."""
    pairs = [("Runners ran; the runner runs. Café CAFE", "Guide > Running"),
             ("使用 gzip 压缩文件。", "压缩工具"), ("Kafka brokers replicate partitions.", ""), ("", "only context")]
    tokenizer = Tokenizer(FTS_TOKENIZE)
    texts = tokenizer.frequencies([text for text, _ in pairs])
    contexts = tokenizer.frequencies([context for _, context in pairs])
    keys = [7, 3, 12, 40]  # chunk ids: any distinct integers, in any order
    expected = sorted((key, term, text_counts.get(term, 0), context_counts.get(term, 0))
                      for key, text_counts, context_counts in zip(keys, texts, contexts, strict=True)
                      for term in {**text_counts, **context_counts})
    rows = [(key, text, context) for key, (text, context) in zip(keys, pairs, strict=True)]
    assert tokenizer.paired_counts(rows) == expected
    assert tokenizer.paired_counts(rows[:1]) == [row for row in expected if row[0] == 7]  # the probe keeps nothing
    assert tokenizer.paired_counts([]) == []
