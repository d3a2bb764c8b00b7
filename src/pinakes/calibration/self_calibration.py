"""Self-calibration (issue #41): the evidence model fitted on questions the KB makes of itself.

Each question of calibration/questions.py is searched twice through the KB's own `Searcher`, with
the settings every search uses: once as it is (answerable: its source document is in the KB) and
once with its source document and their near-duplicates left out by a filter at query time (the
same question, now unanswerable in-domain: the hardest kind, and no re-sync needed), the two sharing
what they can (`Searcher.search_twice`, search/twice.py: each result the one a search of its own
gives). The two sets of evidence features are fitted as a golden set's would be
(calibration/fitting.py), at a stricter false-confidence ceiling than a golden set's
(SYNTHETIC_CEILING): made-up questions are not real ones, and the gap was measured on the
development corpora (docs/QUALITY.md, "Self-calibration").

The result is stored in `.pinakes/self-calibration.json` with its provenance (what was asked, of
which KB, with which model, when, how long it took); search/calibrated.py reads it when
pinakes.toml has no `[retrieval.confidence]`. It is derived, like the index: never written into
pinakes.toml unless a person does (`pnk eval --self-calibrate` prints the block).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

from pinakes.calibration.fitting import ConfidenceFit, FitError, fit_confidence
from pinakes.calibration.near_duplicates import stored_near_chunks
from pinakes.calibration.question_vectors import asking_searcher
from pinakes.calibration.questions import MadeQuestion, QuestionRules, make_questions
from pinakes.calibration.two_processes import ask_on_two_processes, searched_on_two_processes
from pinakes.kb import KBPaths
from pinakes.lexical.filters import SearchFilters
from pinakes.manifest.sections import FEATURES
from pinakes.search.calibrated import SELF_CALIBRATION_FORMAT, self_calibration_path
from pinakes.search.core import Searcher
from pinakes.search.results import SearchResult
from pinakes.search.threads import one_blas_thread

SYNTHETIC = "synthetic"  # the kind of an answerable self-calibration question
NO_ANSWER = "no-answer"
# The false-confidence ceiling the fit keeps on the synthetic no-answer questions: lower than a golden
# set's 0.10, because real unanswerable questions score above made-up ones (measured, leave one
# corpus out: docs/QUALITY.md, "Self-calibration").
SYNTHETIC_CEILING = 0.05
MIN_DOCUMENTS = 20  # below this a sync does not self-calibrate: too few to leave one out of
MIN_QUESTIONS = 30  # per class, or nothing is stored
SYNC_SECONDS = 60.0  # what a sync may spend on it (questions stop being asked when it runs out)
DEFAULT_RULES = QuestionRules(words=6, pick="lead")  # chosen among 10 rule sets: docs/QUALITY.md


@dataclass(frozen=True)
class CalibrationRow:
    """One search of a made question: what the fit reads (calibration/fitting.FitRow)."""

    id: str
    kind: str  # SYNTHETIC (answerable) or NO_ANSWER
    signal: float | None = None
    confidence: str = "unknown"  # "low" when the search returned nothing
    features: Mapping[str, float] | None = None
    hop_features: tuple[Mapping[str, float] | None, ...] | None = None
    found: bool | None = None  # answerable: the source document among the passages

    def to_dict(self) -> dict[str, object]:
        return {"id": self.id, "kind": self.kind, "confidence": self.confidence, "found": self.found,
                "features": dict(self.features) if self.features is not None else None}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> CalibrationRow:
        features = data.get("features")
        return cls(str(data["id"]), str(data["kind"]), confidence=str(data.get("confidence", "unknown")),
                   found=bool(data["found"]) if data.get("found") is not None else None,
                   features={str(k): float(v) for k, v in cast("dict[str, float]", features).items()}
                   if isinstance(features, dict) else None)


@dataclass
class SelfCalibration:
    rows: list[CalibrationRow]
    questions: int  # made (each searched twice unless time ran out)
    documents: int
    seconds: float
    stopped_early: bool
    fit: ConfidenceFit | None = None
    why_not: str | None = None  # why no fit was made
    rules: QuestionRules = field(default_factory=QuestionRules)


def search_questions(searcher: Searcher, questions: Sequence[MadeQuestion], *,
                     deadline: float | None = None, two_processes: bool = False) -> tuple[list[CalibrationRow], bool]:
    """Each question searched as it is and without its source: the rows, and whether the deadline
    (a `time.monotonic()` value) stopped the asking early. `two_processes`: shared with a forked
    child, the same rows (calibration/two_processes.py)."""
    if two_processes:
        return ask_on_two_processes(searcher, questions, _rows, deadline=deadline)
    rows: list[CalibrationRow] = []
    for question in questions:
        if deadline is not None and time.monotonic() > deadline:
            return rows, True
        rows.extend(_rows(searcher, question))
    return rows, False


def _rows(searcher: Searcher, question: MadeQuestion) -> tuple[CalibrationRow, CalibrationRow]:
    """The question's two searches, sharing the work they can (search/twice.py): the rows of
    `question_rows`, as two separate searches give them (tests/test_search_twice.py)."""
    without = SearchFilters(exclude_doc_ids=question.left_out)
    answerable, no_answer = searcher.search_twice(question.query, without, mode="hybrid")
    return question_row(question, answerable, None), question_row(question, no_answer, without)


def question_rows(searcher: Searcher, question: MadeQuestion) -> tuple[CalibrationRow, CalibrationRow]:
    """The question's rows from two separate searches, one as asked and one without its source."""
    without = SearchFilters(exclude_doc_ids=question.left_out)
    return (question_row(question, searcher.search(question.query, mode="hybrid"), None),
            question_row(question, searcher.search(question.query, filters=without, mode="hybrid"), without))


