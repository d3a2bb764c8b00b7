"""What a first sync's self-calibration costs (#45), with its result unchanged: each made question
embedded once, in batched model calls, for both of its searches (calibration/question_vectors.py);
its thresholds counted by bisection (calibration/fitting.py); the sync's own model asked, never a
second copy loaded (sync/engine.py)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from pinakes.calibration import self_calibration
from pinakes.calibration.fitting import fit_thresholds
from pinakes.calibration.question_vectors import QuestionVectors
from pinakes.calibration.self_calibration import CalibrationRow, read_stored, self_calibrate
from pinakes.kb import KBPaths
from pinakes.manifest.sections import FEATURES
from pinakes.search.core import Searcher, SearchSettings
from tests.fakes import HashEmbedder, substitute_embedder
from tests.kb_helpers import Doc, build_kb, init_test_kb, sync, write_documents
from tests.test_self_calibration import corpus, searcher_for

SHARED_TLDR = Path(__file__).resolve().parent.parent.parent / "shared" / "corpora" / "tldr-nl2bash-dev" / "docs"


class CountingEmbedder(HashEmbedder):
    """HashEmbedder that says which query texts it embedded, one at a time or in batched passes."""

    def __init__(self) -> None:
        super().__init__()
        self.single: list[str] = []

    def embed_query(self, text: str) -> np.ndarray:
        self.single.append(text)
        return super().embed_query(text)


class BatchingEmbedder(CountingEmbedder):
    """A model that also embeds many queries in one call (embed/base.py QueryBatches)."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[str]] = []

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        self.batches.append(list(texts))
        return np.stack([HashEmbedder.embed_query(self, text) for text in texts])


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("selfcalcost") / "kb"
    build_kb(root, corpus(), HashEmbedder())
    return root


def test_each_question_is_embedded_once_in_a_batched_pass_and_the_calibration_is_the_same(built: Path) -> None:
    one_at_a_time, batching = CountingEmbedder(), BatchingEmbedder()
    with searcher_for(built, one_at_a_time) as searcher:
        before = self_calibrate(built, searcher=searcher)
    with searcher_for(built, batching) as searcher:
        after = self_calibrate(built, searcher=searcher)

    assert before.fit is not None and before.questions >= self_calibration.MIN_QUESTIONS
    asked = [row.id for row in before.rows if row.kind == self_calibration.SYNTHETIC]
    # One at a time: every question once, for both its searches (search/twice.py); before #45's
    # sharing it was twice, once a search (answerable, then without its source).
    assert len(one_at_a_time.single) == len(asked) == before.questions
    # Now: every question once, all in one pass before the first search, and no call one at a time.
    assert batching.single == []
    assert len(batching.batches) == 1
    assert sorted(batching.batches[0]) == sorted(set(one_at_a_time.single))
    # The same searches, so the same rows and the same fit.
    assert after.rows == before.rows
    assert after.fit == before.fit
    assert after.questions == before.questions and after.documents == before.documents


