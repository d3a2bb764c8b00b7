"""Which vector file answers for an index now, known without reading every row.

The content key (source.content_key) is the proof that a file answers for the index's rows, but
computing it reads every active row's id and checksum: 1.7 to 3.3 s at 1M rows on the development
machine (docs/perf/vector-tiers.md), paid by every cold `pnk search`. So the step that writes the
file also records, in the index's meta, the key it wrote it for (`META_KEY`), in a transaction after
the file is in place, and a searching process compares that with the file's footer instead.

Why the recorded key can be trusted: it is written by the sync's `vectors` step, which runs after
every stage that writes vectors or changes a document's state, and only while the sync's
`sync_started_at` mark is present. Every sync writes that mark before its first change and removes
it only when it completes (sync/engine.py), after this step. So when the mark is absent, no change
has been made since some sync's vectors step ran to the end, and the key it recorded is the key of
the rows now. When the mark is present (a sync running, or killed or stopped before its end), the
recorded key proves nothing and the key is computed from the rows, as before. A step that could not
write the file (its library is not installed) records that instead of a key, and a KB below the
threshold records that it has no file, so a search of a small KB reads one meta row and no file.

`file_state` says the same judgement to a person (`pnk status`, the MCP server's `pinakes_status`):
the expected key as above, then the footer and its staleness checks as `open_vector_file` makes
them, without mapping the pieces or reading every byte.
"""

from __future__ import annotations

import importlib.util
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes.index.chunk_counts import recorded_since_completed_sync
from pinakes.vectors.fileformat import (
    UNAVAILABLE_DETAIL,
    VectorFileUnusable,
    check_answers_for,
    read_header,
    vector_file_path,
)
from pinakes.wording import counted

if TYPE_CHECKING:  # numpy and the engine are imported by `open_for_index` only: `recorded_state` needs neither
    from pinakes.vectors.approximate import OpenVectorFile

META_KEY = "vector_file"  # the content key of the file the last vectors step left, or one of:
BELOW_THRESHOLD = "below-threshold"  # the index held too few vectors for a file: exact search
NOT_BUILT = "not-built"  # the file's library was not installed when the step ran
NOT_WANTED = "numpy-tier"  # the manifest asked for exact search at any size: no file is kept


def recorded_state(conn: sqlite3.Connection) -> str | None:
    """What the last vectors step recorded, when it holds for the index now (see the module);
    None when it may not (a sync started since and has not completed, or no step recorded any)."""
    meta = recorded_since_completed_sync(conn, META_KEY)
    return None if meta is None else meta.get(META_KEY)


def open_for_index(conn: sqlite3.Connection, pinakes_dir: Path, identity: Mapping[str, str], dim: int, *,
                   min_rows: int, check_body: bool = False, release_pages: bool = False) -> OpenVectorFile | None:
    """The vector file that answers for the index behind `conn` now, opened; None when the index
    holds fewer than `min_rows` active vectors (exact search is the tier there, not a fallback);
    VectorFileUnusable when a file should answer and cannot (missing, stale, damaged, its library
    not installed). Call inside the read transaction the search runs in. `release_pages`:
    OpenVectorFile's."""
    from pinakes.vectors.approximate import open_vector_file

    expected = _expected_key(conn, identity, min_rows=lambda: min_rows)
    if expected is None:
        return None
    return open_vector_file(vector_file_path(pinakes_dir), expected, identity, dim, check_body=check_body,
                            release_pages=release_pages)


@dataclass(frozen=True)
class VectorFileState:
    """What the vector file is for the index now, as `pnk status` and the MCP server's status say it."""

    tier: str  # "exact" (no file is kept) or "approximate" (a file should answer vector search)
    state: str  # "none" (the exact tier), "current", or why search answers exactly: missing, stale, damaged, unavailable
    detail: str
    remedy: str | None = None
    rows: int = 0
    pieces: int = 0
    file_bytes: int = 0

    @property
    def needs_sync(self) -> bool:
        """Whether the next `pnk sync` changes the file (builds, updates or rebuilds it)."""
        return self.state in ("missing", "stale", "damaged")

    def describe(self) -> str:
        """One line of `pnk status`."""
        if self.state == "none":
            return f"vector search: exact, no vector file ({self.detail})"
        if self.state == "current":
            return f"vector search: approximate, vector file current ({self.detail})"
        return (f"vector search: exact (slower, more memory) until the vector file is fixed: {self.state} "
                f"({self.detail}); {self.remedy}")


