"""Query analysis: the caller's words, as the index's own FTS5 tokenizer sees them.

User text is never parsed as FTS5 syntax. It is split into words (maximal runs of letters, marks,
digits and private-use characters, so every operator character — quotes, `*`, `^`, `-`, `:`,
parentheses — is a separator), and each word is later quoted whole into the MATCH expression, so
`AND`, `NEAR` or `text:` arrive as plain words.

What a word *means* to the index is decided by the index's tokenizer, not by a Python imitation of
it: the words are fed through an in-memory FTS5 table declared with the same `tokenize=` string as
`chunks_fts`, and fts5vocab reports the terms it produced. Two words are the same term exactly when
the tokenizer folds (case, diacritics) and stems them to the same terms, so `Kafka,` and `kafka`
never count twice; a Devanagari word that unicode61 splits at its vowel signs becomes the same
phrase the indexed text became.

Runs of Han, kana and Hangul are rewritten into their character bigrams before the tokenizer sees
them, exactly as the indexed text was (`search/scripts.py`): a word of these scripts is its own
query unit (a Latin word glued to it, `gzip压缩`, is another) and a phrase of its bigrams.
"""

from __future__ import annotations

import sqlite3
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pinakes.search.scripts import segmented_parts, shadow_or_self

# A query with more distinct terms than this keeps its rarest ones: SQLite caps compound
# expressions, and past a few dozen terms extra words only dilute the ranking.
MAX_QUERY_TERMS = 64
# Words beyond this many are not even tokenized (a 10 000-character paste stays cheap).
MAX_QUERY_WORDS = 1024
PRESENCE_BATCH = 500  # terms per fts5vocab lookup, far below SQLite's variable limit

# English function words: dropped from the keyword query whenever the query has any other word.
# The list holds no word that carries topic meaning (use, set, key, value, time, order, work,
# find, list, number, state, point, case stay out on purpose). The check is on the word as typed;
# a word that only *stems* onto one of these (used -> us) is flagged separately
# (`stems_onto_function_word`), so the keyword plan can tell the two apart.
_FUNCTION_WORDS_TEXT = """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each either else ever
    every few for from further had has have having he her here hers herself him himself his how
    i if in into is it its itself just may me might mine more most much must my myself neither
    no nor not of off on once only onto or other our ours ourselves out over own per same shall
    she should so some such than that the their theirs them themselves then there these they
    this those though through thus to too under until up upon us very via was we were what
    whatever when where whether which while who whom whose why will with within without would
    yet you your yours yourself yourselves
"""
FUNCTION_WORDS = frozenset(_FUNCTION_WORDS_TEXT.split())


@dataclass(frozen=True)
class QueryUnit:
    """One distinct keyword of a query.

    `word` is the caller's spelling, which is what gets quoted into MATCH (FTS5 re-tokenizes it
    exactly as it tokenized the indexed text; quoting the stem instead would re-stem it, and
    Porter is not idempotent). `terms` is what the tokenizer made of it: the identity used for
    de-duplication and document frequency. More than one term makes it a phrase.
    """

    word: str
    terms: tuple[str, ...]
    function_word: bool
    stems_onto_function_word: bool = False  # e.g. using -> us, one -> on (Porter)
    segmented: bool = False  # a run of Han, kana or Hangul: `terms` are its character bigrams

    @property
    def match_text(self) -> str:
        """What is quoted into MATCH: the word as the index's shadow text spells it (bigrams for
        a segmented run, which FTS5 then matches as a phrase), the word itself otherwise."""
        return shadow_or_self(self.word) if self.segmented else self.word


def split_words(text: str) -> list[str]:
    """Maximal runs of letters, marks, digits and private-use characters; everything else splits."""
    words: list[str] = []
    current: list[str] = []
    for char in text:
        category = unicodedata.category(char)
        if category[0] in "LMN" or category == "Co":
            current.append(char)
        elif current:
            words.append("".join(current))
            current = []
    if current:
        words.append("".join(current))
    return words


def tokenizer_of(conn: sqlite3.Connection, table: str = "chunks_fts") -> str:
    """The `tokenize=` argument the index's FTS5 table was created with."""
    from pinakes.index.schema import FTS_TOKENIZE

    row = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()
    if row is None or row[0] is None:
        return FTS_TOKENIZE
    sql = row[0]
    marker = sql.find("tokenize")
    if marker < 0:
        return "unicode61"  # FTS5's own default when no tokenize= was given
    start = sql.find("'", marker)
    end = sql.find("'", start + 1)
    return sql[start + 1 : end] if start >= 0 and end > start else FTS_TOKENIZE


