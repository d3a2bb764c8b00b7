"""How many CPU threads a searching process gives NumPy's BLAS.

OpenBLAS runs the matrix-vector product on a thread per core and keeps those threads spinning for a
while after it returns. In a hybrid search that spin takes the cores the query embedding and the
BM25 worker need: at 100k chunks on two cores, one BLAS thread (with one model-runtime thread,
`search.core.QUERY_MODEL_THREADS`) took hybrid p50 from 52-60 to 33-35 ms, the matrix product
itself no slower (docs/perf/search.md); neither alone helped. OpenBLAS reads its thread count
once, when NumPy is first imported, so a command that only searches asks before anything imports
NumPy; a process that already has NumPy is left as it is, and an OPENBLAS_NUM_THREADS the user set
always wins.
"""

from __future__ import annotations

import os
import sys

BLAS_THREADS_VARIABLE = "OPENBLAS_NUM_THREADS"


def prefer_one_blas_thread() -> None:
    if "numpy" not in sys.modules:
        os.environ.setdefault(BLAS_THREADS_VARIABLE, "1")
