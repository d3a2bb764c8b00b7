"""The free PDF extractor (pypdfium2, the `[pdf]` extra): the text layer, page by page.

The indexed text is every page's text joined by the declared page separator, with the page spans
recorded, so chunk offsets address this extraction (not the file) and a chunk's pages are looked up
from the spans (spec §4.6). pdfium's CRLF line breaks become LF, trailing spaces and control
characters are dropped; nothing else is changed. A scanned, image-only page yields no text: the
free path has no OCR (spec §9), so such a PDF indexes honestly as (nearly) empty.

What shapes the output is declared in the registry (`EXTRACTORS["pypdfium2"].constants`), so a
change here that changes output must change a constant there, which changes the fingerprint.
"""

from __future__ import annotations

import re
from pathlib import Path

from pinakes.errors import MissingExtraError, SourceError
from pinakes.extract.registry import EXTRACTORS
from pinakes.extract.types import ExtractedText

BACKEND = "pypdfium2"
MAX_PDF_BYTES = 500 * 1024 * 1024
# C0/C1 controls other than tab and newline, and the noncharacters pdfium uses for unmapped glyphs.
_NOISE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ufffe\uffff]")
_TRAILING_SPACE = re.compile(r"[ \t]+$", re.MULTILINE)


def extract(path: Path, source_type: str = "pdf") -> ExtractedText:
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
                          remedy="export an unencrypted, valid PDF, or exclude it in [sources]", path=path) from exc
    try:
        page_texts = [_page_text(document, index) for index in range(len(document))]
    except pdfium.PdfiumError as exc:
        raise SourceError(f"pdfium failed to read a page: {exc}; not indexed", path=path) from exc
    finally:
        document.close()

    parts: list[str] = []
    spans: list[tuple[int, int]] = []
    position = 0
    for number, page_text in enumerate(page_texts):
        if number:
            parts.append(separator)
            position += len(separator)
        spans.append((position, position + len(page_text)))
        parts.append(page_text)
        position += len(page_text)
    return ExtractedText(text="".join(parts), pages=tuple(spans), backend=BACKEND, fingerprint=spec.fingerprint())


def _page_text(document: object, index: int) -> str:
    page = document[index]  # type: ignore[index]
    try:
        text_page = page.get_textpage()
        try:
            raw = text_page.get_text_bounded()
        finally:
            text_page.close()
    finally:
        page.close()
    text = raw.replace("\r\n", "\n").replace("\r", "\n")
    return _TRAILING_SPACE.sub("", _NOISE.sub("", text)).strip("\n")


def _check_size(path: Path) -> None:
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise SourceError(f"cannot read the file: {exc.strerror or exc}", path=path) from exc
    if size > MAX_PDF_BYTES:
        raise SourceError(f"the PDF is {size:,} bytes, over the {MAX_PDF_BYTES:,}-byte limit; not indexed",
                          remedy="split it, or exclude it in [sources]", path=path)
