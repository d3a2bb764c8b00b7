"""Progress of a sync, for the person waiting on it.

A sync can run for minutes (embedding thousands of chunks); without a sign of life it looks hung.
`SyncProgress` shows one, in one of three modes:

- "bar" (the stream is a terminal at least `MIN_BAR_COLUMNS` wide): a tqdm bar redrawn in place,
  showing documents done/total, the chunks embedded so far, their rate, an ETA and what is being worked
  on. The fill, the percentage and the ETA are driven by BYTES done / total bytes, since documents vary
  widely in size; the visible count is documents. `close()` clears the bar, leaving the terminal clean
  for the report.

Work is counted as it is done, not only when a document is written (issue #40: `28/29 documents 7%
… ETA 3m47s`, done 2 s later). A document that failed counts as done (`advance(documents=1,
bytes_done=size)` for it too: nothing more will be done on it), so the last failed document does not
hold the fill below 100% and the ETA growing while the sync finishes its graph. A large document
embedded in slices (`embedding(path, size=, chunks=)`) is credited its bytes in proportion to its
chunks given a vector so far, so a corpus whose bytes are mostly one big file does not read 7% while
that file's last slice runs. The fill never moves back.

The ETA is shown only once there is work to extrapolate from (see `SyncProgress.eta`): at least
`ETA_MIN_DOCUMENTS` documents or `ETA_MIN_FRACTION` of the total done, and no document in flight for
longer than all the work measured so far. One slow document (a decompression bomb parsed up to its
limits, a huge scan) says nothing about the rest: while it runs the ETA is "?", not hours.
- "line" (not a terminal: CI logs, a pipe; or a terminal whose width is unknown, 0 or too narrow to
  draw in, as a pseudo-terminal that reports 0 columns does under `script` and some CI runners, where
  tqdm's bar has no width to be drawn in): a plain line, no `\\r` and no escape sequences, at most
  once every `interval` seconds, and a final summary line on `close()`. A sync that ends within
  `interval` seconds of `start()` prints nothing from here at all (announcements aside), so short
  syncs stay quiet.
- "off" (`--quiet`): nothing, ever.

A document read by OCR (a scan, an image: extract/ocr.py) reports each page: its phase reads
`OCR 12/40 pages, 0.9 pages/s, 31s left`, and one of `LARGE_OCR_PAGES` pages or more is announced
with its estimate before its first page is read; so is a run with that many images to read, before
the pipeline starts (`ocr_run`).

What is being worked on is named with its phase (`document(path, phase=...)`: extracting, chunking,
embedding, writing; `step(label)` for a step that is not one document's, such as the graph), so a long
embedding names the document whose chunks are being embedded, not the last one extracted. A new
phase is drawn at once; a new document within a phase waits for the bar's next redraw (at most one
per `mininterval`), so thousands of small files do not flood the terminal.

The sync runs its steps as doit tasks, and doit swaps `sys.stdout`/`sys.stderr` for capture objects
while a task runs: so `SyncProgress` writes only to the stream it was given at construction (the real
stderr, taken before doit starts) and never looks `sys.stderr` up itself.

Progress is best-effort: a closed or broken stream (BrokenPipeError, ValueError on a closed file, ...)
silently turns it off; it never fails a sync. Every file name or other document-controlled string is
passed through `pinakes.display.printable`, so a name cannot clear, recolour or forge lines on the
terminal. Display is driven by the calls (no background thread): call `advance(chunks=...)` per
embedding batch so a long document still shows life.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable, MutableMapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, NoReturn, TextIO, TypeVar

from pinakes.display import printable
from pinakes.wording import counted, noun_for

if TYPE_CHECKING:
    from tqdm import tqdm

    from pinakes.extract.ocr import OcrProgress

Mode = Literal["bar", "line", "off"]

__all__ = ["LINE_INTERVAL", "MIN_BAR_COLUMNS", "Mode", "SyncProgress", "terminal_columns"]

_BAR_FORMAT = "{documents} {percentage:3.0f}%|{bar}| {chunks} {chunk_rate}/s{workers} ETA {left}{current}"
_MIN_BAR = 10  # columns kept for the bar itself when fitting the current file name
_MIN_NAME = 8  # below this many columns the current file name is left out
# Narrower than this, tqdm cuts the bar line before its counts (at 0 columns it has no width at all):
# plain lines, which a narrow terminal wraps but shows whole, tell more.
MIN_BAR_COLUMNS = 30
# Seconds between two plain status lines.
LINE_INTERVAL = 5.0


def _shorten(text: str, width: int) -> str:
    """`text` cut to `width` characters in the middle, keeping the file's own name whole where it fits."""
    if len(text) <= width:
        return text
    if width <= 3:
        return text[len(text) - width:]
    base = text[text.rfind("/"):] if "/" in text else text  # the file's own name, with its slash
    tail = min(width - 3, max(len(base), (width - 3) * 2 // 3))
    head = width - 3 - tail
    return text[:head] + "..." + text[len(text) - tail:]


def _chunks(count: int) -> str:
    """ "1 chunk", "12,345 chunks": the count with thousands separators, the noun in English."""
    return f"{count:,} {noun_for(count, 'chunk')}"


def _duration(seconds: float) -> str:
    """A rough human duration: `45s`, `2m10s`, `1h05m`."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


# A document with this many pages to read by OCR is announced, with its estimate, before it starts.
LARGE_OCR_PAGES = 20

# Enough work measured for an ETA: this many finished documents, or this share of the total.
ETA_MIN_DOCUMENTS = 3
ETA_MIN_FRACTION = 0.10


def _eta(elapsed: float, done: float, total: float) -> float | None:
    """Seconds left at the average rate so far, or None while there is nothing to go on."""
    if done <= 0 or total <= 0 or elapsed <= 0:
        return None
    return max(0.0, elapsed * (total - done) / done)


@functools.cache
def _bar_class() -> type[tqdm[NoReturn]]:
    """The tqdm subclass drawing the bar (tqdm is imported only when a bar is drawn)."""
    from tqdm import tqdm

    # tqdm is generic over what it iterates in its stubs only (this bar is never iterated)
    class _Bar(tqdm):  # pyright: ignore[reportMissingTypeArgument]
        # No monitor thread: it would write to the stream from another thread, out of our error handling.
        monitor_interval = 0

        def __init__(self, *args: Any, progress: SyncProgress, **kwargs: Any) -> None:  # Any: tqdm's arguments
            self._progress = progress
            super().__init__(*args, **kwargs)  # pyright: ignore[reportUnknownMemberType] (stubs: untyped **kwargs)

        @property
        def format_dict(self) -> MutableMapping[str, Any]:  # Any: tqdm's fields; add ours for bar_format
            fields = super().format_dict
            progress = self._progress
            elapsed = float(fields.get("elapsed") or 0.0)
            rate = progress.chunks / elapsed if elapsed > 0 else 0.0
            left = progress.eta()
            extra = {
                "documents": progress.documents_fraction(),
                "chunks": _chunks(progress.chunks),
                "chunk_rate": f"{rate:.1f}" if rate < 100 else f"{rate:,.0f}",
                "workers": "" if progress.workers is None else f" {counted(progress.workers, 'worker')}",
                "left": "?" if left is None else _duration(left),
            }
            # Fit the current file name into what the bar line leaves free (tqdm trims any overflow).
            ncols = fields.get("ncols")
            fixed = len(_BAR_FORMAT.format(bar="", percentage=100, current="", **extra)) + _MIN_BAR
            room = (ncols - fixed if ncols else 40) - 2
            current = progress.current_field(room)
            extra["current"] = f"  {current}" if current else ""
            fields.update(extra)
            return fields

    return _Bar


_T = TypeVar("_T")  # what a guarded call of the stream returns


class _GuardedStream:
    """The stream as tqdm and the line writer see it: a write that fails turns progress off, silently.

    Every write goes through here, tqdm's own included (its initial draw, `close()`, `__del__`), so a
    closed or broken stream can never surface as an exception or an "Exception ignored" message.
    """

    def __init__(self, stream: TextIO, on_error: Callable[[], None]) -> None:
        self._stream = stream
        self._on_error = on_error
        self.broken = False

    @property
    def encoding(self) -> str | None:  # tqdm picks a Unicode or an ASCII bar by it
        return getattr(self._stream, "encoding", None)

    def fileno(self) -> int:  # tqdm asks the terminal's width through it (and copes if it raises)
        return self._stream.fileno()

    def isatty(self) -> bool:
        return self._call(self._stream.isatty, False)

    def write(self, text: str) -> int:
        return self._call(lambda: self._stream.write(text), 0)

    def flush(self) -> None:
        self._call(self._stream.flush, None)

    def _call(self, action: Callable[[], _T], fallback: _T) -> _T:
        if self.broken:
            return fallback
        try:
            return action()
        except (OSError, ValueError):  # BrokenPipeError, a closed file, UnicodeEncodeError, ...
            self.broken = True
            self._on_error()
            return fallback


class SyncProgress:
    """Shows a sync's progress on `stream` (see the module docstring). Usable as a context manager.

    Call order: `start(total_documents, total_bytes)` once the work is known; then per document
    `document(path)` when work on it begins (`embedding(path, size=, chunks=)` for one embedded in
    slices), `advance(chunks=n, reused=m)` per embedding batch (n run through the model, m given a
    stored vector: the rate counts only the model's), and `advance(documents=1, bytes_done=size)` when
    it is done, written or failed (bytes may also be reported in pieces);
    `announce(message)` for one-off lines; `close()` at the end (also on failure; idempotent).
    """

    def __init__(self, stream: TextIO, mode: Mode, *, interval: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if mode not in ("bar", "line", "off"):
            raise ValueError(f"unknown progress mode {mode!r}")
        self.mode: Mode = mode
        self._stream = stream
        self._out = _GuardedStream(stream, self._stream_failed)
        self._interval = LINE_INTERVAL if interval is None else interval
        self._clock = clock
        self._lock = threading.RLock()
        self._bar: tqdm[NoReturn] | None = None
        self._started_at: float | None = None
        self._next_line_at = 0.0
        self._last_work_at: float | None = None  # when an advance() last reported work done
        self._lines = 0  # periodic lines written in line mode
        self._broken = False
        self._closed = False
        self.total_documents = 0
        self.total_bytes = 0
        self.documents_done = 0
        self.bytes_done = 0  # of documents finished (written, or failed)
        # The one document being embedded in slices (`embedding`): its size, chunks, and chunks given a
        # vector so far, which credit it part of its bytes before it is written.
        self._flight_size = 0
        self._flight_chunks = 0
        self._flight_vectors = 0
        self._shown = 0  # the work done as last shown (bytes, or documents without sizes): never less
        self.chunks = 0  # embedded by the model: what the rate and the counts shown measure
        self.reused = 0  # given a stored vector instead (pipeline/vector_reuse.py)
        self.workers: int | None = None  # Ray workers alive (embed/executor_ray.py); None: embedding here
        self._phase = ""  # what is being done to the current document ("embedding"), or a whole step
        self._current = ""  # the current document, already made printable
        self._others = 0  # further documents worked on together with it (one embedding call)

    @classmethod
    def for_stream(cls, stream: TextIO, *, quiet: bool) -> SyncProgress:
        """"off" when quiet, "bar" when `stream` is a terminal at least `MIN_BAR_COLUMNS` wide,
        "line" otherwise (a terminal of unknown or 0 width included)."""
        if quiet:
            return cls(stream, "off")
        try:
            tty = bool(stream.isatty())
        except (AttributeError, OSError, ValueError):  # no isatty, or a closed stream
            tty = False
        columns = terminal_columns(stream) if tty else None
        return cls(stream, "bar" if columns is not None and columns >= MIN_BAR_COLUMNS else "line")

    # -- the engine's API ------------------------------------------------------------------------------

    def start(self, total_documents: int, total_bytes: int) -> None:
        """The work about to be processed. Calling it again replaces the totals."""
        with self._lock:
            if self._inactive:
                return
            self.total_documents = max(0, total_documents)
            self.total_bytes = max(0, total_bytes)
            if self._started_at is None:
                self._started_at = self._clock()
                self._next_line_at = self._started_at + self._interval
            if self.mode == "bar":
                self._guard(self._start_bar)

    def document(self, path: str, *, phase: str = "", others: int = 0) -> None:
        """The file now being worked on, and what is being done to it (`phase`, e.g. "embedding");
        `others`: how many more documents the same piece of work covers (one embedding call)."""
        self._working_on(phase, printable(path), max(0, others))

    def embedding(self, path: str, *, size: int, chunks: int) -> None:
        """`document(path, phase="embedding")` for a document whose `chunks` chunks are embedded in
        slices: until it is written, its `size` bytes are credited as its chunks get vectors."""
        with self._lock:
            self._flight_size, self._flight_chunks, self._flight_vectors = max(0, size), max(0, chunks), 0
        self.document(path, phase="embedding")

    def ocr_run(self, images: int) -> None:
        """Before the pipeline: `images` images to read by OCR, announced with an estimate when there
        are `LARGE_OCR_PAGES` or more (a PDF's scanned pages are found as it is read: announced then)."""
        if images >= LARGE_OCR_PAGES:
            from pinakes.extract.ocr import estimate_seconds, ocr_workers

            workers = ocr_workers()
            self.announce(f"{counted(images, 'image')} to read by OCR: about "
                          f"{_duration(estimate_seconds(images, workers))} ({counted(workers, 'worker')})")

    def ocr_pages(self, report: OcrProgress) -> None:
        """A page of `report.path` read by OCR (or, with `done` 0, its reading about to start)."""
        if report.done == 0 and report.total >= LARGE_OCR_PAGES:
            self.announce(f"{report.path}: reading {counted(report.total, 'page')} by OCR, about "
                          f"{_duration(report.seconds_left)} ({counted(report.workers, 'worker')})")
        rate = report.pages_per_second
        measured = f", {rate:.2f} pages/s, {_duration(report.seconds_left)} left" if rate else ""
        self.document(report.path, phase=f"OCR {report.done}/{report.total} pages{measured}")

    def step(self, label: str) -> None:
        """A step of the sync that is no one document's (deriving the graph)."""
        self._working_on(label, "", 0)

    @property
    def current_display(self) -> str:
        """What is being worked on, as shown: `embedding docs/a.md +3 more`; "" before any."""
        return self.current_field(None)

    def current_field(self, width: int | None) -> str:
        """`current_display` fitted into `width` columns by shortening the file name in its middle
        (None: no limit); "" when even a shortened name would not fit."""
        prefix = f"{self._phase} " if self._phase and self._current else self._phase
        suffix = f" +{self._others} more" if self._others else ""
        if width is None or len(prefix) + len(self._current) + len(suffix) <= width:
            return prefix + self._current + suffix
        room = width - len(prefix) - len(suffix)
        if not self._current or room < _MIN_NAME:
            return ""
        return prefix + _shorten(self._current, room) + suffix

    def advance(self, *, documents: int = 0, bytes_done: int = 0, chunks: int = 0, reused: int = 0) -> None:
        """Work finished since the last call: whole documents, their bytes, chunks embedded, chunks
        whose stored vectors were reused."""
        with self._lock:
            if self._inactive:
                return
            self.documents_done += documents
            self.bytes_done += bytes_done
            self.chunks += chunks
            self.reused += reused
            if documents:  # the document in flight, if any, is written (or failed): its bytes are in
                self._flight_size = self._flight_chunks = self._flight_vectors = 0
            else:
                self._flight_vectors += chunks + reused
            if documents or bytes_done or chunks or reused:
                self._last_work_at = self._clock()
            self._tick(self._moved())

    def workers_alive(self, count: int) -> None:
        """How many cluster workers embed for this run now (shown beside the rate); the first count and
        a loss are also announced at once, since a slower rate alone would not say why."""
        with self._lock:
            first = self.workers is None
            lost = not first and count < (self.workers or 0)
            self.workers = count
        if first:  # said once up front: a sync quicker than one progress line would never name them
            self.announce(f"embedding on the cluster: {counted(count, 'worker')} alive")
        elif lost:
            self.announce(f"a cluster worker was lost; its batches go to the {counted(count, 'worker')} left"
                          if count else "every cluster worker was lost")

    @property
    def fraction_done(self) -> float:
        """The share of the work done as the fill shows it (0.0 before `start`, or with no work)."""
        with self._lock:
            total = self.total_bytes if self._by_bytes else self.total_documents
            return min(1.0, self._shown / total) if total > 0 else 0.0

    def documents_fraction(self) -> str:
        """ "3/5 documents", "1/1 document": the noun agrees with the total."""
        return f"{self.documents_done}/{self.total_documents} {noun_for(self.total_documents, 'document')}"

    def eta(self) -> float | None:
        """Seconds left at the average rate so far; None until enough work is measured (see the
        module docstring), or while one document has run longer than all the measured work."""
        with self._lock:
            if self._started_at is None or self._last_work_at is None:
                return None
            done, total = self._shown, (self.total_bytes if self._by_bytes else self.total_documents)
            if total <= 0 or (self.documents_done < ETA_MIN_DOCUMENTS and done < ETA_MIN_FRACTION * total):
                return None
            if done >= total:
                return 0.0  # every document is done: what runs now (the graph, link scans) is the end
            now = self._clock()
            if now - self._last_work_at > self._last_work_at - self._started_at:
                return None  # the document in flight already took longer than everything before it
            return _eta(now - self._started_at, done, total)

    def announce(self, message: str) -> None:
        """A one-off line: above the bar in bar mode, its own line in line mode, nothing when off."""
        with self._lock:
            if self._inactive:
                return
            text = printable(message)
            if self.mode == "bar":
                bar_class = _bar_class()
                self._guard(lambda: bar_class.write(text, file=self._out))
            else:
                self._write_line(f"sync: {text}")

    def close(self) -> None:
        """Finish: clear the bar, or (line mode, after a sync longer than `interval`) print a summary."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._broken or self.mode == "off":
                return
            if self.mode == "bar":
                bar, self._bar = self._bar, None
                if bar is not None:
                    self._guard(bar.close)
                return
            if self._started_at is None:
                return
            elapsed = self._clock() - self._started_at
            if self._lines or elapsed >= self._interval:
                self._write_line(f"sync: indexed {self.documents_fraction()}, {_chunks(self.chunks)} "
                                 f"in {elapsed:.1f} s")

    def __enter__(self) -> SyncProgress:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- internals -------------------------------------------------------------------------------------

    def _working_on(self, phase: str, name: str, others: int) -> None:
        with self._lock:
            if self._inactive:
                return
            new_phase = phase != self._phase
            self._phase, self._current, self._others = phase, name, others
            if new_phase and self.mode == "bar" and self._bar is not None:
                # At once, not at the next throttled redraw: the work that follows (a model call, a
                # large PDF) may be what the person waits on.
                self._guard(self._bar.refresh)
            else:
                self._tick(0)

    @property
    def _inactive(self) -> bool:
        return self.mode == "off" or self._closed or self._broken

    def _moved(self) -> int:
        """How much further the work done has come since it was last shown (0 if not at all): finished
        documents' bytes plus the credit of the one in flight, in documents when no sizes are known."""
        if self._by_bytes:
            credit = (self._flight_size * min(self._flight_vectors, self._flight_chunks) // self._flight_chunks
                      if self._flight_chunks else 0)
            done = self.bytes_done + credit
        else:
            done = self.documents_done
        moved = max(0, done - self._shown)
        self._shown += moved
        return moved

    @property
    def _by_bytes(self) -> bool:
        """Whether the bar's fill and the ETA follow bytes (else documents: no byte sizes known)."""
        return self.total_bytes > 0

    def _start_bar(self) -> None:
        total = self.total_bytes if self._by_bytes else (self.total_documents or None)
        done = self._shown
        if self._bar is not None:
            self._bar.total = total
            self._bar.n = done
            self._bar.refresh()
            return
        bar = _bar_class()(
            total=total, initial=done, file=self._out, dynamic_ncols=True, mininterval=0.2,
            miniters=0, smoothing=0, leave=False, bar_format=_BAR_FORMAT, progress=self)
        if self._broken:  # its first draw failed
            bar.disable = True
        else:
            self._bar = bar

    def _tick(self, units: int) -> None:
        """Redraw if due: the bar (tqdm throttles to `mininterval`), or a line once per `interval`."""
        if self._started_at is None:
            return  # nothing shown before start()
        if self.mode == "bar":
            bar = self._bar
            if bar is not None:
                self._guard(lambda: bar.update(units))
            return
        now = self._clock()
        if now < self._next_line_at:
            return
        self._next_line_at = now + self._interval
        self._lines += 1
        self._write_line(self._status_line(now - self._started_at))

    def _status_line(self, elapsed: float) -> str:
        parts = [f"sync: {self.documents_fraction()}", _chunks(self.chunks)]
        if elapsed > 0:
            parts.append(f"{self.chunks / elapsed:.1f} chunks/s")
        if self.reused:
            parts.append(f"{self.reused:,} reused")
        if self.workers is not None:
            parts.append(f"{counted(self.workers, 'worker')} alive")
        left = self.eta()
        if left is not None:
            parts.append(f"about {_duration(left)} left")
        line = ", ".join(parts)
        current = self.current_display
        return f"{line} ({current})" if current else line

    def _write_line(self, line: str) -> None:
        self._out.write(line + "\n")
        self._out.flush()

    def _guard(self, action: Callable[[], object]) -> None:
        """Run a tqdm call; should it fail all the same, turn progress off for good instead of raising."""
        try:
            action()
        except (OSError, ValueError):
            self._stream_failed()

    def _stream_failed(self) -> None:
        self._broken = True
        bar, self._bar = self._bar, None
        if bar is not None:
            bar.disable = True  # so that tqdm's own close()/__del__ does nothing more


def terminal_columns(stream: TextIO) -> int | None:
    """The width of the terminal `stream` writes to, None when it cannot be told (0 is returned as 0:
    a pseudo-terminal whose size nobody set)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):  # no fileno (io.UnsupportedOperation), not a terminal
        return None
