"""Scripts written without spaces between words (Han, Hiragana, Katakana, Hangul) in the keyword index.

FTS5's `unicode61` keeps a whole run of letters as one token, so `归档实用程序` is one term and a
search for the word `实用` inside it matches nothing. SQLite's trigram tokenizer is no answer on the
SQLite this runs on (3.40: no rows for fewer than three non-ASCII characters, and it refuses
`remove_diacritics`), and Python's sqlite3 cannot register a tokenizer. So the text FTS5 indexes
is a *shadow* of the chunk's text: every run of these scripts is rewritten as its overlapping
character bigrams (`归档 档实 实用 用程 程序`), a one-character run as itself, and everything else
is left as it was. The shadow feeds FTS5 only (`chunks.fts_text`); the chunk's own text, its
offsets and every citation keep pointing at the original characters.

A query is rewritten the same way, so a word of such a script becomes the phrase of its bigrams;
the keyword retriever searches those bigrams OR-ed, with BM25 parameters of their own
(`search/bm25.py`; the phrase plans are measured options).

The character classes are the letters and digits (Unicode categories L and N: what `unicode61`
keeps inside a token) of the Han, Hiragana, Katakana and Hangul blocks, listed as ranges so that
no import walks the Unicode table; `tests/test_search_scripts.py` re-derives them from
`unicodedata`. Korean separates words by spaces, but a word carries its particles (`파일을`,
`파일의`), so bigrams serve it too. Thai, Lao, Khmer and Myanmar are also written without spaces
and are not segmented here: a bigram of their characters splits vowel signs (category M), which
`unicode61` treats as separators anyway; that needs a measured design of its own.
"""

from __future__ import annotations

import re

# What `shadow()` returns is part of the index schema, like `schema.FTS_TOKENIZE`: a change to it
# changes every stored shadow, so it goes with a new `SCHEMA_VERSION` (every index then rebuilds).

# Letters and digits (categories L, N) of each script's blocks, per Unicode 14 (Python 3.11).
_HAN = (
    "\u3005-\u3007\u3021-\u3029\u3038-\u303b\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufa6d\ufa70-\ufad9"
    "\U00020000-\U0002a6df\U0002a700-\U0002b738\U0002b740-\U0002b81d\U0002b820-\U0002cea1"
    "\U0002ceb0-\U0002ebe0\U0002f800-\U0002fa1d\U00030000-\U0003134a"
)
_KANA = (
    "\u3041-\u3096\u309d-\u309f\u30a1-\u30fa\u30fc-\u30ff\u31f0-\u31ff\uff66-\uff9f"
    "\U0001b000-\U0001b122\U0001b150-\U0001b152\U0001b164-\U0001b167"
)
_HANGUL = (
    "\u1100-\u11ff\u3131-\u318e\ua960-\ua97c\uac00-\ud7a3\ud7b0-\ud7c6\ud7cb-\ud7fb"
    "\uffa0-\uffbe\uffc2-\uffc7\uffca-\uffcf\uffd2-\uffd7\uffda-\uffdc"
)
SEGMENTED_CLASS = _HAN + _KANA + _HANGUL
SEGMENTED_RUN = re.compile(f"[{SEGMENTED_CLASS}]+")


def bigrams(run: str) -> list[str]:
    """Overlapping character bigrams of one run; a one-character run is its own unigram."""
    if len(run) < 2:
        return [run] if run else []
    return [run[i : i + 2] for i in range(len(run) - 1)]


def has_segmented(text: str) -> bool:
    return SEGMENTED_RUN.search(text) is not None


def shadow(text: str) -> str | None:
    """The text FTS5 should index for `text`, or None when it is `text` itself (no run of these
    scripts): the common case stores nothing extra.

    Each run becomes its bigrams separated by spaces, with a space on either side, so that a run
    glued to Latin letters (`gzip压缩`) no longer makes one token with them.
    """
    if not has_segmented(text):
        return None
    return SEGMENTED_RUN.sub(lambda match: " " + " ".join(bigrams(match.group())) + " ", text)


def shadow_or_self(text: str) -> str:
    return shadow(text) or text


def segmented_parts(word: str) -> list[tuple[str, bool]]:
    """A word split into its pieces of these scripts and the pieces around them, in order:
    (piece, segmented). `gzip压缩文件` -> [("gzip", False), ("压缩文件", True)]."""
    parts: list[tuple[str, bool]] = []
    position = 0
    for match in SEGMENTED_RUN.finditer(word):
        if match.start() > position:
            parts.append((word[position : match.start()], False))
        parts.append((match.group(), True))
        position = match.end()
    if position < len(word):
        parts.append((word[position:], False))
    return parts