def test_the_calibration_builds_no_suggestion_where_a_plain_search_of_the_kb_does(
        built: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pinakes.search import core

    built_suggestions: list[str] = []
    real = core.suggest_next

    def counted(query: str, **kwargs: object) -> object:
        built_suggestions.append(query)
        return real(query, **cast("dict[str, Any]", kwargs))

    monkeypatch.setattr(core, "suggest_next", counted)
    # No confidence source (a KB before its first calibration, of a model no prior was fitted for):
    # every search is unknown, and a person's would come with a suggestion.
    with Searcher(KBPaths(built).index_db, SearchSettings(rerank=False), embedder=BatchingEmbedder()) as searcher:
        plain = searcher.search("glacier ledger deliveries")
        assert plain.confidence.level == "unknown" and built_suggestions == ["glacier ledger deliveries"]
        calibration = self_calibrate(built, searcher=searcher)
    assert calibration.fit is not None
    assert built_suggestions == ["glacier ledger deliveries"]  # none of its searches built one


def test_a_text_that_was_not_a_question_is_embedded_by_the_model_as_before():
    model = BatchingEmbedder()
    vectors = QuestionVectors(model, ["  glacier ledger records  ", "harbour gate"])
    assert model.batches == [["glacier ledger records", "harbour gate"]]  # as a search strips them
    assert np.array_equal(vectors.embed_query("glacier ledger records"),
                          HashEmbedder().embed_query("glacier ledger records"))
    assert model.single == []
    other = vectors.embed_query("orchard apprentices")
    assert model.single == ["orchard apprentices"]
    assert np.array_equal(other, HashEmbedder().embed_query("orchard apprentices"))
    assert vectors.identity == model.identity and vectors.max_input_tokens == model.max_input_tokens


def _abstaining(rows: Sequence[CalibrationRow], low: float, *, answerable: bool) -> int:
    """Counted point by point, as the fit counted before bisection."""
    return sum(1 for row in rows if (row.kind != "no-answer") == answerable
               and (row.signal is None or row.signal < low))


@pytest.mark.parametrize("seed", range(40))
def test_thresholds_counted_by_bisection_match_counting_every_question(seed: int) -> None:
    rng = random.Random(seed)
    rows: list[CalibrationRow] = []
    for number in range(rng.randint(4, 80)):
        # Ties (one decimal), questions with nothing found (None), and spread values.
        signal = rng.choice([None, round(rng.random(), 1), rng.random()])
        rows.append(CalibrationRow(f"q{number}", "no-answer" if number % 3 == 0 else "synthetic", signal=signal,
                                   confidence="low" if signal is None else "unknown"))
    if not any(row.signal is not None for row in rows):
        return
    fit = fit_thresholds(rows, "test", max_false_confidence=rng.choice([0.05, 0.1, 0.3]))
    no_answer = sum(1 for row in rows if row.kind == "no-answer")
    assert fit.false_abstain.numerator == _abstaining(rows, fit.low, answerable=True)
    assert fit.false_confidence.numerator == no_answer - _abstaining(rows, fit.low, answerable=False)
    for low, false_abstain, false_confidence in fit.trade_offs:
        assert false_abstain == _abstaining(rows, low, answerable=True)
        assert false_confidence == no_answer - _abstaining(rows, low, answerable=False)
    # The trade-offs are every operating point no other beats on both counts, each once.
    signals = sorted({row.signal for row in rows if row.signal is not None})
    spread = (signals[-1] - signals[0]) or 1.0
    thresholds = [signals[0] - spread / 10, *((a + b) / 2 for a, b in itertools.pairwise(signals)),
                  signals[-1] + spread / 10]
    pairs = {(_abstaining(rows, low, answerable=True), no_answer - _abstaining(rows, low, answerable=False))
             for low in thresholds}
    front = {pair for pair in pairs if not any(other[0] <= pair[0] and other[1] <= pair[1] and other != pair
                                               for other in pairs)}
    assert [point[1:] for point in fit.trade_offs] == sorted(front)


def test_a_first_sync_calibrates_with_its_own_model_and_loads_no_second_copy(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    loads: list[BatchingEmbedder] = []

    def load(section: object, offline: object = None, threads: object = None) -> BatchingEmbedder:
        loads.append(BatchingEmbedder())
        return loads[-1]

    root = tmp_path / "kb"
    init_test_kb(root, HashEmbedder().identity)
    write_documents(root, corpus())
    substitute_embedder(monkeypatch, load)
    report = sync(root, None)
    assert any(note.startswith("confidence self-calibrated") for note in report.notes), report.notes
    assert len(loads) == 1  # the sync's model; before, the calibration loaded one more
    assert loads[0].batches and loads[0].single == []
    assert read_stored(root) is not None


@pytest.mark.heavy
def test_with_the_packaged_model_batched_questions_store_the_calibration_one_at_a_time_gives(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pinakes.embed import load_embedder
    from tests.fakes import default_section

    pages = sorted(SHARED_TLDR.rglob("*.md"))[:40]
    assert len(pages) == 40, f"the shared tldr corpus is missing at {SHARED_TLDR}"
    model = load_embedder(default_section("fastembed"), offline=True)
    root = tmp_path / "kb"
    build_kb(root, [Doc(f"docs/{page.relative_to(SHARED_TLDR).as_posix()}", page.read_text(encoding="utf-8"))
                    for page in pages], model)  # its first sync self-calibrated, batched
    stored = read_stored(root)
    assert stored is not None

    def as_it_is(searcher: Searcher, questions: Sequence[str]) -> Searcher:
        return searcher

    monkeypatch.setattr(self_calibration, "asking_searcher", as_it_is)
    # the real model: searcher_for is typed for the HashEmbedder but needs only an Embedder
    with searcher_for(root, model) as searcher:  # pyright: ignore[reportArgumentType]  # the real model, on purpose
        one_at_a_time = self_calibrate(root, searcher=searcher)
    assert one_at_a_time.fit is not None and one_at_a_time.fit.model is not None
    assert [row.kind for row in stored.rows] == [row.kind for row in one_at_a_time.rows]
    for batched, single in zip(stored.rows, one_at_a_time.rows, strict=True):
        assert (batched.features is None) == (single.features is None)
        if batched.features is not None and single.features is not None:
            for name in FEATURES:  # what the file keeps of each search
                value = single.features.get(name)
                assert batched.features.get(name) == (None if value is None else pytest.approx(value, abs=1e-6)), name
    assert stored.fit.model == one_at_a_time.fit.model
    assert (stored.fit.low, stored.fit.high) == (one_at_a_time.fit.low, one_at_a_time.fit.high)
    assert KBPaths(root).index_db.exists()
