"""`FileState`: one file as the walk saw it, in a leaf module the walk (`sources/walk.py`) and its
columns (`sources/walk_table.py`) both import."""

from __future__ import annotations

from typing import NamedTuple


class FileState(NamedTuple):
    """One file as the walk saw it (a NamedTuple: the walk makes one per file on every sync)."""

    path: str  # KB-root-relative, POSIX
    size: int
    mtime_ns: int
    inode: int
    content_hash: str  # xxh3-128 hex; "" when the walk was asked not to hash
    ctime_ns: int = 0

    @property
    def mtime(self) -> float:
        return self.mtime_ns / 1e9

