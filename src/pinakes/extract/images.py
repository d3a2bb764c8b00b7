"""Images as documents (PNG, JPEG, TIFF, WebP), read by OCR: the `rapidocr` extractor (`[ocr]`).

An image is a paged document: one page per frame (a multi-page TIFF's pages; one for every other
image), joined by the declared page separator with each page's span recorded, so a citation names
its page and `pnk get` returns exactly the indexed text, as for a PDF. Each frame is turned upright
as its EXIF orientation says, then read by the pinned models in an isolated worker (`ocr.py`); the
lines go through layout.py's reading order (`ocr_layout.py`). A file over `MAX_IMAGE_BYTES`, or whose
header declares more than `ocr_engine.MAX_PIXELS` pixels on any frame (a decompression bomb), is
refused before a pixel is decoded, with a failure of its own: the sync goes on.

A frame OCR finds no text on (a photograph) is listed in `pages_without_text`, as a PDF's scanned
page is: indexed as empty, never passed off as read.
"""

from __future__ import annotations

from pathlib import Path

from pinakes.extract.file_size import checked_size
from pinakes.extract.floors import load_floors
from pinakes.extract.isolation import Limits, run_isolated
from pinakes.extract.ocr import OCR_REMEDY, OCR_SLOTS, read_pages
from pinakes.extract.ocr_engine import probe_image, read_image_frame
from pinakes.extract.ocr_layout import layout_pages
from pinakes.extract.ocr_models import require_ocr
from pinakes.extract.registry import EXTRACTORS
from pinakes.extract.types import ExtractedText

BACKEND = "rapidocr"
MAX_IMAGE_BYTES = 200 * 1024 * 1024


def extract(path: Path, source_type: str = "image") -> ExtractedText:
    """Every frame of the image at `path`, read by OCR (see the module docstring)."""
    if source_type != "image":
        raise ValueError(f"the {BACKEND} extractor handles image, not {source_type!r}")
    require_ocr("reading images (OCR)")
    size = _check_size(path)
    info = run_isolated(probe_image, path, limits=Limits.for_input(size), what="the image decoder", path=path,
                        remedy=OCR_REMEDY, slot=OCR_SLOTS[0])
    pages = read_pages(path, [(read_image_frame, (path, frame)) for frame in range(info.frames)],
                       what="OCR of the image")
    floors = load_floors()
    texts, heads = layout_pages(pages, head_threshold=floors.running_head_threshold)
    unread = tuple(number for number, text in enumerate(texts, 1)
                   if sum(1 for char in text if not char.isspace()) < floors.text_yield_floor)
    spec = EXTRACTORS[BACKEND]
    return ExtractedText.from_pages(texts, str(spec.constants["page_separator"]), backend=BACKEND,
                                    fingerprint=spec.fingerprint(), pages_without_text=unread, running_heads=heads)


def _check_size(path: Path) -> int:
    return checked_size(path, MAX_IMAGE_BYTES, "image", too_large="scale it down or split it, or exclude it in [sources]",
                        empty="copy the image again (an empty file is usually one whose copy was cut short), "
                              "then run `pnk sync`; or exclude it in [sources]")
