"""Rename-atomic, durable file writes.

The order is the whole contract: write a temp file in the target's directory, fsync it, rename it
over the target, fsync the directory. A reader (or a crash) sees the old file or the new one, never
a torn one, and the rename is durable only once the directory entry is synced. The temp file lives
beside the target because a rename is only atomic within one filesystem.

An fsync error is final. After a failed fsync the kernel may already have dropped the dirty pages,
so a retry can "succeed" without the data ever reaching the disk (the PostgreSQL fsync lesson); the
error surfaces as a `FilesystemError` naming the path and is never retried.

Temp files have one name, `.<target name>.<8 hex>.pnk.tmp` (`temp_name_for`, `is_temp_name`), so
the walk never takes one for a document and doctor can list them. A write holds an exclusive
`flock` on its temp file until the rename is done, so a temp file nobody holds a lock on belongs to
a writer that died (kill -9, power loss): the next write into that directory removes it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import time
from collections.abc import Callable
from pathlib import Path

from pinakes.errors import FilesystemError, filesystem_error
from pinakes.faults import faultpoint

try:
    import fcntl as _flock
except ImportError:  # Windows: no flock, so nothing is ever swept; doctor still lists leftovers
    _flock = None

_TEMP_ATTEMPTS = 16
TEMP_SUFFIX = ".pnk.tmp"
# This build's temp names, and those of earlier builds (`.<name>.<8 hex>.tmp`, without the lock).
_TEMP_NAME = re.compile(r"\.(?P<target>.+)\.[0-9a-f]{8}(?:\.pnk)?\.tmp")
# A temp file this young may belong to a writer between its create and its flock: never swept.
_STALE_AFTER_SECONDS = 2.0
_swept_directories: set[str] = set()  # swept once per process: a sync writes thousands of sidecars
# Filesystems where a hard link (the create-only-if-absent primitive) is not supported.
_LINK_UNSUPPORTED = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EXDEV}


def atomic_write_text(
    path: Path | str, text: str, *, encoding: str = "utf-8", exclusive: bool = False
) -> None:
    """`atomic_write_bytes` of `text` encoded as given, with no newline translation."""
    atomic_write_bytes(path, text.encode(encoding), exclusive=exclusive)


def atomic_write_bytes(path: Path | str, data: bytes, *, exclusive: bool = False) -> None:
    """Replace `path` with `data` atomically and durably.

    With `exclusive=True` the write only creates: it raises `FileExistsError` if `path` exists,
    decided atomically by the filesystem rather than by a check that a concurrent writer could
    slip past. On any failure the file at `path` is unchanged and no temp file is left behind.
    """
    target = Path(path)
    directory = target.parent
    sweep_stale_temps(directory)
    temp, fd = _create_temp(target)
    try:
        try:
            _write_and_sync(fd, target, data)
            faultpoint("atomic.before-rename")  # a writer killed here leaves its temp file
            if exclusive:
                _link_into_place(temp, target)
            else:
                os.replace(temp, target)
        finally:
            os.close(fd)  # only now: the lock says "a live writer" until the temp name is gone
    except BaseException as exc:
        _remove_quietly(temp)
        if isinstance(exc, OSError) and not isinstance(exc, FileExistsError):
            raise _filesystem_error(target, exc, "the file on disk was left as it was") from exc
        raise
    try:
        _fsync_directory(directory)
    except OSError as exc:
        raise _filesystem_error(
            target, exc, "the new contents are in place but may not survive a crash"
        ) from exc


def atomic_write_file(path: Path | str, fill: Callable[[Path, int], None]) -> None:
    """Replace `path` with a file `fill(temp_path, fd)` writes, atomically and durably: for content
    too large to hold in memory twice, or that a library saves to a path itself.

    The temp file is created and locked as `atomic_write_bytes` creates it, so a sweep never takes
    it for an abandoned one while `fill` runs; `fill` may write through `fd` or reopen the path
    (the lock is on the inode). It is synced, renamed over `path`, and the directory synced. On any
    failure the file at `path` is unchanged and no temp file is left behind.
    """
    target = Path(path)
    directory = target.parent
    sweep_stale_temps(directory)
    temp, fd = _create_temp(target)
    try:
        try:
            _keep_mode_of(target, fd)
            fill(temp, fd)
            os.fsync(fd)
            faultpoint("atomic.before-rename")  # a writer killed here leaves its temp file
            os.replace(temp, target)
        finally:
            os.close(fd)
    except BaseException as exc:
        _remove_quietly(temp)
        if isinstance(exc, OSError):
            raise _filesystem_error(target, exc, "the file on disk was left as it was") from exc
        raise
    try:
        _fsync_directory(directory)
    except OSError as exc:
        raise _filesystem_error(
            target, exc, "the new contents are in place but may not survive a crash"
        ) from exc


def atomic_move(source: Path | str, target: Path | str) -> None:
    """Rename `source` over `target` (same filesystem) and make the rename durable: a move is only
    durable once the directories holding both names are synced."""
    source, target = Path(source), Path(target)
    try:
        os.replace(source, target)
        _fsync_directory(target.parent)
        if source.parent != target.parent:
            _fsync_directory(source.parent)
    except OSError as exc:
        raise _filesystem_error(target, exc, f"{source} was not moved") from exc


def temp_name_for(target_name: str) -> str:
    """A fresh temp file name for writing `target_name` (the one naming rule of every writer)."""
    # os.urandom is what secrets.token_hex reads; importing secrets costs every sync ~7 ms.
    return f".{target_name}.{os.urandom(4).hex()}{TEMP_SUFFIX}"


def is_temp_name(name: str) -> bool:
    """Whether `name` is a temp file of an atomic write (this build's or an earlier one's)."""
    return _TEMP_NAME.fullmatch(name) is not None


def sweep_stale_temps(directory: Path | str) -> list[str]:
    """Remove the temp files in `directory` that writers which died left behind (no lock held on
    them, older than a couple of seconds); once per directory per process. Returns their names.
    Best effort: a temp file that cannot be removed stays for doctor to report."""
    key = os.path.abspath(directory)
    if _flock is None or key in _swept_directories:
        return []
    _swept_directories.add(key)
    removed: list[str] = []
    try:
        with os.scandir(key) as entries:
            candidates = [entry.name for entry in entries
                          if is_temp_name(entry.name) and entry.is_file(follow_symlinks=False)]
    except OSError:
        return removed
    for name in candidates:
        if _remove_if_abandoned(os.path.join(key, name)):
            removed.append(name)
    return removed


def is_abandoned(path: Path | str) -> bool:
    """Whether no writer holds the temp file at `path` (its lock is free): what doctor reports as
    left by a write that was killed, without removing it. Unlike the sweep it does not wait for the
    temp to age: a report removes nothing, and a writer locks its temp as it creates it. Where there
    is no flock (Windows) every temp is taken for abandoned, as doctor always reported them."""
    if _flock is None:
        return True
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False  # gone since it was listed: nothing left to report
    try:
        _flock.flock(fd, _flock.LOCK_EX | _flock.LOCK_NB)
        return True
    except OSError:
        return False  # a live writer holds it
    finally:
        os.close(fd)


def _remove_if_abandoned(path: str) -> bool:
    assert _flock is not None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        held = os.fstat(fd)
        if time.time() - held.st_mtime < _STALE_AFTER_SECONDS:
            return False
        try:
            _flock.flock(fd, _flock.LOCK_EX | _flock.LOCK_NB)
        except OSError:
            return False  # a live writer holds it
        if os.lstat(path).st_ino != held.st_ino:
            return False
        os.unlink(path)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _create_temp(target: Path) -> tuple[Path, int]:
    """A new, empty, uniquely named file beside `target`, open for writing and locked.

    O_EXCL means it is never an existing file or a planted symlink.
    """
    for _ in range(_TEMP_ATTEMPTS):
        temp = target.with_name(temp_name_for(target.name))
        try:
            # 0o666 is filtered by the umask, so a new file gets the mode open() would give it.
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
        except FileExistsError:
            continue
        except OSError as exc:
            raise _filesystem_error(target, exc, "the file on disk was left as it was") from exc
        if _flock is not None:
            with contextlib.suppress(OSError):  # a filesystem without locks: the age rule still holds
                _flock.flock(fd, _flock.LOCK_EX | _flock.LOCK_NB)
        return temp, fd
    raise FilesystemError(
        f"could not create a temporary file beside {target.name}",
        remedy=f"remove stale .*{TEMP_SUFFIX} files in that directory and retry",
        path=target,
    )


def _write_and_sync(fd: int, target: Path, data: bytes) -> None:
    """Write all of `data` to `fd` and sync it (the caller closes it, after the rename)."""
    _keep_mode_of(target, fd)
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
    os.fsync(fd)


def _keep_mode_of(target: Path, fd: int) -> None:
    """Replacing a file keeps its permission bits, as an in-place edit would."""
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        return
    if hasattr(os, "fchmod"):
        os.fchmod(fd, mode)


def _link_into_place(temp: Path, target: Path) -> None:
    try:
        os.link(temp, target)  # fails with FileExistsError if anything is at `target`
    except OSError as exc:
        if exc.errno not in _LINK_UNSUPPORTED:
            raise
        # No hard links here (some FUSE and FAT mounts): fall back to check-then-rename, which a
        # concurrent creator could race, but which still never overwrites a file seen to exist.
        if target.exists():
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(target)) from exc
        os.replace(temp, target)
        return
    _remove_quietly(temp)  # the target is in place; a leftover link to it is only litter


def _fsync_directory(directory: Path) -> None:
    if not hasattr(os, "O_DIRECTORY"):  # Windows cannot open a directory to sync it
        return
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    except OSError as exc:
        # Some filesystems cannot sync a directory at all; that is not a failed sync.
        if exc.errno not in (errno.EINVAL, errno.EBADF):
            raise
    finally:
        os.close(fd)


def _remove_quietly(temp: Path) -> None:
    with contextlib.suppress(OSError):  # the error that brought us here is the one worth reporting
        os.unlink(temp)


def _filesystem_error(target: Path, exc: OSError, consequence: str) -> FilesystemError:
    return filesystem_error(target, exc, "write the file", consequence)
