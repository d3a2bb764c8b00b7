"""layout.py on plain data: glyph boxes in, page text out (no PDF needed)."""

from __future__ import annotations

from pinakes.extract import layout, registry
from pinakes.extract.layout import Glyph, LayoutOptions, layout_document

CHAR_WIDTH, HEIGHT = 6.0, 12.0


def line(text: str, x: float, y: float) -> list[Glyph]:
    """Glyphs of one line starting at x on baseline band y, a space as a whitespace glyph."""
    glyphs: list[Glyph] = []
    for index, char in enumerate(text):
        left = x + index * CHAR_WIDTH
        glyphs.append((char, 0.0, 0.0, 0.0, 0.0) if char == " " else (char, left, y, left + CHAR_WIDTH, y + HEIGHT))
    glyphs.append(("\n", 0.0, 0.0, 0.0, 0.0))
    return glyphs


def page(*lines: tuple[str, float, float]) -> list[Glyph]:
    return [glyph for text, x, y in lines for glyph in line(text, x, y)]


def lay(pages: list[list[Glyph]], threshold: float = 0.3, **options: bool) -> list[str]:
    return layout_document(pages, head_threshold=threshold, options=LayoutOptions(**options))


def two_column_rows(rows: int) -> list[tuple[str, float, float]]:
    """Row by row across two columns (the stream order a naive reader follows)."""
    out: list[tuple[str, float, float]] = []
    for row in range(rows):
        y = 700 - row * 14
        out += [(f"left line {chr(97 + row)} text", 72, y), (f"right line {chr(97 + row)} text", 330, y)]
    return out


def test_two_columns_drawn_row_by_row_are_read_column_by_column() -> None:
    text = lay([page(*two_column_rows(4))])[0]
    assert text.splitlines() == ["left line a text", "left line b text", "left line c text", "left line d text",
                                 "", "right line a text", "right line b text", "right line c text",
                                 "right line d text"]


def test_without_reading_order_the_columns_interleave() -> None:
    text = lay([page(*two_column_rows(4))], reading_order=False)[0]
    assert text.splitlines()[0] == "left line a text right line a text"


def test_a_full_width_title_stays_above_the_columns() -> None:
    title = ("A title that spans across both of the columns below it", 72, 730)
    text = lay([page(title, *two_column_rows(3))])[0]
    assert text.splitlines()[0] == title[0]
    assert text.index("left line c") < text.index("right line a")


def test_one_right_aligned_number_is_not_a_column() -> None:
    lines = [(f"body line {n} of a single column page", 72, 700 - n * 14) for n in range(5)]
    text = lay([page(*lines, ("7", 500, 700))])[0]
    assert text.splitlines()[0] == "body line 0 of a single column page 7"


def head_pages(count: int, *, heads: bool = True) -> list[list[Glyph]]:
    pages: list[list[Glyph]] = []
    for number in range(1, count + 1):
        lines = [(f"Unique body text {chr(96 + number)} number one", 72, 700),
                 (f"more body {chr(96 + number)} words here", 72, 686),
                 (f"and the end of page {chr(96 + number)} body", 72, 672)]
        if heads:
            lines = [("Field Manual", 72, 750), *lines, (str(number + 10), 300, 60)]
        pages.append(page(*lines))
    return pages


def test_running_heads_and_page_numbers_are_stripped_by_recurrence() -> None:
    texts = lay(head_pages(6))
    assert all("Field Manual" not in text for text in texts)
    assert all(not any(part.isdigit() for part in text.split()) for text in texts)
    assert texts[0].splitlines()[0] == "Unique body text a number one"


def test_stripping_switched_off_keeps_the_heads() -> None:
    assert all("Field Manual" in text for text in lay(head_pages(6), strip_running_heads=False))


def test_a_short_document_is_never_stripped() -> None:
    """Recurrence over fewer than MIN_HEAD_PAGES pages is too weak to call a line a head."""
    texts = lay(head_pages(layout.MIN_HEAD_PAGES - 1))
    assert all("Field Manual" in text for text in texts)


def test_a_line_recurring_below_the_threshold_is_kept() -> None:
    pages = head_pages(9, heads=False)
    pages[4] = page(("Recurring opener", 72, 750), *[(f"filler {n}", 72, 700 - 14 * n) for n in range(3)])
    pages[6] = page(("Recurring opener", 72, 750), *[(f"other {n}", 72, 700 - 14 * n) for n in range(3)])
    assert "Recurring opener" in lay(pages, threshold=0.5)[4]  # 1 of 4 same-parity neighbours
    assert "Recurring opener" not in lay(pages, threshold=0.25)[4]


def test_head_signature_folds_numbers_and_case() -> None:
    assert layout.head_signature("Chapter 12:  Data  Import xiv") == "chapter #: data import #"
    assert layout.head_signature("iii") == "#"


def test_line_end_hyphens_are_joined_and_a_compound_keeps_its_hyphen() -> None:
    text = lay([page(("the exam-", 72, 700), ("ple shows a well-", 72, 686), ("known well-known case", 72, 672))])[0]
    assert text == "the example\nshows a well-known\nwell-known case"


def test_a_hyphen_before_a_capital_is_not_joined() -> None:
    assert lay([page(("North-", 72, 700), ("West wing", 72, 686))])[0] == "North-\nWest wing"


def test_pdfium_hyphen_marker_is_a_hyphen_to_judge() -> None:
    glyphs = page(("explic\x02", 72, 700), ("itly so", 72, 686))
    assert lay([glyphs])[0] == "explicitly\nso"
    assert lay([glyphs], join_hyphens=False)[0] == "explic-\nitly so"


def test_ligatures_sharing_one_box_stay_one_word() -> None:
    glyphs: list[Glyph] = [("\ufb01", 72, 700, 78, 712), ("l", 78, 700, 81, 712), ("e", 81, 700, 87, 712)]
    tex: list[Glyph] = [("f", 72, 700, 78, 712), ("i", 72, 700, 78, 712), ("l", 78, 700, 81, 712)]  # pdfTeX fi
    assert lay([glyphs])[0] == "file"
    assert lay([tex])[0] == "fil"


def test_a_paragraph_gap_becomes_a_blank_line() -> None:
    assert lay([page(("first paragraph", 72, 700), ("second paragraph", 72, 670))])[0] == \
        "first paragraph\n\nsecond paragraph"


def test_noise_and_compatibility_forms_are_normalised() -> None:
    assert layout.normalise("e\ufb03cient\x00 \u00a0") == "efficient  "


def test_the_registry_declares_the_layout_version() -> None:
    assert registry.EXTRACTORS["pypdfium2"].constants["layout"] == layout.LAYOUT_VERSION
