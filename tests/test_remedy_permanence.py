"""Only a file no sync can ever extract is offered for exclusion (the `[sources] exclude` line):
a failure a rerun can clear (an I/O error, a parser killed from outside, a paid document the budget
stopped part-way) keeps its own remedy, or leaving the file out would lose a document. One place
decides which (`pipeline/extract.py::failure_stage`); sync's report, `--json`, `pnk status` and doctor
read it from the stage stored with the failure."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest

from pinakes.cli import main
from pinakes.doctor import DoctorContext, run_checks
from pinakes.errors import IsolationError, PaidExtractionFailedError, SourceError
from pinakes.extract import text
from pinakes.init import init_kb
from pinakes.pipeline.extract import failure_stage
from pinakes.pipeline.report import UNEXTRACTABLE
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.fakes import FakeEmbedder
from tests.kb_helpers import text_pdf

ZIP_NAMED_MD = b"PK\x03\x04" + b"\x00" * 64


def raised(call: Callable[..., object], *args: object) -> Exception:
    try:
        call(*args)
    except Exception as exc:
        return exc
    raise AssertionError(f"{call!r} raised nothing")


def test_the_extractor_refusing_the_bytes_is_permanent_an_io_error_is_not(tmp_path: Path) -> None:
    binary = tmp_path / "archive.md"
    binary.write_bytes(ZIP_NAMED_MD)
    invalid = tmp_path / "latin1.md"
    invalid.write_bytes("caf\u00e9\n".encode("latin-1"))
    (tmp_path / "folder.md").mkdir()  # open() fails with EISDIR: the OS refused, not the bytes

    assert failure_stage(raised(text.extract, binary, "markdown")) == UNEXTRACTABLE
    assert failure_stage(raised(text.extract, invalid, "markdown")) == UNEXTRACTABLE
    io_error = raised(text.extract, tmp_path / "folder.md", "markdown")
    assert isinstance(io_error, SourceError) and failure_stage(io_error) == "extract"


@pytest.mark.parametrize(("kind", "stage"), [("memory", UNEXTRACTABLE), ("cpu", UNEXTRACTABLE),
                                             ("crash", UNEXTRACTABLE), ("killed", "extract"),
                                             ("timeout", "extract"), ("start", "extract")])
def test_an_isolated_parser_fails_for_good_only_on_what_the_bytes_cause(kind: str, stage: str) -> None:
    assert failure_stage(IsolationError("the PDF parser failed", kind=kind)) == stage


def test_nothing_of_the_paid_path_or_a_bug_is_permanent() -> None:
    assert failure_stage(PaidExtractionFailedError("the budget stopped the run part-way")) == "extract"
    assert failure_stage(RuntimeError("a Pinakes bug")) == "extract"


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    pytest.importorskip("pypdfium2", reason="the PDF parser killed here is the [pdf] extra (pypdfium2)")
    root = tmp_path / "kb"
    init_kb(root, name="permanence")
    (root / "docs/good.md").write_text("# Good\n\nA readable note.\n", encoding="utf-8")
    (root / "docs/archive.md").write_bytes(ZIP_NAMED_MD)
    (root / "docs/report.pdf").write_bytes(text_pdf([["Harbour dredging schedule"]]))
    return root


def test_a_killed_parser_is_not_offered_for_exclusion_anywhere(kb: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """The PDF parser is SIGKILLed mid-document (a real kill, in its child process): its file is
    valid, so the exclusion names only the binary, in every view; the next sync indexes the PDF."""
    from pinakes.extract import isolation

    isolation.shutdown()  # the child reads PNK_FAULT at call time; start from a fresh worker anyway
    monkeypatch.setenv("PNK_FAULT", "extract.pdf.parse")
    report = run_sync(kb, SyncOptions(), embedder=FakeEmbedder())
    monkeypatch.delenv("PNK_FAULT")
    stages = {f.path: f.stage for f in report.failures}
    assert stages == {"docs/archive.md": UNEXTRACTABLE, "docs/report.pdf": "extract"}
    only_the_binary = 'exclude = ["docs/archive.md"]'
    assert report.exclusion == only_the_binary
    listed = {f["path"]: f["permanent"] for f in cast("list[dict[str, object]]", report.to_dict()["failures"])}
    assert listed == {"docs/archive.md": True, "docs/report.pdf": False}
    assert only_the_binary in report.render_text()

    assert main(["-C", str(kb), "status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["exclusion"] == only_the_binary
    remedy = {check.name: check for check in run_checks(DoctorContext(kb))}["sync failures"].remedy or ""
    assert only_the_binary in remedy and "report.pdf" not in remedy

    again = run_sync(kb, SyncOptions(), embedder=FakeEmbedder())
    assert [f.path for f in again.failures] == ["docs/archive.md"]  # a rerun cleared the PDF
