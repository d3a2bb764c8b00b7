"""The sync lock against real second processes caught mid-acquire (PNK_FAULT_STOP SIGSTOPs a `pnk sync`
at a named point of src/pinakes/sync/lock.py): a lock being created is never reported unreadable, so
nobody is sent to `--force-unlock` while a sync runs; a lock written in place is waited for; and two
syncs reclaiming the same stale lock never both write.

Heavy: every case runs two or three `pnk sync` processes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pinakes.init import init_kb
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.heavy

CLI = """
import sys
sys.path.insert(0, {repo!r})
from tests.fakes import FakeEmbedder, substitute_embedder
substitute_embedder(None, lambda section, offline=None, threads=None: FakeEmbedder())
from pinakes.cli import main
sys.exit(main(sys.argv[1:]))
"""
DEAD_PID = 2**22 + 12345  # above the default pid_max: no process has it


def start_sync(kb: Path, *, stop_at: str = "", kill_at: str = "") -> subprocess.Popen[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("PNK_FAULT")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if stop_at:
        env["PNK_FAULT_STOP"] = stop_at
    if kill_at:
        env["PNK_FAULT"] = kill_at
    return subprocess.Popen([sys.executable, "-c", CLI.format(repo=str(REPO_ROOT)), "-C", str(kb), "sync"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def finish(process: subprocess.Popen[str]) -> tuple[int, str]:
    out, err = process.communicate(timeout=120)
    return process.returncode, out + err


def state(pid: int) -> str:
    """The process's state letter (T: stopped), "" once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return ""
    return stat.rsplit(")", 1)[1].split()[0]


def waiting_on_flock(pid: int) -> bool:
    """Whether `pid` is blocked waiting for an flock (a `->` line of /proc/locks)."""
    return any(line.split()[1] == "->" and line.split()[5] == str(pid)
               for line in Path("/proc/locks").read_text().splitlines() if len(line.split()) > 5)


def wait_until(condition: object, what: str, timeout: float = 60.0) -> None:
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.02)


def make_kb(root: Path, count: int = 3) -> Path:
    init_kb(root, name="lock")
    for number in range(count):
        (root / "docs" / f"d{number}.md").write_text(f"# D{number}\n\nText {number}.\n", encoding="utf-8")
    return root


def lock_record(pid: int) -> str:
    return json.dumps({"pid": pid, "hostname": socket.gethostname(), "started": "2026-01-01T00:00:00+00:00"})


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:  # never leave a stopped sync behind
        if process.poll() is None:
            process.kill()
            process.communicate()


def test_a_sync_caught_between_creating_and_writing_the_lock_is_never_reported_unreadable(
        tmp_path: Path, procs: list[subprocess.Popen[str]]) -> None:
    kb = make_kb(tmp_path / "kb")
    first = start_sync(kb, stop_at="sync.lock-created")
    procs.append(first)
    wait_until(lambda: state(first.pid) == "T", "the first sync stops between create and write")
    # What the second sync meets is no lock at all (the first one's record is not in place yet),
    # never an empty one it would call unreadable and send the user to --force-unlock for.
    code, output = finish(start_sync(kb))
    assert code == 0, output
    assert "cannot be read" not in output and "force-unlock" not in output
    assert "added 3" in output
    os.kill(first.pid, signal.SIGCONT)
    code, output = finish(first)
    assert code == 0 and "cannot be read" not in output, output
    state_dir = kb / ".pinakes"
    assert not (state_dir / "sync.lock").exists()
    assert [name for name in os.listdir(state_dir) if name.startswith(".sync.lock")] == []  # no temp record left


def test_a_sync_killed_while_taking_the_lock_leaves_none_behind(tmp_path: Path) -> None:
    # Killed between creating the lock and writing it, a sync used to leave an empty lock that every
    # later sync refused as unreadable until someone ran --force-unlock.
    kb = make_kb(tmp_path / "kb")
    code, _output = finish(start_sync(kb, kill_at="sync.lock-created"))
    assert code == -signal.SIGKILL
    assert not (kb / ".pinakes" / "sync.lock").exists()
    code, output = finish(start_sync(kb))
    assert code == 0 and "added 3" in output, output


def test_a_lock_being_written_in_place_is_waited_for(tmp_path: Path) -> None:
    # A filesystem without hard links (or an older pnk) creates the lock empty, then writes it.
    kb = make_kb(tmp_path / "kb")
    lock = kb / ".pinakes" / "sync.lock"
    lock.parent.mkdir(exist_ok=True)
    lock.write_text("", encoding="utf-8")
    second = start_sync(kb)
    time.sleep(0.3)
    lock.write_text(lock_record(os.getpid()), encoding="utf-8")  # a live holder: this test
    code, output = finish(second)
    assert code == 0, output
    assert f"sync skipped: another sync holds the lock (pid {os.getpid()}" in output
    assert lock.exists()  # the holder's lock is left alone


def test_a_lock_that_stays_unreadable_is_still_reported(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb")
    lock = kb / ".pinakes" / "sync.lock"
    lock.parent.mkdir(exist_ok=True)
    lock.write_text('{"pid": 12', encoding="utf-8")
    old = time.time() - 60
    os.utime(lock, (old, old))  # a writer that died mid-write a minute ago
    code, output = finish(start_sync(kb))
    assert code == 75, output
    assert "cannot be read" in output and "pnk sync --force-unlock" in output


def test_two_syncs_reclaiming_one_stale_lock_never_both_write(tmp_path: Path,
                                                              procs: list[subprocess.Popen[str]]) -> None:
    kb = make_kb(tmp_path / "kb")
    lock = kb / ".pinakes" / "sync.lock"
    lock.parent.mkdir(exist_ok=True)
    lock.write_text(lock_record(DEAD_PID), encoding="utf-8")  # a crashed sync's lock
    first = start_sync(kb, stop_at="sync.lock-reclaiming,sync.lock-taken")
    procs.append(first)
    wait_until(lambda: state(first.pid) == "T", "the first sync stops about to remove the stale lock")
    second = start_sync(kb, stop_at="sync.lock-reclaiming")
    procs.append(second)
    # The second sync must wait for the first one's reclaim, not judge the same stale lock itself
    # (then it would remove the lock the first one creates next, and both would write).
    wait_until(lambda: state(second.pid) == "T" or waiting_on_flock(second.pid),
               "the second sync reaches the stale lock")
    assert state(second.pid) != "T", "the second sync judged the lock stale while the first was removing it"
    os.kill(first.pid, signal.SIGCONT)
    wait_until(lambda: state(first.pid) == "T", "the first sync holds the lock")
    code, output = finish(second)
    assert code == 0, output
    assert f"sync skipped: another sync holds the lock (pid {first.pid}" in output
    assert json.loads(lock.read_text(encoding="utf-8"))["pid"] == first.pid
    os.kill(first.pid, signal.SIGCONT)
    code, output = finish(first)
    assert code == 0, output
    assert "reclaimed a stale sync lock" in output and "added 3" in output
    assert not lock.exists()