def file_state(conn: sqlite3.Connection, pinakes_dir: Path, *, tier: str) -> VectorFileState:
    """The vector file's state for the index behind `conn` now, judged as a searching process judges
    it when it opens the file (`open_for_index`: the same expected key, footer and staleness checks)
    short of mapping its pieces, and with no checksum of the body: reading the footer and the key
    the last sync recorded in the index's meta is cheap at any size, every byte is not (`pnk doctor`
    reads them). `tier`: the manifest's `[retrieval] vector_tier`."""
    from pinakes.embed.base import META_KEYS

    if tier == "numpy":
        return VectorFileState("exact", "none", 'the manifest asks for exact search at any size: '
                                                '[retrieval] vector_tier = "numpy"')
    recorded = dict(conn.execute(f"SELECT key, value FROM meta WHERE key IN ({', '.join('?' * len(META_KEYS))})",
                                 META_KEYS).fetchall())
    identity = {key: str(recorded.get(key, "")) for key in META_KEYS}  # as the index's meta holds the model
    dim = identity[META_KEYS[-1]]
    if not dim.isdigit():
        return VectorFileState("exact", "none", "no vector embedded yet")
    path = vector_file_path(pinakes_dir)
    try:
        expected = _expected_key(conn, identity, min_rows=_ann_min_rows, check_library=_library_installed)
        if expected is None:
            return VectorFileState("exact", "none", "the index holds too few vectors for one: exact search is "
                                                    "fast enough at this size")
        header = read_header(path)
        check_answers_for(path, header, expected, identity, int(dim))
        _library_installed()
    except VectorFileUnusable as unusable:
        return VectorFileState("approximate", unusable.reason, unusable.detail, unusable.remedy)
    return VectorFileState(
        "approximate", "current",
        f"{counted(header.rows, 'row')} in {counted(len(header.pieces), 'piece')}, {header.file_bytes / 1e6:,.1f} MB; "
        "its footer checked against the index, not every byte: `pnk doctor` reads them all",
        rows=header.rows, pieces=len(header.pieces), file_bytes=header.file_bytes)


def _expected_key(conn: sqlite3.Connection, identity: Mapping[str, str], *, min_rows: Callable[[], int],
                  check_library: Callable[[], object] | None = None) -> str | None:
    """The content key a file must carry to answer for the index now; None when the index is below
    the threshold (`min_rows`, asked only when the last sync's record does not say). VectorFileUnusable
    when the last sync could not build the file. The key the last sync recorded when it still holds
    (the module), else the one its rows make (every active row read)."""
    recorded = recorded_state(conn)
    if recorded == BELOW_THRESHOLD:
        return None
    if recorded == NOT_BUILT:
        from pinakes.vectors import engine

        (check_library or engine.load_library)()  # still not installed: "unavailable"
        raise VectorFileUnusable("missing", "the last sync could not build it (usearch was not installed then)")
    if recorded is not None and recorded != NOT_WANTED:
        return recorded
    from pinakes.vectors.engine import DEFAULT_PARAMS
    from pinakes.vectors.source import content_key, row_keys

    keys = row_keys(conn)
    if len(keys) < min_rows():
        return None
    return content_key(keys, identity, DEFAULT_PARAMS)


def _ann_min_rows() -> int:
    from pinakes.vectors import build  # read when asked: a test lowers it

    return build.ANN_MIN_ROWS


def _library_installed() -> None:
    """VectorFileUnusable("unavailable") when usearch is not installed, known without importing it
    (importing it imports onnxruntime first: engine.py), so a status need not pay that."""
    if importlib.util.find_spec("usearch") is None:
        raise VectorFileUnusable("unavailable", UNAVAILABLE_DETAIL)
