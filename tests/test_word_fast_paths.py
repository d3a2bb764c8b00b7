"""The word splitting's fast paths against their rules applied character by character.

`split_words` (lexical/tokenizer.py) feeds search's query analysis, suggestions and self-calibration's
questions, so its ASCII fast path must give every word the rule gives: checked on all ASCII
characters, on made-up text mixing every kind of character the rule tells apart, and on the
development corpora's text in their many languages. The questions' `content_words`
(calibration/questions.py) likewise, against the rule it states.
"""

from __future__ import annotations

import random
import unicodedata
from pathlib import Path

import pytest

from pinakes.calibration.questions import MIN_WORD_CHARS, content_words
from pinakes.lexical.tokenizer import FUNCTION_WORDS, split_words

CORPORA = Path(__file__).resolve().parent.parent.parent / "shared" / "corpora"


def split_by_rule(text: str) -> list[str]:
    """The rule as the tokenizer stated it before its fast path: maximal runs of letters, marks,
    digits and private-use characters."""
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


def content_words_by_rule(sentence: str) -> list[str]:
    """Content words as the rule states them: no function word, at least MIN_WORD_CHARS characters,
    at least one letter, each once (compared lower-cased), in order."""
    seen: set[str] = set()
    words: list[str] = []
    for word in split_by_rule(sentence):
        lowered = word.lower()
        if (lowered in FUNCTION_WORDS or len(word) < MIN_WORD_CHARS or not any(char.isalpha() for char in word)
                or lowered in seen):
            continue
        seen.add(lowered)
        words.append(word)
    return words


def corpus_lines() -> list[str]:
    if not CORPORA.is_dir():
        pytest.skip("the shared corpora are not here")
    files = sorted(path for path in (CORPORA / "tldr-pages-translations").rglob("*.md"))[::97]
    files += sorted((CORPORA / "python-3.11-docs-rst").rglob("*.rst"))[:40]
    lines = [line for path in files for line in path.read_text(encoding="utf-8", errors="replace").splitlines()]
    assert len(lines) > 3000 and any(not line.isascii() for line in lines)
    return lines


def test_every_ascii_character_is_split_as_the_rule_splits_it() -> None:
    for code in range(128):
        for text in (chr(code), f"ab{chr(code)}cd", f"{chr(code)}x{chr(code)}", f"é{chr(code)}1"):
            assert split_words(text) == split_by_rule(text), repr(text)


def test_mixed_text_splits_as_the_rule_splits_it() -> None:
    # Letters of several scripts, combining marks, digits of other systems, private use, symbols,
    # punctuation, spaces (ASCII and not), a control, a lone surrogate, an unassigned code point.
    alphabet = [*"aZ09 _-.,'\"\t\n/", "é", "\u0301", "\u0915", "\u093f", "日", "本", "\u0663", "\u2155",
                "\ue000", "\u00a0", "\u3000", "\u2014", "€", "\u200b", "\x85",
                "\ud800", "\U0001f600", "\U000e0001", "\u0378", "ß", "\u01c5"]
    generator = random.Random(45)
    for _ in range(5000):
        text = "".join(generator.choice(alphabet) for _ in range(generator.randrange(0, 24)))
        assert split_words(text) == split_by_rule(text), repr(text)


def test_the_corpora_text_splits_as_the_rule_splits_it() -> None:
    for line in corpus_lines():
        assert split_words(line) == split_by_rule(line), repr(line)


def test_content_words_are_the_rules_on_the_corpora_and_on_digits() -> None:
    for sentence in ("version 2024 of x86 and 1234 v2", "١٢٣ ٤٥٦٧ abc", "999 9a9 a99", "Ⅻ ⅫⅫⅫ ²³⁴ 日本語"):
        assert content_words(sentence) == content_words_by_rule(sentence), sentence
    for line in corpus_lines():
        assert content_words(line) == content_words_by_rule(line), repr(line)
