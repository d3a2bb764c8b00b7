"""How a searching process uses threads: how many CPU threads NumPy's BLAS gets, and where a
hybrid search's keyword side runs.

OpenBLAS runs the matrix-vector product on a thread per core and keeps those threads spinning for a
while after it returns. In a hybrid search that spin takes the cores the query embedding and the
BM25 worker need: at 100k chunks on two cores, one BLAS thread (with one model-runtime thread,
`search.core.QUERY_MODEL_THREADS`) took hybrid p50 from 52-60 to 33-35 ms, the matrix product
itself no slower (docs/perf/search.md); neither alone helped. OpenBLAS reads its thread count
once, when NumPy is first imported, so a command that only searches asks before anything imports
NumPy; a process that already has NumPy is left as it is, and an OPENBLAS_NUM_THREADS the user set
always wins.

A hybrid search runs its keyword side on a worker thread while the vector side embeds the query and
ranks (search/core.py). Where the query's vector is at hand already (a self-calibration's questions
are embedded in batches first: calibration/question_vectors.py) there is nothing to overlap but a
product over the matrix, and the hand-off to the worker and back costs more CPU than it saves
(~0.03-0.04 s of a 300-page KB's 400 searches, docs/perf/sync.md "calfast"): with
`SearchSettings.keyword_thread` off (a small KB's self-calibration) the keyword side runs on the
caller's thread, `OnTheCaller`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from concurrent import futures
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

BLAS_THREADS_VARIABLE = "OPENBLAS_NUM_THREADS"


def prefer_one_blas_thread() -> None:
    if "numpy" not in sys.modules:
        os.environ.setdefault(BLAS_THREADS_VARIABLE, "1")


class OnTheCaller(futures.Executor):
    """An executor that runs each call at once on the caller's thread: the future it returns is done,
    with the call's result or its error, as the worker's would hold them (an interrupt is raised at
    once, as the caller's thread would have heard it)."""

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> futures.Future[T]:
        done: futures.Future[T] = futures.Future()
        try:
            done.set_result(fn(*args, **kwargs))
        except Exception as exc:  # handed over as the worker thread's future would hand it
            done.set_exception(exc)
        return done
