"""OCR'd lines -> page texts, through the same reading order as a PDF's text layer (layout.py).

The detector returns one box per run of text on a line (it breaks a line at a column gutter or a
table's cell gap); each box becomes one `layout.Word` in PDF-like coordinates (y up), and from there
the scan goes through layout.py's own steps: lines and segments, columns by x-gap clustering (two
columns never interleave), paragraphs from vertical gaps, running heads and page numbers stripped
by recurrence, line-end hyphens joined, NFKC. One home per concept: nothing here re-implements a
step.
"""

from __future__ import annotations

from collections.abc import Sequence

from pinakes.extract.layout import Word, layout_words, normalise
from pinakes.extract.ocr_engine import OcrPage


def words_from_page(page: OcrPage) -> list[Word]:
    """The page's boxes as words, y flipped so that it grows upwards as in a PDF's user space."""
    words: list[Word] = []
    for line in page.lines:
        text = normalise(line.text).strip()
        if text:
            words.append(Word(text, line.left, page.height - line.bottom, line.right, page.height - line.top))
    return words


def layout_pages(pages: Sequence[OcrPage], *, head_threshold: float) -> tuple[list[str], tuple[str, ...]]:
    """Each page's text in reading order, and the running heads stripped from them (kept as the
    document's context, as a PDF's are)."""
    return layout_words([words_from_page(page) for page in pages], head_threshold=head_threshold)
