"""Draw the fixtures of spec.py into PDFs with fpdf2 (the `[dev]` extra), in seconds.

The PDFs are not committed: `build_all(directory)` writes them wherever the caller wants (the eval
and the tests use a temporary directory), so the committed truth is the spec, never a binary.
A fixture that needs what this machine lacks (the ligature fixture needs a Unicode TrueType font)
is returned as skipped, with the reason, instead of being drawn differently.

Run `python tests/pdf-corpus/generate.py DIR` to look at them.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent))

from spec import FIXTURES, LIGATURES, Fixture, Page

if TYPE_CHECKING:
    from fpdf import FPDF
    from PIL.Image import Image

PAGE_WIDTH, PAGE_HEIGHT, MARGIN = 612.0, 792.0, 72.0
FONT_SIZE, LEADING, PARAGRAPH_SPACE, GUTTER = 11.0, 14.0, 8.0, 24.0
UNICODE_FONTS = (Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"),
                 Path("/usr/share/fonts/dejavu/DejaVuSans.ttf"),
                 Path("/Library/Fonts/DejaVuSans.ttf"))
_HYPHENATE_FROM = 7  # letters: longer words that do not fit are split at a line end


def unicode_font() -> Path | None:
    return next((path for path in UNICODE_FONTS if path.is_file()), None)


def build_all(directory: Path) -> tuple[dict[str, Path], dict[str, str]]:
    """Every fixture drawn into `directory`: ({name: pdf}, {name: why it was skipped})."""
    directory.mkdir(parents=True, exist_ok=True)
    built: dict[str, Path] = {}
    skipped: dict[str, str] = {}
    for fixture in FIXTURES:
        if fixture.drawing == "ligatures" and unicode_font() is None:
            skipped[fixture.name] = "no Unicode TrueType font (DejaVuSans.ttf) on this machine"
            continue
        built[fixture.name] = build(fixture, directory / f"{fixture.name}.pdf")
    return built, skipped


def build(fixture: Fixture, path: Path) -> Path:
    from fpdf import FPDF

    pdf = FPDF(unit="pt", format="letter")
    pdf.set_auto_page_break(False)
    pdf.set_compression(fixture.drawing != "broken-xref")
    font = "Helvetica"
    if fixture.drawing == "ligatures":
        pdf.add_font("DejaVu", fname=str(unicode_font()))
        font = "DejaVu"
    for page in fixture.pages:
        pdf.add_page()
        pdf.set_font(font, size=FONT_SIZE)
        if fixture.drawing == "scanned":
            pdf.image(_raster(page), x=0, y=0, w=PAGE_WIDTH, h=PAGE_HEIGHT)
            continue
        if fixture.drawing == "invisible":
            pdf.text_mode = "INVISIBLE"
        _draw_page(pdf, page, fixture)
    pdf.output(str(path))
    if fixture.drawing == "rotated":
        _rotate(path)
    elif fixture.drawing == "broken-xref":
        data = path.read_bytes()
        path.write_bytes(re.sub(rb"startxref\s+\d+", b"startxref\n999999", data))
    return path


def _draw_page(pdf: FPDF, page: Page, fixture: Fixture) -> None:
    width = PAGE_WIDTH - 2 * MARGIN
    y = MARGIN + FONT_SIZE
    if page.head:
        x = MARGIN if page.head_align == "L" else PAGE_WIDTH - MARGIN - pdf.get_string_width(page.head)
        pdf.text(x, MARGIN - 24, page.head)
    if page.footer:
        pdf.text(MARGIN, PAGE_HEIGHT - MARGIN + 30, page.footer)
    if page.page_number:
        number_width = pdf.get_string_width(page.page_number)
        pdf.text((PAGE_WIDTH - number_width) / 2 + 60, PAGE_HEIGHT - MARGIN + 30, page.page_number)
    if page.title:
        pdf.text(MARGIN, y, page.title)
        y += LEADING + PARAGRAPH_SPACE
    if page.columns == 2:
        column = (width - GUTTER) / 2
        half = (len(page.paragraphs) + 1) // 2
        left = _layout_lines(pdf, page.paragraphs[:half], column, fixture)
        right = _layout_lines(pdf, page.paragraphs[half:], column, fixture)
        # Row by row across both columns: the stream order a naive reader follows is wrong.
        for row in range(max(len(left), len(right))):
            for lines, x in ((left, MARGIN), (right, MARGIN + column + GUTTER)):
                if row < len(lines) and lines[row] is not None:
                    pdf.text(x, y + row * LEADING, _drawn(cast(str, lines[row]), fixture))
        return
    if fixture.drawing == "hyphenate":  # a narrow measure: many line ends to split words at
        width = width / 2
    lines = _layout_lines(pdf, page.paragraphs, width, fixture)
    for row, line in enumerate(lines):
        if line is not None:
            pdf.text(MARGIN, y + row * LEADING, _drawn(line, fixture))
    y += len(lines) * LEADING + PARAGRAPH_SPACE
    if page.table:
        pdf.set_xy(MARGIN, y)
        for label, value in page.table:
            pdf.cell(170, LEADING + 4, label, border=1)
            pdf.cell(220, LEADING + 4, value, border=1, new_x="LMARGIN", new_y="NEXT")
            pdf.set_x(MARGIN)


def _layout_lines(pdf: FPDF, paragraphs: tuple[str, ...], width: float, fixture: Fixture) -> list[str | None]:
    """Greedy wrap; None marks a paragraph gap (about half a line, drawn as a skipped row)."""
    lines: list[str | None] = []
    for number, paragraph in enumerate(paragraphs):
        if number:
            lines.append(None)
        lines.extend(_wrap(pdf, paragraph, width, hyphenate=fixture.drawing == "hyphenate"))
    return lines


def _wrap(pdf: FPDF, text: str, width: float, *, hyphenate: bool) -> Iterator[str]:
    def fits(candidate: str) -> bool:
        return pdf.get_string_width(candidate) <= width

    line = ""
    for word in text.split():
        candidate = f"{line} {word}" if line else word
        if fits(candidate):
            line = candidate
            continue
        letters = word.rstrip(".,")
        if hyphenate and len(letters) >= _HYPHENATE_FROM and line:
            cut = next((cut for cut in range(len(letters) - 3, 2, -1) if fits(f"{line} {word[:cut]}-")), 0)
            if cut:
                yield f"{line} {word[:cut]}-"
                line = word[cut:]
                continue
        yield line
        line = word
    if line:
        yield line


def _drawn(line: str, fixture: Fixture) -> str:
    if fixture.drawing != "ligatures":
        return line
    for letters, ligature in LIGATURES.items():
        line = line.replace(letters, ligature)
    return line


def _raster(page: Page) -> Image:
    """The page's text drawn into a greyscale image: a scan with no text layer."""
    from PIL import Image, ImageDraw, ImageFont

    scale = 2  # 144 dpi
    image = Image.new("L", (int(PAGE_WIDTH * scale), int(PAGE_HEIGHT * scale)), 255)
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=int(FONT_SIZE * scale))
    y = MARGIN * scale
    for paragraph in page.paragraphs:
        words, line = paragraph.split(), ""
        for word in words:
            candidate = f"{line} {word}" if line else word
            if draw.textlength(candidate, font=font) > (PAGE_WIDTH - 2 * MARGIN) * scale:
                draw.text((MARGIN * scale, y), line, fill=0, font=font)
                y += LEADING * scale
                line = word
            else:
                line = candidate
        draw.text((MARGIN * scale, y), line, fill=0, font=font)
        y += (LEADING + PARAGRAPH_SPACE) * scale
    return image


def _rotate(path: Path) -> None:
    import pypdfium2 as pdfium

    document = pdfium.PdfDocument(str(path))
    try:
        for index in range(len(document)):
            # real pypdfium2 API that typings/pypdfium2 (src's parts only) leaves out: as Any
            cast(Any, document[index]).set_rotation(90)
        rotated = path.with_suffix(".rotated.pdf")
        cast(Any, document).save(str(rotated))  # as above: left out of typings/pypdfium2
    finally:
        document.close()
    rotated.replace(path)


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "pdf-corpus-out")
    made, left_out = build_all(out)
    for name, pdf_path in made.items():
        print(f"{name}: {pdf_path}")
    for name, reason in left_out.items():
        print(f"{name}: skipped ({reason})")
