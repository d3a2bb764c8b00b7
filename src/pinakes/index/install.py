"""Installing a rebuilt index: the fully built `index.db.new` becomes the live `index.db`.

Renaming a WAL database over a live one is unsafe in general: `-wal`/`-shm` belong to the path, so
a surviving old WAL can be paired with (and later checkpointed into) the new file. A sound live
index is therefore never renamed over: the new database is copied into it with SQLite's backup API
under the live file's own write lock. A reader mid-transaction keeps its snapshot, its next
transaction and every fresh reader see the new generation, on the same connection.

A damaged live index cannot take that copy: the backup reads the destination's header and pages
through its own pager, and a file cut short or overwritten refuses it ("database disk image is
malformed"), which once left every `pnk sync --rebuild` failing with the remedy it was running. So
when `PRAGMA quick_check` finds the live file damaged (or the copy into it fails), it is replaced
instead, and the replacement is safe for the reason the general rename is not:

1. the caller holds the sync lock, so no Pinakes writer has the live file open;
2. its `-wal` and `-shm` are removed first, so no old frame is left at the path to be paired with
   the new file;
3. every other connection to it is a reader (`mode=ro`), and a read-only connection never
   checkpoints or deletes a WAL when it closes; it goes on reading the old, unlinked inode until
   its next request finds the index signature changed (a new inode) and reopens;
4. the new file is checkpointed and fsynced before the rename, the directory after it.

A kill at any point leaves either the damaged file (the next `--rebuild` runs again) or the new
one; `index.db.new` left behind is removed by the next sync.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from pinakes.atomic import atomic_move
from pinakes.faults import faultpoint
from pinakes.index.integrity import damage
from pinakes.index.schema import BUSY_TIMEOUT_MS, check_version


@dataclass(frozen=True)
class Installed:
    """How a rebuilt index took the live one's place, and what was wrong with the one it replaced."""

    how: str  # "copied into the live index" | "replaced the damaged live index" | "there was no live index"
    damage: str | None = None


def install_rebuilt(new_path: Path, live_path: Path) -> Installed:
    """Make the fully built index at `new_path` the live one (see the module's docstring)."""
    source = sqlite3.connect(new_path, isolation_level=None)
    try:
        check_version(source, new_path)
        source.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        source.close()
    if not live_path.exists():
        _replace(new_path, live_path)
        return Installed("there was no live index")
    found = _live_damage(live_path)
    if found is None:
        try:
            _copy_into(new_path, live_path)
        except sqlite3.DatabaseError as exc:
            found = f"the copy into it failed: {exc}"
        else:
            _discard(new_path)
            return Installed("copied into the live index")
    _replace(new_path, live_path)
    return Installed("replaced the damaged live index", found)


def _live_damage(live_path: Path) -> str | None:
    try:
        conn = sqlite3.connect(f"{live_path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)
    except sqlite3.Error as exc:
        return str(exc)
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        return damage(conn)
    finally:
        conn.close()


def _copy_into(new_path: Path, live_path: Path) -> None:
    """The backup API from `new_path` into the sound live index (see the module's docstring)."""
    source = sqlite3.connect(new_path, isolation_level=None)
    try:
        live = sqlite3.connect(live_path, isolation_level=None)
        try:
            live.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            source.backup(live)
            live.execute("PRAGMA journal_mode = WAL")
            live.execute("PRAGMA wal_checkpoint(PASSIVE)")
        finally:
            live.close()
    finally:
        source.close()


def _replace(new_path: Path, live_path: Path) -> None:
    """Rename the checkpointed, closed `new_path` over `live_path`, which has no writer (see the
    module's docstring for why this is safe only then)."""
    fd = os.open(new_path, os.O_RDWR)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    for suffix in ("-wal", "-shm"):
        with suppress(FileNotFoundError):
            os.unlink(f"{live_path}{suffix}")
    faultpoint("index.replace-unlinked")
    atomic_move(new_path, live_path)
    _discard(new_path)


def _discard(db_path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        with suppress(FileNotFoundError):
            os.unlink(f"{db_path}{suffix}")
