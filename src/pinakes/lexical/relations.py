"""Which words WordNet relates to a word, spelled as the index's tokenizer spells them.

A paraphrase asks in words its passage never uses ("fabric mittens" for gloves, "biro" for pen,
"tome" for book), so a count of the query's words in a passage scores it like a question nothing
answers. WordNet states such relations outright: mitten is a kind of glove, biro a synonym of
ballpoint pen. `search/signals.py`'s `related_share` counts a query word as held by a passage when
the passage holds the word or one of these relatives (docs/QUALITY.md, "#25", (i)).

The table is Princeton WordNet 3.0 reduced to what that needs (`data/wordnet/NOTICE`): for each
single word WordNet files, the words of the synsets of its three most frequent senses per part of
speech and of their neighbours one relation away (derivation, pertainym, participle, similar-to,
see-also, hypernym, hyponym) are its relatives, kept as index terms (Porter stems) so they meet a
chunk's terms. `bench/experiments/lexical_relations/make_table.py` builds it.
"""

from __future__ import annotations

import bisect
import functools
from pathlib import Path
from typing import TypeVar

import numpy as np

# Beside the package, as the wheel installs it.
TABLE = Path(__file__).resolve().parent.parent / "data" / "wordnet" / "relations.npz"
# WordNet's own suffix rules (morphy, in its morph.c), per part of speech: how an inflected word
# finds the lemma it is filed under ("mittens" -> "mitten"); irregular forms are keys themselves.
MORPHY_RULES = {
    "n": (("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"), ("men", "man"), ("ies", "y")),
    "v": (("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"), ("ing", "")),
    "a": (("er", ""), ("est", ""), ("er", "e"), ("est", "e")),
    "r": (),
}
CACHED_WORDS = 4096  # words whose relatives a process keeps (a search asks a handful)
_SUFFIX_RULES = tuple(dict.fromkeys(rule for rules in MORPHY_RULES.values() for rule in rules))


class WordRelations:
    """The table: words as spelled lead to their relatives as index terms. Its index is held as
    Python lists (~10 MB): a search looks up a handful of words, and bisecting a list costs a
    microsecond where a numpy call on one value costs tens."""

    def __init__(self, path: Path = TABLE) -> None:
        with np.load(path, allow_pickle=False) as tables:
            # Sorted ASCII bytes (WordNet's words are ASCII); keys are sorted places in it.
            self._vocabulary: list[bytes] = tables["vocabulary"].tolist()
            self._keys: list[int] = tables["keys"].tolist()
            self._offsets: list[int] = tables["relatives_offsets"].tolist()
            self._relatives = tables["relatives"]
        self.relatives = functools.lru_cache(maxsize=CACHED_WORDS)(self._relatives_of)
        self._words: frozenset[str] | None = None  # the words WordNet files, built on first need

    def _relatives_of(self, word: str) -> frozenset[str]:
        """The index terms WordNet relates to `word` (as typed, any case) or to the lemmas morphy's
        rules take it to; empty for a word WordNet lacks."""
        word = word.lower()
        if not word.isascii():
            return frozenset()
        forms = {word, *(word[: len(word) - len(suffix)] + ending for suffix, ending in _SUFFIX_RULES
                         if word.endswith(suffix) and len(word) > len(suffix))}
        found: set[int] = set()
        for form in forms:
            place = _find(self._vocabulary, form.encode("ascii"))
            key = None if place is None else _find(self._keys, place)
            if key is not None:
                found.update(self._relatives[self._offsets[key]: self._offsets[key + 1]].tolist())
        return frozenset(self._vocabulary[term].decode("ascii") for term in found)

    def other_words(self, word: str) -> tuple[str, ...]:
        """The relatives of `word` that WordNet files as words themselves (a relative kept only as a
        stem, `comput`, is no word to ask with), its own forms left out, closest first: by how many
        relatives each shares with `word` (a synonym shares most; a far hyponym few). What a
        paraphrase may use instead of it (calibration/questions.py)."""
        lowered = word.lower()
        if self._words is None:
            self._words = frozenset(self._vocabulary[key].decode("ascii") for key in self._keys)
        mine = self.relatives(word)
        options = [relative for relative in mine if relative in self._words and relative.isalpha()
                   and not (lowered.startswith(relative) or relative.startswith(lowered))]
        return tuple(sorted(options, key=lambda relative: (-len(mine & self.relatives(relative)), relative)))


Sorted = TypeVar("Sorted", bytes, int)  # the vocabulary's words, the relation keys


def _find(items: list[Sorted], item: Sorted) -> int | None:
    """Where `item` is in the sorted `items`, or None."""
    at = bisect.bisect_left(items, item)
    return at if at < len(items) and items[at] == item else None


@functools.cache
def packaged() -> WordRelations:
    """The table that ships inside Pinakes, read once per process (~80 ms)."""
    return WordRelations()
