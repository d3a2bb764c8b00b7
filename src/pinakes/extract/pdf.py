"""The free PDF extractor (pypdfium2, the `[pdf]` extra): the text layer, page by page.

The indexed text is every page's text joined by the declared page separator, with the page spans
recorded, so chunk offsets address this extraction (not the file) and a chunk's pages are looked up
from the spans (spec §4.6). Each page's glyphs and their boxes go through `layout.py` (reading
order across columns, running heads and page numbers stripped, line-end hyphens joined, NFKC).
A page whose native text layer yields fewer non-whitespace characters than the fitted text-yield
floor (`floors.toml`) while it does draw something (an image, a path) has no usable text layer, and
so has a page mostly covered by images whose text layer is short (`partial_text_layer`: a scan
with a stamped header or page number); it is listed in `pages_without_text` rather than passing as
an indexed page that holds only what its text layer says. With the `[ocr]` extra those pages are
read by OCR (extract/ocr_pdf.py); without it the document stays searchable for what its other
pages hold.

What shapes the output is declared in the registry (`EXTRACTORS["pypdfium2"].constants`), so a
change here that changes output must change a constant there, which changes the fingerprint.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes.errors import MissingExtraError, SourceError
from pinakes.extract.file_size import checked_size
from pinakes.extract.floors import load_floors
from pinakes.extract.layout import Glyph, layout_with_heads
from pinakes.extract.registry import EXTRACTORS
from pinakes.extract.types import ExtractedText
from pinakes.faults import faultpoint

if TYPE_CHECKING:
    from pypdfium2 import PdfDocument, PdfPage

BACKEND = "pypdfium2"
# A page pdfium cannot load (a broken or cyclic page tree): a viewer may repair it on opening.
PAGE_UNREADABLE_REMEDY = ("if the PDF opens in a viewer, save or print it again as a new PDF and run `pnk sync`; "
                          "otherwise exclude it in [sources] exclude")
MAX_PDF_BYTES = 500 * 1024 * 1024


def extract(path: Path, source_type: str = "pdf") -> ExtractedText:
    """`extract_in_process` run in a child process under resource limits (`isolation.py`): a crash,
    a hang or a decompression bomb fails this one document with its reason, never the sync."""
    if source_type != "pdf":
        raise ValueError(f"the {BACKEND} extractor handles pdf, not {source_type!r}")
    if importlib.util.find_spec("pypdfium2") is None:  # said here: the child's error would say it less well
        raise MissingExtraError("pdf", "free PDF extraction", missing_module="pypdfium2")
    from pinakes.extract.isolation import Limits, run_isolated

    limits = Limits.for_input(_check_size(path))
    return run_isolated(extract_in_process, path, source_type, limits=limits, what="the PDF parser", path=path,
                        remedy="if the PDF opens in a viewer, report this as a Pinakes bug; otherwise "
                               "re-export it and run `pnk sync`, or exclude it in [sources]")


def extract_in_process(path: Path, source_type: str = "pdf") -> ExtractedText:
    """The parse itself, in the calling process: what `extract` runs in its child. Call it directly
    only where a crash may take the caller down (a benchmark's baseline)."""
    faultpoint("extract.pdf.parse")  # a planted parser crash, for the isolation tests
    if source_type != "pdf":
        raise ValueError(f"the {BACKEND} extractor handles pdf, not {source_type!r}")
    try:
        import pypdfium2 as pdfium
    except ImportError as exc:
        raise MissingExtraError("pdf", "free PDF extraction", missing_module="pypdfium2") from exc

    spec = EXTRACTORS[BACKEND]
    separator = str(spec.constants["page_separator"])
    _check_size(path)
    try:
        document = pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as exc:
        reason = "encrypted (a password is required)" if "password" in str(exc).lower() else f"unreadable ({exc})"
        raise SourceError(f"the PDF is {reason}; not indexed",
                          remedy="export an unencrypted, valid PDF and run `pnk sync`, or exclude it in [sources]",
                          path=path) from exc
    floors = load_floors()
    try:
        read_pages = [_read_page(document, index) for index in range(len(document))]
    except pdfium.PdfiumError as exc:
        raise SourceError(f"pdfium failed to read a page: {exc}; not indexed", remedy=PAGE_UNREADABLE_REMEDY,
                          path=path) from exc
    finally:
        document.close()
    page_texts, heads = layout_with_heads([page.glyphs for page in read_pages],
                                          head_threshold=floors.running_head_threshold)
    without_text = pages_without_text(read_pages, floors.text_yield_floor)

    return ExtractedText.from_pages(page_texts, separator, backend=BACKEND, fingerprint=spec.fingerprint(),
                                    pages_without_text=without_text, running_heads=heads)


# A page whose images cover at least this share of it, and whose text layer holds fewer than
# PARTIAL_LAYER_CHARS characters, is a scan with a little digital text on it (a stamp, a header, a
# page number), not a page of text: its text layer is partial. Measured (bench/ocr_partial_layer.py,
# docs/QUALITY.md "OCR"): a scan stamped with a one-line date holds 26 characters (over the text-yield
# floor, so the floor alone passed it as read) on a page its image covers whole; the same scans with
# their text drawn invisibly over them (an OCR'd PDF) 972 and more; the R manuals' 677 pages draw no
# image at all (the sparsest holds 50 characters).
IMAGE_PAGE_SHARE = 0.5
PARTIAL_LAYER_CHARS = 200


@dataclass(frozen=True, slots=True)
class _Page:
    glyphs: list[Glyph]
    native_chars: int  # non-whitespace characters of the native text layer (the yield)
    draws_something: bool  # any image, path or other non-text object: not a blank page
    image_share: float = 0.0  # the page area its images cover (their bounds' areas summed, at most 1)


def partial_text_layer(page: _Page) -> bool:
    """A scan with a little digital text on it: mostly image, with a short text layer."""
    return page.image_share >= IMAGE_PAGE_SHARE and page.native_chars < PARTIAL_LAYER_CHARS


def pages_without_text(pages: Sequence[_Page], yield_floor: float) -> tuple[int, ...]:
    """1-based numbers of the pages with no usable text layer: under the yield floor while drawing
    something, or with a partial text layer. A page that draws nothing at all is blank, not unread."""
    return tuple(number for number, page in enumerate(pages, 1)
                 if (page.native_chars < yield_floor and page.draws_something) or partial_text_layer(page))


def _read_page(document: PdfDocument, index: int) -> _Page:
    """One page's glyphs with their loose boxes (font ascent to descent, so a line's glyphs share
    a band), in pdfium's order, through the raw API: the helpers cost a Python object per glyph."""
    import pypdfium2.raw as pdfium_c

    page = document[index]
    try:
        draws, image_share = _drawn(page)
        text_page = page.get_textpage()
        try:
            handle = text_page.raw
            box = pdfium_c.FS_RECTF()
            glyphs: list[Glyph] = []
            native = 0
            for number in range(pdfium_c.FPDFText_CountChars(handle)):
                code = pdfium_c.FPDFText_GetUnicode(handle, number)
                char = chr(code) if code < 0x110000 else "\ufffd"
                if char.isspace():
                    glyphs.append((char, 0.0, 0.0, 0.0, 0.0))
                    continue
                native += 1
                pdfium_c.FPDFText_GetLooseCharBox(handle, number, box)
                glyphs.append((char, box.left, box.bottom, box.right, box.top))
        finally:
            text_page.close()
    finally:
        page.close()
    return _Page(glyphs, native, draws, image_share)


def _drawn(page: PdfPage) -> tuple[bool, float]:
    """Whether the page draws anything but text, and the share of its area its images cover."""
    import ctypes

    import pypdfium2.raw as pdfium_c

    draws = False
    image_area = 0.0
    bounds = [ctypes.c_float() for _ in range(4)]
    for number in range(pdfium_c.FPDFPage_CountObjects(page.raw)):
        item = pdfium_c.FPDFPage_GetObject(page.raw, number)
        kind = pdfium_c.FPDFPageObj_GetType(item)
        draws = draws or kind != pdfium_c.FPDF_PAGEOBJ_TEXT
        if kind == pdfium_c.FPDF_PAGEOBJ_IMAGE and pdfium_c.FPDFPageObj_GetBounds(
                item, *(ctypes.byref(value) for value in bounds)):
            left, bottom, right, top = (value.value for value in bounds)
            image_area += max(0.0, right - left) * max(0.0, top - bottom)
    width, height = page.get_size()
    return draws, min(1.0, image_area / (width * height)) if width > 0 and height > 0 else 0.0


def _check_size(path: Path) -> int:
    # An empty file is said before pdfium, whose word for it is "Data format error".
    return checked_size(path, MAX_PDF_BYTES, "PDF", empty=(
        "copy or download the PDF again (an empty file is usually one whose copy was cut short), then run "
        "`pnk sync`; or exclude it in [sources]"))
