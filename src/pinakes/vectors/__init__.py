"""The approximate vector tier (issue #45): a derived, disposable file beside the index,
`.pinakes/vectors.ann`, that answers vector search for KBs of `ANN_MIN_ROWS` active vectors and more.

Why a second file is allowed at all: the portable unit of a KB is its directory of documents,
sidecars and `pinakes.toml`; everything under `.pinakes/` is derived and rebuilt from it (the index
itself is). The vector file is one more derived file there: content-addressed by the rows it was
built from (source.content_key), checked before every use (fileformat), swapped in whole by rename
(build), and never the only way to an answer: when it is missing, stale, damaged or its library is
not installed, search answers exactly and says so (approximate.fallback_note).

Modules, by concern: `source` (the index's active vectors and their content key), `fileformat`
(layout: the index as pieces of at most `build.PIECE_ROWS` rows, each owning a range of chunk ids;
footer, checksums, atomic write), `engine` (usearch, the one module that imports it), `build`
(`refresh_vector_file`: unchanged, incremental or whole, one piece in memory at a time: issue #45's
memory bar), `approximate` (open, search every piece with exact rescoring, the fallback note),
`freshness` (the key the last sync recorded). The names below
are imported when first asked for, so that importing a light module of the package (a no-op sync
asks `freshness` and reads a footer) does not import numpy.

How it is wired into sync and search is in docs/perf/vector-tiers.md ("Wiring").
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported on first use (`__getattr__`): numpy and usearch stay off the no-op sync's path
    from pinakes.vectors.approximate import (
        OpenVectorFile,
        approximate_candidates,
        approximate_search,
        fallback_note,
        open_vector_file,
    )
    from pinakes.vectors.build import ANN_MIN_ROWS, RefreshReport, refresh_vector_file
    from pinakes.vectors.engine import DEFAULT_PARAMS
    from pinakes.vectors.fileformat import FILE_NAME, VectorFileUnusable, vector_file_path
    from pinakes.vectors.source import vectors_of

_HOMES = {
    "OpenVectorFile": "approximate", "approximate_candidates": "approximate", "approximate_search": "approximate",
    "fallback_note": "approximate", "open_vector_file": "approximate",
    "ANN_MIN_ROWS": "build", "RefreshReport": "build", "refresh_vector_file": "build",
    "DEFAULT_PARAMS": "engine",
    "FILE_NAME": "fileformat", "VectorFileUnusable": "fileformat", "vector_file_path": "fileformat",
    "vectors_of": "source",
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from pinakes.vectors import approximate, build, engine, fileformat, source

    modules = {"approximate": approximate, "build": build, "engine": engine, "fileformat": fileformat,
               "source": source}
    return getattr(modules[home], name)


def expected_key(conn: sqlite3.Connection, identity: Mapping[str, str],
                 params: Mapping[str, object] | None = None) -> str:
    """The content key a vector file must carry to answer for the index behind `conn` now
    (`params`: the engine's DEFAULT_PARAMS when None)."""
    from pinakes.vectors.engine import DEFAULT_PARAMS
    from pinakes.vectors.source import content_key, row_keys

    return content_key(row_keys(conn), identity, DEFAULT_PARAMS if params is None else params)


__all__ = [
    "ANN_MIN_ROWS",
    "DEFAULT_PARAMS",
    "FILE_NAME",
    "OpenVectorFile",
    "RefreshReport",
    "VectorFileUnusable",
    "approximate_candidates",
    "approximate_search",
    "expected_key",
    "fallback_note",
    "open_vector_file",
    "refresh_vector_file",
    "vector_file_path",
    "vectors_of",
]
