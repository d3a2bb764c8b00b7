"""The approximate index itself: usearch's HNSW over int8 vectors, the one module that imports it.

Chosen by measurement (docs/perf/vector-tiers.md): of usearch, faiss-cpu, hnswlib and sqlite-vec on
real MiniLM vectors, usearch is the one that memory-maps its saved index (`view`: a searching
process keeps only the pages it touches), stores int8 (a quarter of float32), removes rows in
place, and ships wheels for every platform the product supports. Candidates are rescored with the
exact float vectors from the index (search.py), so its int8 codes only choose candidates.

usearch is an optional dependency (the `ann` extra): without it `load_library` raises
VectorFileUnusable("unavailable"), a sync skips the file and search stays exact.
"""

from __future__ import annotations

import importlib.util
import struct
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Protocol, cast

import numpy as np
from numpy.typing import NDArray

from pinakes.vectors.fileformat import UNAVAILABLE_DETAIL, VectorFileUnusable

# Build parameters: part of the content key, so changing one rebuilds every file.
DEFAULT_PARAMS: Mapping[str, object] = {"metric": "cos", "dtype": "i8", "connectivity": 16, "expansion_add": 128}
# Search breadth: not part of the file. Recall@10 of the whole path (50 candidates rescored exactly)
# against exact float search on the real vectors extended to 1M rows (docs/perf/vector-tiers.md):
# the index's own builds 0.969-0.9775 on real questions at 512, 0.985-0.991 at 1024; the product's
# path end to end (the step's build, an in-place update, rescoring from SQLite) 0.9785 and 0.977 at
# 1024, 0.982 at 1536 and at 2048 (same build), p50 3.3 / 4.1 / 4.7 ms. More candidates gain nothing:
# the missed neighbours are not in the beam, so breadth is the lever. 101k real: 0.9965 at 512.
# Every piece of the file is searched at it (so a search costs ~pieces x one; a smaller breadth per
# piece is measured in docs/perf/vector-tiers.md, vecpieces, and not shipped).
EXPANSION_SEARCH = 1536


class _Matches(Protocol):
    keys: NDArray[np.uint64]
    distances: NDArray[np.float32]


class AnnIndex(Protocol):
    """The part of usearch's `Index` the product uses."""

    expansion_search: int

    def __len__(self) -> int: ...
    def add(self, keys: NDArray[np.int64], vectors: NDArray[np.float32], *, threads: int = 0) -> object: ...
    def remove(self, keys: NDArray[np.int64], *, compact: bool = False, threads: int = 0) -> object: ...
    def search(self, vectors: NDArray[np.float32], count: int = 10, *, threads: int = 0) -> _Matches: ...
    def save(self, path_or_buffer: str | None = None) -> object: ...
    def load(self, path_or_buffer: object) -> None: ...
    def view(self, path_or_buffer: object) -> None: ...
    def reset(self) -> None: ...


class _IndexClass(Protocol):
    def __call__(self, *, ndim: int, metric: str, dtype: str, connectivity: int, expansion_add: int,
                 expansion_search: int) -> AnnIndex: ...


def load_library() -> tuple[str, _IndexClass]:
    """("usearch <version>", its Index class), or VectorFileUnusable("unavailable")."""
    _onnxruntime_first()
    try:
        import usearch  # optional: only KBs above the threshold need it
        import usearch.index
    except ImportError as exc:
        raise VectorFileUnusable("unavailable", UNAVAILABLE_DETAIL) from exc
    module: ModuleType = usearch.index
    version = cast("str", getattr(usearch, "__version__", "unknown"))
    return f"usearch {version}", cast("_IndexClass", module.Index)


def _onnxruntime_first() -> None:
    """Importing onnxruntime after usearch kills the process (SIGSEGV on import; measured with
    usearch 2.26.6 and onnxruntime 1.32.0, Linux x86-64, Python 3.11.7); the other order works. A
    process that holds the file may load a fastembed model later (the reranker of a long-lived
    `pnk serve`, the confidence calibration after a sync), so onnxruntime, when installed, is
    imported first (~0.15 s, already paid by every process that embeds with fastembed)."""
    if importlib.util.find_spec("onnxruntime") is not None:
        # imported for its cost alone; onnxruntime ships no type stubs
        import onnxruntime  # noqa: F401  # pyright: ignore[reportMissingTypeStubs, reportUnusedImport]


# What opens the library's own header, saved right after the vector codes.
_HEADER_MAGIC = b"usearch"


def codes_span(read: Callable[[int, int], bytes], size: int) -> tuple[int, int]:
    """Where a saved index holds its vector codes, (offset, bytes) from its start (fileformat's
    CodesSpan): usearch 2 saves a u32 row count and a u32 row width, the rows' codes, then its
    header (opening with b"usearch") and the graph. (0, 0) — every byte checked — when the bytes
    are not laid out so (another version's layout): the span is trusted only with the magic where
    the counts say the codes end.

    Part of the file's format: every reader finds the span again with this function and refuses a
    footer that disagrees, and an update compares a copied piece's span with its old footer's. What
    it answers for a saved piece changes only with FORMAT_VERSION (fileformat.py), which makes every
    older file stale, never damaged (tests/test_vector_graph_checksums.py pins its answer)."""
    head = read(0, 8)
    if len(head) < 8:
        return 0, 0
    rows, width = struct.unpack("<II", head)
    end = 8 + rows * width
    if width == 0 or end + len(_HEADER_MAGIC) > size or read(end, len(_HEADER_MAGIC)) != _HEADER_MAGIC:
        return 0, 0
    return 8, rows * width


def new_index(dim: int, params: Mapping[str, object]) -> AnnIndex:
    _, index_class = load_library()
    return index_class(ndim=dim, metric=str(params["metric"]), dtype=str(params["dtype"]),
                       connectivity=_int(params["connectivity"]), expansion_add=_int(params["expansion_add"]),
                       expansion_search=EXPANSION_SEARCH)


def _int(value: object) -> int:
    if not isinstance(value, int):
        raise TypeError(f"expected an integer build parameter, not {value!r}")
    return value
