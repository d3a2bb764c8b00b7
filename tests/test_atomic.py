"""Atomic writes: the durable order, no torn file on failure, fsync errors are final (C3/C4/C5)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from pinakes import atomic
from pinakes.atomic import atomic_write_bytes, atomic_write_text
from pinakes.errors import EXIT_IO, FilesystemError

OLD = b"id: 01J9ZX7K3M4N5P6Q7R8S9T0VWX\ntitle: old\n"
NEW = b"id: 01J9ZX7K3M4N5P6Q7R8S9T0VWX\ntitle: new, and longer than the old one\n"


class Trace:
    """Records the os calls an atomic write makes, naming each file descriptor by its path."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.events: list[tuple[str, ...]] = []
        self._paths: dict[int, str] = {}
        real_open, real_write, real_fsync = os.open, os.write, os.fsync
        real_replace, real_link, real_close = os.replace, os.link, os.close

        def traced_open(path: str | os.PathLike[str], flags: int, mode: int = 0o777, **kwargs: Any):
            fd = real_open(path, flags, mode, **kwargs)
            self._paths[fd] = os.fspath(path)
            return fd

        def traced_write(fd: int, data: bytes):
            self.events.append(("write", self._paths.get(fd, "?")))
            return real_write(fd, data)

        def traced_fsync(fd: int):
            self.events.append(("fsync", self._paths.get(fd, "?")))
            return real_fsync(fd)

        def traced_replace(src: str | os.PathLike[str], dst: str | os.PathLike[str], **kwargs: Any):
            self.events.append(("replace", os.fspath(src), os.fspath(dst)))
            return real_replace(src, dst, **kwargs)

        def traced_link(src: str | os.PathLike[str], dst: str | os.PathLike[str], **kwargs: Any):
            self.events.append(("link", os.fspath(src), os.fspath(dst)))
            return real_link(src, dst, **kwargs)

        def traced_close(fd: int):
            self._paths.pop(fd, None)
            return real_close(fd)

        for name, fn in [
            ("open", traced_open),
            ("write", traced_write),
            ("fsync", traced_fsync),
            ("replace", traced_replace),
            ("link", traced_link),
            ("close", traced_close),
        ]:
            monkeypatch.setattr(atomic.os, name, fn)

    def kinds(self) -> list[str]:
        collapsed: list[str] = []
        for event in self.events:
            if not (collapsed and collapsed[-1] == event[0] == "write"):
                collapsed.append(event[0])
        return collapsed


