"""`SyncProgress`: what a waiting person sees during a sync, in a terminal, a log, or not at all."""

from __future__ import annotations

import gc
import io
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pinakes.pipeline.context import embedding_input
from pinakes.pipeline.progress import MIN_BAR_COLUMNS, SyncProgress
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.conftest import REPO_ROOT
from tests.fakes import FakeEmbedder
from tests.terminal import child_env, run_on_pty
from tests.test_serve_helpers import make_kb, manifest_fake_embedder

EVIL = "docs/evil\x1b[2J\x1b[31m\nforged line\r.md"
ANNOUNCED = "big.txt: 20,512 chunks to embed; about 3 min"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class RecordingStream(io.StringIO):
    """A stream that records every call made on it."""

    def __init__(self, *, tty: bool = False) -> None:
        super().__init__()
        self.tty = tty
        self.calls: list[str] = []

    def write(self, s: str) -> int:
        self.calls.append("write")
        return super().write(s)

    def flush(self) -> None:
        self.calls.append("flush")
        super().flush()

    def isatty(self) -> bool:
        self.calls.append("isatty")
        return self.tty


class BrokenStream:
    """Every write fails as a pipe with no reader does."""

    encoding = "utf-8"

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.attempts = 0

    def write(self, s: str) -> int:
        self.attempts += 1
        raise self.error

    def flush(self) -> None:
        self.attempts += 1
        raise self.error

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        raise io.UnsupportedOperation("fileno")


def full_cycle(progress: SyncProgress, clock: Clock | None = None, *, step: float = 0.0) -> None:
    progress.start(3, 3000)
    for i in range(3):
        progress.document(f"notes/file{i}.md")
        progress.advance(chunks=10)
        if clock is not None:
            clock.now += step
        progress.advance(documents=1, bytes_done=1000)
    progress.announce(ANNOUNCED)
    progress.close()


# -- modes ---------------------------------------------------------------------------------------------


class SizedTerminal(RecordingStream):
    """A terminal on file descriptor 2, whose width the test sets through os.get_terminal_size."""

    def __init__(self) -> None:
        super().__init__(tty=True)

    def fileno(self) -> int:
        return 2


def _terminal_size(columns: int) -> Callable[[int | None], os.terminal_size]:
    """A stand-in for `os.get_terminal_size`: a terminal `columns` wide and 25 lines high."""
    def get_terminal_size(fd: int | None = None) -> os.terminal_size:
        return os.terminal_size((columns, 25))

    return get_terminal_size


def test_for_stream_picks_the_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "get_terminal_size", _terminal_size(80))
    assert SyncProgress.for_stream(SizedTerminal(), quiet=False).mode == "bar"
    assert SyncProgress.for_stream(RecordingStream(tty=False), quiet=False).mode == "line"
    assert SyncProgress.for_stream(SizedTerminal(), quiet=True).mode == "off"
    closed = io.StringIO()
    closed.close()  # isatty() raises ValueError on a closed stream
    assert SyncProgress.for_stream(closed, quiet=False).mode == "line"


@pytest.mark.parametrize("columns", [0, MIN_BAR_COLUMNS - 1])
def test_a_terminal_too_narrow_to_draw_in_gets_plain_lines(columns: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "get_terminal_size", _terminal_size(columns))
    assert SyncProgress.for_stream(SizedTerminal(), quiet=False).mode == "line"
    monkeypatch.setattr(os, "get_terminal_size", _terminal_size(MIN_BAR_COLUMNS))
    assert SyncProgress.for_stream(SizedTerminal(), quiet=False).mode == "bar"


def test_a_terminal_of_unknown_width_gets_plain_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_size(fd: int | None = None) -> os.terminal_size:
        raise OSError(25, "Inappropriate ioctl for device")

    monkeypatch.setattr(os, "get_terminal_size", no_size)
    assert SyncProgress.for_stream(SizedTerminal(), quiet=False).mode == "line"
    assert SyncProgress.for_stream(RecordingStream(tty=True), quiet=False).mode == "line"  # no file descriptor


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="mode"):
        SyncProgress(io.StringIO(), "fancy")  # pyright: ignore[reportArgumentType]  # an unknown mode on purpose


