"""The PDF parser runs in a child process under resource limits (`pinakes.extract.isolation`).

Two levels: the generic runner (every way a child can end becomes a clear `IsolationError`, and the
next call still works), then whole `pnk sync` runs in a fresh process over a KB that holds a
decompression bomb, a page-tree loop, a truncated file and a planted parser crash beside good
documents: each bad file fails alone, with its reason, within the limits, and the sync process's
own peak memory stays far below what the bomb took from its child.

The functions the runner tests send to the child live at the top of this module: the child imports
them by name, so this module must stay importable without side effects.
"""

from __future__ import annotations

import ctypes
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pinakes.distribution import pip_install
from pinakes.errors import IsolationError, MissingExtraError, SourceError
from pinakes.extract import isolation
from pinakes.extract.isolation import Limits, run_isolated
from tests.conftest import REPO_ROOT

MIB = 1 << 20
# Small limits, so a limit is reached in a second and the tests stay light on a shared machine.
TEST_LIMITS = Limits(address_space_bytes=256 * MIB, cpu_seconds=1, wall_seconds=2.0, output_bytes=4 * MIB)
T = TypeVar("T")


# --- what the runner tests run in the child ------------------------------------------------------


def child_pid() -> int:
    return os.getpid()


def child_echo(value: object) -> object:
    return value


def child_raises_source_error(path: str) -> None:
    raise SourceError("the PDF is unreadable (planted)", remedy="re-export it", path=path)


def child_raises_missing_extra() -> None:
    # Its __init__ does not take its own args: the runner must rebuild it without calling __init__.
    raise MissingExtraError("pdf", "free PDF extraction", missing_module="pypdfium2")


def child_segfaults() -> None:
    ctypes.string_at(0)


def child_aborts() -> None:
    os.abort()


def child_exits() -> None:
    os._exit(3)


def child_spins() -> None:
    while True:
        pass


def child_sleeps() -> None:
    time.sleep(60)