def _litter(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def test_write_order_is_write_fsync_replace_fsync_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "a.md.pnk.yaml"
    target.write_bytes(OLD)
    trace = Trace(monkeypatch)
    atomic_write_bytes(target, NEW)

    assert trace.kinds() == ["write", "fsync", "replace", "fsync"]
    temp = trace.events[0][1]
    assert Path(temp).parent == tmp_path, "the temp file must be beside the target (same filesystem)"
    assert ("fsync", temp) in trace.events
    assert trace.events[-2] == ("replace", temp, str(target))
    assert trace.events[-1] == ("fsync", str(tmp_path))
    assert target.read_bytes() == NEW
    assert _litter(tmp_path) == []


def test_exclusive_create_links_instead_of_replacing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "b.md.pnk.yaml"
    trace = Trace(monkeypatch)
    atomic_write_bytes(target, NEW, exclusive=True)
    assert trace.kinds() == ["write", "fsync", "link", "fsync"]
    assert target.read_bytes() == NEW
    assert _litter(tmp_path) == []


def test_exclusive_create_refuses_an_existing_file_and_leaves_it_alone(tmp_path: Path) -> None:
    target = tmp_path / "c.md.pnk.yaml"
    target.write_bytes(OLD)
    with pytest.raises(FileExistsError):
        atomic_write_bytes(target, NEW, exclusive=True)
    assert target.read_bytes() == OLD
    assert _litter(tmp_path) == []


def test_a_write_that_fails_halfway_leaves_the_old_file_byte_identical(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "d.md.pnk.yaml"
    target.write_bytes(OLD)
    real_write = os.write

    def half_then_enospc(fd: int, data: bytes) -> int:
        if len(data) > 4:
            return real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(atomic.os, "write", half_then_enospc)
    with pytest.raises(FilesystemError) as caught:
        atomic_write_bytes(target, NEW)
    assert target.read_bytes() == OLD
    assert _litter(tmp_path) == []
    assert caught.value.path == target
    assert caught.value.exit_code == EXIT_IO
    assert caught.value.remedy is not None and "disk space" in caught.value.remedy


def test_a_failed_rename_leaves_the_old_file_and_no_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "e.md.pnk.yaml"
    target.write_bytes(OLD)

    def refuse(src: str | os.PathLike[str], dst: str | os.PathLike[str], **kwargs: Any):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(atomic.os, "replace", refuse)
    with pytest.raises(FilesystemError, match="left as it was"):
        atomic_write_bytes(target, NEW)
    assert target.read_bytes() == OLD
    assert _litter(tmp_path) == []


def test_an_interrupt_mid_write_still_removes_the_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "f.md.pnk.yaml"
    target.write_bytes(OLD)

    def interrupted(fd: int, data: bytes) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(atomic.os, "write", interrupted)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_bytes(target, NEW)
    assert target.read_bytes() == OLD
    assert _litter(tmp_path) == []


def test_an_fsync_error_is_final_and_never_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "g.md.pnk.yaml"
    target.write_bytes(OLD)
    calls: list[int] = []

    def failing_fsync(fd: int) -> None:
        calls.append(fd)
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(atomic.os, "fsync", failing_fsync)
    with pytest.raises(FilesystemError) as caught:
        atomic_write_bytes(target, NEW)
    assert len(calls) == 1, "a failed fsync must not be retried"
    assert target.read_bytes() == OLD
    assert _litter(tmp_path) == []
    assert caught.value.path == target
    assert caught.value.exit_code == EXIT_IO


def test_a_directory_fsync_error_surfaces_after_the_rename(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "h.md.pnk.yaml"
    target.write_bytes(OLD)
    real_fsync = os.fsync

    def fail_on_directory(fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_fsync(fd)

    monkeypatch.setattr(atomic.os, "fsync", fail_on_directory)
    with pytest.raises(FilesystemError, match="may not survive a crash"):
        atomic_write_bytes(target, NEW)
    assert target.read_bytes() == NEW  # the rename happened; only its durability is in doubt


def test_replacing_a_file_keeps_its_permission_bits(tmp_path: Path) -> None:
    target = tmp_path / "i.md.pnk.yaml"
    target.write_bytes(OLD)
    os.chmod(target, 0o640)
    atomic_write_bytes(target, NEW)
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640


def test_a_new_file_gets_the_mode_the_umask_allows(tmp_path: Path) -> None:
    previous = os.umask(0o022)
    try:
        atomic_write_bytes(tmp_path / "j.md.pnk.yaml", NEW)
    finally:
        os.umask(previous)
    assert stat.S_IMODE(os.stat(tmp_path / "j.md.pnk.yaml").st_mode) == 0o644


def test_text_is_written_without_newline_translation(tmp_path: Path) -> None:
    target = tmp_path / "k.md.pnk.yaml"
    atomic_write_text(target, "a: 1\r\nb: é\r\n")
    assert target.read_bytes() == "a: 1\r\nb: é\r\n".encode()


def test_a_missing_directory_is_a_filesystem_error(tmp_path: Path) -> None:
    with pytest.raises(FilesystemError) as caught:
        atomic_write_bytes(tmp_path / "absent" / "l.md.pnk.yaml", NEW)
    assert caught.value.path == tmp_path / "absent" / "l.md.pnk.yaml"


def test_exclusive_create_without_hard_links_still_refuses_an_existing_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(src: str | os.PathLike[str], dst: str | os.PathLike[str], **kwargs: Any):
        raise OSError(errno.EPERM, os.strerror(errno.EPERM))

    monkeypatch.setattr(atomic.os, "link", no_links)
    created = tmp_path / "m.md.pnk.yaml"
    atomic_write_bytes(created, NEW, exclusive=True)
    assert created.read_bytes() == NEW
    with pytest.raises(FileExistsError):
        atomic_write_bytes(created, OLD, exclusive=True)
    assert created.read_bytes() == NEW
    assert _litter(tmp_path) == []


def test_a_file_written_by_a_callback_replaces_the_target_whole_or_not_at_all(tmp_path: Path) -> None:
    target = tmp_path / "big.bin"
    target.write_bytes(b"old")

    def save_then_append(temp: Path, fd: int) -> None:
        temp.write_bytes(b"saved by a library through the path ")  # same inode: the lock holds
        os.lseek(fd, 0, os.SEEK_END)
        os.write(fd, b"then appended")

    atomic.atomic_write_file(target, save_then_append)
    assert target.read_bytes() == b"saved by a library through the path then appended"

    def fails_halfway(temp: Path, fd: int) -> None:
        os.write(fd, b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(FilesystemError) as failed:
        atomic.atomic_write_file(target, fails_halfway)
    assert failed.value.exit_code == EXIT_IO
    assert target.read_bytes() == b"saved by a library through the path then appended"
    assert os.listdir(tmp_path) == ["big.bin"]
