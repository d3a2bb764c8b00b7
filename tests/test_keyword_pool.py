"""The keyword side's pool without bm25() on every matched row (search/keyword_pool.py): the same
rows, order and scores, to the float, as the one statement that scores them all, on an index built
by the sync."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest

from pinakes.index import schema
from pinakes.lexical.tokenizer import Tokenizer
from pinakes.search import bm25, keyword_pool
from pinakes.search.query import analyze, fts_quote, tokenizer_of
from tests.test_keyword_term_counts import make_kb

# Zipf-like: the first words are in most chunks, the last in a few, as at scale.
WORDS = ["file", "system", "network", "kernel", "module", "parameter", "package", "archive", "compress",
         "shell", "terminal", "user", "account", "process", "signal", "memory", "printer", "queue", "locale",
         "timezone", "password", "cron", "schedule", "mount", "partition", "firewall", "resolver",
         "bibliography", "ncurses", "apache"]
Reader = tuple[sqlite3.Connection, Tokenizer]  # the `reader` fixture's connection and tokenizer


def documents(count: int = 160, seed: int = 45) -> dict[str, str]:
    rng = random.Random(seed)
    weights = [1.0 / (rank + 1) ** 1.3 for rank in range(len(WORDS))]
    texts: dict[str, str] = {}
    for number in range(count):
        paragraphs: list[str] = []
        for _ in range(rng.randint(1, 2)):
            words = rng.choices(WORDS, weights, k=rng.randint(3, 25))
            paragraphs.append(" ".join(words) + ".")
        title = " ".join(rng.choices(WORDS, weights, k=2))
        texts[f"d{number:02d}.md"] = f"# {title}\n\n" + "\n\n".join(paragraphs) + "\n"
    return texts


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[sqlite3.Connection, Tokenizer]]:
    index = make_kb(tmp_path_factory.mktemp("pool") / "kb", documents())
    conn = schema.open_reader(index)
    bm25.ensure_vocabulary(conn)
    tokenizer = Tokenizer(tokenizer_of(conn))
    yield conn, tokenizer
    tokenizer.close()
    conn.close()


def queries(count: int = 150, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.sample(WORDS, rng.randint(2, 6))) for _ in range(count)]


def plan_of(conn: sqlite3.Connection, tokenizer: Tokenizer, query: str,
            frequencies: bm25.DocumentFrequencies) -> bm25.KeywordPlan:
    chunk_count = int(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
    return bm25.plan_keywords(conn, analyze(query, tokenizer), bm25.KeywordOptions(), chunk_count, frequencies)


def test_the_pool_is_fts5s_own_first_rows_to_the_float(reader: Reader, monkeypatch: pytest.MonkeyPatch) -> None:
    """Forced on (the KB is small), the pool equals the one statement's answer, rows, order and
    scores, for every query and pool size, while scoring fewer rows for many of them."""
    conn, tokenizer = reader
    monkeypatch.setattr(keyword_pool, "PRUNE_FROM_POSTINGS", 0)
    monkeypatch.setattr(keyword_pool, "RESTRICT_BELOW_SHARE", 1.0)
    restricted: list[bool] = []
    real = bm25._fts5_ranked  # pyright: ignore[reportPrivateUsage]  # the test pins the private helper
    groups_expression = bm25._groups_expression  # pyright: ignore[reportPrivateUsage]  # a pinned private helper

    def counting(*args: Any, **kwargs: Any) -> list[tuple[int, float]]:  # _fts5_ranked's own, passed through
        restricted.append(kwargs.get("within") is not None)
        return real(*args, **kwargs)

    monkeypatch.setattr(bm25, "_fts5_ranked", counting)
    frequencies = bm25.DocumentFrequencies(conn)
    rows = bm25._averages(conn)[0]  # pyright: ignore[reportPrivateUsage]  # the test pins the private helper
    compared = 0
    for query in queries():
        plan = plan_of(conn, tokenizer, query, frequencies)
        if plan.match is None:
            continue
        for pool in (1, 3, 10, 30):
            whole = real(conn, plan.match, pool, None, None)
            counts = [plan.document_frequency[unit.terms] for unit in plan.units]
            def ranked(groups: keyword_pool.Groups | None, plan: bm25.KeywordPlan = plan,
                       pool: int = pool) -> list[tuple[int, float]]:
                within = None if groups is None else groups_expression(plan.units, groups)
                return counting(conn, plan.match, pool, None, None, within=within)

            pruned = keyword_pool.pool_of(counts, rows, pool, bm25.CONTEXT_WEIGHT, ranked)
            assert pruned == whole, (query, pool)
            compared += 1
    assert compared >= 400
    assert sum(restricted) >= 100  # the restricted statement ran, not only the fallback


def test_keyword_results_are_unchanged_by_the_pool(reader: Reader, monkeypatch: pytest.MonkeyPatch) -> None:
    """bm25_search's answer (the BM25F rescoring of the pool) with the pool pruned (or taken apart by
    term set) and without."""
    conn, tokenizer = reader
    frequencies = bm25.DocumentFrequencies(conn)
    for query in queries(seed=11):
        plan = plan_of(conn, tokenizer, query, frequencies)
        answers: list[list[tuple[list[tuple[int, float]], int]]] = []
        for threshold in (0, 10**12):
            monkeypatch.setattr(keyword_pool, "PRUNE_FROM_POSTINGS", threshold)
            monkeypatch.setattr(keyword_pool, "BY_SET_FROM_POSTINGS", threshold)
            answers.append([(bm25.bm25_search(conn, plan, limit), limit) for limit in (1, 5, 20)])
        assert answers[0] == answers[1], query


def test_scoped_pools_are_unchanged(reader: Reader, monkeypatch: pytest.MonkeyPatch) -> None:
    """A filter's scope applies to every statement, the bound's and the pool's."""
    conn, tokenizer = reader
    frequencies = bm25.DocumentFrequencies(conn)
    scope = "SELECT id FROM chunks WHERE id % 3 != 0"
    for query in queries(count=60, seed=3):
        plan = plan_of(conn, tokenizer, query, frequencies)
        answers: list[list[tuple[int, float]]] = []
        for threshold in (0, 10**12):
            monkeypatch.setattr(keyword_pool, "PRUNE_FROM_POSTINGS", threshold)
            monkeypatch.setattr(keyword_pool, "BY_SET_FROM_POSTINGS", threshold)
            answers.append(bm25.bm25_search(conn, plan, 4, scope_sql=scope, scope_params=[]))
        assert answers[0] == answers[1], query


