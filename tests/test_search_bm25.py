"""The keyword retriever: user text never reaches FTS5 as syntax, and the plan drops what it should."""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import cast

import pytest

from pinakes.index import schema
from pinakes.lexical.tokenizer import Tokenizer, split_words
from pinakes.search import bm25 as keyword
from pinakes.search.core import Searcher, SearchSettings
from pinakes.search.query import MAX_QUERY_TERMS, analyze, fts_quote
from tests.fakes import HashEmbedder
from tests.kb_helpers import Doc, build_search_kb, flat_kb

HOSTILE_QUERIES = {
    "unbalanced quote": 'kafka "replication',
    "embedded quotes": 'kafka"s "replication" ""',
    "lone quote": '"',
    "NEAR group": "NEAR(kafka replication, 2)",
    "prefix star": "kafk* repl*",
    "lone star": "*",
    "initial token caret": "^kafka",
    "minus": "-kafka -postgres",
    "column filter": "text:kafka",
    "unknown column filter": "nosuchcolumn:kafka",
    "table-name column": "chunks_fts:kafka",
    "braces column set": "{text}: kafka",
    "open paren": "(kafka OR",
    "close paren": ")",
    "lone AND": "AND",
    "lone OR": "OR",
    "lone NOT": "NOT",
    "trailing AND": "kafka AND",
    "leading NOT": "NOT kafka",
    "binary NOT": "kafka NOT postgres",
    "plus": "kafka + replication",
    "emoji only": "🔥🚀",
    "emoji and word": "kafka 🔥",
    "arabic rtl": "مرحبا بالعالم",
    "hebrew rtl": "שלום עולם kafka",
    "rtl override": "\u202ekafka\u202c",
    "devanagari marks": "हिन्दी kafka",
    "nul byte": "kafka\x00replication",
    "sql injection": "kafka'; DROP TABLE chunks; --",
    "like wildcards": "%_% kafka",
    "backslashes": "\\\\ kafka \\",
    "10 000 chars, one token": "x" * 10_000,
    "10 000 chars of words": ("kafka replication " * 600)[:10_000],
    "3 000 distinct words": " ".join(f"w{i}" for i in range(3_000)),
    "punctuation only": "!@#$%^&*()[]{};:,.<>/?|`~",
}


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_search_kb(tmp_path_factory.mktemp("bm25") / "kb", HashEmbedder())


@pytest.fixture
def searcher(index: Path) -> Generator[Searcher, None, None]:
    with Searcher(index, SearchSettings(rerank=False), embedder=HashEmbedder()) as searcher:
        yield searcher


@pytest.mark.parametrize("mode", ["bm25", "hybrid"])
@pytest.mark.parametrize("query", list(HOSTILE_QUERIES.values()), ids=list(HOSTILE_QUERIES))
def test_hostile_queries_return_a_result(searcher: Searcher, query: str, mode: str):
    result = searcher.search(query, mode=mode)
    assert result.query == query.strip()
    assert all(passage.path != "docs/legacy.md" for passage in result.passages)


@pytest.mark.parametrize("query", [
    "NEAR(kafka replication, 2)", "text:kafka", "^kafka", "-kafka", '"kafka', "(kafka OR", "kafka AND",
    "kafk* kafka",
])
def test_operator_characters_are_separators_not_syntax(searcher: Searcher, query: str):
    result = searcher.search(query, mode="bm25")
    assert result.passages, query
    assert result.passages[0].path == "docs/kafka.md"


def test_lone_operator_word_is_searched_as_a_word(tmp_path: Path):
    index = flat_kb(tmp_path / "kb", [
        Doc("a.md", "Nothing about logic here."),
        Doc("b.md", "Use NOT to negate and OR to combine conditions."),
    ])
    with Searcher(index, SearchSettings(rerank=False)) as searcher:
        result = searcher.search("OR", mode="bm25")
    assert [passage.path for passage in result.passages] == ["b.md"]


