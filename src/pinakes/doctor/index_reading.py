"""The index as a check reads it: opened read-only, or None where there is none or it cannot be opened.

Only the index checks (`checks_index.py`) report an index that is missing, of another schema version or
damaged; every other check that reads it says nothing of that and skips what it needed the index for.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path

from pinakes.errors import PinakesError
from pinakes.index import schema


@contextmanager
def readable_index(index_db: Path) -> Generator[sqlite3.Connection | None]:
    """The index opened read-only for the block and closed after it; None when it cannot be opened
    (no index yet, another schema version, a damaged file): the index checks report that."""
    try:
        conn = schema.open_reader(index_db)
    except PinakesError:
        yield None
        return
    try:
        yield conn
    finally:
        conn.close()
