"""A question searched twice, as asked and with documents left out, sharing the work the two can
(search/twice.py, `Searcher.search_twice`; #45): each result the one its own `Searcher.search`
gives, every passage, score and evidence feature of every self-calibration question, on KBs built by
the sync (tldr pages cut into several chunks each, with and without soft-deleted documents); the
keyword side's two lists exactly those of two scoped searches, whatever is left out; and the work
done once."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from pinakes.calibration import self_calibration
from pinakes.calibration.near_duplicates import stored_near_chunks
from pinakes.calibration.questions import MadeQuestion, make_questions
from pinakes.index import schema
from pinakes.kb import KBPaths
from pinakes.lexical.filters import SearchFilters
from pinakes.search import bm25, core, coverage
from pinakes.search.results import SearchResult
from tests.fakes import HashEmbedder
from tests.kb_helpers import Doc, build_kb
from tests.test_self_calibration import corpus, searcher_for

SHARED_TLDR = Path(__file__).resolve().parent.parent.parent / "shared" / "corpora" / "tldr-nl2bash-dev" / "docs"


def _pages(count: int, start: int = 0) -> list[Doc]:
    pages = sorted(SHARED_TLDR.rglob("*.md"))[start:start + count]
    assert len(pages) == count, f"the shared tldr corpus is missing at {SHARED_TLDR}"
    return [Doc(f"docs/tldr/{page.relative_to(SHARED_TLDR).as_posix()}", page.read_text(encoding="utf-8"))
            for page in pages]


@pytest.fixture(scope="module", params=["active", "with-deleted"])
def built(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Tldr pages and the calibration corpus, cut small (several chunks a page, so a question leaves
    several rows out); "with-deleted": soft-deleted documents too, so every search has a scope."""
    root = tmp_path_factory.mktemp("twice") / "kb"
    deleted = _pages(8, start=40) if request.param == "with-deleted" else []
    build_kb(root, [*_pages(40), *corpus()], HashEmbedder(), deleted=deleted, max_tokens=48, overlap=0)
    return root


def _questions(root: Path) -> list[MadeQuestion]:
    paths = KBPaths(root)
    conn = schema.open_reader(paths.index_db)
    try:
        return make_questions(conn, self_calibration.DEFAULT_RULES, None,
                              lambda sources: stored_near_chunks(conn, sources, None, paths.index_db))
    finally:
        conn.close()


def _seen(result: SearchResult) -> tuple[object, ...]:
    """Everything a search returns but its timings."""
    return (result.query, result.passages, result.confidence, result.suggested_next, result.notes, result.mode,
            result.reranked)


def test_every_question_searched_twice_gives_what_two_searches_give(built: Path):
    questions = _questions(built)
    assert len(questions) >= 60
    assert sum(len(question.left_out) > 1 for question in questions) >= 1  # near-duplicates left out too
    with searcher_for(built, HashEmbedder()) as searcher:
        for question in questions:
            without = SearchFilters(exclude_doc_ids=question.left_out)
            answerable, no_answer = searcher.search_twice(question.query, without)
            assert _seen(answerable) == _seen(searcher.search(question.query)), question.query
            assert _seen(no_answer) == _seen(searcher.search(question.query, filters=without)), question.query
            assert answerable.confidence.features is not None and no_answer.confidence.features is not None
            assert not {passage.doc_id for passage in no_answer.passages} & set(question.left_out)
            # What the calibration stores of them: every feature of both rows.
            assert self_calibration._rows(  # pyright: ignore[reportPrivateUsage]  # the test pins the private helper
                searcher, question) == self_calibration.question_rows(searcher, question)


@pytest.mark.heavy  # a whole calibration twice; the test above compares every row already
def test_the_calibration_is_the_one_two_searches_a_question_give(built: Path, monkeypatch: pytest.MonkeyPatch):
    with searcher_for(built, HashEmbedder()) as searcher:
        shared = self_calibration.self_calibrate(built, searcher=searcher)
    monkeypatch.setattr(self_calibration, "_rows", self_calibration.question_rows)
    with searcher_for(built, HashEmbedder()) as searcher:
        separate = self_calibration.self_calibrate(built, searcher=searcher)
    assert shared.fit is not None and shared.questions >= self_calibration.MIN_QUESTIONS
    assert shared.rows == separate.rows
    assert shared.fit == separate.fit


