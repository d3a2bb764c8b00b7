"""Reading pages by OCR, from the sync's side: isolated workers, two cores, progress.

Every page is one call to an extraction worker (`isolation.run_isolated`) running a function of
`ocr_engine.py`, under the limits a PDF parse of the same file gets (`Limits.for_input`, with
room for the models: `ocr_limits`): a page
that crashes the decoder, loops or blows up its memory fails its document with the reason, never
the sync, and the worker is replaced. One call per page, not per document, so progress is shown
page by page and a long scan never sits silent.

Pages are read `ocr_workers()` at a time, each worker a process of its own (slots `OCR_SLOTS`,
apart from slot 0 where the text-layer parser runs, so a worker holding the OCR models never
parses a PDF under a parser's memory limit). Two processes of one ONNX thread each, not one of two
threads: on a shared machine a thread pool waits on its slowest core at every layer.

Whoever shows progress listens (`listening`): each page read reports the document, pages done and
to do, and the seconds so far, so a caller can show pages/s and pages left; a caller can also price
a run before it starts from `PAGE_SECONDS_GUESS`, or better from the rate measured so far.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import queue
import threading
import time
from collections.abc import Callable, Generator, Iterable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from pinakes.extract.isolation import GIB, Limits, run_isolated
from pinakes.extract.ocr_engine import OcrPage

OCR_SLOTS = (1, 2)
# The address space an OCR call may use at the least: the models and their working memory. Measured
# (bench/bench_ocr.py, docs/QUALITY.md "OCR") at a peak of 642 MiB resident and 1,343 MiB of address
# space a worker on dense 150-dpi pages (1,031 and 1,768 MiB when lines were recognised six at a time);
# the PDF parser's 2 GiB would leave a bomb-sized margin only, and a page that outgrew it would be
# recorded as a document no sync can read. The CPU and wall-clock limits are the PDF parser's own
# (Limits.for_input), per page.
OCR_ADDRESS_SPACE = 3 * GIB
# Seconds one worker takes for a dense 150-dpi page on this project's reference machine with a core
# to itself (1.3 s of CPU a page, bench/bench_ocr.py): what an estimate assumes before this run has
# measured any; a loaded machine is slower, and the measured rate takes over after the first pages.
PAGE_SECONDS_GUESS = 1.5
OCR_REMEDY = ("if the file opens in a viewer, report this as a Pinakes bug; otherwise re-export it and run "
              "`pnk sync`, or exclude it in [sources]")

PageCall = tuple[Callable[..., OcrPage], tuple[object, ...]]


@dataclass(frozen=True, slots=True)
class OcrProgress:
    """Where the OCR of one document stands: `done` of `total` pages read in `seconds` of wall clock."""

    path: str
    done: int
    total: int
    seconds: float
    workers: int

    @property
    def pages_per_second(self) -> float | None:
        return self.done / self.seconds if self.done and self.seconds > 0 else None

    @property
    def seconds_left(self) -> float:
        """At the rate measured on this document, or the guess before its first page."""
        rate = self.pages_per_second
        left = self.total - self.done
        return left / rate if rate else estimate_seconds(left, self.workers)


Listener = Callable[[OcrProgress], None]
_listener: Listener | None = None


def estimate_seconds(pages: int, workers: int | None = None) -> float:
    """What reading `pages` pages is expected to take before any has been measured."""
    return pages * PAGE_SECONDS_GUESS / max(1, workers or ocr_workers())


def images_to_read(content_hashes: Iterable[str], cache_dir: Path) -> int:
    """How many of these images (by content hash) OCR would read now: those the extraction cache
    does not hold under the current OCR fingerprint. Each counts one page (a TIFF may hold more)."""
    from pinakes.extract.cache import ExtractCache
    from pinakes.extract.registry import EXTRACTORS

    cache, fingerprint = ExtractCache(cache_dir), EXTRACTORS["rapidocr"].fingerprint()
    return sum(1 for content_hash in content_hashes if not cache.path_for(content_hash, fingerprint).is_file())


@contextlib.contextmanager
def listening(listener: Listener | None) -> Generator[None]:
    """Report every page read inside the block to `listener` (None: to nobody)."""
    global _listener
    previous, _listener = _listener, listener
    try:
        yield
    finally:
        _listener = previous


def ocr_workers() -> int:
    """How many pages are read at once: one per core, at most len(OCR_SLOTS)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(len(OCR_SLOTS), cores))


def read_pages(path: Path, calls: Sequence[PageCall], *, what: str, label: str | None = None) -> list[OcrPage]:
    """Run each call (one page each) in the OCR workers, at most `ocr_workers()` at once; the pages
    in the order of `calls`. The first failure cancels the pages not yet started and is raised."""
    total = len(calls)
    if not total:
        return []
    limits = ocr_limits(path)
    workers = min(ocr_workers(), total)
    slots: queue.SimpleQueue[int] = queue.SimpleQueue()
    for slot in OCR_SLOTS[:workers]:
        slots.put(slot)
    started = time.monotonic()
    shown = label if label is not None else str(path)
    done = 0
    tally = threading.Lock()
    listener = _listener

    def notify(count: int) -> None:
        if listener is not None:
            listener(OcrProgress(shown, count, total, time.monotonic() - started, workers))

    def one(call: PageCall) -> OcrPage:
        nonlocal done
        slot = slots.get()
        try:
            function, args = call
            page = run_isolated(function, *args, limits=limits, what=what, path=path, remedy=OCR_REMEDY, slot=slot)
        finally:
            slots.put(slot)
        with tally:
            done += 1
            count = done
        notify(count)
        return page

    notify(0)
    futures: list[Future[OcrPage]] = [_pool().submit(one, call) for call in calls]
    finished, _ = wait(futures, return_when=FIRST_EXCEPTION)
    for future in futures:
        error = future.exception() if future in finished else None
        if error is not None:
            for other in futures:
                other.cancel()
            wait(futures)  # nothing of this document still runs when its failure is reported
            raise error
    return [future.result() for future in futures]


_pool_lock = threading.Lock()
_executor: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    """The threads that drive the OCR workers (one per slot), made once and kept for the life of the
    process rather than per document. (The workers themselves outlive any thread: isolation.py
    starts them from process_starter.py's thread.)"""
    global _executor
    with _pool_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=len(OCR_SLOTS), thread_name_prefix="pinakes-ocr")
        return _executor


def ocr_limits(path: Path) -> Limits:
    """The limits of a PDF parse of the same file, with room for the models (`OCR_ADDRESS_SPACE`)."""
    limits = Limits.for_input(_size(path))
    return dataclasses.replace(limits, address_space_bytes=max(limits.address_space_bytes, OCR_ADDRESS_SPACE))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