def test_split_words_treats_every_operator_character_as_a_separator():
    assert split_words('a"b*c^d-e:f(g)h{i}j+k') == list("abcdefghijk")
    assert split_words("naïve café") == ["naïve", "café"]
    assert split_words("🔥") == []


def test_fts_quote_escapes_embedded_quotes():
    assert fts_quote('say "hi"') == '"say ""hi"""'


@pytest.fixture
def tokenizer() -> Generator[Tokenizer, None, None]:
    tokenizer = Tokenizer(schema.FTS_TOKENIZE)
    yield tokenizer
    tokenizer.close()


def test_spellings_the_tokenizer_folds_together_are_one_term(tokenizer: Tokenizer):
    units = analyze("Kafka, kafka KAFKA **kafka** “kafka” replicating replication", tokenizer).units
    assert [unit.terms for unit in units] == [("kafka",), ("replic",)]


def test_presence_reports_exactly_the_asked_terms_each_text_holds(tokenizer: Tokenizer):
    texts = ["Kafka replicates partitions.", "Postgres replication slots", "", "nothing relevant"]
    wanted = {"kafka", "replic", "partit", "slot"}
    found = tokenizer.presence(texts, wanted)
    assert found == [frozenset({"kafka", "replic", "partit"}), frozenset({"replic", "slot"}), frozenset(),
                     frozenset()]
    # The same answer as reading every term back.
    assert found == [frozenset(set(terms) & wanted) for terms in tokenizer.terms(texts)]
    assert tokenizer.presence(texts, set()) == [frozenset()] * 4


def test_presence_asks_for_more_terms_than_one_statement_may_bind(tokenizer: Tokenizer,
                                                                  monkeypatch: pytest.MonkeyPatch):
    import pinakes.lexical.tokenizer as tokenizer_module

    monkeypatch.setattr(tokenizer_module, "PRESENCE_BATCH", 3)
    wanted = {"kafka", "replic", "partit", "slot", "broker", "leader", "zzz"}
    found = tokenizer.presence(["Kafka brokers elect a leader", "replication slots"], wanted)
    assert found == [frozenset({"kafka", "broker", "leader"}), frozenset({"replic", "slot"})]


def test_a_word_the_tokenizer_splits_becomes_a_phrase_unit(tokenizer: Tokenizer):
    (unit,) = analyze("हिन्दी", tokenizer).units
    assert len(unit.terms) > 1 and unit.word == "हिन्दी"


def test_function_words_are_marked_by_the_word_as_typed(tokenizer: Tokenizer):
    units = {unit.word: (unit.function_word, unit.stems_onto_function_word)
             for unit in analyze("What does the broker use", tokenizer).units}
    assert units == {"What": (True, True), "does": (True, True), "the": (True, True),
                     "broker": (False, False), "use": (False, True)}


def _plan(searcher: Searcher, query: str) -> keyword.KeywordPlan:
    with searcher.snapshot() as generation:
        return keyword.plan_keywords(generation.conn, analyze(query, generation.tokenizer),
                                     keyword.KeywordOptions(), generation.chunk_count,
                                     generation.document_frequencies)


def test_function_words_are_dropped_when_a_content_word_is_present(searcher: Searcher):
    plan = _plan(searcher, "What is the replication of a partition?")
    assert [unit.word for unit in plan.units] == ["replication", "partition"]
    assert not plan.function_words_only


def test_a_query_of_function_words_only_searches_them(searcher: Searcher):
    plan = _plan(searcher, "what is it")
    assert plan.function_words_only
    assert {unit.word for unit in plan.units} <= {"what", "is", "it"}


def test_unknown_content_words_are_dropped_and_named(searcher: Searcher):
    plan = _plan(searcher, "zarquon replication")
    assert [unit.word for unit in plan.units] == ["replication"]
    assert plan.unknown_words == ("zarquon",)
    assert any("zarquon" in note for note in plan.notes)


