"""The registered extractors, declared without importing any of them.

A fingerprint is derived from the declared constants (version strings, thresholds, request shape).
Changing a constant that changes output changes the fingerprint, which re-extracts exactly the
documents that extractor produced (sync) and refuses or marks stale queries over them (search).

An extractor whose pages may have no text layer names the OCR extractor that reads them (`ocr`): a
document with such pages is stamped with `ocr_fingerprint()`, which folds both fingerprints, so an
OCR change re-reads the scanned documents and nothing else (extract/ocr_pdf.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

import xxhash

from pinakes.extract.ocr_models import DETECTION, OCR_DISTRIBUTION, RECOGNITION


@dataclass(frozen=True)
class ExtractorSpec:
    name: str
    paid: bool
    module: str  # imported only when extraction actually runs
    extra: str | None  # the pip extra that provides it; None = always available
    source_types: tuple[str, ...]
    constants: Mapping[str, str | int] = field(default_factory=dict[str, str | int])
    # Its output also depends on the floors fitted from the PDF corpus (extract/floors.toml): they
    # join the fingerprint, so a re-fit re-extracts, and a missing file fails here, at first use.
    fitted_floors: bool = False
    # Its results go to the extraction cache (extract/cache.py), which `pnk get` reads them back from:
    # every extractor but the text one, whose source file is its own indexed text.
    cached: bool = True
    # The extractor (a key of EXTRACTORS) that reads this one's pages with no usable text layer.
    ocr: str | None = None

    def fingerprint(self, model: str | None = None) -> str:
        """`model`: the model a paid backend is set to call (`[extraction] model`), which shapes its
        text as much as its prompt does; None, or a backend that calls no model, uses the declared one.
        The declared model's fingerprint is the one every KB that never set the key was extracted under."""
        constants: dict[str, object] = dict(self.constants)
        if model is not None and "model" in constants:
            constants["model"] = model
        if self.fitted_floors:
            from pinakes.extract.floors import load_floors

            constants["floors"] = load_floors().fingerprint_values()
        payload = json.dumps({"name": self.name, **constants}, sort_keys=True, default=str)
        return xxhash.xxh3_64_hexdigest(payload.encode())

    def ocr_fingerprint(self) -> str | None:
        """The fingerprint of a document some of whose pages `ocr` read: this extractor's and the
        OCR's together. None for an extractor without OCR."""
        if self.ocr is None:
            return None
        return xxhash.xxh3_64_hexdigest(f"{self.fingerprint()}+{EXTRACTORS[self.ocr].fingerprint()}".encode())

    def is_current(self, fingerprint: str) -> bool:
        """Whether `fingerprint` is one this build stamps today (spec §4.4's coherence check). A paid
        backend's model is a setting, not a version: an extraction made with any model the price table
        prices (every one `[extraction] model` accepts) is current, never "extracted by an older version"."""
        if fingerprint == self.fingerprint() or fingerprint == self.ocr_fingerprint():
            return True
        if "model" not in self.constants:
            return False
        from pinakes.budget.errors import PriceTableError
        from pinakes.budget.prices import load_prices

        try:
            models = load_prices().models
        except PriceTableError:
            return False
        return any(fingerprint == self.fingerprint(model) for model in models)


# Versions of what the document formats share: the Markdown they are written as, the HTML walk, and the
# zip and XML limits past which a container is refused (extract/archives.py).
BLOCKS = "1"
HTML_WALK = "1"
ZIP_LIMITS = "1"

EXTRACTORS: dict[str, ExtractorSpec] = {
    spec.name: spec
    for spec in (
        ExtractorSpec(
            name="text",
            paid=False,
            module="pinakes.extract.text",
            extra=None,
            source_types=("markdown", "text", "code"),
            constants={"version": "1", "encoding": "utf-8-strict", "binary_sniff_bytes": 8192},
            cached=False,
        ),
        ExtractorSpec(
            name="pypdfium2",
            paid=False,
            module="pinakes.extract.pdf",
            extra="pdf",
            source_types=("pdf",),
            # pdf.py: glyph geometry through layout.py (reading order, running heads, hyphens, NFKC);
            # pages joined by page_separator. LAYOUT_VERSION is layout.py's; keep the two in step.
            # version 3: a page with a partial text layer (pdf.partial_text_layer) is a page without text.
            constants={"version": "3", "page_separator": "\n\n", "layout": "2", "partial_text_layer": "0.5/200"},
            fitted_floors=True,
            ocr="rapidocr",
        ),
        ExtractorSpec(
            name="rapidocr",
            paid=False,
            module="pinakes.extract.images",
            extra="ocr",
            source_types=("image",),
            # extract/ocr*.py: pages rendered at render_dpi (a PDF's) or decoded (an image's frames,
            # EXIF orientation applied), read by the pinned models with the settings below, the lines
            # laid out by layout.py (layout is its LAYOUT_VERSION); pages joined by page_separator.
            constants={"version": "1", "engine": OCR_DISTRIBUTION, "det_sha256": DETECTION.sha256,
                       "rec_sha256": RECOGNITION.sha256, "render_dpi": 150, "det_limit_side": 1280, "rec_batch": 1,
                       "text_score": "0.5", "direction_classifier": "off", "page_separator": "\n\n",
                       "layout": "2"},
            fitted_floors=True,
        ),
        ExtractorSpec(
            name="claude-vision",
            paid=True,
            module="pinakes.extract.claude_vision",
            extra="claude",
            source_types=("pdf",),
            # The request shape (claude_vision.py): what one request sends and asks for. Each value
            # shapes the text, so each is in the fingerprint; `request_shape` versions the prompt,
            # the output schema and the rendering (grayscale PNG, longer side <= max_edge_px).
            constants={"version": "1", "request_shape": "1", "pages_per_request": 8,
                       "model": "claude-opus-5-5", "max_edge_px": 1568},
        ),
        # The document formats (issue #43): each written as Markdown (extract/blocks.py, BLOCKS) and
        # chunked as Markdown is. An EPUB's chapters go through the HTML walk (extract/html_text.py,
        # HTML_WALK), so a change to the walk re-extracts both.
        *(ExtractorSpec(name=name, paid=False, module=f"pinakes.extract.{name}", extra="formats",
                        source_types=(name,), constants={"version": "1", "blocks": BLOCKS, **walk})
          for name, walk in (("html", {"walk": HTML_WALK}), ("epub", {"walk": HTML_WALK, "zip": ZIP_LIMITS}),
                             ("docx", {"zip": ZIP_LIMITS}), ("odt", {"zip": ZIP_LIMITS}))),
    )
}

# Names `[extraction] backend` and `pnk sync --extract` accept: the PDF backends.
PDF_BACKENDS = tuple(name for name, spec in EXTRACTORS.items() if "pdf" in spec.source_types)


def current_fingerprint(backend: str) -> str | None:
    """The fingerprint `backend` would stamp today, or None for a name this build does not know."""
    spec = EXTRACTORS.get(backend)
    return spec.fingerprint() if spec else None
