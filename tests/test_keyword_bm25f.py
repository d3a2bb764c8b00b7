"""The keyword side's BM25F over a chunk's text and its document context (issue #46): each field
normalised by its own length, one saturation, and the IDF read from the rows whose own text holds
the term, every score checked against FTS5's own postings rather than the index's term counts."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pytest

from pinakes.index import schema
from pinakes.search import bm25
from pinakes.search.core import Searcher, SearchSettings
from pinakes.search.generation import open_generation
from pinakes.search.query import analyze
from pinakes.search.results import Passage
from tests.fakes import HashEmbedder
from tests.kb_helpers import Doc, build_kb

MANUAL = ("## Part {n}\n\nThe {n} step copies the source tree into the target directory, keeps the file "
          "metadata and reports every skipped file to the caller.\n\n")


def corpus() -> list[Doc]:
    """A long manual whose name lives only in its title (so in every chunk's context), and a short
    note that names it once in its text beside a word of its own."""
    return [
        Doc("docs/field-manual.md", "".join(MANUAL.format(n=n) for n in range(1, 7)), title="Wombat field manual"),
        Doc("docs/kangaroo-notes.md", "A wombat dug a burrow under the fence near the caller.\n",
            title="Kangaroo notes"),
        Doc("docs/platypus.md", "Platypus burrow entrances sit above the waterline.\n", title="Platypus"),
        Doc("docs/echidna.md", "Echidnas eat ants and termites.\n", title="Echidna"),
        # enough other rows that the manual's chunks are under half the index (else "wombat" is weightless)
        *(Doc(f"docs/animal-{n}.md", f"Animal {n} sleeps through the day in a hollow log.\n", title=f"Animal {n}")
          for n in range(10)),
    ]


def postings(index: Path) -> tuple[dict[tuple[int, str, str], int], dict[tuple[int, str], int]]:
    """FTS5's own postings: (row, term, column) -> count, and (row, column) -> tokens."""
    conn = sqlite3.connect(index)
    try:
        conn.execute("CREATE VIRTUAL TABLE temp.instances USING fts5vocab (main, chunks_fts, 'instance')")
        counts = {(int(row), term, col): int(n) for row, term, col, n in conn.execute(
            "SELECT doc, term, col, count(*) FROM temp.instances GROUP BY doc, term, col")}
        rowids = [int(row) for (row,) in conn.execute("SELECT rowid FROM chunks_fts")]
    finally:
        conn.close()
    lengths = {(row, col): 0 for row in rowids for col in ("text", "context")}
    for (row, _term, col), n in counts.items():
        lengths[(row, col)] += n
    return counts, lengths


def field_frequency(counts: dict[tuple[int, str, str], int], term: str, documents_per_chunk: float) -> int:
    """Rows holding `term` in their text, plus its context rows counted as documents, at most the
    rows holding it at all."""
    text = {row for (row, t, col) in counts if t == term and col == "text"}
    context = {row for (row, t, col) in counts if t == term and col == "context"}
    return min(len(text | context), len(text) + math.ceil(len(context) * documents_per_chunk))


def by_hand(index: Path, terms: list[str], k1: float = 2.5, b: float = 0.4, context_b: float = 0.75,
            ) -> dict[int, float]:
    counts, lengths = postings(index)
    rows = sorted({row for row, _ in lengths})
    average = {col: sum(lengths[(row, col)] for row in rows) / len(rows) for col in ("text", "context")}
    with sqlite3.connect(index) as conn:
        documents = conn.execute("SELECT count(DISTINCT doc_id) FROM chunks").fetchone()[0]
    scores: dict[int, float] = {}
    for term in terms:
        df = max(1, field_frequency(counts, term, documents / len(rows)))
        idf = math.log(1.0 + (len(rows) - df + 0.5) / (df + 0.5))
        for row in rows:
            text, context = counts.get((row, term, "text"), 0), counts.get((row, term, "context"), 0)
            weight = text / (1 - b + b * lengths[(row, "text")] / average["text"])
            if context:
                weight += context / (1 - context_b + context_b * lengths[(row, "context")] / average["context"])
            if weight:
                scores[row] = scores.get(row, 0.0) + idf * weight * (k1 + 1) / (weight + k1)
    return scores


def bm25_score(passage: Passage) -> float:
    """A keyword-mode passage's BM25 score (None only for a passage the keyword side did not find)."""
    score = passage.scores.bm25_score
    assert score is not None, passage.path
    return score


def test_the_keyword_score_is_bm25f_over_fts5s_own_postings(tmp_path: Path) -> None:
    index = build_kb(tmp_path / "kb", corpus(), HashEmbedder(), max_tokens=40, overlap=0)
    expected = by_hand(index, ["wombat", "burrow"])
    with Searcher(index, SearchSettings(rerank=False, final_k=20)) as searcher:
        result = searcher.search("wombat burrow", mode="bm25")
    with sqlite3.connect(index) as conn:
        ids = {(path, ordinal): chunk_id for chunk_id, path, ordinal in conn.execute(
            "SELECT c.id, d.path, c.ordinal FROM chunks c JOIN documents d ON d.id = c.doc_id")}
    got = {ids[(passage.path, passage.ordinal)]: passage.scores.bm25_score for passage in result.passages}
    assert len(got) == len(expected) >= 8
    assert got == pytest.approx(expected, abs=1e-6)  # passages carry scores to six places
    # the note that says both words in its own text leads; the manual's chunks follow on the title
    assert result.passages[0].path == "docs/kangaroo-notes.md"


def test_a_word_in_every_chunks_context_counts_once_per_document(tmp_path: Path) -> None:
    """"wombat" is in the context of every chunk of the manual and in the text of one chunk of the
    note: its document frequency is about two (the note's row, the manual counted as documents), not
    one more than every chunk the manual was cut into."""
    index = build_kb(tmp_path / "kb", corpus(), HashEmbedder(), max_tokens=40, overlap=0)
    generation = open_generation(index, schema.index_signature(index))
    try:
        plan = bm25.plan_keywords(generation.conn, analyze("wombat burrow", generation.tokenizer),
                                  bm25.KeywordOptions(), generation.chunk_count, generation.document_frequencies)
        manual_chunks = generation.conn.execute(
            "SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE d.path = 'docs/field-manual.md'"
        ).fetchone()[0]
    finally:
        generation.conn.close()
    wombat = next(unit for unit in plan.units if unit.terms == ("wombat",))
    assert manual_chunks >= 6
    assert plan.document_frequency[("wombat",)] == manual_chunks + 1  # every row holding it, either field
    n = generation.chunk_count
    manual_as_documents = math.ceil(manual_chunks * 14 / n)  # its context rows at the index's 14 documents per n rows
    assert plan.field_frequency == {"wombat": 1 + manual_as_documents, "burrow": 2}
    assert 1 + manual_as_documents < manual_chunks + 1
    df = 1 + manual_as_documents
    assert plan.field_idf("wombat") == pytest.approx(math.log(1 + (n - df + 0.5) / (df + 0.5)))
    assert plan.field_idf("wombat") > plan.idf(wombat)


def quarterly_reports() -> list[Doc]:
    """Two quarters' reports of one company in the same words: the period is named only in their
    titles, so in every chunk's context, and each report is half the index."""
    body = "".join(MANUAL.format(n=n) for n in range(1, 7))
    return [Doc("docs/report-one.md", body, title="Northwind report for the period ended March"),
            Doc("docs/report-two.md", body, title="Northwind report for the period ended June")]


def test_a_period_named_only_in_half_the_chunks_context_keeps_its_weight(tmp_path: Path) -> None:
    """"june" is in the context of half the index's rows, but in one of its two documents: BM25F
    counts it once (its weight is that of a word in one document), so it is not weightless, and
    the report it names comes first. Judged by its rows, it was left out of the plan, and the two
    reports tied exactly: the first synced (March) came first, by storage order."""
    index = build_kb(tmp_path / "kb", quarterly_reports(), HashEmbedder(), max_tokens=40, overlap=0)
    with Searcher(index, SearchSettings(rerank=False, final_k=20)) as searcher:
        with searcher.snapshot() as generation:
            plan = bm25.plan_keywords(generation.conn, analyze("Northwind June part 3 source tree", generation.tokenizer),
                                      bm25.KeywordOptions(), generation.chunk_count, generation.document_frequencies)
            chunks = generation.chunk_count
        june = searcher.search("Northwind June part 3 source tree", mode="bm25")
        march = searcher.search("Northwind March part 3 source tree", mode="bm25")
    assert chunks >= 6
    assert plan.document_frequency[("june",)] * 2 >= chunks  # by rows, FTS5's bm25() would weigh it nothing
    assert plan.field_frequency["june"] == 1
    assert "june" in {unit.terms[0] for unit in plan.units}
    assert "June" not in plan.weightless_words
    assert june.passages[0].path == "docs/report-two.md"
    assert march.passages[0].path == "docs/report-one.md"
    other = max(bm25_score(p) for p in june.passages if p.path == "docs/report-one.md")
    assert bm25_score(june.passages[0]) > other  # not a tie that storage order breaks
