"""A PDF's pages with no usable text layer, read by OCR on the free path (the `[ocr]` extra).

The free PDF extractor (pdf.py) reads every page's text layer and lists the pages that have none
(`pages_without_text`: under the fitted text-yield floor while drawing something, a scan). When OCR
is installed those pages, and only those, are rendered at the OCR's dpi and read (`ocr.py`); their
text takes the place of the empty text layer, laid out by the same layout.py steps among themselves
(reading order, running heads, hyphens), and the document is stamped with the PDF extractor's
`ocr_fingerprint()` (both fingerprints folded). A page OCR finds nothing on either (a photograph, a
blank scan) stays listed in `pages_without_text`.

Two cache entries, so nothing is read twice and a change reads only what it touches: the text-layer
extraction under the PDF extractor's own fingerprint (as before OCR existed), and the merged one
under the OCR fingerprint. A rerun hits the merged entry; an OCR change (another dpi, other models,
a new Pinakes) misses it and re-reads only the scanned pages, the text layer coming from its own
entry; a PDF with a full text layer never reaches OCR at all. Without the extra, a merged entry
already made is still used (reading it needs no OCR); otherwise the pages stay reported unread.

The rule for a page with a partial text layer — some text, above the floor — is to keep its text
layer and not OCR it: measured on the development corpus (docs/QUALITY.md "OCR"), the pages over the
floor are pages with a real text layer, and OCR reading them would only add its errors.
"""

from __future__ import annotations

from pathlib import Path

from pinakes.extract import ocr_models
from pinakes.extract.cache import ExtractCache
from pinakes.extract.floors import load_floors
from pinakes.extract.layout import MAX_KEPT_HEADS
from pinakes.extract.ocr import read_pages
from pinakes.extract.ocr_engine import read_pdf_page
from pinakes.extract.ocr_layout import layout_pages
from pinakes.extract.registry import EXTRACTORS
from pinakes.extract.types import ExtractedText


def complete_with_ocr(text_layer: ExtractedText, path: Path, content_hash: str, cache: ExtractCache,
                      *, label: str | None = None) -> ExtractedText:
    """`text_layer` with its pages without text read by OCR, from the cache when read before; the
    text layer itself when it has no such page, when its extractor has no OCR, or when OCR is not
    installed and never read this document."""
    spec = EXTRACTORS.get(text_layer.backend)
    fingerprint = spec.ocr_fingerprint() if spec is not None else None
    if fingerprint is None or spec is None or not text_layer.pages_without_text or text_layer.pages is None:
        return text_layer
    hit = cache.get(content_hash, fingerprint)
    if hit is not None:
        return hit.extracted
    if not ocr_models.ocr_installed():
        return text_layer
    merged = read_scanned_pages(text_layer, path, fingerprint, label=label)
    cache.put(content_hash, merged, paid=False)
    return merged


def read_scanned_pages(text_layer: ExtractedText, path: Path, fingerprint: str, *,
                       label: str | None = None) -> ExtractedText:
    """Read `text_layer.pages_without_text` by OCR and put their text in place."""
    assert text_layer.pages is not None  # a PDF's extraction is paged
    numbers = text_layer.pages_without_text
    floors = load_floors()
    pages = read_pages(path, [(read_pdf_page, (path, number - 1)) for number in numbers],
                       what="OCR of the PDF's scanned pages", label=label)
    texts, heads = layout_pages(pages, head_threshold=floors.running_head_threshold)
    page_texts = [text_layer.text[start:end] for start, end in text_layer.pages]
    for number, text in zip(numbers, texts, strict=True):
        page_texts[number - 1] = text
    unread = tuple(number for number, text in zip(numbers, texts, strict=True)
                   if sum(1 for char in text if not char.isspace()) < floors.text_yield_floor)
    separator = str(EXTRACTORS[text_layer.backend].constants["page_separator"])
    kept_heads = tuple(dict.fromkeys((*text_layer.running_heads, *heads)))[:MAX_KEPT_HEADS]
    return ExtractedText.from_pages(page_texts, separator, backend=text_layer.backend, fingerprint=fingerprint,
                                    pages_without_text=unread, running_heads=kept_heads)
