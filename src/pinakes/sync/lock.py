"""`.pinakes/sync.lock`: one writer at a time, recoverable after a crash (spec §6.5).

The lock records pid, hostname and start time. A live holder on this host means another sync is
running: hook-driven contention is normal, so the caller exits 0 quietly. A dead pid on this host is a
crashed sync: reclaim with a warning, or hook-driven freshness would stop forever. Another host's
lock cannot be checked for liveness, so it is refused and named until a person runs
`pnk sync --force-unlock`.

The lock appears whole. Its record is written and synced in a temp file beside it, then hard-linked
to the lock's name: link() fails when the name exists, so exactly one sync creates the lock (what
O_EXCL gave), and no reader ever finds it empty or half-written, which it could not tell from a lock
whose writer died mid-write (and `--force-unlock` then lets two syncs write). Where the filesystem
has no hard links the lock is created with O_EXCL and written in place; a reader that finds a young
lock it cannot parse waits for the write (WRITE_GRACE_S) before calling it unreadable.

Removing a stale lock is read-decide-unlink; two syncs doing it at once could each remove what the
other just created. So that step, and `--force-unlock`, hold an flock on the state directory, and the
lock is re-read under it: a lock created meanwhile is a live one.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import time
from collections.abc import Generator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pinakes.atomic import sweep_stale_temps, temp_name_for
from pinakes.errors import LockHeldError, filesystem_error
from pinakes.faults import faultpoint

try:
    import fcntl as _flock
except ImportError:  # Windows: no flock; the reclaim step is then unguarded
    _flock = None

# How long a lock whose record cannot be parsed may still be being written (in place, where the
# filesystem has no hard links): younger than this, a reader waits for the record rather than
# reporting the lock unreadable.
WRITE_GRACE_S = 2.0
_POLL_S = 0.05
# Filesystems where a hard link is not supported (some FUSE and FAT mounts).
_LINK_UNSUPPORTED = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EXDEV}


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
    """The recorded holder, None when unlocked. Raises LockHeldError for contents that stay
    unreadable past WRITE_GRACE_S (a lock being written in place is waited for)."""
    deadline = time.monotonic() + WRITE_GRACE_S
    while True:
        try:
            raw, age_s = _read(lock_path)
        except FileNotFoundError:
            return None
        holder = _parse(raw)
        if holder is not None:
            return holder
        if age_s >= WRITE_GRACE_S or time.monotonic() >= deadline:
            raise LockHeldError(
                "the sync lock exists but cannot be read, so its holder cannot be checked",
                remedy="if no sync is running, run `pnk sync --force-unlock`",
                path=lock_path,
            )
        time.sleep(_POLL_S)


def _read(lock_path: Path) -> tuple[bytes, float]:
    """The lock's bytes and how long ago they were last written."""
    with open(lock_path, "rb") as handle:
        age_s = time.time() - os.fstat(handle.fileno()).st_mtime
        return handle.read(), age_s


def _parse(raw: bytes) -> LockHolder | None:
    try:
        data = json.loads(raw.decode("utf-8"))
        return LockHolder(pid=int(data["pid"]), hostname=str(data["hostname"]), started=str(data["started"]))
    except (ValueError, KeyError, TypeError):
        return None


def held_by_live_process(lock_path: Path) -> bool:
    """Whether a live process on this host, other than this one, holds the lock: what a sync would
    find busy (LockBusy). A dead holder's lock, another host's or an unreadable one is False: the
    sync itself reclaims the first and names the others."""
    try:
        holder = read_holder(lock_path)
    except LockHeldError:
        return False
    return (holder is not None and holder.hostname == _hostname() and holder.pid != os.getpid()
            and _pid_alive(holder.pid))


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
        sweep_stale_temps(self.path.parent)  # a temp record whose sync was killed before linking it
        if self.force_unlock and self.path.exists():
            with _directory_guard(self.path.parent):
                holder = self._holder_or_none()
                self.warnings.append(f"removed the sync lock ({holder.describe() if holder else 'unreadable'})")
                self.path.unlink(missing_ok=True)
        record = json.dumps({"pid": os.getpid(), "hostname": _hostname(),
                             "started": datetime.now(UTC).isoformat(timespec="seconds")}).encode("utf-8")
        for _ in range(2):
            if self._create(record) or self._reclaim_existing(record):
                self._held = True
                faultpoint("sync.lock-taken")
                return
        raise LockHeldError("could not take the sync lock", remedy="retry the sync", path=self.path)

    def _create(self, record: bytes) -> bool:
        """Create the lock holding `record`, whole; False when a lock exists already."""
        temp = self.path.with_name(temp_name_for(self.path.name))
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            if _flock is not None:  # a live writer's temp file: atomic.sweep_stale_temps leaves it
                with contextlib.suppress(OSError):
                    _flock.flock(fd, _flock.LOCK_EX | _flock.LOCK_NB)
            faultpoint("sync.lock-created")  # the lock's file exists, its record is not written yet
            _write_all(fd, record)
            try:
                os.link(temp, self.path)
            except FileExistsError:
                return False
            except OSError as exc:
                if exc.errno not in _LINK_UNSUPPORTED:
                    raise
                return self._create_in_place(record)
            return True
        finally:
            os.close(fd)
            with contextlib.suppress(OSError):  # the lock holds the record now; the temp name is litter
                os.unlink(temp)

    def _create_in_place(self, record: bytes) -> bool:
        """Without hard links: O_EXCL, then the record (readers wait WRITE_GRACE_S for it)."""
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        try:
            _write_all(fd, record)
        except OSError:
            # A lock we could not fill (disk full) must not stay behind half-written: every later
            # sync would find a lock it cannot read and refuse.
            self.path.unlink(missing_ok=True)
            raise
        finally:
            os.close(fd)
        return True

    def _holder_or_none(self) -> LockHolder | None:
        try:
            return read_holder(self.path)
        except LockHeldError:
            return None

    def _reclaim_existing(self, record: bytes) -> bool:
        """Another lock is there: a live holder (LockBusy), another host's (refused), or a dead
        holder's, replaced by ours under the directory guard, so that a lock created meanwhile is
        never mistaken for it and no other sync takes the place between the removal and our create.
        False when the lock went away meanwhile (try again)."""
        with _directory_guard(self.path.parent):
            holder = read_holder(self.path)
            if holder is None:
                return False  # released between our create and our read: try again
            if holder.hostname != _hostname():
                raise LockHeldError(
                    f"another host holds the sync lock ({holder.describe()}); its liveness cannot be "
                    "checked from here",
                    remedy="if no sync is running there, run `pnk sync --force-unlock`",
                    path=self.path,
                )
            if holder.pid != os.getpid() and _pid_alive(holder.pid):
                raise LockBusy(holder)
            faultpoint("sync.lock-reclaiming")
            self.warnings.append(f"reclaimed a stale sync lock ({holder.describe()}; that process is gone)")
            self.path.unlink(missing_ok=True)
            return self._create(record)

    def release(self) -> None:
        if self._held:
            self.path.unlink(missing_ok=True)
            self._held = False

    def __enter__(self) -> SyncLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.fsync(fd)


@contextlib.contextmanager
def _directory_guard(directory: Path) -> Generator[None]:
    """An exclusive flock on `directory` for the lock's read-decide-remove steps. Best effort: where
    a directory cannot be locked (no fcntl, some network filesystems) the steps run unguarded."""
    fd: int | None = None
    if _flock is not None:
        with contextlib.suppress(OSError):
            fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
            _flock.flock(fd, _flock.LOCK_EX)
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)  # closing the descriptor releases the flock