def test_a_query_whose_content_words_are_all_unknown_finds_nothing_by_keyword(searcher: Searcher):
    """Falling back to 'what' and 'does' would answer with prose that shares only the phrasing."""
    result = searcher.search("What is a zarquon, and why is it?", mode="bm25")
    assert result.passages == ()
    assert result.confidence.level == "low"
    assert any("zarquon" in note for note in result.notes)


def test_a_word_stemming_onto_a_function_word_does_not_match_its_rows(tmp_path: Path):
    """Porter folds `used` onto `us`; searching it would answer with every row saying "us"."""
    index = flat_kb(tmp_path / "kb", [
        Doc("pronoun.md", "Tell us what you think; the team will get back to us."),
        Doc("zarquon.md", "Zarquon is the name of a prophet."),
    ])
    with Searcher(index, SearchSettings(rerank=False)) as searcher:
        unknown = searcher.search("How is a frobnicator used?", mode="bm25")
        known = searcher.search("How is zarquon used?", mode="bm25")
        alone = searcher.search("used", mode="bm25")
    assert unknown.passages == ()
    assert [passage.path for passage in known.passages] == ["zarquon.md"]
    assert [passage.path for passage in alone.passages] == ["pronoun.md"]  # nothing else to search


def test_the_term_cap_keeps_the_rarest_terms(tmp_path: Path):
    common = [f"common{i}" for i in range(MAX_QUERY_TERMS)]
    rare = [f"rare{i}" for i in range(10)]
    docs = [Doc(f"d{n}.md", " ".join(common)) for n in range(3)]
    docs.append(Doc("rare.md", " ".join(rare + common)))
    # Enough other chunks that the common words are not weightless (in half the chunks or more).
    docs.extend(Doc(f"other{n}.md", "unrelated filler") for n in range(5))
    index = flat_kb(tmp_path / "kb", docs)
    with Searcher(index, SearchSettings(rerank=False)) as searcher:
        plan = _plan(searcher, " ".join(common + rare))
        result = searcher.search(" ".join(common + rare), mode="bm25")
    kept = {unit.word for unit in plan.units}
    assert len(plan.units) == MAX_QUERY_TERMS
    assert set(rare) <= kept
    assert len(plan.capped_words) == len(common) + len(rare) - MAX_QUERY_TERMS
    assert result.passages[0].path == "rare.md"
    assert any(f"{MAX_QUERY_TERMS} rarest" in note for note in result.notes)


def test_weightless_terms_are_dropped_while_a_term_with_weight_remains(tmp_path: Path):
    index = flat_kb(tmp_path / "kb", [
        Doc("a.md", "archive policy"), Doc("b.md", "archive rules"),
        Doc("c.md", "archive tarball notes"), Doc("d.md", "courier loans"),
        Doc("e.md", "reading room"),
    ])
    with Searcher(index, SearchSettings(rerank=False)) as searcher:
        plan = _plan(searcher, "archive tarball")
        both = searcher.search("archive tarball", mode="bm25")
        alone = searcher.search("archive", mode="bm25")
    # "archive" is in 3 of 5 chunks: FTS5's IDF for it is clamped to 1e-6.
    assert [unit.word for unit in plan.units] == ["tarball"]
    assert plan.weightless_words == ("archive",)
    assert [passage.path for passage in both.passages] == ["c.md"]
    assert any("without keyword weight" in note and "archive" in note for note in both.notes)
    # Nothing with weight left: the weightless word is searched rather than nothing.
    assert sorted(passage.path for passage in alone.passages) == ["a.md", "b.md", "c.md"]