def test_the_keyword_lists_are_those_of_two_scoped_searches_whatever_is_left_out(built: Path):
    with searcher_for(built, HashEmbedder()) as searcher, searcher.snapshot() as generation:
        conn = generation.conn
        documents = [row[0] for row in conn.execute("SELECT id FROM documents WHERE state = 'active' ORDER BY id")]
        options = searcher.settings.keyword
        run = core._Run(  # pyright: ignore[reportPrivateUsage]  # the test pins the private run
            searcher, "x", SearchFilters(), "bm25", None, None)
        scope = run._scope(generation)  # pyright: ignore[reportPrivateUsage]  # the test pins the private scope
        rng = random.Random(7)
        queries = ["find files by name", "compress a directory archive", "list running processes memory",
                   "git commit changes", "glacier ledger deliveries", "network interface address show"]
        for query in queries:
            analyzed = core.analyze(query, generation.tokenizer)
            plan = bm25.plan_keywords(conn, analyzed, options, generation.chunk_count, generation.document_frequencies)
            best = bm25.bm25_search(conn, plan, 30, scope_sql=scope[0] if scope else None,
                                    scope_params=scope[1] if scope else None, options=options)
            top_documents = list(dict.fromkeys(row[0] for row in conn.execute(
                f"SELECT doc_id FROM chunks WHERE id IN ({', '.join('?' * len(best))})", [i for i, _ in best])))
            # The documents of the best rows (the pool's head moves most), and random ones, up to many.
            for left in [top_documents[:1], top_documents[:5], rng.sample(documents, 3), rng.sample(documents, 40)]:
                without = SearchFilters(exclude_doc_ids=tuple(left))
                without_scope = run._scope(  # pyright: ignore[reportPrivateUsage]  # the private scope, pinned
                    generation, without)
                assert without_scope is not None
                left_out = frozenset(row[0] for row in conn.execute(
                    f"SELECT id FROM chunks WHERE doc_id IN ({', '.join('?' * len(left))})", left))
                for limit in (1, 5, 30):
                    first, second = bm25.bm25_search_twice(conn, plan, limit, scope, without_scope, left_out, options)
                    assert first == bm25.bm25_search(conn, plan, limit, scope_sql=scope[0] if scope else None,
                                                     scope_params=scope[1] if scope else None, options=options)
                    assert second == bm25.bm25_search(conn, plan, limit, scope_sql=without_scope[0],
                                                      scope_params=without_scope[1], options=options)
                    assert not {chunk for chunk, _ in second} & left_out


def test_the_work_the_two_share_is_done_once(built: Path, monkeypatch: pytest.MonkeyPatch):
    counted: dict[str, list[int]] = {"pools": [], "separate": [], "embedded": []}
    asked: list[list[int]] = []  # the chunks each search read the query's terms of (coverage)
    pool, search = bm25._fts5_pool, bm25.bm25_search  # pyright: ignore[reportPrivateUsage]  # counted below

    def pooled(*args: Any, **kwargs: Any) -> object:
        counted["pools"].append(1)
        return pool(*args, **kwargs)

    def separate(*args: Any, **kwargs: Any) -> object:
        counted["separate"].append(1)
        return search(*args, **kwargs)

    monkeypatch.setattr(bm25, "_fts5_pool", pooled)
    monkeypatch.setattr(bm25, "bm25_search", separate)
    embedder = HashEmbedder()
    real_embed = embedder.embed_query

    def embedded(text: str) -> object:
        counted["embedded"].append(1)
        return real_embed(text)

    monkeypatch.setattr(embedder, "embed_query", embedded)
    real_held = coverage.held

    def held(conn: sqlite3.Connection, chunk_ids: list[int], terms: set[str]) -> object:
        asked.append(list(chunk_ids))
        return real_held(conn, chunk_ids, terms)

    monkeypatch.setattr(coverage, "held", held)

    def clear() -> None:
        for key in counted:
            counted[key].clear()
        asked.clear()

    # Which chunks a second pool adds depends on the documents' ids (ULIDs, new every build): a question
    # whose second pool holds only chunks the first read reads terms once. Every question shares its
    # work; the first whose second pool adds chunks is compared with two separate searches.
    chosen: tuple[SearchFilters, str, SearchResult, SearchResult, list[int]] | None = None
    with searcher_for(built, embedder) as searcher:
        for question in (question for question in _questions(built) if len(question.query.split()) > 2):
            without = SearchFilters(exclude_doc_ids=question.left_out)
            clear()
            answerable, no_answer = searcher.search_twice(question.query, without)
            assert counted["pools"] == [1] and counted["separate"] == []  # FTS5's first rows found once, for both
            assert counted["embedded"] == [1]  # one model call for the query
            # The second search read the terms of only the chunks the first had not.
            assert len(asked) in (1, 2) and not (len(asked) == 2 and set(asked[0]) & set(asked[1]))
            if len(asked) == 2 and chosen is None:
                chosen = (without, question.query, answerable, no_answer, [len(chunks) for chunks in asked])
        assert chosen is not None, "no question's second pool added a chunk to the first's"
        without, query, answerable, no_answer, shared_asked = chosen

        clear()
        assert searcher.search(query).passages == answerable.passages
        assert searcher.search(query, filters=without).passages == no_answer.passages
        assert counted["pools"] == [1, 1] and counted["embedded"] == [1, 1]
        assert len(asked[0]) == shared_asked[0] and len(asked[1]) > shared_asked[1]  # the pools overlap


def test_a_filter_that_does_more_than_leave_out_is_two_searches(built: Path):
    with searcher_for(built, HashEmbedder()) as searcher:
        without = SearchFilters(exclude_doc_ids=("nothing",), path_prefix="docs/tldr/")
        answerable, filtered = searcher.search_twice("compress files into an archive", without)
        assert _seen(answerable) == _seen(searcher.search("compress files into an archive"))
        assert _seen(filtered) == _seen(searcher.search("compress files into an archive", filters=without))
        assert filtered.passages and all(passage.path.startswith("docs/tldr/") for passage in filtered.passages)