def child_naps(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def child_allocates() -> bytes:
    return bytes(1 << 30)


def child_returns_too_much() -> str:
    return "x" * (8 * MIB)


def child_hits_faultpoint() -> None:
    from pinakes.faults import faultpoint

    faultpoint("test.isolation")


# --- the generic runner --------------------------------------------------------------------------


def run(function: Callable[..., T], *args: object, limits: Limits = TEST_LIMITS) -> T:
    return run_isolated(function, *args, limits=limits, what="the test parser", path="/kb/docs/x.pdf")


def test_a_call_runs_in_another_process_and_its_result_comes_back() -> None:
    assert run(child_pid) != os.getpid()
    assert run(child_echo, {"text": "é" * 1000, "pages": ((0, 1),)}) == {"text": "é" * 1000, "pages": ((0, 1),)}


def test_one_worker_serves_call_after_call() -> None:
    assert run(child_pid) == run(child_pid)


def test_what_the_function_raises_comes_back_as_itself_and_keeps_the_worker() -> None:
    worker = run(child_pid)
    with pytest.raises(SourceError) as caught:
        run(child_raises_source_error, "/kb/docs/x.pdf")
    assert type(caught.value) is SourceError
    assert caught.value.render() == "/kb/docs/x.pdf: the PDF is unreadable (planted)\n  remedy: re-export it"
    with pytest.raises(MissingExtraError) as missing:
        run(child_raises_missing_extra)
    assert missing.value.extra == "pdf" and missing.value.remedy == pip_install(("pdf",))
    assert run(child_pid) == worker  # a parser's own error is not a reason to restart


@pytest.mark.parametrize(("function", "kind", "says"), [
    (child_segfaults, "crash", "crashed (SIGSEGV, at a peak of"),
    (child_aborts, "crash", "crashed (SIGABRT, at a peak of"),
    (child_exits, "exit", "exited unexpectedly (status 3)"),
    (child_spins, "cpu", "used up its 1 s CPU-time limit"),
    (child_sleeps, "timeout", "took longer than its 2 s limit"),
    (child_allocates, "memory", "ran out of its 256 MiB memory limit"),
    (child_returns_too_much, "output", "over its 4 MiB limit"),
])
def test_every_way_the_child_can_end_is_a_clear_failure_and_the_next_call_works(
        function: Callable[[], object], kind: str, says: str) -> None:
    # The CPU limit gets a wall clock it cannot reach first, even on a loaded machine.
    limits = TEST_LIMITS if kind != "cpu" else Limits(256 * MIB, cpu_seconds=1, wall_seconds=30.0)
    before = run(child_pid)
    started = time.monotonic()
    with pytest.raises(IsolationError) as caught:
        run(function, limits=limits)
    assert time.monotonic() - started < limits.wall_seconds + 2
    assert caught.value.kind == kind
    assert caught.value.path == Path("/kb/docs/x.pdf")
    assert says in caught.value.message and "the test parser" in caught.value.message
    assert caught.value.remedy
    assert run(child_pid) != before  # a fresh worker: the failed one is gone
    with pytest.raises(ProcessLookupError):
        os.kill(before, 0)


def test_a_fault_point_set_after_the_worker_started_still_reaches_it(monkeypatch: pytest.MonkeyPatch) -> None:
    run(child_pid)  # the worker exists before the switch is set
    monkeypatch.setenv("PNK_FAULT", "test.isolation")
    with pytest.raises(IsolationError) as caught:
        run(child_hits_faultpoint)
    assert caught.value.kind == "killed"
    monkeypatch.delenv("PNK_FAULT")
    assert run(child_hits_faultpoint) is None


def test_a_worker_killed_between_calls_is_replaced() -> None:
    before = run(child_pid)
    os.kill(before, 9)
    give_up = time.monotonic() + 5
    while not process_ended(before) and time.monotonic() < give_up:
        time.sleep(0.01)
    assert run(child_pid) not in (before, os.getpid())


def test_shutdown_leaves_no_worker_behind() -> None:
    worker = run(child_pid)
    isolation.shutdown()
    with pytest.raises(ProcessLookupError):
        os.kill(worker, 0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's prctl")
def test_a_worker_outlives_the_thread_that_started_it_even_under_another_threads_call() -> None:
    """Linux's parent-death signal follows the *thread* that started a process. A worker started by
    a short-lived thread (a sync run on a thread: `pnk watch` in an application, an MCP server, a
    test) must not die when that thread ends, least of all mid-call for another thread."""
    isolation.shutdown()  # the worker this test watches is started by its first thread
    first_pid: list[int] = []
    first_may_end = threading.Event()

    def first_caller() -> None:
        first_pid.append(run(child_pid))
        first_may_end.wait(30)

    second_result: list[object] = []

    def second_caller() -> None:
        try:
            second_result.append(run(child_naps, 1.0))
        except Exception as exc:  # reported by the assertion below
            second_result.append(exc)

    first = threading.Thread(target=first_caller)
    first.start()
    give_up = time.monotonic() + 30
    while not first_pid and first.is_alive() and time.monotonic() < give_up:
        time.sleep(0.01)
    assert first_pid, "the first thread's call did not return"
    second = threading.Thread(target=second_caller)
    second.start()
    time.sleep(0.3)  # the second thread's call is in flight, in the worker the first one started
    first_may_end.set()
    first.join()
    second.join(30)
    assert second_result == [first_pid[0]]  # that worker answered, alive
    assert run(child_pid) == first_pid[0]  # and serves on


PARENT_SCRIPT = """
import os, sys
sys.path.insert(0, {repo!r})
from pinakes.extract.isolation import Limits, run_isolated
from tests.test_pdf_isolation import child_pid, child_sleeps
print(run_isolated(child_pid, limits=Limits.for_input(0), what="x"), flush=True)
run_isolated(child_sleeps, limits=Limits.for_input(0), what="x")
"""


def process_ended(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0]
    except (FileNotFoundError, IndexError):
        return True
    return state in ("Z", "X")  # a zombie waits for init to reap it: it no longer runs


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's prctl")
def test_a_parser_mid_call_dies_with_a_parent_killed_by_sigkill() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT_SCRIPT.format(repo=str(REPO_ROOT))],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        worker = int(parent.stdout.readline())
        time.sleep(0.2)  # the worker is now inside child_sleeps
        assert not process_ended(worker)
    finally:
        parent.kill()
        parent.wait()
    give_up = time.monotonic() + 5
    while not process_ended(worker) and time.monotonic() < give_up:
        time.sleep(0.05)
    assert process_ended(worker)


def test_limits_grow_with_the_input() -> None:
    small, large = Limits.for_input(10_000), Limits.for_input(400 * MIB)
    assert small.address_space_bytes == isolation.ADDRESS_SPACE_BASE + 4 * 10_000
    assert small.cpu_seconds == isolation.CPU_SECONDS_BASE + isolation.CPU_SECONDS_PER_MIB
    assert large.cpu_seconds > small.cpu_seconds and large.wall_seconds > large.cpu_seconds
    assert large.output_bytes == small.output_bytes == isolation.OUTPUT_BYTES


# --- hostile PDFs --------------------------------------------------------------------------------


def pdf_file(objects: list[bytes]) -> bytes:
    out = b"%PDF-1.4\n"
    offsets: list[int] = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{offset:010d} 00000 n \n" for offset in offsets).encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return out


def flate_bomb_pdf(mib: int) -> bytes:
    """A one-page PDF of ~3 KB whose content stream inflates, through two FlateDecode filters, to
    `mib` MiB (spaces: valid content, so nothing stops the parser but its memory). The inner stream
    is one byte-aligned deflate block repeated (a full flush resets the window, so each copy stands
    alone): building a 1 GiB bomb takes a fraction of a second."""
    raw = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = raw.compress(b" " * MIB) + raw.flush(zlib.Z_FULL_FLUSH)
    end = raw.flush(zlib.Z_FINISH)
    adler, chunk = 1, b" " * MIB
    for _ in range(mib):
        adler = zlib.adler32(chunk, adler)
    inner = b"\x78\xda" + block * mib + end + adler.to_bytes(4, "big")
    stream = zlib.compress(inner, 9)
    return pdf_file([
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
        b"<< /Filter [/FlateDecode /FlateDecode] /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ])


def page_tree_loop_pdf() -> bytes:
    """The root's /Kids holds an intermediate node whose /Kids points back at the root."""
    return pdf_file([
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 >>",
        b"<< /Type /Pages /Parent 2 0 R /Kids [2 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>",
    ])


def good_pdf(words: str) -> bytes:
    from tests.test_extract_text import make_pdf

    return make_pdf([[f"{words} on page one"], [f"{words} on page two"]])


def test_flate_bomb_really_inflates() -> None:
    """The bomb is what it claims: a few KB that inflate to the size asked for."""
    data = flate_bomb_pdf(64)
    assert len(data) < 4096
    stream = data[data.index(b"stream\n") + 7:data.rindex(b"\nendstream")]
    inflated = zlib.decompress(zlib.decompress(stream))
    assert len(inflated) == 64 * MIB and inflated.strip() == b""


# --- whole syncs, each in a fresh process --------------------------------------------------------

SYNC_SCRIPT = """
import json, resource, sys, time
sys.path.insert(0, {repo!r})
import pinakes.extract.isolation as isolation
isolation.ADDRESS_SPACE_BASE = {address_space}
isolation.CPU_SECONDS_BASE = {cpu}
isolation.WALL_SECONDS_SLACK = 5
from tests.fakes import FakeEmbedder
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
started = time.monotonic()
report = run_sync({kb!r}, SyncOptions(), embedder=FakeEmbedder())
seconds = time.monotonic() - started
isolation.shutdown()
# VmHWM, not ru_maxrss: after an exec, ru_maxrss still counts the RSS of the process that spawned
# this one (the test runner). The children's ru_maxrss carries this process's own RSS the same way.
hwm = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({{"seconds": seconds, "failures": {{f.path: [f.stage, f.error] for f in report.failures}},
                  "peak_rss": hwm,
                  "child_peak_rss": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024}}))
"""
SYNC_ADDRESS_SPACE = 512 * MIB
SYNC_CPU_SECONDS = 10


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    pytest.importorskip("pypdfium2", reason="the PDF parser under test is the [pdf] extra (pypdfium2)")
    from pinakes.init import init_kb

    root = tmp_path / "kb"
    init_kb(root, name="isolation")
    (root / "docs" / "notes.md").write_text("# Notes\n\nHarbour dredging schedule.\n", encoding="utf-8")
    return root


def sync_in_fresh_process(kb: Path, fault: str | None = None) -> dict[str, Any]:
    env = {key: value for key, value in os.environ.items() if key != "PNK_FAULT"}
    if fault:
        env["PNK_FAULT"] = fault
    code = SYNC_SCRIPT.format(repo=str(REPO_ROOT), kb=str(kb), address_space=SYNC_ADDRESS_SPACE,
                              cpu=SYNC_CPU_SECONDS)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def indexed(kb: Path) -> dict[str, int]:
    """Active document path -> its chunk count, read from the index the sync built."""
    conn = sqlite3.connect(kb / ".pinakes" / "index.db")
    try:
        return dict(conn.execute("SELECT d.path, COUNT(c.id) FROM documents d LEFT JOIN chunks c "
                                 "ON c.doc_id = d.id WHERE d.state = 'active' GROUP BY d.path"))
    finally:
        conn.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="peak memory is read from /proc (Linux)")
def test_a_bomb_a_page_tree_loop_and_a_truncated_file_each_fail_alone(kb: Path) -> None:
    docs = kb / "docs"
    (docs / "a-good.pdf").write_bytes(good_pdf("Lighthouse keeping"))
    (docs / "b-bomb.pdf").write_bytes(flate_bomb_pdf(1024))  # 1 GiB inflated, twice the 512 MiB limit
    (docs / "c-loop.pdf").write_bytes(page_tree_loop_pdf())
    whole = good_pdf("Tide tables")
    (docs / "d-truncated.pdf").write_bytes(whole[:len(whole) // 2])
    (docs / "e-good.pdf").write_bytes(good_pdf("Buoy maintenance"))

    result = sync_in_fresh_process(kb)

    failures = result["failures"]
    assert set(failures) == {"docs/b-bomb.pdf", "docs/c-loop.pdf", "docs/d-truncated.pdf"}
    # Each refusal is the file's own (its bytes, under limits that scale with its size): no sync
    # gets past it, so its remedy is to leave it out.
    assert all(stage == "unextractable" for stage, _ in failures.values())
    bomb = failures["docs/b-bomb.pdf"][1]
    assert "the PDF parser" in bomb and "of its 512 MiB memory limit" in bomb
    assert "ran out of" in bomb or "most likely out of memory" in bomb
    assert "failed to read a page" in failures["docs/c-loop.pdf"][1]
    assert "the PDF is unreadable" in failures["docs/d-truncated.pdf"][1]
    chunks = indexed(kb)
    assert chunks.keys() >= {"docs/a-good.pdf", "docs/e-good.pdf", "docs/notes.md"}
    assert chunks["docs/a-good.pdf"] > 0 and chunks["docs/e-good.pdf"] > 0 and chunks["docs/notes.md"] > 0
    # Within the limits: nothing waited for a wall clock (the bomb hits its memory limit in seconds).
    assert result["seconds"] < 2 * SYNC_CPU_SECONDS + 5
    # The bomb inflated in the child, not in the sync: the sync's own peak stays under half the
    # child's limit, and a child went past it (more than the sync's own RSS it inherits the count of).
    assert result["peak_rss"] < SYNC_ADDRESS_SPACE // 2, f"the sync peaked at {result['peak_rss'] / MIB:.0f} MiB"
    assert result["child_peak_rss"] >= SYNC_ADDRESS_SPACE // 2


def test_a_parser_crash_fails_only_its_own_document(kb: Path) -> None:
    docs = kb / "docs"
    for name in ("a", "b", "c"):
        (docs / f"{name}.pdf").write_bytes(good_pdf(f"Report {name}"))

    # The worker counts its parses: the second (b.pdf) SIGKILLs the parser mid-document; c.pdf goes
    # to the fresh worker that replaces it.
    result = sync_in_fresh_process(kb, fault="extract.pdf.parse:2")

    assert set(result["failures"]) == {"docs/b.pdf"}
    stage, error = result["failures"]["docs/b.pdf"]
    # Killed from outside: not the file's fault, so not offered for exclusion (the next sync indexes it).
    assert stage == "extract" and "the PDF parser was killed (SIGKILL" in error
    chunks = indexed(kb)
    assert chunks["docs/a.pdf"] > 0 and chunks["docs/c.pdf"] > 0 and chunks["docs/notes.md"] > 0
    assert "docs/b.pdf" not in chunks or chunks["docs/b.pdf"] == 0

    # The next sync, without the fault, indexes it: a failed extraction is not remembered as done.
    assert sync_in_fresh_process(kb)["failures"] == {}
    assert indexed(kb)["docs/b.pdf"] > 0
