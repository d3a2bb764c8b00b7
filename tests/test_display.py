"""`printable`: untrusted text made safe for a terminal, ordinary text left alone."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pinakes.display import MAX_HEADING_CHARS, MAX_HEADING_LEVELS, clipped, heading_trail, printable

BIDI = [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
SEPARATORS = [0x2028, 0x2029]
CONTROLS = [*range(0x20), 0x7F, *range(0x80, 0xA0)]
SURROGATES = [0xD800, 0xDBFF, 0xDC80, 0xDCFF, 0xDFFF]


def is_unsafe(char: str) -> bool:
    code = ord(char)
    return (unicodedata.category(char) == "Cc" or code in BIDI or code in SEPARATORS
            or 0xD800 <= code <= 0xDFFF)


@pytest.mark.parametrize(("raw", "shown"), [
    ("\x1b[2J", "\\x1b[2J"),
    ("\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"),
    ("a\nb", "a\\nb"),
    ("a\rb", "a\\rb"),
    ("a\tb", "a\\tb"),
    ("\x00\x7f\x9b", "\\x00\\x7f\\x9b"),  # NUL, DEL, CSI (the one-byte C1 escape)
    ("invoice\u202egpj.exe", "invoice\\u202egpj.exe"),
    ("\u2066x\u2069", "\\u2066x\\u2069"),
    ("line\u2028break", "line\\u2028break"),
    ("bad\udcffbyte", "bad\\udcffbyte"),  # a non-UTF-8 file name, as os.fsdecode gives it
])
def test_dangerous_characters_are_made_visible(raw: str, shown: str) -> None:
    assert printable(raw) == shown


@pytest.mark.parametrize("text", [
    "notes/plain.md", "café résumé.md", "中文文档.pdf", "emoji 😀 👩‍👩‍👧 (with joiners).md",
    "back\\slash", "", "Ωmega ß ﬁ", "\u00a0non-breaking\u00a0space",
])
def test_ordinary_text_is_unchanged(text: str) -> None:
    assert printable(text) == text


def test_no_unsafe_code_point_survives_and_each_is_shown_distinctly() -> None:
    seen: dict[str, int] = {}
    for code in [*range(0xA0), *BIDI, *SEPARATORS, *SURROGATES]:
        char = chr(code)
        shown = printable(char)
        assert not any(is_unsafe(c) for c in shown), (hex(code), shown)
        assert shown.isascii() and shown.isprintable(), (hex(code), shown)
        if is_unsafe(char):
            assert shown.startswith("\\") and len(shown) > 1, hex(code)
            assert shown not in seen, (hex(code), hex(seen.get(shown, -1)))  # unambiguous
            seen[shown] = code
        else:
            assert shown == char, hex(code)  # printable ASCII passes through
    assert len(seen) == len(CONTROLS) + len(BIDI) + len(SEPARATORS) + len(SURROGATES)


UNSAFE_OR_ANY = st.one_of(
    st.characters(exclude_categories=()),  # any code point, surrogates included
    st.sampled_from([chr(c) for c in [*CONTROLS, *BIDI, *SEPARATORS, *SURROGATES]]),
)


@given(st.text(UNSAFE_OR_ANY))
def test_output_never_holds_an_unsafe_character(text: str) -> None:
    shown = printable(text)
    assert not any(is_unsafe(c) for c in shown)
    if not any(is_unsafe(c) for c in text):
        assert shown == text


def test_clipped_bounds_a_value_and_says_so_with_an_ellipsis() -> None:
    assert clipped("see-also", 64) == "see-also"
    assert clipped("x" * 64, 64) == "x" * 64
    assert clipped("x" * 100_000, 64) == "x" * 63 + "…" and len(clipped("x" * 65, 64)) == 64
    with pytest.raises(ValueError):
        clipped("x", 0)


def test_a_heading_trail_is_bounded_per_heading_and_in_depth() -> None:
    from pinakes.extract.front_matter import MAX_TITLE_CHARS

    assert MAX_HEADING_CHARS == MAX_TITLE_CHARS  # a heading is bounded as a title is
    assert heading_trail(["Intro", "Setup"]) == ("Intro", "Setup")
    (shown,) = heading_trail(["h" * 100_000])
    assert shown == "h" * (MAX_HEADING_CHARS - 1) + "…"
    deep = [f"level {n}" for n in range(1, 1001)]
    trail = heading_trail(deep)
    assert len(trail) == MAX_HEADING_LEVELS
    assert trail[0] == "level 1" and trail[1] == "…" and trail[-1] == "level 1000"
    assert heading_trail(deep[:MAX_HEADING_LEVELS]) == tuple(deep[:MAX_HEADING_LEVELS])
