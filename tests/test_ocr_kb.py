"""A KB of scans and images, through the real sync with free OCR (the `[ocr]` extra): every file
real, made here (a typeset PDF drawn with fpdf2 and rendered with pypdfium2 into an image-only PDF;
PNG, JPEG with an EXIF rotation, a two-page TIFF, WebP drawn with Pillow; a decompression bomb).

What it proves: each is searchable with a citation naming its page (a TIFF's frame), `pnk get`
returns exactly each cited span, two columns are read one after the other, a bomb fails alone with
a clear error, a rerun reads nothing again, and a changed OCR setting re-reads only the scanned
pages (a PDF with a text layer is neither parsed nor OCR'd again)."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import pytest

pytest.importorskip("pypdfium2", reason="PDF rendering needs the [pdf] extra (pypdfium2)")
pytest.importorskip("fpdf", reason="the typeset PDF is drawn with fpdf2 (the [dev] extra)")

from PIL import Image

from pinakes.cli import main
from pinakes.extract import ocr as ocr_module
from pinakes.extract import ocr_models, pdf
from pinakes.extract.ocr import PageCall
from pinakes.extract.ocr_engine import OcrPage
from pinakes.extract.registry import EXTRACTORS
from pinakes.extract.types import ExtractedText
from pinakes.pipeline.report import SyncReport
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.ocr_helpers import image_only_pdf, render_pages, text_image
from tests.test_ocr import bomb_png
from tests.test_serve_helpers import doc_ids, make_kb, manifest_fake_embedder

pytestmark = [pytest.mark.heavy,
              pytest.mark.skipif(not ocr_models.ocr_installed(), reason="OCR needs the [ocr] extra (rapidocr)")]

TYPES = 'types = ["markdown", "text", "code", "pdf", "image"]'


def typeset_pdf(path: Path, pages: list[list[str]]) -> Path:
    from fpdf import FPDF

    document = FPDF(unit="pt", format="letter")
    document.set_font("Helvetica", size=14)
    for lines in pages:
        document.add_page()
        for number, text in enumerate(lines):
            document.text(72, 100 + 24 * number, text)
    document.output(str(path))
    return path


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_kb(tmp_path_factory.mktemp("ocr") / "kb", "ocr", {"notes.md": "# Notes\nA plain note.\n"})
    manifest = root / "pinakes.toml"
    text, replaced = re.subn(r"^types = .*$", TYPES, manifest.read_text(), count=1, flags=re.M)
    assert replaced, "pnk init writes [sources] types"
    manifest.write_text(text)  # images are opt-in
    docs = root / "docs"
    typeset = typeset_pdf(root / "typeset.pdf", [["The lighthouse keeper logged every storm."],
                                                 ["The harbour crane lifted granite blocks."]])
    image_only_pdf(docs / "scan.pdf", render_pages(typeset, [0, 1]))
    typeset_pdf(docs / "layer.pdf", [["This report has a real text layer about dredging."]])
    text_image(["A receipt for seventeen oranges."]).save(docs / "receipt.png")
    upright = text_image(["Turned photograph of a whiteboard agenda."])
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 clockwise to display": the pixels are stored turned
    upright.rotate(90, expand=True).convert("RGB").save(docs / "photo.jpg", exif=exif)
    frames = [text_image(["First frame mentions the ferry timetable."]),
              text_image(["Second frame mentions the customs ledger."])]
    frames[0].save(docs / "fax.tif", save_all=True, append_images=frames[1:])
    text_image(["A WebP screenshot about tidal charts."]).save(docs / "shot.webp", lossless=True)
    text_image([], columns=[["west column opens", "west column middle", "west column closes"],
                            ["east column opens", "east column middle", "east column closes"]]
               ).save(docs / "columns.png")
    bomb_png(docs / "bomb.png", 40_000, 40_000)
    return root


def sync(root: Path, **options: Any) -> SyncReport:
    return run_sync(root, SyncOptions(**options), embedder=manifest_fake_embedder(root))


@pytest.fixture(scope="module")
def first_report(kb: Path) -> SyncReport:
    return sync(kb)


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    capsys.readouterr()
    main(list(argv))
    return json.loads(capsys.readouterr().out)


def test_the_bomb_fails_alone_with_a_clear_error_and_everything_else_is_indexed(
        kb: Path, first_report: SyncReport) -> None:
    failures = {failure.path: failure for failure in first_report.failures}
    assert set(failures) == {"docs/bomb.png"}
    assert "pixel limit" in failures["docs/bomb.png"].error and "decompression bomb" in failures["docs/bomb.png"].error
    assert set(doc_ids(kb)) == {"docs/notes.md", "docs/scan.pdf", "docs/layer.pdf", "docs/receipt.png",
                                "docs/photo.jpg", "docs/fax.tif", "docs/shot.webp", "docs/columns.png"}
    assert first_report.pages_without_text == {}


@pytest.mark.parametrize(("query", "path", "page", "words"), [
    ("lighthouse keeper", "docs/scan.pdf", 1, "lighthouse keeper logged every storm"),
    # (the tiny recogniser reads this twice-resampled "lifted" as "lfted", sure of it: docs/QUALITY.md)
    ("granite crane", "docs/scan.pdf", 2, "granite blocks"),
    ("seventeen oranges", "docs/receipt.png", 1, "receipt for seventeen oranges"),
    ("whiteboard agenda", "docs/photo.jpg", 1, "photograph of a whiteboard agenda"),  # EXIF honoured
    ("ferry timetable", "docs/fax.tif", 1, "ferry timetable"),
    ("customs ledger", "docs/fax.tif", 2, "customs ledger"),  # a TIFF's second frame is page 2
    ("tidal charts", "docs/shot.webp", 1, "tidal charts"),
])
def test_each_scan_and_image_is_cited_by_page_and_get_returns_the_cited_span(
        kb: Path, first_report: SyncReport, capsys: pytest.CaptureFixture[str], query: str, path: str, page: int,
        words: str) -> None:
    found = run_json(capsys, "-C", str(kb), "search", query, "--mode", "bm25", "--json")
    passages: list[dict[str, Any]] = [
        p for p in cast(list[object], found["passages"]) if isinstance(p, dict) and p["path"] == path]
    assert passages, found
    passage = passages[0]
    assert passage["page_start"] <= page <= passage["page_end"] and passage["citation"].startswith(f"{path}:p")
    assert words in " ".join(str(passage["text"]).lower().split())
    got = run_json(capsys, "-C", str(kb), "get", str(passage["doc_id"]), "--range",
                   f"{passage['char_start']}-{passage['char_end']}", "--json")
    assert got["text"] == passage["text"]
    # The page the words are on is the page the text's spans say (short pages share a chunk).
    on_page = run_json(capsys, "-C", str(kb), "get", str(passage["doc_id"]), "--pages", str(page), "--json")
    assert words in " ".join(str(on_page["text"]).lower().split())


def test_two_columns_of_an_image_are_read_one_after_the_other(kb: Path, first_report: SyncReport,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    got = run_json(capsys, "-C", str(kb), "get", doc_ids(kb)["docs/columns.png"], "--json")
    words = " ".join(str(got["text"]).lower().split())
    assert words.index("west column closes") < words.index("east column opens")


@pytest.fixture
def counted_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, list[object]]]:
    """Every text-layer parse and every page sent to OCR, by file name."""
    reads: dict[str, list[object]] = {"text layer": [], "ocr": []}
    parse, read_pages = pdf.extract, ocr_module.read_pages

    def counting_parse(path: Path, source_type: str = "pdf") -> ExtractedText:
        reads["text layer"].append(path.name)
        return parse(path, source_type)

    def counting_read(path: Path, calls: Sequence[PageCall], **kwargs: Any) -> list[OcrPage]:
        reads["ocr"].extend((path.name, args[-1]) for _, args in calls)
        return read_pages(path, calls, **kwargs)

    monkeypatch.setattr(pdf, "extract", counting_parse)
    monkeypatch.setattr(ocr_module, "read_pages", counting_read)
    import pinakes.extract.images as images
    import pinakes.extract.ocr_pdf as ocr_pdf

    monkeypatch.setattr(images, "read_pages", counting_read)
    monkeypatch.setattr(ocr_pdf, "read_pages", counting_read)
    yield reads


def test_a_rerun_reads_nothing_and_a_changed_ocr_setting_rereads_only_the_scanned_pages(
        kb: Path, first_report: SyncReport, counted_reads: dict[str, list[object]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    rerun = sync(kb, rebuild=True)  # even a rebuild: everything comes from the extraction cache
    assert counted_reads == {"text layer": [], "ocr": []}
    assert {f.path for f in rerun.failures} == {"docs/bomb.png"}

    ocr = EXTRACTORS["rapidocr"]
    monkeypatch.setitem(EXTRACTORS, "rapidocr", dataclasses.replace(ocr, constants={**ocr.constants, "render_dpi": 120}))
    changed = sync(kb)
    assert counted_reads["text layer"] == []  # neither PDF is parsed again: its text layer is cached
    scanned = sorted(map(tuple, cast(list[tuple[str, int]], counted_reads["ocr"])))  # (name, page) pairs
    assert scanned == sorted([("scan.pdf", 0), ("scan.pdf", 1), ("receipt.png", 0), ("photo.jpg", 0),
                              ("fax.tif", 0), ("fax.tif", 1), ("shot.webp", 0), ("columns.png", 0)])
    assert {f.path for f in changed.failures} == {"docs/bomb.png"}