def question_row(question: MadeQuestion, result: SearchResult, filters: SearchFilters | None) -> CalibrationRow:
    """What the fit reads of one search of `question`: `filters` None for the answerable one."""
    features = result.confidence.features
    level = "low" if not result.passages else "unknown"
    if filters is not None:
        return CalibrationRow(question.id, NO_ANSWER, confidence=level,
                              features=dict(features) if features is not None else None)
    found = any(passage.doc_id == question.source for passage in result.passages)
    return CalibrationRow(question.id, SYNTHETIC, confidence=level,
                          features=dict(features) if features is not None else None, found=found)


def self_calibrate(kb_root: Path, *, rules: QuestionRules = DEFAULT_RULES, seconds: float | None = None,
                   offline: bool | None = None, searcher: Searcher | None = None,
                   fit: Callable[[Sequence[CalibrationRow], str], ConfidenceFit] | None = None) -> SelfCalibration:
    """Make the KB's questions, search them, fit the model on them. `seconds` bounds the asking."""
    from pinakes.index import schema
    from pinakes.lexical.relations import packaged

    paths = KBPaths(kb_root)
    started = time.monotonic()
    conn = schema.open_reader(paths.index_db)
    try:
        documents = int(conn.execute("SELECT count(*) FROM documents WHERE state = 'active'").fetchone()[0])
        chunks = int(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
        meta = schema.read_meta(conn)
        dim = meta.get("embedding_dim")
        width = int(dim) if dim and dim.isdigit() else None
        questions = make_questions(conn, rules, packaged() if rules.paraphrase > 0 else None,
                                   lambda sources: stored_near_chunks(conn, sources, width, paths.index_db))
    finally:
        conn.close()
    own = searcher is None
    searcher = searcher or Searcher.for_kb(kb_root, offline=offline)
    try:
        with asking_searcher(searcher, [question.query for question in questions]) as asking, one_blas_thread():
            rows, stopped = search_questions(asking, questions,
                                             deadline=None if seconds is None else started + seconds,
                                             two_processes=searched_on_two_processes(asking, chunks))
        fitted_for = _fitted_for(searcher, meta, len(rows) // 2, documents, rules)
    finally:
        if own:
            searcher.close()
    result = SelfCalibration(rows, len(rows) // 2, documents, round(time.monotonic() - started, 1), stopped,
                             rules=rules)
    answerable = sum(1 for row in rows if row.kind == SYNTHETIC)
    if answerable < MIN_QUESTIONS:
        result.why_not = (f"only {answerable} questions could be made and asked (at least {MIN_QUESTIONS} are "
                          "needed): too few documents with sentences to ask about" + (", or too little time"
                                                                                         if stopped else ""))
        return result
    try:
        result.fit = (fit or _default_fit)(rows, fitted_for)
    except FitError as exc:
        result.why_not = f"the model could not be fitted on the questions: {exc}"
    return result


def _default_fit(rows: Sequence[CalibrationRow], fitted_for: str) -> ConfidenceFit:
    return fit_confidence(rows, fitted_for, max_false_confidence=SYNTHETIC_CEILING)


def _fitted_for(searcher: Searcher, meta: Mapping[str, str], questions: int, documents: int,
                rules: QuestionRules) -> str:
    """What search/confidence.py checks a block against: the embedding model first, then how it was made."""
    model = meta.get("embedding_model") or "unknown embedding model"
    if meta.get("embedding_provider"):
        model += f" via {meta['embedding_provider']}"
    settings = searcher.settings
    reranked = f" + {searcher.reranker().model} (evidence model, reranked)" if settings.rerank else \
        " (evidence model, rerank off)"
    return (f"{model}{reranked}, self-calibration: {questions} questions made from the KB's {documents} documents "
            f"({rules.describe()}), hybrid final_k={settings.final_k} fusion_top_k={settings.fusion_top_k} "
            f"candidates_per_source={settings.candidates_per_source} rrf_k={settings.rrf_k}")


def store(kb_root: Path, calibration: SelfCalibration) -> Path:
    """Write `.pinakes/self-calibration.json` (atomically) with the fit and its provenance."""
    from pinakes.atomic import atomic_write_text

    assert calibration.fit is not None and calibration.fit.model is not None
    fit = calibration.fit
    model = fit.model
    assert model is not None
    answerable = [row for row in calibration.rows if row.kind == SYNTHETIC]
    data = {
        "format": SELF_CALIBRATION_FORMAT,
        "made_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "rules": calibration.rules.describe(),
        "documents": calibration.documents,
        "questions": calibration.questions,
        "answerable_found": sum(1 for row in answerable if row.found),
        "seconds": calibration.seconds,
        "stopped_early": calibration.stopped_early,
        "confidence": {"signal": fit.signal, "features": list(model.features), "weights": list(model.weights),
                       "bias": model.bias, "high": fit.high, "low": fit.low, "fitted_for": fit.fitted_for},
        # The questions' features (FEATURES order, a search that found nothing as null): what a small
        # golden set's fit is shrunk towards (calibration/shrinkage.py) without asking them again.
        "rows": [[row.kind, [row.features.get(name) for name in FEATURES] if row.features is not None else None]
                 for row in calibration.rows],
        "on_its_questions": {"false_abstain": fit.false_abstain.to_dict(),
                             "false_confidence": fit.false_confidence.to_dict(),
                             "ceiling": fit.max_false_confidence},
    }
    target = self_calibration_path(KBPaths(kb_root))
    atomic_write_text(target, json.dumps(data, indent=2) + "\n")
    return target


@dataclass(frozen=True)
class StoredSelfCalibration:
    fit: ConfidenceFit  # the stored block as a fit (its rates are not stored; they read 0/0)
    rows: list[CalibrationRow]
    path: Path


def read_stored(kb_root: Path) -> StoredSelfCalibration | None:
    """The KB's stored self-calibration with its questions, or None when there is none usable."""
    from pinakes.calibration.fitting import Rate, SignalModel

    path = self_calibration_path(KBPaths(kb_root))
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != SELF_CALIBRATION_FORMAT:
            return None
        block = data["confidence"]
        model = SignalModel(tuple(block["features"]), tuple(float(w) for w in block["weights"]), float(block["bias"]))
        rows = [CalibrationRow(f"q{number}", str(kind),
                               features=None if values is None else
                               {name: float(value) for name, value in zip(FEATURES, values, strict=True)
                                if value is not None})
                for number, (kind, values) in enumerate(data["rows"])]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    empty = Rate(0, 0)
    fit = ConfidenceFit(high=float(block["high"]), low=float(block["low"]), fitted_for=str(block["fitted_for"]),
                        false_abstain=empty, false_confidence=empty, no_answer_high=empty, excluded=(), model=model,
                        max_false_confidence=SYNTHETIC_CEILING)
    return StoredSelfCalibration(fit, rows, path)
