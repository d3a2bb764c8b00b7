"""The scored PDF corpus (tests/pdf-corpus): the gate passes on the shipped code, catches a planted
regression, re-fits the shipped floors; pages without a text layer are reported end to end; the
floors are required at startup; the real R manuals when ../shared has them."""

from __future__ import annotations

import importlib
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pypdfium2", reason="PDF extraction needs the [pdf] extra (pypdfium2)")
pytest.importorskip("fpdf", reason="the PDF corpus is drawn with fpdf2 (the [dev] extra)")

from pinakes.cli import main
from pinakes.doctor import DoctorContext
from pinakes.doctor.checks_pdf import checks as pdf_checks
from pinakes.errors import FloorsMissingError
from pinakes.extract import floors as floors_module
from pinakes.extract import ocr_models
from pinakes.extract.layout import LayoutOptions
from pinakes.extract.pdf import extract
from pinakes.init import init_kb
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from pinakes.sync.status import kb_status
from tests.fakes import FakeEmbedder

CORPUS = Path(__file__).parent / "pdf-corpus"


# The corpus scripts run as scripts (`python tests/pdf-corpus/evaluate.py`) and import each other
# by plain name, so the tests import them the same way.
sys.path.insert(0, str(CORPUS))
evaluate = importlib.import_module("evaluate")
generate = importlib.import_module("generate")


@pytest.fixture(scope="module")
def shipped() -> Any:  # evaluate.py's report (the corpus scripts are imported by name, untyped here)
    return evaluate.evaluate()


def test_the_shipped_free_path_passes_its_baseline_and_floors(shipped: Any) -> None:
    assert shipped.ok, shipped.problems
    assert shipped.strata["two-column"]["order_fidelity"]["value"] >= 0.95
    assert shipped.strata["scanned"]["word_coverage"]["value"] is None  # no native layer: null, not 0.0
    assert shipped.fit["separable"]


def test_every_scanned_page_is_reported_and_no_other_page_is(shipped: Any) -> None:
    for score in shipped.fixtures:
        expected = tuple(range(1, score.pages + 1)) if score.stratum == "scanned" else ()
        assert score.pages_without_text == expected, score.name


def test_a_planted_regression_fails_the_gate() -> None:
    planted = evaluate.evaluate(LayoutOptions(strip_running_heads=False))
    assert not planted.ok
    assert any(p.startswith("headers-footers junk_rate") for p in planted.problems), planted.problems
    assert evaluate.main(["--disable", "strip_running_heads"]) == 1


