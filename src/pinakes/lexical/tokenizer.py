"""The index's own FTS5 tokenizer, run on arbitrary text.

What a word *means* to the index is decided by the index's tokenizer, not by a Python imitation of
it: texts are fed through an in-memory FTS5 table declared with the same `tokenize=` string as
`chunks_fts`, and fts5vocab reports the terms it produced. The index writer counts a chunk's terms
with it (`index/terms.py`), and search analyses a query with it (`search/query.py`), so both sides
agree on every term. Texts are shadowed first (`lexical/scripts.py`), exactly as the index holds them.
"""

from __future__ import annotations

import re
import sqlite3
import unicodedata
from collections.abc import Generator, Sequence
from contextlib import contextmanager

from pinakes.lexical.scripts import shadow_or_self

PRESENCE_BATCH = 500  # terms per fts5vocab lookup, far below SQLite's variable limit

# English function words: the keyword query drops them whenever the query has any other word
# (search/query.py), and eval's skeleton never proposes them as terms.
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


# An ASCII character is a word character exactly when it is a digit or a Latin letter (categories Nd,
# Lu, Ll; every other ASCII character is punctuation, a symbol, a space or a control: tests/
# test_split_words.py checks all 128), so ASCII text needs no per-character category lookup.
_ASCII_WORD = re.compile(r"[0-9A-Za-z]+")
_ASCII_SEPARATORS = re.compile(r"[\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f]+")


def split_words(text: str) -> list[str]:
    """Maximal runs of letters, marks, digits and private-use characters; everything else splits."""
    if text.isascii():  # most text: a compiled regex, the same words (self-calibration's hot path, #45)
        return _ASCII_WORD.findall(text)
    words: list[str] = []
    # An ASCII separator ends a word whatever surrounds it, so the pieces between them split alone.
    for piece in _ASCII_SEPARATORS.split(text):
        if piece.isascii():
            if piece:
                words.append(piece)
        else:
            words.extend(_split_by_category(piece))
    return words


def _split_by_category(text: str) -> list[str]:
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
        self._paired = False  # the two-column probe (`paired_frequencies`), made on first use
        self._function_terms: frozenset[tuple[str, ...]] | None = None

    @property
    def function_terms(self) -> frozenset[tuple[str, ...]]:
        """What the tokenizer makes of each function word (`us`, `on`, `ar` under Porter)."""
        if self._function_terms is None:
            words: list[str] = sorted(FUNCTION_WORDS)
            self._function_terms = frozenset(terms for terms in self.terms(words) if terms)
        return self._function_terms

    @contextmanager
    def _probed(self, texts: list[str]) -> Generator[sqlite3.Connection]:
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
                result[int(doc) - 1].append(term)
        return [tuple(terms) for terms in result]

    def frequencies(self, texts: list[str]) -> list[dict[str, int]]:
        """How often each term occurs in each text (as the index holds it: shadowed)."""
        result: list[dict[str, int]] = [{} for _ in texts]
        with self._probed(texts) as conn:
            for doc, term, count in conn.execute("SELECT doc, term, count(*) FROM probe_terms GROUP BY doc, term"):
                result[doc - 1][term] = count
        return result

    def paired_counts(self, rows: Sequence[tuple[int, str, str]]) -> list[tuple[int, str, int, int]]:
        """For each (key, text, context) row (keys distinct integers, such as chunk ids), every term
        of the text or the context (shadowed as the index holds them) with how often it occurs in
        each: (key, term, in the text, in the context), ordered by key then term. One pass of the
        tokenizer over both columns; SQLite does the counting, so no row passes through Python."""
        if not rows:
            return []
        conn = self._conn
        if not self._paired:
            quoted = self.tokenize.replace("'", "''")
            conn.execute(f"CREATE VIRTUAL TABLE pair_probe USING fts5 (t, c, tokenize = '{quoted}')")
            conn.execute("CREATE VIRTUAL TABLE pair_probe_terms USING fts5vocab (pair_probe, instance)")
            self._paired = True
        conn.execute("BEGIN")
        try:
            conn.executemany("INSERT INTO pair_probe (rowid, t, c) VALUES (?, ?, ?)",
                             ((key, shadow_or_self(text), shadow_or_self(context)) for key, text, context in rows))
            return conn.execute("SELECT doc, term, sum(col = 't'), sum(col = 'c') FROM pair_probe_terms "
                                "GROUP BY doc, term ORDER BY doc, term").fetchall()
        finally:
            conn.execute("ROLLBACK")

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
                    result[int(doc) - 1].add(term)
        return [frozenset(found) for found in result]

    def close(self) -> None:
        self._conn.close()