@pytest.mark.parametrize("step", [0.0, 100.0])  # a short and a long sync
def test_off_mode_writes_nothing_ever(step: float) -> None:
    stream = RecordingStream(tty=True)
    clock = Clock()
    progress = SyncProgress(stream, "off", interval=5.0, clock=clock)
    full_cycle(progress, clock, step=step)
    progress.close()
    assert stream.getvalue() == ""
    assert [c for c in stream.calls if c != "isatty"] == []


# -- line mode -----------------------------------------------------------------------------------------


def test_line_mode_prints_at_most_once_per_interval_then_a_final_line() -> None:
    stream = RecordingStream()
    clock = Clock()
    progress = SyncProgress(stream, "line", interval=5.0, clock=clock)
    progress.start(10, 10_000)
    progress.document("docs/notes/x.md")
    clock.now += 4.9
    progress.advance(documents=1, bytes_done=1000, chunks=3479)
    assert stream.getvalue() == ""  # nothing before `interval`

    clock.now += 0.1  # 5.0 s in: the first line
    progress.advance(chunks=1)
    lines = stream.getvalue().splitlines()
    assert lines == ["sync: 1/10 documents, 3,480 chunks, 696.0 chunks/s, about 45s left (docs/notes/x.md)"]

    for _ in range(4):  # 4.8 s more of steady work: still within the interval, no new line
        clock.now += 1.2
        progress.document("docs/notes/y.md")
        progress.advance(documents=1, bytes_done=1000, chunks=10)
    assert len(stream.getvalue().splitlines()) == 1

    clock.now += 0.2  # 10.0 s in
    progress.advance(chunks=5)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[1].startswith("sync: 5/10 documents, 3,525 chunks, ")
    assert lines[1].endswith(", about 10s left (docs/notes/y.md)")  # 5,000 of 10,000 bytes in 10 s

    clock.now += 2.5
    progress.close()
    lines = stream.getvalue().splitlines()
    assert lines[2] == "sync: indexed 5/10 documents, 3,525 chunks in 12.5 s"
    progress.close()  # idempotent
    progress.advance(documents=1)  # and nothing after it
    assert stream.getvalue().splitlines() == lines
    assert "\r" not in stream.getvalue() and "\x1b" not in stream.getvalue()


def test_line_mode_eta_follows_bytes_not_documents() -> None:
    stream = io.StringIO()
    clock = Clock()
    progress = SyncProgress(stream, "line", interval=1.0, clock=clock)
    progress.start(4, 100_000)
    clock.now += 10
    progress.advance(documents=3, bytes_done=1_000)  # three quarters of the documents, 1 % of the bytes
    assert "about 16m30s left" in stream.getvalue()


def test_line_mode_without_byte_sizes_estimates_by_documents() -> None:
    stream = io.StringIO()
    clock = Clock()
    progress = SyncProgress(stream, "line", interval=1.0, clock=clock)
    progress.start(4, 0)
    clock.now += 10
    progress.advance(documents=1)
    assert stream.getvalue() == "sync: 1/4 documents, 0 chunks, 0.0 chunks/s, about 30s left\n"


def test_a_sync_shorter_than_the_interval_prints_nothing_at_all() -> None:
    stream = RecordingStream()
    clock = Clock()
    progress = SyncProgress(stream, "line", interval=5.0, clock=clock)
    progress.start(3, 3000)
    for i in range(3):
        progress.document(f"notes/file{i}.md")
        clock.now += 1.5
        progress.advance(documents=1, bytes_done=1000, chunks=7)
    progress.close()  # 4.5 s
    assert stream.getvalue() == ""
    assert stream.calls == []


