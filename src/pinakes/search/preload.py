"""What a process's first search can start before it needs it: the embedding model loading on a
thread, and the kernel reading the vector file ahead.

A one-shot `pnk search` (and a server's first search) spends ~1 s loading the model: importing
fastembed and ONNX Runtime, then building the session, mostly Python holding one core. The keyword
side needs no model and the vector file's pages need only a disk, so they run meanwhile instead
of after it (docs/perf/search.md, "cold `pnk search`"). Nothing here changes what a search returns:
the model is the one the search would have loaded, and read-ahead only fills the page cache.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

T = TypeVar("T")


class Loading(Generic[T]):
    """`load()` running on its own thread; `result()` waits for it and returns its value or raises
    its error, as calling `load()` there would have. Not a daemon: a process that ends meanwhile
    waits for it rather than tearing a native library down mid-load."""

    def __init__(self, load: Callable[[], T]):
        self._load = load
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="pinakes-model-load")
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._load()
        except BaseException as exc:  # handed to the caller of result(), which raises it
            self._error = exc

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        assert self._value is not None
        return self._value


# The kernel reads at most its read-ahead window (read_ahead_kb, 8 MiB here) per WILLNEED call, so a
# whole file is asked for a window at a time: 75 calls for the 614 MB vector file of 1.1M rows, ~0.1 s
# to submit, the file in the page cache ~0.4 s later on the development machine. Last window first:
# usearch saves its int8 vectors, then the graph, and opening the file walks every node of the graph
# (the vectors are read only where a search goes), so the graph is what is needed first (measured
# cold: the open 0.15 s after asking back to front, 0.22 s front to back, 0.27 s not asking).
READ_AHEAD_STEP = 8 << 20


def read_ahead(path: Path) -> bool:
    """Ask the kernel to read all of `path` into the page cache (POSIX_FADV_WILLNEED), without
    waiting for the reads; False when it could not be asked (no such file, no such call on this
    platform). A missing or damaged file is found and reported by the reader that opens it later,
    never here."""
    if not hasattr(os, "posix_fadvise"):
        return False
    try:
        handle = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        size = os.fstat(handle).st_size
        for offset in reversed(range(0, size, READ_AHEAD_STEP)):
            os.posix_fadvise(handle, offset, READ_AHEAD_STEP, os.POSIX_FADV_WILLNEED)
        return True
    except OSError:
        return False
    finally:
        os.close(handle)


def read_ahead_in_background(path: Path) -> threading.Thread:
    """`read_ahead(path)` on a daemon thread (submitting the reads can block ~0.1 s): only system
    calls, so a process may end while it runs."""
    thread = threading.Thread(target=read_ahead, args=(path,), name="pinakes-read-ahead", daemon=True)
    thread.start()
    return thread
