"""Extraction backends (#27): free and paid extraction behind one interface, called by the sync at
its declared points (check, before_rebuild, extend_plan, after_pair, prepare, extract, finish).

What each hook does is asserted through `pnk sync` by tests/test_sync_paid*.py and
tests/test_paid_faults.py; this file pins the shape: which backend a run gets, and that the paid
rows (`pinakes.pipeline.paid_state`, `paid_planning`, `paid_extraction`, `paid_carry`) are reached only
through `pinakes.pipeline.backends`, never by ad-hoc calls from the engine or a stage.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pinakes.manifest import Manifest, load_manifest
from pinakes.pipeline.backends import FreeExtraction, PaidExtraction, backend_for
from pinakes.sync import SyncOptions
from tests.test_layers import SRC, import_edges

DEMO_MANIFEST = Path(__file__).resolve().parent / "demo-kb" / "pinakes.toml"
PAID_ROWS = "pinakes.pipeline.paid_"  # the modules of the paid rows, by the prefix of their names
BACKENDS = "pinakes.pipeline.backends"
# Run-time importers of the paid rows besides the backends, each with its reason.
ALSO_IMPORT_THE_PAID_ROWS = {
    "pinakes.sync.estimate": "FREE_PDF_BACKEND: --estimate-only prices what a paid sync would pay for",
}


def with_backend(manifest: Manifest, backend: str) -> Manifest:
    return replace(manifest, extraction=replace(manifest.extraction, backend=backend))


def test_the_paid_rows_are_reached_only_through_the_extraction_backend() -> None:
    importers = {edge.importer: edge.where for edge in import_edges(SRC) if edge.imported.startswith(PAID_ROWS)}
    assert BACKENDS in importers
    stray = {module: where for module, where in importers.items()
             if module != BACKENDS and not module.startswith(PAID_ROWS) and module not in ALSO_IMPORT_THE_PAID_ROWS}
    assert stray == {}, f"call the paid rows through pinakes.pipeline.backends, not directly: {stray}"


@pytest.mark.parametrize(("manifest_backend", "extract", "expected", "pdf_backend"), [
    ("pypdfium2", None, FreeExtraction, "pypdfium2"),
    ("pypdfium2", "claude-vision", PaidExtraction, "claude-vision"),
    ("claude-vision", None, PaidExtraction, "claude-vision"),
    ("claude-vision", "pypdfium2", FreeExtraction, "pypdfium2"),
])
def test_extract_chooses_the_backend_for_the_run_else_the_manifest_does(
        manifest_backend: str, extract: str | None, expected: type, pdf_backend: str) -> None:
    manifest = with_backend(load_manifest(DEMO_MANIFEST), manifest_backend)
    backend = backend_for(manifest, SyncOptions(extract_backend=extract))
    assert type(backend) is expected and backend.pdf_backend == pdf_backend
