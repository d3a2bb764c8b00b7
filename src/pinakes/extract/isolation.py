"""Run a parser in a child process under resource limits, so a hostile or broken input fails one
call instead of the process that made it (issue #13 item 5; the reliability notes' B9/B10).

The API is generic, for any parser of untrusted bytes (the free PDF extractor uses it; a renderer
of PDF pages may too)::

    from pinakes.extract.isolation import Limits, run_isolated

    result = run_isolated(parse, path, limits=Limits.for_input(path.stat().st_size),
                          what="the PDF parser", path=path)

`parse` must be a module-level function (the child imports it by name, so its module must import
nothing heavy), and its arguments and return value must pickle. What it raises is raised again
here: the same class with the same args and attributes, so a `SourceError` a parser raises reads
exactly as it would in process. Every other way the child can end is an `IsolationError` (a
`SourceError`, so a sync records it against that one document and goes on) naming `path`, what
ran, and why, with `kind` one of KINDS:

    memory   MemoryError in the child, or a fatal signal after using a third or more of its limit
    cpu      the CPU-time limit (SIGXCPU)            timeout   the wall-clock limit (the parent kills)
    crash    a fatal signal (SIGSEGV, SIGABRT, ...)   killed    SIGKILL from outside (the OOM killer)
    exit     the child exited with a status          output    the result is over the output limit
    start    the child could not be started          protocol  the child's reply cannot be read

The limits (`Limits`; `Limits.for_input` derives them from the input's size, and the constants
below are sized against measurements in docs/perf/pdf-isolation.md) are enforced where the kernel
can do it: RLIMIT_AS for the address space, RLIMIT_CPU for CPU time (set before each call on top
of the CPU the worker has already used), RLIMIT_CORE = 0 (a crash writes no core file) and
RLIMIT_FSIZE (the child's error stream is a file the parent reads back). The wall clock and the
output size are enforced by the parent. Where `resource` cannot set a limit (RLIMIT_AS is not
enforced on macOS), the wall clock and the output limit still hold. A native parser that runs out
of memory aborts rather than raising, so a death by signal is told apart by the child's peak RSS
during that call, which the waiting parent samples from /proc (Linux).

Process model, measured (docs/perf/pdf-isolation.md): one long-lived worker per parent process,
started with fork+exec (`subprocess`, never a bare fork of a parent that may hold threads or
numpy/onnxruntime state), importing only this module and then the modules of the functions it is
sent. It serves calls one at a time (callers are serialised by a lock) and is replaced after any
failure that ends or taints it; a function that raises leaves it running. A fresh interpreter per
call would cost a Python start-up and a pypdfium2 import per document; the reused worker costs a
pipe round trip. Callers that want several cores name a `slot`: one such worker per slot. It
ignores Ctrl-C (the parent decides), exits when its stdin closes, is told to
stop at the parent's exit, and on Linux is killed by the kernel if the parent dies first. That
signal follows the *thread* that started the child, not the process, so every worker is started by
one daemon thread that lives as long as the process (`process_starter.py`): a caller on a short-lived
thread (a sync run on a thread by `pnk watch`'s host, a server, a test) never takes its worker down
with it, mid-call for another thread. The
parent's `sys.path` and fault-injection variables (`pinakes.faults`) travel with each call, so the
child imports and faults as the caller would.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import math
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TypeVar

from pinakes.errors import IsolationError
from pinakes.extract.process_starter import die_with_parent, start_process

T = TypeVar("T")

MIB = 1 << 20
GIB = 1 << 30

# Limits derived from the input's size (Limits.for_input). Free extraction of the R manuals, layout
# included, takes 0.2-1.5 s per manual (~170 pages/s, at most ~2 s of CPU per MiB of PDF) with a
# worker peak of 70 MiB: these sit 40x and more above that, grow with a file up to the 500 MiB
# pdf.MAX_PDF_BYTES, and still stop a bomb within seconds and a loop within about two minutes.
ADDRESS_SPACE_BASE = 2 * GIB  # a parser's whole address space, the interpreter included
ADDRESS_SPACE_PER_INPUT_BYTE = 4  # so a legitimately huge file is not refused for its size alone
CPU_SECONDS_BASE = 60
CPU_SECONDS_PER_MIB = 10
WALL_SECONDS_FACTOR = 2  # the wall clock allows for a busy machine: factor x CPU limit + slack
WALL_SECONDS_SLACK = 10
OUTPUT_BYTES = 64 * MIB  # the pickled result: ~60 M characters, ~20,000 dense pages of text
STDERR_BYTES = 16 * MIB  # RLIMIT_FSIZE: what the child may write to its error stream per call
PEAK_SAMPLE_SECONDS = 0.02  # how often a waiting parent reads the child's peak RSS (Linux /proc)

KINDS = ("memory", "cpu", "timeout", "crash", "killed", "exit", "output", "start", "protocol")
# The fault-injection switches (pinakes.faults) the child reads at call time, not at its start.
_FORWARDED_ENV = ("PNK_FAULT", "PNK_FAULT_TRACE")
_HEADER = struct.Struct(">Q")
_OK, _RAISED, _MEMORY, _TOO_LARGE = b"o", b"r", b"m", b"t"
_BOOTSTRAP = ("import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
              "from pinakes.extract.isolation import child_main; child_main()")
_DEFAULT_REMEDY = ("if the file is valid (it opens in other software), report this as a Pinakes bug; "
                   "otherwise repair or re-export it and run `pnk sync`, or exclude it in [sources]")


@dataclass(frozen=True, slots=True)
class Limits:
    """What one call may use. `address_space_bytes` and `cpu_seconds` are kernel limits inside the
    child; `wall_seconds` and `output_bytes` are enforced by the parent."""

    address_space_bytes: int
    cpu_seconds: int
    wall_seconds: float
    output_bytes: int = OUTPUT_BYTES

    @classmethod
    def for_input(cls, size_bytes: int) -> Limits:
        cpu = CPU_SECONDS_BASE + CPU_SECONDS_PER_MIB * -(-size_bytes // MIB)
        return cls(address_space_bytes=ADDRESS_SPACE_BASE + ADDRESS_SPACE_PER_INPUT_BYTE * size_bytes,
                   cpu_seconds=cpu, wall_seconds=float(WALL_SECONDS_FACTOR * cpu + WALL_SECONDS_SLACK))


def run_isolated(function: Callable[..., T], *args: object, limits: Limits, what: str,
                 path: Path | str | None = None, remedy: str = _DEFAULT_REMEDY, slot: int = 0) -> T:
    """`function(*args)` in the worker process, under `limits`; see the module docstring. `slot`
    picks one of several workers, each its own process serving one call at a time, so callers on
    different threads can keep several cores busy (OCR reads pages two at a time: extract/ocr.py)."""
    call = _Call(what=what, limits=limits, path=Path(path) if path is not None else None, remedy=remedy)
    with _slot_lock(slot):
        for attempt in (1, 2):
            worker = _workers.get(slot)
            if worker is None or not worker.alive():
                _discard_worker(slot)
                worker = _workers[slot] = _Worker.start(call)
            try:
                outcome = worker.run(function, args, call)
            except _WorkerGone:
                _discard_worker(slot)  # it died between calls (killed from outside): one fresh try
                if attempt == 2:
                    raise call.failure("start", f"{what} could not be started (the worker process "
                                                "closed its input at once)") from None
                continue
            except BaseException:
                _discard_worker(slot)  # a limit, a crash, Ctrl-C: never leave a parser running or tainted
                raise
            if isinstance(outcome, _Raised):
                raise outcome.exception  # what the function itself raised; the worker stays up for the next call
            return outcome
    raise AssertionError("unreachable")


def shutdown() -> None:
    """Stop every worker, if any runs (at exit, and for tests that count processes)."""
    for slot in list(_workers):
        with _slot_lock(slot):
            _discard_worker(slot)


# --- the parent side -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Call:
    what: str
    limits: Limits
    path: Path | None
    remedy: str

    def failure(self, kind: str, message: str) -> IsolationError:
        return IsolationError(message, kind=kind, remedy=self.remedy, path=self.path)


@dataclass(frozen=True, slots=True)
class _Raised:
    """What the function raised in the worker (rebuilt here): raised again once the worker is put away."""

    exception: BaseException


def _unreadable(call: _Call, exc: Exception) -> IsolationError:
    return call.failure("protocol", f"{call.what} sent a reply that cannot be read ({type(exc).__name__}: {exc})")


class _WorkerGone(Exception):
    """The worker was dead before it was given the call."""


class _Worker:
    def __init__(self, process: subprocess.Popen[bytes], stderr: IO[bytes]) -> None:
        self.process = process
        self.stderr = stderr  # the child's error stream: a temporary file read back on failure
        # The child's peak RSS during the current call, sampled from /proc while the parent waits:
        # after a fatal signal, what tells a bomb from a crash. (wait4's ru_maxrss cannot: it never
        # resets between calls and counts the parent's own RSS from before the exec.)
        self.call_peak = 0

    @classmethod
    def start(cls, call: _Call) -> _Worker:
        stderr = tempfile.TemporaryFile(prefix="pinakes-parser-")  # noqa: SIM115 - lives as long as the worker
        # The child starts on the parent's sys.path, so it imports this very copy of pinakes
        # (and the same modules) whatever put them on the parent's path.
        try:
            process = start_process(lambda: subprocess.Popen(
                [sys.executable, "-c", _BOOTSTRAP, json.dumps(sys.path)], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=stderr, close_fds=True, start_new_session=True))
        except OSError as exc:
            stderr.close()
            raise call.failure("start", f"{call.what} could not be started ({sys.executable!r}: "
                                        f"{exc.strerror or exc})") from exc
        return cls(process, stderr)

    def alive(self) -> bool:
        return not self._reap(block=False)

    def run(self, function: Callable[..., T], args: tuple[object, ...], call: _Call) -> T | _Raised:
        """What the function returned, or what it raised (`_Raised`); a failure of the worker raises."""
        env = {name: os.environ.get(name) for name in _FORWARDED_ENV}
        setup = pickle.dumps((call.limits, env, list(sys.path)), pickle.HIGHEST_PROTOCOL)
        payload = pickle.dumps((function, args), pickle.HIGHEST_PROTOCOL)
        self._clear_stderr()
        self._reset_peak()
        deadline = time.monotonic() + call.limits.wall_seconds
        assert self.process.stdin is not None  # started with stdin=PIPE
        try:
            _write_frame(self.process.stdin, setup)
            _write_frame(self.process.stdin, payload)
        except (BrokenPipeError, ConnectionResetError):
            raise _WorkerGone() from None
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        header = _read_exactly(fd, 1 + _HEADER.size, deadline, self._sample_peak)
        if header is None:
            raise self._ended(call, deadline)
        status, length = bytes(header[:1]), _HEADER.unpack(header[1:])[0]
        if length > call.limits.output_bytes + MIB:  # the child checks; this guards the parent
            self.kill()
            raise call.failure("output", f"{call.what} sent {_size(length)}, over its "
                                         f"{_size(call.limits.output_bytes)} output limit")
        body = _read_exactly(fd, length, deadline, self._sample_peak)
        if body is None:
            raise self._ended(call, deadline)
        if status == _OK:
            try:
                return pickle.loads(body)  # what the function returned (a T), as the child pickled it
            except Exception as exc:  # any unpickling fault is a protocol failure
                raise _unreadable(call, exc) from None
        return _Raised(self._reply(status, body, call))

    def _reply(self, status: bytes, body: bytearray, call: _Call) -> BaseException:
        """What the function raised, from a reply that is not _OK; a failure of the worker raises."""
        try:
            detail = pickle.loads(body)
        except Exception as exc:  # any unpickling fault is a protocol failure
            raise _unreadable(call, exc) from None
        if status == _RAISED:
            return _rebuild_exception(*detail, call=call)
        if status == _MEMORY:
            raise call.failure("memory", f"{call.what} ran out of its {_size(call.limits.address_space_bytes)} "
                                         "memory limit (a decompression bomb, or a document too large to parse)")
        if status == _TOO_LARGE:
            raise call.failure("output", f"{call.what} produced {_size(detail)} of output, over its "
                                         f"{_size(call.limits.output_bytes)} limit")
        raise call.failure("protocol", f"{call.what} sent an unknown reply ({status!r})")

    def _ended(self, call: _Call, deadline: float) -> IsolationError:
        """The reply never came: the wall clock ran out, or the child ended. Says which, and how."""
        if time.monotonic() >= deadline and self.alive():
            self.kill()
            return call.failure("timeout", f"{call.what} took longer than its {call.limits.wall_seconds:g} s "
                                           "limit (a loop in the file, or a document too large to parse)")
        # Its output closed: it is exiting. Give the kernel a moment to say how, then make sure.
        give_up = time.monotonic() + 1.0
        while self.alive() and time.monotonic() < give_up:
            time.sleep(0.005)
        self.kill()
        returncode = self.process.returncode
        words = self._last_words()
        said = f"; its last words: {words}" if words else ""
        if returncode is not None and returncode < 0:
            signum = -returncode
            name = _signal_name(signum)
            peak = self.call_peak
            if signum == signal.SIGXCPU:
                return call.failure("cpu", f"{call.what} used up its {call.limits.cpu_seconds} s CPU-time limit "
                                           "(a loop in the file, or a document too large to parse)")
            if signum == signal.SIGXFSZ:
                return call.failure("crash", f"{call.what} wrote more than {_size(STDERR_BYTES)} of errors")
            # A growing buffer fails when doubling it would pass the limit, so a parser that dies of
            # memory has reached at least half of it; sampling may see a little less: a third.
            if peak >= call.limits.address_space_bytes // 3:
                return call.failure("memory", f"{call.what} was stopped by {name} after reaching {_size(peak)} "
                                              f"of its {_size(call.limits.address_space_bytes)} memory limit: "
                                              f"most likely out of memory (a decompression bomb?){said}")
            if signum == signal.SIGKILL:
                return call.failure("killed", f"{call.what} was killed (SIGKILL, from outside: the system may "
                                              f"be out of memory){said}")
            return call.failure("crash", f"{call.what} crashed ({name}, at a peak of {_size(peak)} of its "
                                         f"{_size(call.limits.address_space_bytes)} memory limit){said}")
        return call.failure("exit", f"{call.what} exited unexpectedly (status {returncode}){said}")

    def kill(self) -> None:
        """Kill and reap the child (a no-op once it has ended)."""
        if self._reap(block=False):
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid, signal.SIGKILL)  # not Popen.kill: its poll() would reap
        self._reap(block=True)

    def _reap(self, *, block: bool) -> bool:
        """Collect the child's exit status; True once it has ended."""
        if self.process.returncode is not None:
            return True
        try:
            pid, status = os.waitpid(self.process.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:  # reaped elsewhere: the status is lost
            self.process.returncode = -signal.SIGKILL
            return True
        if pid == 0:
            return False
        self.process.returncode = os.waitstatus_to_exitcode(status)
        return True

    def close(self) -> None:
        """Ask the child to exit (EOF on its input), then make sure of it."""
        for stream in (self.process.stdin, self.process.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        give_up = time.monotonic() + 2.0
        while self.alive() and time.monotonic() < give_up:
            time.sleep(0.01)
        self.kill()
        self.stderr.close()

    def _reset_peak(self) -> None:
        """Start the call's peak afresh: the kernel's high-water mark too (Linux's clear_refs)."""
        self.call_peak = 0
        with contextlib.suppress(OSError):
            Path(f"/proc/{self.process.pid}/clear_refs").write_text("5")

    def _sample_peak(self) -> None:
        try:
            status = Path(f"/proc/{self.process.pid}/status").read_text()
        except OSError:  # not Linux, or already gone
            return
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                self.call_peak = max(self.call_peak, int(line.split()[1]) * 1024)
                return

    def _clear_stderr(self) -> None:
        # The child's fd 2 shares this file's offset, so rewinding here rewinds the child too.
        self.stderr.seek(0)
        self.stderr.truncate()

    def _last_words(self) -> str:
        """The last line the child wrote to its error stream (a native abort message, say)."""
        self.stderr.flush()
        size = os.fstat(self.stderr.fileno()).st_size
        tail = os.pread(self.stderr.fileno(), 4096, max(0, size - 4096)).decode("utf-8", "replace")
        lines = [line.strip() for line in tail.splitlines() if line.strip()]
        return lines[-1][:200] if lines else ""


_lock = threading.Lock()  # guards _slot_locks itself
_slot_locks: dict[int, threading.Lock] = {}
_workers: dict[int, _Worker] = {}


def _slot_lock(slot: int) -> threading.Lock:
    with _lock:
        return _slot_locks.setdefault(slot, threading.Lock())


def _discard_worker(slot: int) -> None:
    worker = _workers.pop(slot, None)
    if worker is not None:
        worker.close()


def _forget_worker_in_forked_child() -> None:
    # A fork of the parent must not share (or close) the parent's worker pipes.
    global _lock
    _workers.clear()
    _slot_locks.clear()
    _lock = threading.Lock()


atexit.register(shutdown)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_worker_in_forked_child)


def _rebuild_exception(module: str, qualname: str, args: tuple[object, ...], state: dict[str, object],
                       child_traceback: str, *, call: _Call) -> BaseException:
    """The child's exception, rebuilt as its own class without calling its __init__ (whose
    signature need not match its args, as MissingExtraError's does not)."""
    try:
        target: object = importlib.import_module(module)
        for part in qualname.split("."):
            target = getattr(target, part)
        if not (isinstance(target, type) and issubclass(target, BaseException)):
            raise TypeError(f"{module}.{qualname} is not an exception class")
        exc = target.__new__(target, *args)
        exc.args = args
        exc.__dict__.update(state)
    except Exception:  # a class the parent cannot rebuild still reports its text
        text = str(args[0]) if len(args) == 1 else str(args)
        exc = call.failure("crash", f"{call.what} failed: {qualname}: {text}")
    exc.add_note(f"raised in the isolated child process:\n{child_traceback}")
    return exc


def _read_exactly(fd: int, length: int, deadline: float, tick: Callable[[], None]) -> bytearray | None:
    """`length` bytes from `fd` by `deadline`, or None at EOF or when the deadline passes; `tick`
    runs every PEAK_SAMPLE_SECONDS of waiting."""
    buffer = bytearray(length)
    view = memoryview(buffer)
    got = 0
    while got < length:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], min(remaining, PEAK_SAMPLE_SECONDS))
        if not ready:
            tick()
            continue
        count = os.readv(fd, [view[got:]])
        if count == 0:
            return None
        got += count
    return buffer


