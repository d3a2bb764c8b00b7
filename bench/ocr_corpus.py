"""The scanned-PDF development corpus for OCR, built on the machine from the R manuals (#43).

Nothing of the manuals is committed: this script is how the corpus is made. From each PDF of
`../shared/corpora/r-manuals-pdf/docs` it takes `PAGES_PER_MANUAL` pages at fixed places (the third
page, which in these Texinfo manuals is the dense table of contents with its dot leaders, and pages
at 40% and 75% of the book), and writes, under the cache directory:

- `<manual>.text.pdf`: those pages as they are (their text layer): the baseline's input;
- `<manual>.scan.pdf`: the same pages rendered at 150 dpi in grayscale with pypdfium2 and saved as
  image-only pages (no text layer at all): what OCR reads;
- `<manual>.truth.json`: each page's text layer as pdfium reports it (NFKC), the truth OCR is scored
  against: running heads and page numbers included, since they are on the scanned page too.

    python bench/ocr_corpus.py [--cache DIR] [--pages-per-manual 3]

The default cache is `bench/results/ocr-corpus` (ignored by git). Building is deterministic and
skipped when the files are there; it takes a few seconds.
"""

from __future__ import annotations

import argparse
import json
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

REPO = Path(__file__).resolve().parent.parent
MANUALS = REPO.parent / "shared" / "corpora" / "r-manuals-pdf" / "docs"
DEFAULT_CACHE = REPO / "bench" / "results" / "ocr-corpus"
DPI = 150
PAGES_PER_MANUAL = 3
_PLACES = (None, 0.40, 0.75, 0.20, 0.55, 0.90)  # None: the third page (the table of contents)


@dataclass(frozen=True)
class ScannedManual:
    name: str
    text_pdf: Path
    scan_pdf: Path
    pages: tuple[int, ...]  # 0-based page indices in the original manual
    truth: tuple[str, ...]  # per page


def page_indices(count: int, wanted: int) -> tuple[int, ...]:
    chosen: list[int] = []
    for place in _PLACES[:wanted]:
        index = min(2, count - 1) if place is None else int(count * place)
        if index not in chosen:
            chosen.append(index)
    return tuple(chosen)


def build(cache: Path = DEFAULT_CACHE, pages_per_manual: int = PAGES_PER_MANUAL,
          manuals: Path = MANUALS) -> list[ScannedManual]:
    import pypdfium2 as pdfium

    cache.mkdir(parents=True, exist_ok=True)
    built: list[ScannedManual] = []
    for source in sorted(manuals.glob("*.pdf")):
        name = source.stem
        text_pdf, scan_pdf = cache / f"{name}.text.pdf", cache / f"{name}.scan.pdf"
        truth_file = cache / f"{name}.truth.json"
        if truth_file.is_file() and text_pdf.is_file() and scan_pdf.is_file():
            recorded = json.loads(truth_file.read_text(encoding="utf-8"))
            if recorded["dpi"] == DPI and len(recorded["pages"]) == min(pages_per_manual, len(_PLACES)):
                built.append(ScannedManual(name, text_pdf, scan_pdf, tuple(recorded["pages"]), tuple(recorded["truth"])))
                continue
        document = pdfium.PdfDocument(str(source))
        try:
            pages = page_indices(len(document), pages_per_manual)
            truth: list[str] = []
            images: list[Any] = []  # PIL images
            for index in pages:
                page = document[index]
                text_page = page.get_textpage()
                truth.append(unicodedata.normalize("NFKC", text_page.get_text_range()))
                text_page.close()
                # to_pil(): real pypdfium2 API that typings/pypdfium2 (src's parts only) leaves out
                bitmap: Any = page.render(scale=DPI / 72, grayscale=True)
                images.append(bitmap.to_pil())
                page.close()
            # new(): real pypdfium2 API that typings/pypdfium2 (src's parts only) leaves out
            subset = cast(Any, pdfium.PdfDocument).new()
            subset.import_pages(document, list(pages))
            subset.save(str(text_pdf))
            subset.close()
        finally:
            document.close()
        first, *rest = images
        first.save(scan_pdf, "PDF", resolution=DPI, save_all=True, append_images=rest)
        truth_file.write_text(json.dumps({"source": source.name, "dpi": DPI, "pages": list(pages), "truth": truth},
                                         ensure_ascii=False), encoding="utf-8")
        built.append(ScannedManual(name, text_pdf, scan_pdf, pages, tuple(truth)))
    return built


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--pages-per-manual", type=int, default=PAGES_PER_MANUAL)
    args = parser.parse_args()
    if not MANUALS.is_dir():
        print(f"ocr_corpus skipped: the R manuals are not at {MANUALS}")
        return 0
    corpus = build(args.cache, args.pages_per_manual)
    print(f"{sum(len(m.pages) for m in corpus)} pages of {len(corpus)} manuals under {args.cache}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