def test_the_frequency_cache_answers_correctly_across_a_reset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    index = flat_kb(tmp_path / "kb", [Doc("a.md", "kafka archive"), Doc("b.md", "kafka tarball"),
                                        Doc("c.md", "reading room")])
    monkeypatch.setattr(keyword.DocumentFrequencies, "MAX_REMEMBERED", 3)
    with Searcher(index, SearchSettings(rerank=False)) as searcher:
        searcher.search("kafka archive", mode="bm25")
        # Two remembered + three asked > 3: the cache starts afresh mid-question, kafka included.
        plan = _plan(searcher, "kafka tarball room")
        generation = searcher._generation  # pyright: ignore[reportPrivateUsage] -- the test reads the cached generation
        assert generation is not None
        cache = generation.document_frequencies
        assert cache.of_terms(["kafka", "tarbal", "room", "zzz"]) == {"kafka": 2, "tarbal": 1, "room": 1, "zzz": 0}
    assert plan.document_frequency == {("kafka",): 2, ("tarbal",): 1, ("room",): 1}


def test_the_quorum_strategy_keeps_weightless_terms(tmp_path: Path):
    index = flat_kb(tmp_path / "kb", [
        Doc("a.md", "archive policy"), Doc("b.md", "archive rules"),
        Doc("c.md", "archive tarball notes"), Doc("d.md", "courier loans"),
        Doc("e.md", "reading room"),
    ])
    quorum = keyword.KeywordOptions(strategy=keyword.KeywordStrategy.QUORUM)
    with Searcher(index, SearchSettings(rerank=False)) as searcher, searcher.snapshot() as generation:
        plan = keyword.plan_keywords(generation.conn, analyze("archive tarball", generation.tokenizer), quorum,
                                     generation.chunk_count)
    # The quorum weighs terms by its own IDF, positive for every term: nothing is weightless there.
    assert [unit.word for unit in plan.units] == ["archive", "tarball"]
    assert plan.weightless_words == ()


def test_dropping_weightless_terms_keeps_the_ranking_of_rows_that_have_weight(tmp_path: Path):
    """Under FTS5's bm25() (k1=None), whose clamped IDF is what makes a term weightless."""
    index = flat_kb(tmp_path / "kb", [Doc(f"d{n}.md", text) for n, text in enumerate([
        "archive tarball tarball", "archive tarball", "archive gzip", "archive", "gzip tarball", "room",
        "courier", "loans",
    ])])
    off = SearchSettings(rerank=False, keyword=keyword.KeywordOptions(drop_weightless_terms=False, k1=None))
    on = SearchSettings(rerank=False, keyword=keyword.KeywordOptions(k1=None))
    with Searcher(index, off) as plain, \
            Searcher(index, on) as dropping:
        everything = plain.search("archive tarball gzip", mode="bm25")
        weighted = dropping.search("archive tarball gzip", mode="bm25")
    weighted_paths = [passage.path for passage in weighted.passages]
    assert "d3.md" not in weighted_paths  # holds only the weightless word
    assert [p.path for p in everything.passages if p.path != "d3.md"] == weighted_paths


def test_bm25_ranks_the_document_holding_more_query_terms_first(searcher: Searcher):
    result = searcher.search("broker replication partition", mode="bm25")
    assert result.passages[0].citation.startswith("docs/kafka.md:")
    assert result.passages[0].scores.bm25_rank == 1
    scores = cast("list[float]", [passage.scores.bm25_score for passage in result.passages])  # bm25 ranked: all set
    assert scores == sorted(scores, reverse=True)


def test_quorum_strategy_excludes_chunks_below_half_the_idf_weight(tmp_path: Path):
    index = flat_kb(tmp_path / "kb", [
        Doc("both.md", "kafka postgres"),
        Doc("kafka1.md", "kafka only"), Doc("kafka2.md", "kafka again"),
        Doc("pg1.md", "postgres only"), Doc("pg2.md", "postgres again"),
    ])
    quorum = SearchSettings(rerank=False, keyword=keyword.KeywordOptions(strategy=keyword.KeywordStrategy.QUORUM))
    with Searcher(index, quorum) as searcher:
        strict = searcher.search("kafka postgres", mode="bm25")
    with Searcher(index, SearchSettings(rerank=False)) as searcher:
        plain = searcher.search("kafka postgres", mode="bm25")
    assert [passage.path for passage in strict.passages] == ["both.md"]
    assert len(plain.passages) == 5