def _write_frame(stream: IO[bytes], data: bytes) -> None:
    stream.write(_HEADER.pack(len(data)))
    stream.write(data)
    stream.flush()


def _size(count: int) -> str:
    for unit, scale in (("GiB", GIB), ("MiB", MIB), ("KiB", 1024)):
        if count >= scale:
            return f"{count / scale:.3g} {unit}"
    return f"{count} bytes"


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


# --- the child side --------------------------------------------------------------------------------


def child_main() -> None:
    """The worker's loop: read a call, run it under its limits, reply; exit at EOF (what `_BOOTSTRAP` runs)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.dup(1)
    # Anything printed (by Python or by native code) goes to the error stream, never into the replies.
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    _set_limit("RLIMIT_CORE", 0)
    _set_limit("RLIMIT_FSIZE", STDERR_BYTES)
    die_with_parent()
    while True:
        setup = _read_frame(requests)
        payload = _read_frame(requests)
        if setup is None or payload is None:
            return
        status, body = _serve(setup, payload)
        os.write(replies, status + _HEADER.pack(len(body)))
        view = memoryview(body)
        while view:
            view = view[os.write(replies, view):]
        if status == _MEMORY:
            return  # the heap may be in any state after a MemoryError: the parent starts a fresh worker



def _serve(setup: bytes, payload: bytes) -> tuple[bytes, bytes]:
    limits, env, parent_path = pickle.loads(setup)
    for name, value in env.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    if sys.path != parent_path:
        sys.path[:] = parent_path
    _set_limit("RLIMIT_AS", limits.address_space_bytes)
    _set_cpu_limit(limits.cpu_seconds)
    try:
        function, args = pickle.loads(payload)
        result = function(*args)
        body = pickle.dumps(result, pickle.HIGHEST_PROTOCOL)
    except MemoryError:
        return _MEMORY, pickle.dumps(None)
    except BaseException as exc:  # whatever it raised travels back to the caller
        return _RAISED, _exception_detail(exc)
    if len(body) > limits.output_bytes:
        return _TOO_LARGE, pickle.dumps(len(body))
    return _OK, body


def _exception_detail(exc: BaseException) -> bytes:
    cls = type(exc)
    text = "".join(traceback.format_exception(exc))
    try:
        return pickle.dumps((cls.__module__, cls.__qualname__, exc.args, dict(vars(exc)), text))
    except Exception:  # unpicklable args or attributes: keep their text
        return pickle.dumps((cls.__module__, cls.__qualname__, tuple(str(arg) for arg in exc.args), {}, text))


def _read_frame(stream: IO[bytes]) -> bytes | None:
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (length,) = _HEADER.unpack(header)
    data = stream.read(length)
    return data if len(data) == length else None


def _set_limit(name: str, soft: int) -> None:
    """Lower (or raise, up to the hard limit) one soft limit; a platform without it keeps its own."""
    try:
        import resource

        which = getattr(resource, name)
        _, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        resource.setrlimit(which, (soft, hard))
    except (ImportError, AttributeError, ValueError, OSError):
        pass


def _set_cpu_limit(seconds: int) -> None:
    # RLIMIT_CPU counts the process's whole life, so the worker's budget for this call sits on top
    # of what it has used so far; only the soft limit moves, so a later call can raise it again.
    try:
        import resource

        usage = resource.getrusage(resource.RUSAGE_SELF)
        _set_limit("RLIMIT_CPU", math.ceil(usage.ru_utime + usage.ru_stime) + seconds)
    except ImportError:
        pass