def test_the_gate_fails_on_floor_drift(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    drifted = tmp_path / "floors.toml"
    drifted.write_text('fitted_on = "test"\n[running_head]\nthreshold = 0.9\n[text_yield]\nfloor = 21.0\n')
    monkeypatch.setattr(floors_module, "floors_path", lambda: drifted)
    floors_module.load_floors.cache_clear()
    try:
        result = evaluate.evaluate()
    finally:
        floors_module.load_floors.cache_clear()
    assert any("floor drift: running_head_threshold" in p for p in result.problems)


def test_the_eval_scores_what_the_extractor_returns(tmp_path: Path) -> None:
    fixture = next(f for f in generate.FIXTURES if f.name == "headers-repeating")
    pdf = generate.build(fixture, tmp_path / "h.pdf")
    extracted = extract(pdf)
    pages = evaluate.read_pages(pdf)
    threshold = floors_module.load_floors().running_head_threshold
    assert [extracted.text[s:e] for s, e in extracted.pages or ()] == \
        evaluate.extract_with(pages, LayoutOptions(), threshold)


def mixed_pdf(path: Path) -> Path:
    """Page 1 has a text layer; page 2 is an image of text (a scan)."""
    from fpdf import FPDF
    from PIL import Image, ImageDraw

    image = Image.new("L", (600, 200), 255)
    ImageDraw.Draw(image).text((10, 10), "scanned words nobody can search", fill=0)
    pdf = FPDF(unit="pt", format="letter")
    pdf.add_page()
    pdf.set_font("Helvetica", size=11)
    pdf.text(72, 100, "The harbour dredging report has a text layer on this first page.")
    pdf.add_page()
    pdf.image(image, x=72, y=72, w=400)
    pdf.output(str(path))
    return path


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    init_kb(root, name="test")
    (root / "docs").mkdir(exist_ok=True)
    mixed_pdf(root / "docs" / "mixed.pdf")
    return root


def test_pages_without_text_are_reported_by_sync_status_and_doctor(kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ocr_models, "ocr_installed", lambda: False)  # without [ocr]: tests/test_ocr_kb.py has it
    report = run_sync(kb, SyncOptions(), embedder=FakeEmbedder())
    assert report.ok and report.pages_without_text == {"docs/mixed.pdf": [2]}
    assert "docs/mixed.pdf: page 2 with no text read" in report.render_text()
    assert "install free OCR" in report.render_text()
    conn = sqlite3.connect(kb / ".pinakes" / "index.db")
    try:
        stored = conn.execute("SELECT pages_without_text FROM documents WHERE path = 'docs/mixed.pdf'").fetchone()
        hits = conn.execute("SELECT COUNT(*) FROM chunks_fts WHERE chunks_fts MATCH 'dredging'").fetchone()
    finally:
        conn.close()
    assert json.loads(stored[0]) == [2] and hits == (1,)  # searchable for what it has
    status = kb_status(kb)
    assert status.pages_without_text == {"docs/mixed.pdf": [2]}
    assert "docs/mixed.pdf: pages 2" in status.render_text()
    checks = {check.name: check for check in pdf_checks(DoctorContext(kb))}
    assert checks["pdf floors"].status == "OK"
    assert checks["pdf text layers"].status == "WARN" and "docs/mixed.pdf: pages 2" in checks["pdf text layers"].detail
    # A cache hit (a rebuild re-extracts nothing) still knows which pages had no text.
    rebuilt = run_sync(kb, SyncOptions(rebuild=True), embedder=FakeEmbedder())
    assert rebuilt.pages_without_text == {"docs/mixed.pdf": [2]}


def test_missing_floors_stop_a_sync_at_startup_with_a_remedy(
        kb: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(floors_module, "floors_path", lambda: tmp_path / "absent" / "floors.toml")
    floors_module.load_floors.cache_clear()
    try:
        with pytest.raises(FloorsMissingError, match="missing"):
            floors_module.load_floors()
        code = main(["-C", str(kb), "sync"])
        checks = {check.name: check for check in pdf_checks(DoctorContext(kb))}
    finally:
        floors_module.load_floors.cache_clear()
    err = capsys.readouterr().err
    assert code == FloorsMissingError.exit_code
    assert "floors are missing" in err and "remedy:" in err and "--write-floors" in err
    assert checks["pdf floors"].status == "FAIL"


@pytest.mark.skipif(not (evaluate.R_MANUALS / "docs").is_dir(),
                    reason="the R manuals (../shared/corpora/r-manuals-pdf) are not beside this checkout")
def test_on_the_r_manuals_layout_removes_head_junk_without_losing_words(monkeypatch: pytest.MonkeyPatch,
                                                                        tmp_path: Path) -> None:
    root = tmp_path / "r"
    (root / "docs").mkdir(parents=True)
    (root / "truth").mkdir()
    for name in ("R-data", "R-FAQ"):
        (root / "docs" / f"{name}.pdf").symlink_to(evaluate.R_MANUALS / "docs" / f"{name}.pdf")
        (root / "truth" / f"{name}.txt").symlink_to(evaluate.R_MANUALS / "truth" / f"{name}.txt")
    rows = {(row["manual"], row["arm"]): row for row in evaluate.r_manuals(root)}
    for name in ("R-data", "R-FAQ"):
        native, laid_out = rows[(name, "native")], rows[(name, "layout")]
        assert laid_out["precision"] > native["precision"]
        assert laid_out["page_number_lines"] < native["page_number_lines"]
        assert laid_out["word_coverage"] >= 0.99
        assert laid_out["recall"] >= native["recall"] - 0.01