def test_reaching_groups_cover_every_row_that_can_reach_the_floor():
    """Every set of terms whose ceilings reach the floor holds a whole group; no group is needless."""
    ceilings = [6.4, 6.18, 5.91, 2.0]
    groups = keyword_pool.reaching(ceilings, 12.06)
    assert sorted(groups) == [(0, 1), (0, 2), (1, 2)]  # any two of the rare three; the common one never
    for mask in range(1, 16):
        members = {index for index in range(4) if mask >> index & 1}
        if sum(ceilings[index] for index in members) >= 12.06:
            assert any(set(group) <= members for group in groups), members
    for group in groups:
        assert sum(ceilings[index] for index in group) >= 12.06


def test_many_terms_fall_back_to_the_terms_a_row_must_hold():
    ceilings = [1.0] * 12 + [20.0]
    assert keyword_pool.reaching(ceilings, 12.5) == [(12,)]  # the twelve together stay below
    assert keyword_pool.reaching(ceilings, 10.5) == [(10,), (11,), (12,)]  # ten stay below, not eleven


def test_a_low_guess_is_checked_and_widened(monkeypatch: pytest.MonkeyPatch) -> None:
    """When the first statement's last score lets in rows it did not score, a second statement
    scores the rows that floor needs; the first answer is never returned unchecked."""
    monkeypatch.setattr(keyword_pool, "PRUNE_FROM_POSTINGS", 0)
    calls: list[keyword_pool.Groups | None] = []

    def ranked_ending_at(last: float) -> keyword_pool.Ranked:
        def ranked(groups: keyword_pool.Groups | None) -> list[tuple[int, float]]:
            calls.append(groups)
            return [(1, 30.0), (2, last)]
        return ranked

    # Ceilings: 10.0 for the rare term, 0.89 and ~0 for the common ones (1,000 rows).
    keyword_pool.pool_of([10, 400, 500], 1000, 2, 1.0, ranked_ending_at(9.0))
    assert calls == [[(0,)]]  # a floor no row without the rare term reaches: the first answer stands
    calls.clear()
    keyword_pool.pool_of([10, 400, 500], 1000, 2, 1.0, ranked_ending_at(0.5))
    assert calls == [[(0,)], [(0,), (1,)]]  # the second term alone reaches 0.5: its rows scored too


def test_too_few_rows_for_the_guess_try_the_next_rarest_terms_ceiling(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows holding the rarest term fill less than the pool: the next floor (the second rarest
    term's ceiling) is tried before every row is scored."""
    monkeypatch.setattr(keyword_pool, "PRUNE_FROM_POSTINGS", 0)
    calls: list[keyword_pool.Groups | None] = []

    def ranked(groups: keyword_pool.Groups | None) -> list[tuple[int, float]]:
        calls.append(groups)
        return [(1, 30.0)] if groups == [(0,)] else [(1, 30.0), (2, 25.0)]

    assert keyword_pool.pool_of([10, 20, 500], 1000, 2, 1.0, ranked) == [(1, 30.0), (2, 25.0)]
    assert calls == [[(0,)], [(0,), (1,)]]


def few_term_queries(count: int = 200, seed: int = 5) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.sample(WORDS, rng.randint(2, 3))) for _ in range(count)]


