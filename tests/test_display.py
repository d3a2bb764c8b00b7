"""`printable`: untrusted text made safe for a terminal, ordinary text left alone."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pinakes.display import printable

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