def test_announce_prints_its_own_line_at_once() -> None:
    stream = io.StringIO()
    clock = Clock()
    progress = SyncProgress(stream, "line", interval=5.0, clock=clock)
    progress.start(1, 10)
    progress.announce(ANNOUNCED)
    assert stream.getvalue() == f"sync: {ANNOUNCED}\n"
    progress.close()  # a short sync: the announcement stays the only output
    assert stream.getvalue() == f"sync: {ANNOUNCED}\n"


def test_one_document_and_one_chunk_read_as_english(monkeypatch: pytest.MonkeyPatch) -> None:
    """ "1/1 document, 1 chunk", never "1 chunks": the periodic line, the closing line and the bar."""
    stream = io.StringIO()
    clock = Clock()
    progress = SyncProgress(stream, "line", interval=1.0, clock=clock)
    progress.start(1, 0)
    clock.now += 2
    progress.advance(chunks=1)
    progress.advance(documents=1)
    progress.close()
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("sync: 0/1 document, 1 chunk, 0.5 chunks/s"), lines
    assert lines[-1] == "sync: indexed 1/1 document, 1 chunk in 2.0 s"

    class Terminal81(io.StringIO):
        def fileno(self) -> int:
            return 2

    monkeypatch.setattr(os, "get_terminal_size", _terminal_size(81))
    screen = Terminal81()
    bar = SyncProgress(screen, "bar")
    bar.start(1, 100)
    bar.advance(chunks=1)
    time.sleep(0.25)
    bar.advance(documents=1, bytes_done=100)
    bar.close()
    last = [frame for frame in screen.getvalue().split("\r") if frame.strip()][-1]
    assert last.startswith("1/1 document 100%|") and "| 1 chunk " in last, last


def test_context_manager_closes_even_when_the_sync_fails() -> None:
    stream = io.StringIO()
    clock = Clock()
    with pytest.raises(RuntimeError), SyncProgress(stream, "line", interval=5.0, clock=clock) as progress:
        progress.start(2, 200)
        progress.advance(documents=1, bytes_done=100, chunks=4)
        clock.now += 6
        raise RuntimeError("embedding failed")
    assert stream.getvalue() == "sync: indexed 1/2 documents, 4 chunks in 6.0 s\n"


# -- untrusted names -----------------------------------------------------------------------------------


def test_line_mode_never_prints_a_name_raw() -> None:
    stream = io.StringIO()
    clock = Clock()
    progress = SyncProgress(stream, "line", interval=5.0, clock=clock)
    progress.start(1, 100)
    progress.document(EVIL)
    progress.announce(f"{EVIL}: 20,512 chunks to embed")
    clock.now += 5
    progress.advance(chunks=1)
    progress.close()
    out = stream.getvalue()
    assert "\x1b" not in out and "\r" not in out
    lines = out.split("\n")
    assert len(lines) == 4 and lines[-1] == ""  # announce, progress, final: no line split by the name
    assert lines[0] == "sync: docs/evil\\x1b[2J\\x1b[31m\\nforged line\\r.md: 20,512 chunks to embed"
    assert lines[1].endswith("(docs/evil\\x1b[2J\\x1b[31m\\nforged line\\r.md)")


def test_bar_mode_never_prints_a_name_raw() -> None:
    stream = io.StringIO()
    progress = SyncProgress(stream, "bar")
    progress.start(1, 100)
    progress.document(EVIL)
    time.sleep(0.25)  # past tqdm's mininterval, so the next update redraws
    progress.advance(chunks=1)
    progress.announce(EVIL)
    progress.close()
    out = stream.getvalue()
    assert "\\x1b[2J\\x1b[31m\\nforged line\\r.md" in out
    assert "\x1b" not in out
    assert out.count("\n") == 1  # the announcement's own line end, nothing from the name


# -- bar mode (without a terminal) ---------------------------------------------------------------------


