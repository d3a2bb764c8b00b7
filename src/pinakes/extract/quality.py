"""The five extraction-quality metrics of spec §7.1, each with its own denominator.

Every metric returns a `Ratio`: numerator and denominator as counts, and a value that is None when
the denominator is legitimately zero (no native text layer, no (label, value) pairs asserted) —
never a bare 0.0 that would read like a measured failure.

| metric | numerator | denominator |
|---|---|---|
| `char_recall` | expected non-space characters found, in order (LCS) | expected non-space characters |
| `order_fidelity` | LCS length over word sequences | expected word count |
| `junk_rate` | extracted words absent from the ground truth | extracted word count |
| `pair_adjacency` | asserted (label, value) pairs within `PAIR_WINDOW` characters | asserted pairs |
| `word_coverage` | significant native-layer words present in the extraction | significant native-layer words |

`junk_rate` counts with multiplicity: the fourth "chapter" is junk when the truth says it three
times, which is what a running head repeated onto every page looks like. Words are NFKC-folded,
lowercased runs of letters and digits, so punctuation and case never count as errors.
`token_bag` is the coarser bag-of-tokens overlap used where the truth is not page-aligned (the R
manuals): recall and precision of the lowercase `[a-z0-9]+` token multiset.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

PAIR_WINDOW = 80  # characters between a label and its value for the pair to count as adjacent
SIGNIFICANT_WORD_LETTERS = 4  # a native-layer word this long (letters only) is significant

_WORD = re.compile(r"[^\W_]+")
_TOKEN = re.compile(r"[a-z0-9]+")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class Ratio:
    numerator: int
    denominator: int

    @property
    def value(self) -> float | None:
        return self.numerator / self.denominator if self.denominator else None

    def __add__(self, other: Ratio) -> Ratio:
        return Ratio(self.numerator + other.numerator, self.denominator + other.denominator)

    def to_dict(self) -> dict[str, object]:
        value = self.value
        return {"numerator": self.numerator, "denominator": self.denominator,
                "value": round(value, 4) if value is not None else None}


def words(text: str) -> list[str]:
    return _WORD.findall(unicodedata.normalize("NFKC", text).lower())


def lcs_length(first: Sequence[Hashable], second: Sequence[Hashable]) -> int:
    """Length of the longest common subsequence, bit-parallel (Allison-Dix / Hyyrö): one big-int
    add per element of `second`, so a 20k x 20k comparison takes milliseconds, not minutes."""
    if not first or not second:
        return 0
    masks: dict[Hashable, int] = {}
    for position, item in enumerate(first):
        masks[item] = masks.get(item, 0) | (1 << position)
    full = (1 << len(first)) - 1
    row = full
    for item in second:
        matches = row & masks.get(item, 0)
        row = ((row + matches) | (row - matches)) & full
    return len(first) - row.bit_count()


def char_recall(expected: str, extracted: str) -> Ratio:
    want = [c for c in unicodedata.normalize("NFKC", expected) if not c.isspace()]
    got = [c for c in unicodedata.normalize("NFKC", extracted) if not c.isspace()]
    return Ratio(lcs_length(want, got), len(want))


def order_fidelity(expected: str, extracted: str) -> Ratio:
    want = words(expected)
    return Ratio(lcs_length(want, words(extracted)), len(want))


def junk_rate(expected: str, extracted: str) -> Ratio:
    got = Counter(words(extracted))
    excess = got - Counter(words(expected))
    return Ratio(sum(excess.values()), sum(got.values()))


def pair_adjacency(extracted: str, pairs: Iterable[tuple[str, str]], window: int = PAIR_WINDOW) -> Ratio:
    """Pairs whose label and value both occur with at most `window` characters between them (in
    either order, whitespace runs counted as one character)."""
    flat = _SPACE.sub(" ", unicodedata.normalize("NFKC", extracted))
    asserted = list(pairs)
    found = sum(1 for label, value in asserted if _adjacent(flat, label, value, window))
    return Ratio(found, len(asserted))


def word_coverage(native_layer: str, extracted: str) -> Ratio:
    """Distinct significant words of the native text layer that the extraction still has: what
    layout processing must not lose. None when the page has no native layer at all (a scan)."""
    significant = {w for w in words(native_layer) if w.isalpha() and len(w) >= SIGNIFICANT_WORD_LETTERS}
    present = set(words(extracted))
    return Ratio(len(significant & present), len(significant))


def token_bag(truth: str, extracted: str) -> tuple[Ratio, Ratio]:
    """(recall, precision) of the lowercase `[a-z0-9]+` token multisets."""
    want, got = Counter(_TOKEN.findall(truth.lower())), Counter(_TOKEN.findall(extracted.lower()))
    common = sum((want & got).values())
    return Ratio(common, sum(want.values())), Ratio(common, sum(got.values()))


def _adjacent(text: str, label: str, value: str, window: int) -> bool:
    label_spans = _spans(text, _SPACE.sub(" ", label))
    value_spans = _spans(text, _SPACE.sub(" ", value))
    return any(max(v_start - l_end, l_start - v_end, 0) <= window
               for l_start, l_end in label_spans for v_start, v_end in value_spans)


def _spans(text: str, needle: str) -> list[tuple[int, int]]:
    if not needle:
        return []
    return [(m.start(), m.end()) for m in re.finditer(re.escape(needle), text)]
