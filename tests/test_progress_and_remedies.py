"""#24 item 14: a PDF page pdfium cannot read fails its document with a remedy naming a command that
exists; the progress ETA is never extrapolated from a single slow document (the sweep saw "about
1h26m left" while one decompression bomb was parsed)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from pinakes.cli import COMMANDS
from pinakes.pipeline.progress import SyncProgress
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.fakes import FakeEmbedder
from tests.test_pdf_isolation import page_tree_loop_pdf


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def named_commands(remedy: str) -> list[str]:
    return re.findall(r"`pnk ([a-z-]+)", remedy)


def test_a_page_pdfium_cannot_read_fails_with_a_remedy_naming_a_real_command(tmp_path: Path) -> None:
    pytest.importorskip("pypdfium2", reason="the PDF parser under test is the [pdf] extra (pypdfium2)")
    from pinakes.init import init_kb

    kb = tmp_path / "kb"
    init_kb(kb, name="remedies")
    (kb / "docs/loop.pdf").write_bytes(page_tree_loop_pdf())
    (kb / "docs/notes.md").write_text("# Notes\n\nKept.\n", encoding="utf-8")
    report = run_sync(kb, SyncOptions(), embedder=FakeEmbedder())
    [failure] = report.failures
    assert failure.path == "docs/loop.pdf" and "failed to read a page" in failure.error
    remedy = failure.error.split("remedy: ", 1)[1]
    assert named_commands(remedy) and all(command in COMMANDS for command in named_commands(remedy)), remedy


def status_lines(stream: io.StringIO) -> list[str]:
    return stream.getvalue().splitlines()


def test_no_eta_while_one_slow_document_is_all_there_is_to_go_on() -> None:
    stream, clock = io.StringIO(), Clock()
    progress = SyncProgress(stream, "line", interval=5.0, clock=clock)
    progress.start(200, 50_000_000)
    for _ in range(2):  # two small documents, quickly
        clock.now += 0.2
        progress.advance(documents=1, bytes_done=5_000, chunks=4)
    progress.document("docs/bomb.pdf")
    for _ in range(12):  # a bomb parsed up to its limits, a minute with nothing done
        clock.now += 5
        progress.advance()
        progress.document("docs/bomb.pdf")
    assert progress.eta() is None
    lines = status_lines(stream)
    assert lines and not any("left" in line for line in lines), lines


def test_a_slow_document_in_flight_does_not_inflate_a_measured_eta() -> None:
    stream, clock = io.StringIO(), Clock()
    progress = SyncProgress(stream, "line", interval=1.0, clock=clock)
    progress.start(100, 100_000)
    for _ in range(20):  # a steady 1,000 bytes a second
        clock.now += 1
        progress.advance(documents=1, bytes_done=1_000)
    assert progress.eta() == pytest.approx(80.0)
    clock.now += 15  # one document taking longer than the others, but not than all of them
    assert progress.eta() == pytest.approx(35 * 80_000 / 20_000)
    clock.now += 10  # now longer than all the measured work together: no guess
    assert progress.eta() is None
    progress.advance(documents=1, bytes_done=1_000)  # it finished: the average, slowdown included
    assert progress.eta() == pytest.approx(45 * 79_000 / 21_000)


def test_an_eta_needs_three_documents_or_a_tenth_of_the_work() -> None:
    clock = Clock()
    progress = SyncProgress(io.StringIO(), "line", clock=clock)
    progress.start(100, 1_000_000)
    clock.now += 2
    progress.advance(documents=2, bytes_done=50_000)  # 2 documents, 5 %
    assert progress.eta() is None
    clock.now += 1
    progress.advance(documents=1, bytes_done=1_000)  # the third
    assert progress.eta() is not None
    few = SyncProgress(io.StringIO(), "line", clock=clock)
    few.start(4, 1_000_000)
    clock.now += 60
    few.advance(documents=1, bytes_done=250_000)  # one big PDF of four: a quarter of the work
    assert few.eta() == pytest.approx(180.0)