def test_bar_mode_draws_counts_and_fits_the_name_to_the_width(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal81(io.StringIO):
        def fileno(self) -> int:
            return 2

    monkeypatch.setattr(os, "get_terminal_size", _terminal_size(81))
    stream = Terminal81()
    progress = SyncProgress(stream, "bar")
    progress.start(4, 4000)
    name = "a/" * 40 + "the-file.md"
    progress.document(name)
    progress.advance(documents=1, bytes_done=3000, chunks=1234)
    time.sleep(0.25)
    progress.advance(chunks=1)
    drawn = [frame for frame in stream.getvalue().split("\r") if frame.strip()]
    last = drawn[-1]
    assert last.startswith("1/4 documents  75%|")  # the fill follows bytes: 3,000 of 4,000
    assert re.search(r"\| 1,235 chunks [\d,.]+/s ETA \d+s  ", last), last
    assert last.endswith("/the-file.md") and "..." in last and name not in last
    assert all(len(frame) <= 80 for frame in drawn)  # tqdm leaves the last column free
    assert len(last) >= 75  # and the name used the room there was
    progress.close()
    assert stream.getvalue().endswith("\r") and stream.getvalue().split("\r")[-2].strip() == ""  # cleared


# -- a broken stream -----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["bar", "line"])
@pytest.mark.parametrize("error", [BrokenPipeError(32, "Broken pipe"), ValueError("I/O operation on closed file"),
                                   OSError(5, "Input/output error")])
def test_a_broken_stream_never_raises(mode: Any, error: Exception, monkeypatch: pytest.MonkeyPatch) -> None:
    unraisable: list[object] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    stream = BrokenStream(error)
    clock = Clock()
    # BrokenStream stands in for a TextIO: the progress only writes and flushes
    progress = SyncProgress(stream,  # pyright: ignore[reportArgumentType]  # a stand-in stream
                            mode, interval=1.0, clock=clock)
    full_cycle(progress, clock, step=5.0)
    with progress:
        progress.advance(documents=1)
    assert stream.attempts == 1  # the first failure turns progress off for good
    del progress
    gc.collect()
    assert unraisable == []  # nor does tqdm complain from a destructor


def test_a_closed_stream_never_raises() -> None:
    stream = io.StringIO()
    stream.close()
    for mode in ("bar", "line"):
        clock = Clock()
        full_cycle(SyncProgress(stream, mode, interval=1.0, clock=clock), clock, step=5.0)


# -- a real terminal -----------------------------------------------------------------------------------

CHILD = textwrap.dedent("""
    import io, sys, time
    from pinakes.pipeline.progress import MIN_BAR_COLUMNS, SyncProgress

    progress = SyncProgress.for_stream(sys.stderr, quiet=sys.argv[1] == "quiet")
    print(progress.mode, flush=True)
    sys.stdout = sys.stderr = io.StringIO()  # as doit does while a task runs
    with progress:
        progress.start(5, 5000)
        for i in range(5):
            progress.document(f"notes/file{i}.md")
            progress.advance(chunks=3)
            time.sleep(0.25)
            progress.advance(documents=1, bytes_done=1000)
            if i == 2:
                progress.announce(%r)
""") % ANNOUNCED


posix_only = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")


@posix_only
def test_a_real_terminal_gets_a_bar_written_past_the_swapped_stderr() -> None:
    mode, screen = run_on_pty(CHILD, "loud", columns=70)
    assert mode.strip() == "bar"
    assert all(len(frame) <= 69 for frame in re.split(r"[\r\n]", screen)), screen  # fits the terminal
    assert re.search(r"[1-5]/5 documents +\d+%\|", screen), screen
    assert re.search(r"\| \d+ chunks [\d.]+/s ETA ", screen), screen
    assert "notes/file" in screen
    assert f"\r{ANNOUNCED}\r\n" in screen or f"{ANNOUNCED}\r\n" in screen  # its own line above the bar
    assert "Traceback" not in screen and "Exception ignored" not in screen
    # close() leaves the terminal clean: the bar's last line is overwritten with blanks
    last_line = screen.split("\n")[-1]
    assert last_line.endswith("\r") and last_line.split("\r")[-2].strip() == "", repr(last_line)


@posix_only
def test_a_real_terminal_gets_nothing_when_quiet() -> None:
    mode, screen = run_on_pty(CHILD, "quiet")
    assert mode.strip() == "off"
    assert screen == ""


def test_a_pipe_gets_plain_lines() -> None:
    proc = subprocess.run([sys.executable, "-c", CHILD, "loud"], capture_output=True, text=True,
                          env=child_env(), cwd=REPO_ROOT, timeout=60, check=True)
    assert proc.stdout.strip() == "line"
    assert proc.stderr == f"sync: {ANNOUNCED}\n"  # a 1.25 s sync: only the announcement


# -- what is being worked on ---------------------------------------------------------------------------


def test_the_current_field_names_the_phase_and_the_documents_worked_on_together() -> None:
    stream = io.StringIO()
    clock = Clock()
    progress = SyncProgress(stream, "line", interval=1.0, clock=clock)
    progress.start(5, 5000)
    progress.document("docs/a.md", phase="embedding", others=3)
    clock.now += 1
    progress.advance(chunks=40)
    progress.step("deriving the graph")
    clock.now += 1
    progress.advance(documents=4)
    first, second = stream.getvalue().splitlines()
    assert first.endswith("(embedding docs/a.md +3 more)")
    assert second.endswith("(deriving the graph)")


def test_the_bar_fits_a_long_name_between_its_phase_and_its_count() -> None:
    progress = SyncProgress(io.StringIO(), "line")
    progress.document("a/" * 40 + "the-file.md", phase="embedding", others=2)
    field = progress.current_field(40)
    assert len(field) == 40 and field.startswith("embedding a/") and field.endswith("/the-file.md +2 more")
    assert "..." in field
    assert progress.current_field(len("embedding  +2 more") + 7) == ""  # no room for a readable name


def test_a_new_phase_is_drawn_at_once_a_new_document_within_one_waits_for_the_next_redraw() -> None:
    stream = io.StringIO()
    progress = SyncProgress(stream, "bar")
    progress.start(3, 300)
    progress.document("docs/one.md", phase="chunking")
    progress.document("docs/one.md", phase="embedding", others=1)  # well within tqdm's mininterval
    assert "ETA ?  embedding docs/one.md +1 more" in stream.getvalue().split("\r")[-1]
    progress.document("docs/two.md", phase="embedding")  # throttled: no redraw for every small file
    assert "docs/two.md" not in stream.getvalue()
    progress.close()


class SlowEmbedder(FakeEmbedder):
    """The fake embedder, slow enough that a sync takes seconds, recording what progress shows during
    each call (`showing` is set by the test to read the sync's progress)."""

    def __init__(self, seconds: float = 0.0, **identity: Any) -> None:
        super().__init__(**identity)
        self.seconds = seconds
        self.showing: Callable[[], str] = lambda: ""
        self.seen: list[tuple[str, list[str]]] = []

    def embed_documents(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        self.seen.append((self.showing(), list(texts)))
        time.sleep(self.seconds)
        return super().embed_documents(texts, batch_size)


def progress_kb(root: Path) -> Path:
    """Small notes that share embedding calls, and one long enough to stream slice by slice."""
    documents = {f"notes/note{i}.md": f"# Note {i}\n\n" + f"note{i}word " * 3000 for i in range(6)}  # ~13 chunks
    documents["long.md"] = "# Long\n\n" + "".join(f"Paragraph {n} of the long document, about longword things "
                                                  "here.\n\n" * 40 for n in range(60))  # ~110 chunks
    return make_kb(root, "progress", documents)


def test_while_chunks_are_embedded_the_field_names_their_document(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    kb = progress_kb(tmp_path / "kb")
    made: list[SyncProgress] = []
    real_for_stream = SyncProgress.for_stream.__func__

    def recording(cls: type[SyncProgress], stream: Any, *, quiet: bool) -> SyncProgress:
        made.append(real_for_stream(cls, stream, quiet=quiet))
        return made[-1]

    monkeypatch.setattr(SyncProgress, "for_stream", classmethod(recording))
    embedder = manifest_fake_embedder(kb)
    slow = SlowEmbedder(dim=embedder.identity.dim, model=embedder.identity.model, provider=embedder.identity.provider)
    slow.showing = lambda: made[-1].current_display
    report = run_sync(kb, SyncOptions(), embedder=slow, progress_stream=io.StringIO())
    assert report.ok and len(report.added) == 7
    # each chunk's embedded text (its context, then its text) -> its document, from the index
    owner: dict[str, str] = {}
    conn = sqlite3.connect(kb / ".pinakes" / "index.db")
    for text, context, path in conn.execute(
            "SELECT c.text, c.context, d.path FROM chunks c JOIN documents d ON d.id = c.doc_id"):
        owner[embedding_input(context or "", text)] = path
    conn.close()
    assert len(slow.seen) >= 3
    for showing, texts in slow.seen:
        embedded = sorted({owner[text] for text in texts})
        match = re.fullmatch(r"embedding (\S+)(?: \+(\d+) more)?", showing)
        assert match, (showing, embedded)
        assert match[1] in embedded and len(embedded) == 1 + int(match[2] or 0), (showing, embedded)
    streamed = [showing for showing, _texts in slow.seen if showing == "embedding docs/long.md"]
    assert len(streamed) >= 2  # the long document, one call per slice, named throughout
    assert any(showing.endswith("more") for showing, _texts in slow.seen)  # notes embedded together


# -- a real sync on a real terminal --------------------------------------------------------------------

SYNC_CHILD = textwrap.dedent("""
    import sys
    from pathlib import Path

    import pinakes.pipeline.progress
    from pinakes.cli import main
    from tests.fakes import substitute_embedder
    from tests.test_serve_helpers import manifest_fake_embedder
    from tests.test_sync_progress import SlowEmbedder

    kb = Path(sys.argv[1])
    identity = manifest_fake_embedder(kb).identity
    substitute_embedder(None, lambda *a, **k: SlowEmbedder(0.3, dim=identity.dim, model=identity.model,
                                                           provider=identity.provider))
    pinakes.pipeline.progress.LINE_INTERVAL = 0.5  # a line every half second, so a short sync shows several
    sys.exit(main(["-C", str(kb), "sync"]))
""")


@posix_only
def test_pnk_sync_on_a_terminal_of_0_columns_prints_plain_periodic_lines(tmp_path: Path) -> None:
    kb = progress_kb(tmp_path / "kb")
    report, screen = run_on_pty(SYNC_CHILD, str(kb), columns=0)
    assert "added 7" in report
    lines = screen.split("\r\n")
    periodic = [line for line in lines if re.fullmatch(r"sync: \d/7 documents, [\d,]+ chunks, [\d.]+ chunks/s.*", line)]
    assert len(periodic) >= 2, screen
    assert any(re.search(r"\((embedding|writing) docs/", line) for line in periodic), screen
    assert lines[-2].startswith("sync: indexed 7/7 documents, ") and lines[-1] == "", screen  # the summary
    assert "\x1b" not in screen and "\r" not in screen.replace("\r\n", "") and "%|" not in screen  # no bar


@posix_only
def test_pnk_sync_on_a_wide_terminal_draws_the_bar_naming_the_document_embedded(tmp_path: Path) -> None:
    kb = progress_kb(tmp_path / "kb")
    report, screen = run_on_pty(SYNC_CHILD, str(kb), columns=100)
    assert "added 7" in report
    frames = re.split(r"[\r\n]", screen)
    assert any(re.search(r"documents +\d+%\|.*  embedding docs/long\.md$", frame.rstrip()) for frame in frames), screen
    assert not any(frame.startswith("sync: ") for frame in frames), screen


@pytest.mark.heavy  # the same terminal as the test above, made by `script` as a CI step would
@pytest.mark.skipif(shutil.which("script") is None, reason="needs util-linux `script` to make a terminal of 0 columns")
def test_pnk_sync_under_script_without_a_terminal_prints_plain_lines(tmp_path: Path) -> None:
    """`script -qc 'pnk sync' /dev/null` from a CI step: script's terminal has no size (0 columns)."""
    kb = progress_kb(tmp_path / "kb")
    command = shlex.join([sys.executable, "-c", SYNC_CHILD, str(kb)])
    done = subprocess.run(["script", "-qec", command, "/dev/null"], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, env=child_env(), cwd=REPO_ROOT, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "added 7" in done.stdout
    assert re.search(r"^sync: \d/7 documents, ", done.stdout, re.MULTILINE), done.stdout
    assert "sync: indexed 7/7 documents" in done.stdout and "%|" not in done.stdout


def _recorded_sync(kb: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[SyncProgress, SlowEmbedder, Any]:
    """A real sync of `kb`, its progress kept, and each embedding call's view of it (the fill)."""
    made: list[SyncProgress] = []
    real_for_stream = SyncProgress.for_stream.__func__

    def recording(cls: type[SyncProgress], stream: Any, *, quiet: bool) -> SyncProgress:
        made.append(real_for_stream(cls, stream, quiet=quiet))
        return made[-1]

    monkeypatch.setattr(SyncProgress, "for_stream", classmethod(recording))
    embedder = manifest_fake_embedder(kb)
    slow = SlowEmbedder(dim=embedder.identity.dim, model=embedder.identity.model, provider=embedder.identity.provider)
    slow.showing = lambda: f"{made[-1].current_display} {made[-1].fraction_done:.6f}"
    report = run_sync(kb, SyncOptions(), embedder=slow, progress_stream=io.StringIO())
    return made[-1], slow, report


def test_a_failed_document_counts_as_done_so_the_fill_ends_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #40: `28/29 documents 7% … ETA 3m47s` while the sync finished: the one document left had
    failed, most of the bytes were its, and the ETA grew with the elapsed time."""
    kb = progress_kb(tmp_path / "kb")
    (kb / "docs/archive.md").write_bytes(b"PK\x03\x04" + b"\x00" * 2_000_000)  # a zip named .md: unextractable
    progress, _slow, report = _recorded_sync(kb, monkeypatch)
    assert [failure.path for failure in report.failures] == ["docs/archive.md"]
    assert progress.documents_fraction() == "8/8 documents"
    assert progress.fraction_done == 1.0 and progress.eta() == 0.0


def test_a_document_embedded_in_slices_is_credited_as_its_slices_finish(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #40: only finished documents' bytes counted, so a corpus that is mostly one large file
    read a few percent until that file was written."""
    kb = progress_kb(tmp_path / "kb")
    _progress, slow, report = _recorded_sync(kb, monkeypatch)
    assert report.ok
    fills = [float(showing.rsplit(" ", 1)[1]) for showing, _texts in slow.seen if "docs/long.md" in showing]
    assert len(fills) >= 2 and fills == sorted(fills) and fills[-1] > fills[0]


def test_the_fill_credits_the_document_in_flight_and_never_moves_back() -> None:
    stream, clock = io.StringIO(), Clock()
    progress = SyncProgress(stream, "line", interval=1.0, clock=clock)
    progress.start(29, 100_000)
    for _ in range(28):
        clock.now += 1
        progress.advance(documents=1, bytes_done=250)  # 7 % of the bytes in 28 documents
    progress.embedding("docs/big.pdf", size=93_000, chunks=100)
    clock.now += 1
    progress.advance(chunks=90)
    assert progress.fraction_done == pytest.approx((7_000 + 83_700) / 100_000)
    assert progress.eta() == pytest.approx(29 * (100_000 - 90_700) / 90_700)
    progress.embedding("docs/other.pdf", size=10, chunks=10)  # the big one failed unwritten: no step back
    assert progress.fraction_done == pytest.approx(0.907)
    progress.advance(documents=1, bytes_done=93_000)  # its failure is counted as done
    assert progress.fraction_done == 1.0 and progress.documents_fraction() == "29/29 documents"
    clock.now += 60  # the sync finishes (graph, links): nothing is left, and the ETA stays at 0
    assert progress.eta() == 0.0
