"""Self-calibration's questions searched on two threads (calibration/two_threads.py): the same rows
in the same order and the same fit as one question after another, on a KB built by the sync; the
deadline keeps the questions asked from the first; an error is the first question's in order; and
only where the second reader is cheap and nothing but the question vectors is shared."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from pinakes.calibration import self_calibration, two_threads
from pinakes.calibration.question_vectors import asking_searcher
from pinakes.calibration.questions import MadeQuestion
from pinakes.calibration.self_calibration import self_calibrate
from pinakes.calibration.two_threads import ask_on_threads, searched_on_threads
from pinakes.search.core import Searcher
from tests.fakes import HashEmbedder
from tests.kb_helpers import build_kb
from tests.test_self_calibration import corpus, searcher_for
from tests.test_self_calibration_cost import BatchingEmbedder


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("calthreads") / "kb"
    build_kb(root, corpus(), HashEmbedder())
    return root


def test_two_threads_give_the_rows_and_the_fit_of_one_question_after_another(built, monkeypatch):
    searched_by: set[str] = set()
    search = Searcher.search_twice  # a question's two searches (search/twice.py)

    def recorded(self: Searcher, query: str, *args: object, **kwargs: object) -> object:
        searched_by.add(threading.current_thread().name)
        return search(self, query, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Searcher, "search_twice", recorded)
    with searcher_for(built, BatchingEmbedder()) as searcher:
        threaded = self_calibrate(built, searcher=searcher)
    assert len(searched_by) == two_threads.THREADS, searched_by  # both threads searched

    monkeypatch.setattr(self_calibration, "searched_on_threads", lambda searcher, chunks: False)
    searched_by.clear()
    with searcher_for(built, BatchingEmbedder()) as searcher:
        one = self_calibrate(built, searcher=searcher)
    assert len(searched_by) == 1

    assert threaded.fit is not None and threaded.questions >= self_calibration.MIN_QUESTIONS
    assert threaded.rows == one.rows
    assert threaded.fit == one.fit
    assert not threaded.stopped_early and not one.stopped_early


def _questions(count: int) -> list[MadeQuestion]:
    return [MadeQuestion(f"q{number}", f"question {number}", "doc", ("doc",)) for number in range(count)]


class _Clock:
    """`time` as two_threads reads it, on a clock the test moves: the deadline passes when the test
    says, not when a loaded machine happens to get there."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


def test_the_deadline_keeps_the_questions_asked_from_the_first_in_order(built, monkeypatch):
    questions = _questions(60)
    clock = _Clock()
    monkeypatch.setattr(two_threads, "time", clock)
    # The deadline passes while both threads are in a slow question (q10 and q11, one each: a thread
    # waiting here cannot take the other); the barrier's timeout fails the test if one never comes.
    both_slow = threading.Barrier(two_threads.THREADS, action=lambda: setattr(clock, "now", 2.0), timeout=60)

    def ask(searcher: Searcher, question: MadeQuestion) -> tuple[str, str]:
        number = int(question.id[1:])
        if number < 10:
            time.sleep(0.002 * (number % 3))  # the first ten quickly and out of order
        else:
            both_slow.wait()  # the next two outlast the deadline
        return question.id, question.id + "-left-out"

    with searcher_for(built, BatchingEmbedder()) as searcher:
        rows, stopped = ask_on_threads(searcher, questions, ask, deadline=1.0)
        assert stopped
        # each thread took one slow question before the deadline, finished it, then stopped
        assert rows == [row for question in questions[:12] for row in (question.id, question.id + "-left-out")]

        rows, stopped = ask_on_threads(searcher, questions[:10], ask)
        assert not stopped
        assert rows == [row for question in questions[:10] for row in (question.id, question.id + "-left-out")]


def test_an_error_is_the_first_questions_in_order(built):
    def ask(searcher: Searcher, question: MadeQuestion) -> tuple[str, str]:
        number = int(question.id[1:])
        if number in (5, 6, 7):
            time.sleep(0.01 * (8 - number))  # the later ones fail first
            raise ValueError(question.id)
        return question.id, question.id

    with searcher_for(built, BatchingEmbedder()) as searcher, pytest.raises(ValueError, match=r"^q5$"):
        ask_on_threads(searcher, _questions(20), ask)


def test_only_a_small_kb_without_rerank_whose_questions_were_batched_goes_to_two_threads(built):
    with searcher_for(built, BatchingEmbedder()) as searcher:
        asking = asking_searcher(searcher, ["a question"])
        assert searched_on_threads(asking, 100)
        assert not searched_on_threads(asking, two_threads.MAX_CHUNKS + 1)  # the second matrix costs
        reranked = Searcher(asking.index_path, replace(asking.settings, rerank=True), embedder=asking.embedder())
        assert not searched_on_threads(reranked, 100)  # one reranker for both threads
        asking.close()
    with searcher_for(built, HashEmbedder()) as searcher:  # a model that cannot batch queries
        asking = asking_searcher(searcher, ["a question"])
        assert not searched_on_threads(asking, 100)
        asking.close()
