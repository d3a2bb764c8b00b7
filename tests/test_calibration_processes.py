"""Self-calibration's questions shared with a forked child (calibration/two_processes.py): the same
rows in the same order and the same fit as one question after another, on a KB built by the sync;
the deadline keeps the questions asked from the first; a child that dies, hangs or fails leaves its
questions to the parent, and an error is the first question's in order; and only on Linux, where
the child's reader is cheap and nothing but the question vectors is shared."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Generator
from dataclasses import replace
from pathlib import Path
from typing import cast

import numpy as np
import pytest

from pinakes.calibration import self_calibration, two_processes
from pinakes.calibration.question_vectors import QuestionVectors, asking_searcher
from pinakes.calibration.questions import MadeQuestion
from pinakes.calibration.self_calibration import self_calibrate
from pinakes.calibration.two_processes import ask_on_two_processes, searched_on_two_processes
from pinakes.errors import PinakesError
from pinakes.search.core import Searcher
from tests.fakes import HashEmbedder
from tests.kb_helpers import build_kb
from tests.test_self_calibration import corpus, searcher_for
from tests.test_self_calibration_cost import BatchingEmbedder

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the calibration forks its second asker on Linux only")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("calprocesses") / "kb"
    build_kb(root, corpus(), HashEmbedder())
    return root


class _Record:
    """Lines appended to a file by whichever process writes them (a child's memory is its own)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.write_text("")

    def add(self, line: str) -> None:
        with self.path.open("a", encoding="utf-8") as out:
            out.write(line + "\n")

    def lines(self) -> list[str]:
        return self.path.read_text(encoding="utf-8").split()


def test_two_processes_give_the_rows_and_the_fit_of_one_question_after_another(
        built: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    searched_by = _Record(tmp_path / "pids")
    search = cast(Callable[..., object], Searcher.search_twice)  # a question's two searches (search/twice.py)

    def recorded(self: Searcher, query: str, *args: object, **kwargs: object) -> object:
        searched_by.add(str(os.getpid()))
        return search(self, query, *args, **kwargs)

    monkeypatch.setattr(Searcher, "search_twice", recorded)
    with searcher_for(built, BatchingEmbedder()) as searcher:
        shared = self_calibrate(built, searcher=searcher)
    assert len(set(searched_by.lines())) == 2, "this process and its child both searched"
    assert len(searched_by.lines()) == shared.questions, "each question searched once, by one of them"

    def never(searcher: Searcher, chunks: int) -> bool:
        return False

    monkeypatch.setattr(self_calibration, "searched_on_two_processes", never)
    searched_by.path.write_text("")
    with searcher_for(built, BatchingEmbedder()) as searcher:
        one = self_calibrate(built, searcher=searcher)
    assert set(searched_by.lines()) == {str(os.getpid())}

    assert shared.fit is not None and shared.questions >= self_calibration.MIN_QUESTIONS
    assert shared.rows == one.rows
    assert shared.fit == one.fit
    assert not shared.stopped_early and not one.stopped_early


def _questions(count: int) -> list[MadeQuestion]:
    return [MadeQuestion(f"q{number}", f"question {number}", "doc", ("doc",)) for number in range(count)]


@contextlib.contextmanager
def _asking(root: Path, questions: list[MadeQuestion]) -> Generator[Searcher, None, None]:
    """The calibration's searcher over `root`: its questions' vectors batched, as the child needs."""
    with searcher_for(root, BatchingEmbedder()) as searcher:
        asking = asking_searcher(searcher, [question.query for question in questions])
        try:
            yield asking
        finally:
            asking.close()


def _rows(questions: list[MadeQuestion]) -> list[str]:
    return [row for question in questions for row in (question.id, question.id + "-left-out")]


class _Clock:
    """`time` as two_processes reads it, on a clock the test moves (each process moves its own
    copy): the deadline passes when the test says, not when a loaded machine happens to get there."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


def test_the_deadline_keeps_the_questions_asked_from_the_first_in_order(built: Path, monkeypatch: pytest.MonkeyPatch):
    questions = _questions(60)
    clock = _Clock()
    monkeypatch.setattr(two_processes, "time", clock)

    def ask(searcher: Searcher, question: MadeQuestion) -> tuple[str, str]:
        if int(question.id[1:]) >= 10:
            clock.now = 2.0  # the deadline passes while each process asks its question 10 or 11
        return question.id, question.id + "-left-out"

    with _asking(built, questions) as searcher:
        rows, stopped = ask_on_two_processes(searcher, questions, ask, deadline=1.0)
        assert stopped
        assert rows == _rows(questions[:12])  # each finished the question it was in, then stopped

        clock.now = 0.0
        rows, stopped = ask_on_two_processes(searcher, questions[:10], ask)
        assert not stopped
        assert rows == _rows(questions[:10])


def test_a_child_killed_mid_way_leaves_its_questions_to_the_parent(built: Path, tmp_path: Path):
    parent = os.getpid()
    asked_by = _Record(tmp_path / "asked")

    def ask(searcher: Searcher, question: MadeQuestion) -> tuple[str, str]:
        asked_by.add(f"{question.id}:{'parent' if os.getpid() == parent else 'child'}")
        if os.getpid() != parent and question.id == "q7":
            os.kill(os.getpid(), signal.SIGKILL)
        return question.id, question.id + "-left-out"

    questions = _questions(20)
    with _asking(built, questions) as searcher:
        rows, stopped = ask_on_two_processes(searcher, questions, ask)
    assert not stopped
    assert rows == _rows(questions)
    asked = asked_by.lines()
    assert {"q1:child", "q7:child", "q7:parent", "q9:parent", "q19:parent"} <= set(asked)
    assert "q9:child" not in asked


def test_a_silent_child_is_killed_and_its_questions_asked_by_the_parent(
        built: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setattr(two_processes, "SILENCE_SECONDS", 0.5)
    parent = os.getpid()
    children = _Record(tmp_path / "children")

    def ask(searcher: Searcher, question: MadeQuestion) -> tuple[str, str]:
        if os.getpid() != parent:
            children.add(str(os.getpid()))
            if question.id == "q5":
                time.sleep(3600)  # hung
        return question.id, question.id + "-left-out"

    questions = _questions(12)
    started = time.monotonic()
    with _asking(built, questions) as searcher:
        rows, stopped = ask_on_two_processes(searcher, questions, ask)
    assert time.monotonic() - started < 60
    assert not stopped
    assert rows == _rows(questions)
    (child,) = set(children.lines())
    with pytest.raises(ProcessLookupError):  # killed and reaped, not left behind
        os.kill(int(child), 0)


def test_an_error_is_the_first_questions_in_order(built: Path):
    def ask(searcher: Searcher, question: MadeQuestion) -> tuple[str, str]:
        if question.id in ("q5", "q6", "q7"):  # the child's q5 and q7, the parent's q6
            raise ValueError(question.id)
        return question.id, question.id

    questions = _questions(20)
    with _asking(built, questions) as searcher, pytest.raises(ValueError, match=r"^q5$"):
        ask_on_two_processes(searcher, questions, ask)


def test_the_child_answers_only_from_the_batched_vectors():
    model = BatchingEmbedder()
    vectors = QuestionVectors(model, ["a question", "another question"])
    child = vectors.batched_only()
    assert np.array_equal(child.embed_query("a question"), vectors.embed_query("a question"))
    with pytest.raises(PinakesError, match="not among the calibration's batched questions"):
        child.embed_query("a text never batched")
    assert vectors.embed_query("a text never batched").shape == (model.identity.dim,)  # the parent's model


def test_only_a_small_kb_without_rerank_whose_questions_were_batched_goes_to_two_processes(
        built: Path, monkeypatch: pytest.MonkeyPatch):
    with searcher_for(built, BatchingEmbedder()) as searcher:
        asking = asking_searcher(searcher, ["a question"])
        assert searched_on_two_processes(asking, 100)
        assert not searched_on_two_processes(asking, two_processes.MAX_CHUNKS + 1)  # the child's matrix costs
        reranked = Searcher(asking.index_path, replace(asking.settings, rerank=True), embedder=asking.embedder())
        assert not searched_on_two_processes(reranked, 100)  # one reranker for both
        with monkeypatch.context() as patched:
            patched.setattr(sys, "platform", "darwin")
            assert not searched_on_two_processes(asking, 100)  # a fork is Linux's only here
        asking.close()
    with searcher_for(built, HashEmbedder()) as searcher:  # a model that cannot batch queries
        asking = asking_searcher(searcher, ["a question"])
        assert not searched_on_two_processes(asking, 100)
        asking.close()


def test_the_child_leaves_ctrl_c_to_its_parent(built: Path, tmp_path: Path):
    """Ctrl-C reaches the whole process group; a handler the parent installed (`pnk watch` announces
    that it stops) must run once, in the parent, which then kills the child."""
    parent = os.getpid()
    seen = _Record(tmp_path / "handlers")

    def ask(searcher: Searcher, question: MadeQuestion) -> tuple[str, str]:
        if os.getpid() != parent:
            seen.add(f"{signal.getsignal(signal.SIGINT) is signal.SIG_IGN}:{signal.getsignal(signal.SIGTERM) is signal.SIG_DFL}")
        return question.id, question.id

    previous = signal.signal(signal.SIGINT, lambda _signum, _frame: None)
    previous_term = signal.signal(signal.SIGTERM, lambda _signum, _frame: None)
    try:
        questions = _questions(6)
        with _asking(built, questions) as searcher:
            ask_on_two_processes(searcher, questions, ask)
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.signal(signal.SIGTERM, previous_term)
    assert seen.lines() == ["True:True"] * 3


def test_a_child_that_never_answers_is_given_up_on_after_about_a_halfs_time(
        built: Path, monkeypatch: pytest.MonkeyPatch):
    """A child forked while another thread held a lock it needs never answers: its questions are
    asked here after FIRST_ANSWER_SECONDS, not SILENCE_SECONDS."""
    monkeypatch.setattr(two_processes, "SILENCE_SECONDS", 60.0)
    monkeypatch.setattr(two_processes, "FIRST_ANSWER_SECONDS", 0.5)
    parent = os.getpid()

    def ask(searcher: Searcher, question: MadeQuestion) -> tuple[str, str]:
        if os.getpid() != parent:
            time.sleep(3600)  # stuck before its first answer
        return question.id, question.id + "-left-out"

    questions = _questions(8)
    started = time.monotonic()
    with _asking(built, questions) as searcher:
        rows, stopped = ask_on_two_processes(searcher, questions, ask)
    assert time.monotonic() - started < 30
    assert not stopped and rows == _rows(questions)


def test_a_silent_child_does_not_keep_the_calibration_past_its_deadline(built: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(two_processes, "SILENCE_SECONDS", 60.0)
    monkeypatch.setattr(two_processes, "FIRST_ANSWER_SECONDS", 60.0)
    clock = _Clock()
    monkeypatch.setattr(two_processes, "time", clock)
    parent = os.getpid()

    def ask(searcher: Searcher, question: MadeQuestion) -> tuple[str, str]:
        if os.getpid() != parent:
            time.sleep(3600)  # hung
        if question.id == "q2":
            clock.now = 2.0  # the deadline passes while the parent asks q2
        return question.id, question.id + "-left-out"

    questions = _questions(8)
    started = time.monotonic()
    with _asking(built, questions) as searcher:
        rows, stopped = ask_on_two_processes(searcher, questions, ask, deadline=1.0)
    assert time.monotonic() - started < 30
    assert stopped and rows == _rows(questions[:1])  # q1 was the hung child's


def test_after_an_error_the_child_is_not_waited_for(built: Path):
    parent = os.getpid()

    def ask(searcher: Searcher, question: MadeQuestion) -> tuple[str, str]:
        if os.getpid() != parent:
            time.sleep(2)  # its half would take 20 s
        elif question.id == "q0":
            raise ValueError("q0")
        return question.id, question.id

    questions = _questions(20)
    started = time.monotonic()
    with _asking(built, questions) as searcher, pytest.raises(ValueError, match=r"^q0$"):
        ask_on_two_processes(searcher, questions, ask)
    assert time.monotonic() - started < 15
