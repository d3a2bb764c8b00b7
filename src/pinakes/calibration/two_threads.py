"""Self-calibration's questions searched on two threads, each with its own Searcher (connection).

A calibration is 2 searches a question (as it is, and without its source, sharing their work:
search/twice.py), a few ms of CPU a question, one after another on one core while a sync's second
core is idle. Part of a search holds no GIL
(SQLite's statements, NumPy's product), so a second thread with its own reader (its own connection,
tokenizer and matrix: `Searcher` serialises the calls of one) overlaps it; the rest of the search is
Python and takes turns. Each question's rows are kept at its own position, so the rows and the fit
are those of asking one question after another (tests/test_calibration_threads.py); the deadline
keeps the longest run of questions asked from the first, as the one-thread loop does. Measured on
2 cores (docs/perf/sync.md, "#45: what is left after the pipeline"): ~10-17% less wall time at the
same CPU where a core is free, as after a sync; no gain where another process holds the second core.

Only where the second reader is cheap and the searches touch nothing shared but the question
vectors: a KB of at most MAX_CHUNKS chunks (the second reader holds its own float32 matrix), rerank
off (a reranker is one model or one paid endpoint for both threads), and the questions answered
from their batched vectors (calibration/question_vectors.py).
"""

from __future__ import annotations

import copy
import itertools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TypeVar

from pinakes.calibration.question_vectors import QuestionVectors
from pinakes.calibration.questions import MadeQuestion
from pinakes.errors import PinakesError
from pinakes.search.calibrated import KBConfidence
from pinakes.search.core import Searcher
from pinakes.search.settings import SearchSettings

MAX_CHUNKS = 20_000  # the second reader's matrix: at most ~30 MB at 384 float32 dimensions
THREADS = 2

Row = TypeVar("Row")
Ask = Callable[[Searcher, MadeQuestion], tuple[Row, Row]]  # a question's two rows


def searched_on_threads(searcher: Searcher, chunks: int) -> bool:
    """Whether this calibration's questions go to two threads (module docstring). `searcher` is
    the calibration's (`asking_searcher`): its model is the batched questions' when they were."""
    if chunks > MAX_CHUNKS or searcher.settings.rerank:
        return False
    try:
        return isinstance(searcher.embedder(), QuestionVectors)
    except PinakesError:  # the first search meets it again, on one thread, as it always did
        return False


def ask_on_threads(searcher: Searcher, questions: Sequence[MadeQuestion], ask: Ask[Row], *,
                   deadline: float | None = None) -> tuple[list[Row], bool]:
    """Every question's two rows, in question order, `ask`ed on THREADS threads (`searcher` and
    readers like it), and whether the deadline (a `time.monotonic()` value) stopped the asking: then
    the rows are those of the questions asked from the first up to the first one not asked. An error
    is raised as the first question in order that met one."""
    answers: list[tuple[Row, Row] | BaseException | None] = [None] * len(questions)
    following = itertools.count()  # next() on it is atomic: each question is taken by one thread
    stop = threading.Event()

    def work(reader: Searcher) -> None:
        while not stop.is_set():
            number = next(following)
            if number >= len(questions) or (deadline is not None and time.monotonic() > deadline):
                return
            try:
                answers[number] = ask(reader, questions[number])
            except BaseException as exc:  # handed to the caller, in question order
                answers[number] = exc
                stop.set()
                return

    readers = [searcher] + [Searcher(searcher.index_path, _own_copy(searcher.settings), embedder=searcher.embedder(),
                                     embedding_section=searcher.embedding_section) for _ in range(THREADS - 1)]
    try:
        threads = [threading.Thread(target=work, args=(reader,), name=f"pinakes-calibration-{number}")
                   for number, reader in enumerate(readers[1:], start=1)]
        for thread in threads:
            thread.start()
        try:
            work(readers[0])
        finally:
            for thread in threads:
                thread.join()
    finally:
        for reader in readers[1:]:
            reader.close()
    rows: list[Row] = []
    for answer in answers:
        if answer is None:
            return rows, True
        if isinstance(answer, BaseException):
            raise answer
        rows.extend(answer)
    return rows, False


def _own_copy(settings: SearchSettings) -> SearchSettings:
    """The settings with their own KB confidence sources: those keep a cache of the stored file,
    which two threads would otherwise fill at once."""
    confidence = settings.confidence
    return replace(settings, confidence=copy.copy(confidence)) if isinstance(confidence, KBConfidence) else settings
