"""Make untrusted text safe to print to a terminal.

File names, titles and document text come from the knowledge base, i.e. from whoever wrote the files:
they are untrusted. Printed raw, a name holding `ESC [ 2 J` clears the screen, other escape sequences
recolour the terminal, set its title or (in some terminals) worse; a `\\r` or `\\n` lets a name
overwrite or forge the lines around it; a bidi override (U+202E) makes text display in another order
than it is stored in, so what a person reads is not what is there.

`printable` turns every such character into a visible, unambiguous escape, in the form Python uses:

- C0 controls, DEL and C1 controls (U+0000-U+001F, U+007F, U+0080-U+009F): `\\n`, `\\r`, `\\t` for
  newline, carriage return and tab, `\\xNN` (two lower-case hex digits) for the others, e.g. ESC ->
  `\\x1b`;
- Unicode bidi controls (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069) and the line and
  paragraph separators (U+2028, U+2029): `\\uNNNN`, e.g. `\\u202e`;
- lone surrogates (U+D800-U+DFFF, which is how Python decodes file names that are not valid UTF-8):
  `\\udcNN`; printed raw they are not characters at all, and a strict stream refuses them.

Everything else, including all ordinary non-ASCII text (é, 中文, emoji with their joiners), passes
through unchanged. A backslash already in the text is left as it is: `printable` is for people reading a
terminal, not a reversible encoding, so a name that literally holds the four characters `\\x1b` looks
the same as one holding ESC. Where exactness matters use JSON (`--json`): JSON output is deliberately
NOT escaped this way, since JSON has its own escaping and a script must get the name as it is.

`clipped` bounds a value the KB controls that has no bound of its own where it is written (a heading
line, a link's relation in a sidecar): past its limit it is cut and ends in `…`, on the terminal and
in `--json` alike, so one 100 kB line cannot flood either. `heading_trail` applies it to a passage's
heading path: each heading as long as a title may be (MAX_HEADING_CHARS, the front matter's
MAX_TITLE_CHARS), at most MAX_HEADING_LEVELS of them (the outermost and the innermost kept, `…` for
the levels between).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["ELLIPSIS", "MAX_HEADING_CHARS", "MAX_HEADING_LEVELS", "clipped", "heading_trail", "printable"]

ELLIPSIS = "…"
MAX_HEADING_CHARS = 300  # a heading is a section's title: bounded as a document's title is
MAX_HEADING_LEVELS = 8  # Markdown has 6; a numbered outline may nest deeper

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

_BIDI_AND_SEPARATORS = (
    0x061C, 0x200E, 0x200F,  # ALM, LRM, RLM
    *range(0x202A, 0x202F),  # LRE, RLE, PDF, LRO, RLO
    *range(0x2066, 0x206A),  # LRI, RLI, FSI, PDI
    0x2028, 0x2029,  # line and paragraph separators
)


def _build_table() -> dict[int, str]:
    table: dict[int, str] = {}
    for code in [*range(0x20), 0x7F, *range(0x80, 0xA0)]:
        char = chr(code)
        table[code] = _NAMED.get(char, f"\\x{code:02x}")
    for code in [*_BIDI_AND_SEPARATORS, *range(0xD800, 0xE000)]:
        table[code] = f"\\u{code:04x}"
    return table


_TABLE = _build_table()


def printable(text: str) -> str:
    """`text` with control, bidi-control and separator characters replaced by visible escapes.

    >>> printable("evil\\x1b[2J\\nname\\u202etxt.exe")
    'evil\\\\x1b[2J\\\\nname\\\\u202etxt.exe'
    >>> printable("café 中文 😀")
    'café 中文 😀'
    """
    return text.translate(_TABLE)


def clipped(text: str, limit: int) -> str:
    """`text` if it has at most `limit` characters, else its first `limit - 1` and `…` (`limit` in all).

    >>> clipped("see-also", 64)
    'see-also'
    >>> clipped("abcdef", 4)
    'abc…'
    """
    if limit < 1:
        raise ValueError("a clip limit is at least 1")
    return text if len(text) <= limit else text[: limit - 1] + ELLIPSIS


def heading_trail(headings: Sequence[str]) -> tuple[str, ...]:
    """A heading path as it is shown: each heading clipped to MAX_HEADING_CHARS, and at most
    MAX_HEADING_LEVELS levels (the outermost, `…`, then the innermost ones)."""
    shown = [clipped(heading, MAX_HEADING_CHARS) for heading in headings]
    if len(shown) > MAX_HEADING_LEVELS:
        shown = [shown[0], ELLIPSIS, *shown[len(shown) - MAX_HEADING_LEVELS + 2:]]
    return tuple(shown)