def test_term_sets_give_the_one_statements_rows_to_the_float(reader: Reader, monkeypatch: pytest.MonkeyPatch) -> None:
    """Queries of two and three terms, taken apart by the set of terms each row holds (forced on:
    the KB is small): the pool equals the one statement's, rows, order and scores, for every pool
    size and context weight, and the bound ends many visits before the last set."""
    conn, tokenizer = reader
    monkeypatch.setattr(keyword_pool, "BY_SET_FROM_POSTINGS", 0)
    frequencies = bm25.DocumentFrequencies(conn)
    rows = bm25._averages(conn)[0]  # pyright: ignore[reportPrivateUsage]  # the test pins the private helper
    compared = stopped = 0

    def unrestricted(groups: keyword_pool.Groups | None) -> list[tuple[int, float]]:
        raise AssertionError("a query of three terms or fewer never needs the restricted statement")

    for query in few_term_queries():
        plan = plan_of(conn, tokenizer, query, frequencies)
        if not 2 <= len(plan.units) <= keyword_pool.MAX_TERMS_BY_SET or plan.match is None:
            continue
        phrases = [fts_quote(unit.match_text) for unit in plan.units]
        counts = [plan.document_frequency[unit.terms] for unit in plan.units]
        for pool in (1, 3, 10, 30):
            for weight in (bm25.CONTEXT_WEIGHT, 0.4, 2.5):
                whole = bm25._fts5_ranked(  # pyright: ignore[reportPrivateUsage]  # the test pins the private helper
                    conn, plan.match, pool, None, None, context_weight=weight)
                visited: list[tuple[int, ...]] = []

                def exactly(members: tuple[int, ...], pool: int = pool, weight: float = weight,
                            phrases: list[str] = phrases, visited: list[tuple[int, ...]] = visited,
                            ) -> list[tuple[int, float]]:
                    visited.append(members)
                    return bm25._fts5_ranked(  # pyright: ignore[reportPrivateUsage]  # the test pins the private helper
                        conn, keyword_pool.term_set_expression(phrases, members), pool, None, None,
                        context_weight=weight)

                assert keyword_pool.pool_of(counts, rows, pool, weight, unrestricted, exactly) == whole, \
                    (query, pool, weight)
                compared += 1
                stopped += len(visited) < 2 ** len(phrases) - 1
    assert compared >= 300
    assert stopped >= 50


def test_a_term_set_matches_the_rows_holding_exactly_those_terms(reader: Reader) -> None:
    """The sets' statements split the OR's rows: every row once, in the set of the terms it holds."""
    conn, _ = reader
    words = ["kernel", "module", "printer"]
    phrases = [fts_quote(word) for word in words]
    holding: dict[str, set[int]] = {word: {rowid for (rowid,) in conn.execute(
        "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?", (fts_quote(word),))} for word in words}
    union = set[int]().union(*holding.values())
    seen: list[int] = []
    for mask in range(1, 8):
        members = tuple(index for index in range(3) if mask >> index & 1)
        expression = keyword_pool.term_set_expression(phrases, members)
        found: set[int] = {rowid for (rowid,) in conn.execute(
            "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?", (expression,))}
        assert found == {rowid for rowid in union
                         if {index for index, word in enumerate(words) if rowid in holding[word]} == set(members)}
        seen.extend(found)
    assert sorted(seen) == sorted(union) and len(union) > 20
    assert keyword_pool.term_set_expression(phrases, (0, 2)) == '(("kernel" AND "printer") NOT "module")'


def test_which_queries_are_taken_apart_by_term_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two or three terms from BY_SET_FROM_POSTINGS matched postings on, below PRUNE_FROM_POSTINGS
    too; fewer postings: the one statement; four terms: the restricted statement, never the sets."""
    monkeypatch.setattr(keyword_pool, "PRUNE_FROM_POSTINGS", 1_000)
    monkeypatch.setattr(keyword_pool, "BY_SET_FROM_POSTINGS", 100)
    sets: list[tuple[int, ...]] = []
    statements: list[keyword_pool.Groups | None] = []

    def exactly(members: tuple[int, ...]) -> list[tuple[int, float]]:
        sets.append(members)
        return []

    def ranked(groups: keyword_pool.Groups | None) -> list[tuple[int, float]]:
        statements.append(groups)
        return []

    keyword_pool.pool_of([50, 60, 70], 10_000, 2, 1.0, ranked, exactly)
    assert len(sets) == 7 and statements == []  # no row found: every set is visited
    sets.clear()
    keyword_pool.pool_of([20, 30, 40], 10_000, 2, 1.0, ranked, exactly)
    assert sets == [] and statements == [None]
    statements.clear()
    keyword_pool.pool_of([10, 300, 400, 500], 10_000, 2, 1.0, ranked, exactly)
    assert sets == [] and statements and statements[0] is not None
