"""`.pinakes/sync.lock`: one writer at a time, recoverable after a crash (spec §6.5).

The lock records pid, hostname and start time. A live holder on this host means another sync is
running: hook-driven contention is normal, so the caller exits 0 quietly. A dead pid on this host is a
crashed sync: reclaim with a warning, or hook-driven freshness would stop forever. Another host's
lock cannot be checked for liveness, so it is refused and named until a person runs
`pnk sync --force-unlock`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pinakes.errors import LockHeldError, filesystem_error


def _hostname() -> str:
    # The kernel's node name is what socket.gethostname() returns on POSIX; the socket module costs
    # every sync a few milliseconds to import.
    if hasattr(os, "uname"):
        return os.uname().nodename
    import socket

    return socket.gethostname()


@dataclass(frozen=True)
class LockHolder:
    pid: int
    hostname: str
    started: str

    def describe(self) -> str:
        return f"pid {self.pid} on {self.hostname}, since {self.started}"


class LockBusy(Exception):
    """A live sync on this host holds the lock (not an error: the caller exits 0)."""

    def __init__(self, holder: LockHolder):
        super().__init__(holder.describe())
        self.holder = holder


def read_holder(lock_path: Path) -> LockHolder | None:
    """The recorded holder, None when unlocked. Raises LockHeldError for unreadable contents."""
    try:
        raw = lock_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        data = json.loads(raw)
        return LockHolder(pid=int(data["pid"]), hostname=str(data["hostname"]),
                          started=str(data["started"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise LockHeldError(
            "the sync lock exists but cannot be read, so its holder cannot be checked",
            remedy="if no sync is running, run `pnk sync --force-unlock`",
            path=lock_path,
        ) from exc


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class SyncLock:
    """Context manager holding `.pinakes/sync.lock` for the duration of a sync."""

    def __init__(self, lock_path: Path, *, force_unlock: bool = False):
        self.path = lock_path
        self.force_unlock = force_unlock
        self.warnings: list[str] = []
        self._held = False

    def acquire(self) -> None:
        try:
            self._acquire()
        except OSError as exc:
            raise filesystem_error(self.path, exc, "take the sync lock",
                                   "nothing was synced; .pinakes/ must be writable to sync") from exc

    def _acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.force_unlock and self.path.exists():
            holder = self._holder_or_none()
            self.warnings.append(f"removed the sync lock ({holder.describe() if holder else 'unreadable'})")
            self.path.unlink(missing_ok=True)
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                self._resolve_existing()
                continue
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    json.dump({"pid": os.getpid(), "hostname": _hostname(),
                               "started": datetime.now(UTC).isoformat(timespec="seconds")}, handle)
                    handle.flush()
                    os.fsync(handle.fileno())
            except OSError:
                # A lock we could not fill (disk full) must not stay behind half-written: every later
                # sync would find a lock it cannot read and refuse.
                self.path.unlink(missing_ok=True)
                raise
            self._held = True
            return
        raise LockHeldError("could not take the sync lock", remedy="retry the sync", path=self.path)

    def _holder_or_none(self) -> LockHolder | None:
        try:
            return read_holder(self.path)
        except LockHeldError:
            return None

    def _resolve_existing(self) -> None:
        holder = read_holder(self.path)
        if holder is None:
            return  # released between our open and our read: try again
        if holder.hostname != _hostname():
            raise LockHeldError(
                f"another host holds the sync lock ({holder.describe()}); its liveness cannot be "
                "checked from here",
                remedy="if no sync is running there, run `pnk sync --force-unlock`",
                path=self.path,
            )
        if holder.pid != os.getpid() and _pid_alive(holder.pid):
            raise LockBusy(holder)
        self.warnings.append(f"reclaimed a stale sync lock ({holder.describe()}; that process is gone)")
        self.path.unlink(missing_ok=True)

    def release(self) -> None:
        if self._held:
            self.path.unlink(missing_ok=True)
            self._held = False

    def __enter__(self) -> SyncLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
