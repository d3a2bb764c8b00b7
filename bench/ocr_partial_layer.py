"""The measurement behind the rule for a page with a partial text layer (#43): which pages the free
PDF extractor sends to OCR (`pdf.pages_without_text`, `pdf.partial_text_layer`).

Three kinds of page, each through the extractor's own page reader (`pdf._read_page`):

- every page of the R manuals (typeset, a full text layer): none may be sent to OCR;
- "stamped scans": the OCR corpus's scanned pages (bench/ocr_corpus.py) with one line of real text
  added on top, as a scanner or a PDF tool stamps a date or "page 3 of 12": their text layer passes
  the text-yield floor but holds none of the page's body, so OCR must read them;
- "OCR'd scans": the same scanned pages with the page's whole text drawn invisibly over the image,
  as an OCR'd PDF carries it: their text layer is the page's text, so OCR must leave them alone.

For each, the characters of the text layer and the share of the page its images cover.

    python bench/ocr_partial_layer.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))


def read_pages(path: Path) -> list[object]:
    import pypdfium2 as pdfium

    from pinakes.extract.pdf import _read_page  # pyright: ignore[reportPrivateUsage]  # the extractor's own page reader

    document = pdfium.PdfDocument(str(path))
    try:
        return [_read_page(document, index) for index in range(len(document))]
    finally:
        document.close()


def made_scans(corpus: Sequence[Any], scratch: Path, invisible: bool) -> Path:
    """Each scanned page of the corpus with a stamp (or, `invisible`, its whole text layer) on top."""
    import pypdfium2 as pdfium
    from fpdf import FPDF
    from fpdf.enums import TextMode

    pdf = FPDF(unit="pt", format="letter")
    pdf.set_auto_page_break(False)
    for manual in corpus:
        document = pdfium.PdfDocument(str(manual.scan_pdf))
        for index, truth in enumerate(manual.truth):
            bitmap = cast(Any, document[index].render(scale=1, grayscale=True))  # typings/pypdfium2 lacks to_pil
            image = bitmap.to_pil()
            pdf.add_page()
            pdf.image(image, x=0, y=0, w=612, h=792)
            pdf.set_font("Helvetica", size=9)
            if invisible:
                pdf.text_mode = TextMode.INVISIBLE
                pdf.set_xy(40, 40)
                pdf.multi_cell(530, 11, truth.encode("latin-1", "replace").decode("latin-1"))
                pdf.text_mode = TextMode.FILL
            else:
                pdf.text(40, 30, f"Scanned 2026-03-01, page {index + 1} of {len(manual.truth)}")
        document.close()
    path = scratch / ("ocrd.pdf" if invisible else "stamped.pdf")
    pdf.output(str(path))
    return path


def summary(pages: list[Any], yield_floor: float) -> dict[str, object]:
    from pinakes.extract.pdf import pages_without_text

    chars = sorted(page.native_chars for page in pages)
    shares = sorted(page.image_share for page in pages)
    return {"pages": len(pages), "sent_to_ocr": len(pages_without_text(pages, yield_floor)),
            "text_layer_chars": {"min": chars[0], "median": chars[len(chars) // 2], "max": chars[-1]},
            "image_share": {"min": round(shares[0], 3), "max": round(shares[-1], 3)}}


def main() -> int:
    import ocr_corpus

    from pinakes.extract.floors import load_floors

    if not ocr_corpus.MANUALS.is_dir():
        print(f"ocr_partial_layer skipped: the R manuals are not at {ocr_corpus.MANUALS}")
        return 0
    floor = load_floors().text_yield_floor
    corpus = ocr_corpus.build()
    manuals = [page for path in sorted(ocr_corpus.MANUALS.glob("*.pdf")) for page in read_pages(path)]
    with tempfile.TemporaryDirectory() as scratch:
        stamped = read_pages(made_scans(corpus, Path(scratch), invisible=False))
        ocrd = read_pages(made_scans(corpus, Path(scratch), invisible=True))
    print(json.dumps({"text_yield_floor": floor, "r_manuals": summary(manuals, floor),
                      "stamped_scans": summary(stamped, floor), "ocrd_scans": summary(ocrd, floor)}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