class Tokenizer:
    """The index's FTS5 tokenizer, run on arbitrary text in a private in-memory database.

    Not thread-safe; the Searcher serialises calls.
    """

    def __init__(self, tokenize: str):
        self.tokenize = tokenize
        self._conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        quoted = tokenize.replace("'", "''")
        self._conn.execute(f"CREATE VIRTUAL TABLE probe USING fts5 (t, tokenize = '{quoted}')")
        self._conn.execute("CREATE VIRTUAL TABLE probe_terms USING fts5vocab (probe, instance)")
        self._function_terms: frozenset[tuple[str, ...]] | None = None

    @property
    def function_terms(self) -> frozenset[tuple[str, ...]]:
        """What the tokenizer makes of each function word (`us`, `on`, `ar` under Porter)."""
        if self._function_terms is None:
            words: list[str] = sorted(FUNCTION_WORDS)
            self._function_terms = frozenset(terms for terms in self.terms(words) if terms)
        return self._function_terms

    @contextmanager
    def _probed(self, texts: list[str]) -> Iterator[sqlite3.Connection]:
        """The probe table holding `texts` (row i + 1 for text i, shadowed as the index holds it)
        for the duration of the block; it keeps nothing between calls."""
        conn = self._conn
        conn.execute("BEGIN")
        try:
            conn.execute("DELETE FROM probe")
            conn.executemany(
                "INSERT INTO probe (rowid, t) VALUES (?, ?)",
                ((i + 1, shadow_or_self(text)) for i, text in enumerate(texts)),
            )
            yield conn
        finally:
            conn.execute("ROLLBACK")

    def terms(self, texts: list[str]) -> list[tuple[str, ...]]:
        """The terms of each text, in order of appearance (as the index holds it: shadowed)."""
        result: list[list[str]] = [[] for _ in texts]
        with self._probed(texts) as conn:
            for doc, term in conn.execute("SELECT doc, term FROM probe_terms ORDER BY doc, offset"):
                result[doc - 1].append(term)
        return [tuple(terms) for terms in result]

    def frequencies(self, texts: list[str]) -> list[dict[str, int]]:
        """How often each term occurs in each text (as the index holds it: shadowed)."""
        result: list[dict[str, int]] = [{} for _ in texts]
        with self._probed(texts) as conn:
            for doc, term, count in conn.execute("SELECT doc, term, count(*) FROM probe_terms GROUP BY doc, term"):
                result[doc - 1][term] = count
        return result

    def presence(self, texts: list[str], terms: set[str]) -> list[frozenset[str]]:
        """Which of `terms` each text contains. Asks fts5vocab for those terms only, so the cost
        is the tokenizing, not reading every instance back into Python as `terms()` does."""
        if not texts or not terms:
            return [frozenset() for _ in texts]
        result: list[set[str]] = [set() for _ in texts]
        wanted = sorted(terms)
        with self._probed(texts) as conn:
            # In batches: a word the tokenizer splits finely can bring more terms than SQLite has
            # variables for one statement.
            for start in range(0, len(wanted), PRESENCE_BATCH):
                batch = wanted[start : start + PRESENCE_BATCH]
                marks = ", ".join("?" * len(batch))
                for doc, term in conn.execute(f"SELECT doc, term FROM probe_terms WHERE term IN ({marks})", batch):
                    result[doc - 1].add(term)
        return [frozenset(found) for found in result]

    def close(self) -> None:
        self._conn.close()


@dataclass(frozen=True)
class AnalyzedQuery:
    units: tuple[QueryUnit, ...]
    words_ignored: int  # words past MAX_QUERY_WORDS, never tokenized


def analyze(text: str, tokenizer: Tokenizer) -> AnalyzedQuery:
    """Distinct query units in first-seen order (a unit is kept under its first spelling)."""
    words = split_words(text)
    ignored = max(0, len(words) - MAX_QUERY_WORDS)
    words = words[:MAX_QUERY_WORDS]
    # A run of Han, kana or Hangul is a unit of its own, apart from Latin letters glued to it.
    parts = dict.fromkeys(part for word in words for part in segmented_parts(word))
    distinct_words = [part for part, _ in parts]
    term_lists = tokenizer.terms(distinct_words) if distinct_words else []
    units: dict[tuple[str, ...], QueryUnit] = {}
    function_terms = tokenizer.function_terms if term_lists else frozenset()
    for (word, segmented), terms in zip(parts, term_lists, strict=True):
        if not terms:
            continue
        is_function = word.lower() in FUNCTION_WORDS
        known = units.get(terms)
        if known is None:
            units[terms] = QueryUnit(word=word, terms=terms, function_word=is_function,
                                     stems_onto_function_word=terms in function_terms, segmented=segmented)
        elif known.function_word and not is_function:
            # `us` and `used` share a term; the content spelling decides that it is content.
            units[terms] = QueryUnit(word=known.word, terms=terms, function_word=False,
                                     stems_onto_function_word=True)
    return AnalyzedQuery(units=tuple(units.values()), words_ignored=ignored)


def fts_quote(word: str) -> str:
    """A word as an FTS5 string literal: the only syntax user text ever reaches."""
    return '"' + word.replace('"', '""') + '"'
