"""How many CPU threads a searching process gives NumPy's BLAS.

OpenBLAS runs the matrix-vector product on a thread per core and keeps those threads spinning for a
while after it returns. In a hybrid search that spin takes the cores the query embedding and the
BM25 worker need: at 100k chunks on two cores, one BLAS thread (with one model-runtime thread,
`search.core.QUERY_MODEL_THREADS`) took hybrid p50 from 52-60 to 33-35 ms, the matrix product
itself no slower (docs/perf/search.md); neither alone helped. OpenBLAS reads its thread count
once, when NumPy is first imported, so a command that only searches asks before anything imports
NumPy; a process that already has NumPy is left as it is, and an OPENBLAS_NUM_THREADS the user set
wins there.

A process that searches in bulk after importing NumPy (a sync's self-calibration, hundreds of
searches) limits its BLAS for that while instead (`one_blas_thread`, threadpoolctl), whatever the
environment said: there the spinning threads took a third of the calibration's CPU at 1,503 chunks,
and with its forked second asker four of them fought for two cores (docs/perf/sync.md, "The
questions on two processes"). The count is the process's, and threadpoolctl lets one thread at a
time set it: where a block is already open on another thread, or another live thread of the
process holds threadpoolctl's control, the block leaves the count as it is (slower, never wrong).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Generator

BLAS_THREADS_VARIABLE = "OPENBLAS_NUM_THREADS"


def prefer_one_blas_thread() -> None:
    if "numpy" not in sys.modules:
        os.environ.setdefault(BLAS_THREADS_VARIABLE, "1")


# Held while a block has set the count. A block that finds it held leaves the count alone rather than
# wait (it would spend its caller's time bound waiting; in a child forked while another thread held
# it, forever). Each block restores what it found, so two setting it at once would leave it wrong.
_limit_lock = threading.Lock()


@contextlib.contextmanager
def one_blas_thread() -> Generator[None, None, None]:
    """NumPy's BLAS on one thread inside the block, in a process that may already have imported
    NumPy (module docstring), as it was after; where another block is open, the count is left as
    it is. A child forked inside keeps one."""
    from threadpoolctl import threadpool_limits  # pyright: ignore[reportMissingTypeStubs]  # ships no stubs

    if not _limit_lock.acquire(blocking=False):
        yield
        return
    try:
        with threadpool_limits(limits=1, user_api="blas"):
            yield
    finally:
        _limit_lock.release()
