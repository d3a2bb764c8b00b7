"""Self-calibration's questions searched by this process and a child forked from it (Linux).

A calibration is 2 searches a question (as it is, and without its source, sharing their work:
search/twice.py), a few ms of CPU a question, nearly all of it Python: two threads took turns at the
GIL and gained nothing (docs/perf/sync.md, "Two threads or one"), while a sync's second core sits
idle once its model has stopped. A forked child searches every other question with a reader of its
own (its own SQLite connection, tokenizer and matrix) while this process searches the rest: about
half the wall time at the same CPU (docs/perf/sync.md, "The questions on two processes"). The rows
are those of asking one question after another: each question's rows are kept at its position, and
any question the child did not answer (it failed, died, or fell silent: `_Child.collect`) is asked
here, where an error is raised as the first question in order that meets one
(tests/test_calibration_processes.py).

Why a fork is safe here, though this process has other threads (the model's thread pool, the
sync's helpers): the child runs only the calibration's searches, which take nothing from those
threads. It opens its own SQLite connection (never one of this process's; the index is in WAL mode
and only read while the child lives, and this process keeps its own connections open until it has
reaped the child, so SQLite's per-process lock bookkeeping the child inherits is never the last
word on the shared-memory index), answers its questions' vectors from the batched pass and never
runs the model (`QuestionVectors.batched_only`: an ONNX Runtime thread pool does not survive a
fork), runs NumPy's BLAS on the one thread the calibration gives it (search/threads.py
`one_blas_thread`: two processes' spinning BLAS threads took four of two cores), asks for the
kernel's SIGKILL when its parent dies, writes only to its pipe, and leaves by `os._exit` (no atexit
handler, buffered output or parent's cleanup runs twice). A lock another thread held at the fork
can only make the child fall silent (a reviewer's probe: a third of the forks made while two other
threads read the index in a loop; no path of the product has such threads during a calibration),
and then its questions are asked here after about one half's time: slower than one process, never
different rows. It ignores Ctrl-C, which is its parent's to handle.

Only where the second reader is cheap and the searches touch nothing shared but the question
vectors: Linux, a KB of at most MAX_CHUNKS chunks (the child's reader holds its own float32
matrix), rerank off (a reranker is one model or one paid endpoint), and the questions answered
from their batched vectors (calibration/question_vectors.py). Elsewhere one question after another.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import struct
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from typing import TypeVar

from pinakes.calibration.question_vectors import QuestionVectors
from pinakes.calibration.questions import MadeQuestion
from pinakes.errors import PinakesError
from pinakes.search.core import Searcher

MAX_CHUNKS = 20_000  # the child's matrix: at most ~30 MB at 384 float32 dimensions
# The child is given up on (killed, its unanswered questions asked here) after this long without an
# answer once this process has asked its own half: a question takes milliseconds.
SILENCE_SECONDS = 10.0
FIRST_ANSWER_SECONDS = 1.0  # the least time given to a child that has not answered yet (`_Child.collect`)
DEADLINE_GRACE_SECONDS = 1.0  # how long past the deadline the child's last answer is waited for

Row = TypeVar("Row")
Ask = Callable[[Searcher, MadeQuestion], tuple[Row, Row]]  # a question's two rows
_FRAME = struct.Struct("<I")  # the length of one pickled (position, rows) answer


def searched_on_two_processes(searcher: Searcher, chunks: int) -> bool:
    """Whether this calibration's questions are shared with a forked child (module docstring).
    `searcher` is the calibration's (`asking_searcher`): its model is the batched questions' when
    they were."""
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return False
    if chunks > MAX_CHUNKS or searcher.settings.rerank:
        return False
    try:
        return isinstance(searcher.embedder(), QuestionVectors)
    except PinakesError:  # the first search meets it again, in this process, as it always did
        return False


def ask_on_two_processes(searcher: Searcher, questions: Sequence[MadeQuestion], ask: Ask[Row], *,
                         deadline: float | None = None) -> tuple[list[Row], bool]:
    """Every question's two rows, in question order, `ask`ed by this process (the even positions)
    and a forked child (the odd ones), and whether the deadline (a `time.monotonic()` value)
    stopped the asking: then the rows are those of the questions asked from the first up to the
    first one not asked."""
    answers: dict[int, tuple[Row, Row] | BaseException] = {}
    started = time.monotonic()
    child = _Child.start(searcher, questions, ask, deadline)
    failed = False
    try:
        for position in range(0, len(questions), 1 if child is None else 2):
            if deadline is not None and time.monotonic() > deadline:
                break
            try:
                answers[position] = ask(searcher, questions[position])
            except Exception as exc:  # raised below if no earlier question fails first
                answers[position] = exc
                failed = True
                break
            if child is not None:
                child.collect(answers, wait=False)
        if child is not None:
            # After an error only what the child has sent is kept: its other questions before the
            # failed one are asked here, sooner than its whole half would be waited for.
            child.collect(answers, wait=not failed, deadline=deadline,
                          own_seconds=time.monotonic() - started)
    finally:
        if child is not None:
            child.end()
    rows: list[Row] = []
    for position, question in enumerate(questions):
        answer = answers.get(position)
        if answer is None:  # the child's, unanswered: asked here
            if deadline is not None and time.monotonic() > deadline:
                return rows, True
            answer = ask(searcher, question)
        if isinstance(answer, BaseException):
            raise answer
        rows.extend(answer)
    return rows, False


class _Child:
    """The forked child's side as its parent sees it: the pipe its answers come through."""

    def __init__(self, pid: int, reader: int) -> None:
        self.pid = pid
        self._reader = reader
        self._buffer = bytearray()
        self._open = True
        self._answered = False

    @classmethod
    def start(cls, searcher: Searcher, questions: Sequence[MadeQuestion], ask: Ask[Row],
              deadline: float | None) -> _Child | None:
        """The child asking the odd positions, or None where none could be forked (one process
        then asks every question)."""
        if len(questions) < 2:
            return None
        reader, writer = os.pipe()
        try:
            with warnings.catch_warnings():
                # Python 3.12+ warns that forking a process with threads may deadlock the child if
                # it uses what those threads held; this child does not (module docstring).
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
        except OSError:
            os.close(reader)
            os.close(writer)
            return None
        if pid == 0:  # the child: never returns
            code = 1
            try:
                os.close(reader)
                code = _child_main(searcher, questions, ask, deadline, writer)
            finally:
                os._exit(code)
        os.close(writer)
        os.set_blocking(reader, False)
        return cls(pid, reader)

    def collect(self, answers: dict[int, tuple[Row, Row] | BaseException], *, wait: bool,
                deadline: float | None = None, own_seconds: float = 0.0) -> None:
        """Move the child's answers into `answers`: those it has sent (`wait` False), or all it
        will send until it ends, falls silent or the deadline passes (DEADLINE_GRACE_SECONDS after
        it, for the question it is on). Silent: SILENCE_SECONDS
        without an answer; or, where it has sent none while this process asked its own half (in
        `own_seconds`), max(FIRST_ANSWER_SECONDS, own_seconds) more: a child forked while another
        thread held a lock it needs (SQLite's allocator mutex, say) never answers, and its
        questions are then asked here after about one half's time rather than ten seconds."""
        poller = select.poll()  # not select(): this process may hold descriptors past FD_SETSIZE
        poller.register(self._reader, select.POLLIN)
        while self._open:
            if wait:
                silence = SILENCE_SECONDS if self._answered else min(SILENCE_SECONDS, max(FIRST_ANSWER_SECONDS, own_seconds))
                if deadline is not None:  # the question it is on may end, as this process's would
                    silence = min(silence, max(0.0, deadline - time.monotonic()) + DEADLINE_GRACE_SECONDS)
                if not poller.poll(int(silence * 1000)):  # given up on: its questions are asked here
                    return
            try:
                data = os.read(self._reader, 1 << 16)
            except BlockingIOError:
                return
            if not data:
                self._open = False
            self._buffer += data
            self._take(answers)

    def _take(self, answers: dict[int, tuple[Row, Row] | BaseException]) -> None:
        while len(self._buffer) >= _FRAME.size:
            (size,) = _FRAME.unpack_from(self._buffer)
            if len(self._buffer) < _FRAME.size + size:
                return
            position, rows = pickle.loads(bytes(self._buffer[_FRAME.size:_FRAME.size + size]))
            del self._buffer[:_FRAME.size + size]
            answers[position] = rows
            self._answered = True

    def end(self) -> None:
        """Kill the child if it still runs, and reap it."""
        os.close(self._reader)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


def _child_main(searcher: Searcher, questions: Sequence[MadeQuestion], ask: Ask[Row],
                deadline: float | None, writer: int) -> int:
    """The child: the odd positions asked with a reader of its own, each answer sent as it comes;
    the first question that fails ends it (the parent asks that one and the rest)."""
    from pinakes.extract.process_starter import die_with_parent

    # Ctrl-C reaches the whole foreground process group: it is the parent's to handle (it kills
    # this child), not a handler the parent installed (`pnk watch` announces that it stops).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    die_with_parent()
    vectors = searcher.embedder()
    if not isinstance(vectors, QuestionVectors):
        return 1
    reader = Searcher(searcher.index_path, searcher.settings, embedder=vectors.batched_only(),
                      embedding_section=searcher.embedding_section)
    for position in range(1, len(questions), 2):
        if deadline is not None and time.monotonic() > deadline:
            break
        try:
            rows = ask(reader, questions[position])
        except Exception:
            break
        data = pickle.dumps((position, rows), protocol=pickle.HIGHEST_PROTOCOL)
        _write_all(writer, _FRAME.pack(len(data)) + data)
    return 0


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]

