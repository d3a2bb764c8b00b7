"""A read-only index handle that follows syncs and rebuilds (spec §6.5).

Before each request the index file is stat()ed (`schema.index_signature`: inode, mtime and size
of index.db and its -wal); when the signature moved, the handle is reopened. Trusting the open
handle instead would keep answering from whatever generation it opened: the stale-read window
is one request, never a session. The Searcher does the same for search; this is the same rule
for `pinakes_get` and `pinakes_list_kbs`.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path

from pinakes.errors import IndexMissingError
from pinakes.index import schema

_NO_FILE = (0, 0, 0)


class IndexReader:
    """One `mode=ro` connection to an index, reopened whenever the file's signature changes."""

    def __init__(self, index_path: Path):
        self.index_path = index_path
        self._conn: sqlite3.Connection | None = None
        self._signature: tuple[tuple[int, int, int], ...] | None = None
        self._lock = threading.Lock()

    @contextmanager
    def snapshot(self) -> Generator[sqlite3.Connection]:
        """A read transaction over the index as it is now; every query inside sees one commit."""
        with self._lock:
            conn = self._current()
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("ROLLBACK")

    def _current(self) -> sqlite3.Connection:
        signature = schema.index_signature(self.index_path)
        if self._conn is not None and signature == self._signature:
            return self._conn
        self._close()
        if signature[0] == _NO_FILE:
            raise IndexMissingError("this KB has no index yet", remedy="run `pnk sync` in the KB",
                                    path=self.index_path)
        self._conn = schema.open_reader(self.index_path)
        self._signature = signature
        return self._conn

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self) -> None:
        with self._lock:
            self._close()
