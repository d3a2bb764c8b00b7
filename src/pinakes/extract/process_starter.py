"""Child processes started from one thread that lives as long as the process.

On Linux a child's parent-death signal (prctl PR_SET_PDEATHSIG, which the isolation workers set so
a parser stuck in native code never outlives its parent) fires when the *thread* that started the
child ends, not the process. A worker started by a caller's short-lived thread (a sync that `pnk
watch` runs on its host's thread, an MCP request, OCR's page threads, a test) would be killed when
that thread ends, even mid-call for another thread. So isolation.py starts every worker here: on
one daemon thread, made on first use, that ends only with the process.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future

Start = Callable[[], "subprocess.Popen[bytes]"]
_Started = Future["subprocess.Popen[bytes]"]

_lock = threading.Lock()
_starts: queue.SimpleQueue[tuple[Start, _Started]] | None = None


def start_process(start: Start) -> subprocess.Popen[bytes]:
    """`start()`, run on the starter thread; its process, or what it raised, comes back here."""
    global _starts
    with _lock:
        if _starts is None:
            _starts = queue.SimpleQueue()
            threading.Thread(target=_serve, args=(_starts,), name="pinakes-process-starter", daemon=True).start()
        starts = _starts
    started: _Started = Future()
    starts.put((start, started))
    try:
        return started.result()
    except BaseException:
        started.add_done_callback(_kill_unclaimed)  # a wait cut short (Ctrl-C) leaves no process unowned
        raise


def _serve(starts: queue.SimpleQueue[tuple[Start, _Started]]) -> None:
    while True:
        start, started = starts.get()
        try:
            started.set_result(start())
        except BaseException as exc:  # the caller's to raise
            started.set_exception(exc)


def _kill_unclaimed(started: _Started) -> None:
    if not started.cancelled() and started.exception() is None:
        process = started.result()
        process.kill()
        process.wait()


def _forget_in_forked_child() -> None:
    # A fork keeps only the thread that forked: the starter is made afresh on first use there.
    global _lock, _starts
    _lock = threading.Lock()
    _starts = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_forked_child)


def die_with_parent() -> None:
    """Called first in a worker started here: on Linux, the kernel kills it when its parent dies
    (even by SIGKILL), so a worker stuck in native code is never orphaned; elsewhere a worker exits
    once idle, when its input closes."""
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    try:
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the signal was asked for
        os._exit(1)
