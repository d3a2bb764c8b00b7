"""What a model's answer is allowed to claim, computed by the code (spec §4.3; the peer lessons).

Three rules, each a measured failure elsewhere before it was a rule here:

- A citation is an index into the passages *that call was shown*. An index outside them is
  `unresolved`; it never names a document, because the model never saw a path or an ID.
- "answered" is computed, never read from the model: at least one citation resolves, the answer
  is not a lone resolved citation beside an invented one (a model citing a passage it was not
  shown was demonstrably not reading), and every number in the answer appears in a passage it
  cites or in the question. Numbers are checked; language is not, and an answer can pass all
  three and still be false: the output lists what it rests on so a reader can check.
- Text a document controls that imitates the prompt's own grammar is defused before it is sent:
  a passage marker (`[3]`, `［3］`, `[ 3 ]`, digits in any script) anywhere in a passage or in the
  question becomes `(3)`, and the evidence block's own tags lose their opening bracket. Both
  rewrites keep the text's length in characters, so what was sent stays comparable with what is
  cited. Escaping is not a defence against a model that follows instructions in a passage; it
  keeps the narrower promise that a passage boundary is something this code wrote.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field

# Characters that draw nothing (or nothing a reader notices) and may hide inside a marker:
# whitespace, format and control characters, combining marks, unassigned/private code points.
_INVISIBLE_CATEGORIES = frozenset({"Zs", "Zl", "Zp", "Cc", "Cf", "Cn", "Co", "Cs", "Mn", "Me"})
_NAMED_BLANKS = "\u115f\u1160\u3164\uffa0\u2800"  # Hangul fillers, braille blank


def _invisible_class() -> str:
    ranges: list[str] = []
    start = None
    for code in range(0x110000):
        char = chr(code)
        hidden = (unicodedata.category(char) in _INVISIBLE_CATEGORIES or char.isspace()
                  or char in _NAMED_BLANKS) and char not in "[]［］"
        if hidden and start is None:
            start = code
        if not hidden and start is not None:
            ranges.append(_range(start, code - 1))
            start = None
    if start is not None:
        ranges.append(_range(start, 0x10FFFF))
    return "".join(ranges)


def _range(first: int, last: int) -> str:
    def escape(code: int) -> str:
        return f"\\U{code:08x}"

    return escape(first) if first == last else f"{escape(first)}-{escape(last)}"


_HIDDEN = f"[{_invisible_class()}]*"
# A passage marker as a model may read one: an opening bracket (ASCII or fullwidth), digits in any
# script, a closing bracket, with anything invisible in between.
MARKER = re.compile(f"([\\[［]){_HIDDEN}(\\d+){_HIDDEN}([\\]］])")
_EVIDENCE_TAG = re.compile(r"<(/?\s*(?:evidence|passage)\b)", re.IGNORECASE)
_BRACKETS = {"[": "(", "［": "（", "]": ")", "］": "）"}
# A run of ASCII or other-script digits, with thousands separators and decimals kept in one run, so
# 2024 is never corroborated by 24 and 1,200 is one number.
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def defuse(text: str) -> str:
    """`text` with every passage marker and evidence tag rewritten so it cannot open a passage.

    Length-preserving: each rewrite swaps one character for one character."""
    text = MARKER.sub(lambda m: _BRACKETS[m.group(1)] + m.group(0)[1:-1] + _BRACKETS[m.group(3)], text)
    return _EVIDENCE_TAG.sub(lambda m: "‹" + m.group(1), text)


def numbers_in(text: str) -> set[str]:
    """The numbers in `text`, normalised (ASCII digits, separators dropped)."""
    found: set[str] = set()
    for match in _NUMBER.finditer(text):
        digits = "".join(str(unicodedata.digit(char)) if char.isdigit() else char for char in match.group(0))
        found.add(digits.replace(",", ""))
    return found


@dataclass(frozen=True)
class Grounding:
    """What one answer's citations resolved to, and whether that makes it an answer."""

    resolved: tuple[int, ...]  # 1-based indexes into the passages shown, in first-cited order
    unresolved: tuple[int, ...]  # indexes the model cited that it was never shown
    unsupported_numbers: tuple[str, ...]  # in the answer, in no cited passage and not in the question
    reasons: tuple[str, ...] = field(default=())  # why it is not an answer (empty when it is)

    @property
    def answered(self) -> bool:
        return not self.reasons


def ground(answer: str, cited: Sequence[int], shown: Sequence[str], question: str) -> Grounding:
    """Resolve `cited` (the model's indexes, plus any `[n]` markers in its text) against the
    `shown` passage texts (as sent, 1-based), and decide whether `answer` is an answer."""
    wanted = [*cited, *(int(m.group(2)) for m in MARKER.finditer(answer) if m.group(2).isascii())]
    resolved: list[int] = []
    unresolved: list[int] = []
    for index in wanted:
        target = resolved if 1 <= index <= len(shown) else unresolved
        if index not in target:
            target.append(index)
    evidence = set(numbers_in(question))
    for index in resolved:
        evidence |= numbers_in(shown[index - 1])
    # The answer's own markers are this code's numbers, not the KB's: they never need support.
    claimed = numbers_in(MARKER.sub(" ", answer))
    unsupported = tuple(sorted(claimed - evidence, key=lambda n: (len(n), n)))
    reasons: list[str] = []
    if not answer.strip():
        reasons.append("the answer is empty")
    if not resolved:
        reasons.append("no citation resolves to a passage it was shown")
    elif len(resolved) == 1 and unresolved:
        reasons.append("its one resolving citation stands beside one to a passage it was never shown")
    if unsupported:
        reasons.append("it states numbers no cited passage contains: " + ", ".join(unsupported))
    return Grounding(tuple(resolved), tuple(unresolved), unsupported, tuple(reasons))


def renumber(answer: str, mapping: dict[int, int]) -> str:
    """The answer's `[n]` markers rewritten to the output's citation numbers; a marker that
    resolves to nothing becomes `[?n]` so a reader sees it was not evidence."""

    def swap(match: re.Match[str]) -> str:
        raw = match.group(2)
        number = int(raw) if raw.isascii() else -1
        return f"[{mapping[number]}]" if number in mapping else f"[?{raw}]"

    return MARKER.sub(swap, answer)
