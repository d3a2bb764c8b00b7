"""The registered extractors, declared without importing any of them.

A fingerprint is derived from the declared constants (version strings, thresholds, request shape).
Changing a constant that changes output changes the fingerprint, which re-extracts exactly the
documents that extractor produced (sync) and refuses or marks stale queries over them (search).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

import xxhash


@dataclass(frozen=True)
class ExtractorSpec:
    name: str
    paid: bool
    module: str  # imported only when extraction actually runs
    extra: str | None  # the pip extra that provides it; None = always available
    source_types: tuple[str, ...]
    constants: Mapping[str, object] = field(default_factory=dict)

    def fingerprint(self) -> str:
        payload = json.dumps({"name": self.name, **self.constants}, sort_keys=True, default=str)
        return xxhash.xxh3_64_hexdigest(payload.encode())


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
        ),
        ExtractorSpec(
            name="pypdfium2",
            paid=False,
            module="pinakes.extract.pdf",
            extra="pdf",
            source_types=("pdf",),
            # pdf.py: pages joined by page_separator; CRLF -> LF, trailing spaces and controls dropped.
            constants={"version": "1", "page_separator": "\n\n", "normalise": "lf,rstrip,no-controls"},
        ),
        ExtractorSpec(
            name="claude-vision",
            paid=True,
            module="pinakes.extract.claude_vision",
            extra="claude",
            source_types=("pdf",),
            constants={"version": "1", "pages_per_request": 8},
        ),
    )
}

# Names `[extraction] backend` and `pnk sync --extract` accept: the PDF backends.
PDF_BACKENDS = tuple(name for name, spec in EXTRACTORS.items() if "pdf" in spec.source_types)


def current_fingerprint(backend: str) -> str | None:
    """The fingerprint `backend` would stamp today, or None for a name this build does not know."""
    spec = EXTRACTORS.get(backend)
    return spec.fingerprint() if spec else None
