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
them, exactly as the indexed text was (`lexical/scripts.py`): a word of these scripts is its own
query unit (a Latin word glued to it, `gzip压缩`, is another) and a phrase of its bigrams.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from pinakes.lexical.scripts import segmented_parts, shadow_or_self
from pinakes.lexical.tokenizer import FUNCTION_WORDS, Tokenizer, split_words

# A query with more distinct terms than this keeps its rarest ones: SQLite caps compound
# expressions, and past a few dozen terms extra words only dilute the ranking.
MAX_QUERY_TERMS = 64
# Words beyond this many are not even tokenized (a 10 000-character paste stays cheap).
MAX_QUERY_WORDS = 1024


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
    function_terms = tokenizer.function_terms if term_lists else frozenset[tuple[str, ...]]()
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
