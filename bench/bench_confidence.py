"""The confidence calibration harness (issue #25): can a signal tell an answerable question from one
whose answer is not in the KB, on questions it was not fitted on?

    nice -n 10 python bench/bench_confidence.py                      # every corpus, 5 seeds
    python bench/bench_confidence.py --corpus cranfield --seeds 3 --json out.json
    python bench/bench_confidence.py --latency 10000              # what the features cost a search

For each development corpus (built once by bench/tune_retrieval.py's `build_corpus`, i.e. `pnk init` +
`pnk sync` through the product, cached under --cache) and each seed:

 1. In-domain no-answer questions: in a seeded order each question draws no-answer with probability
    --share (40%); a no-answer question's evidence documents are all deleted from a copy of the KB
    and an incremental `run_sync` drops them (deleting re-embeds nothing); no answerable question
    loses any of its evidence, so a question whose evidence would be partly removed is dropped
    (counted in the output; many on tldr, whose questions share the common utilities' pages).
 2. Every question is searched once through the KB's own `Searcher` (hybrid, the template's
    settings), and its evidence features (search/signals.py) recorded as an `eval` outcome row.
 3. The rows are split into two halves (stratified by class); every candidate signal is fitted on
    one half with `pnk eval --fit-confidence`'s own code (eval/fitting.py) and scored on the other,
    both ways round.

Reported per corpus and signal: held-out false-abstain and false-confidence, summed over seeds and
folds with numerator, denominator and a Wilson 95% interval (the folds re-use questions, so the
interval is narrower than the evidence: read the per-fold spread beside it), the trade-off curve
(the fit's false-confidence ceiling swept, each point scored held-out), and a paired comparison of
each signal against the old one (best cosine) across folds: the fold-by-fold balanced error
(false-abstain rate + false-confidence rate) / 2, with the sign test.

The corpora (bench/tune_retrieval.py): cranfield (1 400 abstracts, 225 questions), tldr (504 NL2Bash
questions over a seeded 2 000-page sample of the 7 425 tldr pages: every page a question names plus
random others; evidence = relevant, primary and also-acceptable pages), pydocs (120 library pages of
the Python 3.11 docs, one synopsis question each, the synopsis removed from the page).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO))  # tests.fakes, for the latency run's hashed vectors

import tune_retrieval  # noqa: E402  (the corpora and their builds)

from pinakes.eval.fitting import (  # noqa: E402
    FEATURE_SETS_BEFORE_RELATIONS,
    L2_PENALTY,
    MAX_FALSE_CONFIDENCE,
    MODEL_FEATURES,
    ConfidenceFit,
    FitError,
    SignalModel,
    fit_confidence,
    fit_model,
    fit_thresholds,
    score_fit,
)
from pinakes.eval.outcomes import Outcome  # noqa: E402
from pinakes.eval.paired import sign_test  # noqa: E402
from pinakes.search.confidence import MODEL, TOP_SCORE  # noqa: E402
from pinakes.search.signals import FEATURES  # noqa: E402

if TYPE_CHECKING:
    from pinakes.embed import Embedder

CACHE = Path("/work/cache/pnk-conf")
SHIPPED_PRIOR = False  # whether the shipped fit shrinks towards the development prior
CORPORA = ("cranfield", "tldr", "pydocs")
SHARE = 0.4
SEEDS = 5
FALSE_CONFIDENCE_CEILINGS = (0.0, 0.05, 0.10, 0.20, 0.30, 0.50)
Z95 = 1.959964


@dataclass(frozen=True)
class Candidate:
    name: str
    signal: str
    features: tuple[str, ...] = ()
    penalty: float = 1.0
    prior: bool = False  # shrink towards the model fitted on the other development corpora
    cross_fit: bool = True  # thresholds chosen on cross-fitted scores (False: on the model's own fit)
    feature_sets: tuple[tuple[str, ...], ...] | None = None  # what a chosen-per-KB fit chooses among (None: the product's)


SHIPPED = "model: shipped (feature set chosen per KB)"
BEFORE_RELATIONS = "model: feature set chosen per KB, without related_share (before (i))"
FIVE = ("cosine", "cosine_spread", "keyword_share", "bm25_ratio", "agreement")
CANDIDATES = (
    Candidate("best cosine (old)", TOP_SCORE),
    *(Candidate(f"{feature} alone", MODEL, (feature,)) for feature in FEATURES),
    Candidate("model: cosine + keyword_share + agreement", MODEL, ("cosine", "keyword_share", "agreement")),
    Candidate("model: all features", MODEL, FEATURES),
    Candidate("model: 5 features, penalty 1", MODEL, FIVE, 1.0),
    Candidate("model: 5 features, penalty 1, in-sample thresholds", MODEL, FIVE, 1.0, cross_fit=False),
    Candidate("model: 5 features, penalty 10", MODEL, FIVE, 10.0),
    Candidate("model: 5 features, dev prior, penalty 10", MODEL, FIVE, 10.0, True),
    Candidate("model: cosine + keyword_share, penalty 1", MODEL, ("cosine", "keyword_share"), 1.0),
    Candidate("model: cosine + keyword_share, penalty 10", MODEL, ("cosine", "keyword_share"), 10.0),
    Candidate(BEFORE_RELATIONS, MODEL, (), L2_PENALTY, SHIPPED_PRIOR, feature_sets=FEATURE_SETS_BEFORE_RELATIONS),
    *(Candidate(f"model: chosen per KB, + {' + '.join(extra)}", MODEL, (), L2_PENALTY, SHIPPED_PRIOR,
                feature_sets=(*FEATURE_SETS_BEFORE_RELATIONS, extra))
      for extra in (("cosine", "keyword_share", "related_share"), ("csls", "keyword_share", "related_share"))),
    Candidate("model: cosine + keyword_share + related_share", MODEL, ("cosine", "keyword_share", "related_share"), L2_PENALTY),
    Candidate("model: cosine + related_share", MODEL, ("cosine", "related_share"), L2_PENALTY),
    Candidate("model: shipped (feature set chosen per KB)", MODEL, (), L2_PENALTY, SHIPPED_PRIOR),
)


# -- no-answer questions, by removing evidence ------------------------------------------------------


def evidence_of(corpus: str) -> dict[str, set[str]]:
    """Each question's evidence documents (KB-root-relative)."""
    if corpus == "tldr":
        rows = tune_retrieval._jsonl(  # pyright: ignore[reportPrivateUsage] -- the tuning harness's own reader
            tune_retrieval.SHARED / "tldr-nl2bash-dev" / "questions.jsonl")
        return {str(row["id"]): {f"docs/{p}" for key in ("relevant", "primary_relevant", "also_acceptable")
                                 for p in row.get(key) or ()} for row in rows}
    build = tune_retrieval.build_corpus(corpus, CACHE, quiet=True)
    return {question.id: set(question.relevant) | set(question.primary) for question in build.questions}


def choose_no_answer(evidence: dict[str, set[str]], share: float, seed: int) -> tuple[set[str], set[str]]:
    """(no-answer ids, dropped ids). Questions in a seeded order each draw their class (no-answer with
    probability `share`); a question takes the other class when its draw would break a rule, and
    is dropped when both would: a no-answer question's evidence documents are all removed, and no
    answerable question loses one. So a dropped question is one whose evidence is partly removed
    (neither cleanly answerable nor cleanly unanswerable), and is left out of the run."""
    rng = random.Random(seed)
    order = sorted(evidence)
    rng.shuffle(order)
    removed: set[str] = set()
    kept: set[str] = set()
    no_answer: set[str] = set()
    dropped: set[str] = set()
    for qid in order:
        docs = evidence[qid]
        can_remove = not docs & kept
        can_keep = not docs & removed
        if can_remove and (rng.random() < share or not can_keep):
            no_answer.add(qid)
            removed |= docs
        elif can_keep:
            kept |= docs
        else:
            dropped.add(qid)
    return no_answer, dropped


def seed_kb(corpus: str, base: Path, removed_docs: set[str], seed: int, work: Path) -> Path:
    kb = work / f"{corpus}-{seed}"
    if kb.exists():
        shutil.rmtree(kb)
    shutil.copytree(base, kb, ignore=shutil.ignore_patterns(".built"))
    for relative in removed_docs:
        for path in (kb / relative, kb / (relative + ".pnk.yaml")):
            path.unlink(missing_ok=True)
    from pinakes.sync import SyncOptions
    from pinakes.sync.engine import run_sync

    run_sync(kb, SyncOptions(quiet=True, offline=True))
    return kb


# An experiment's extra evidence features (bench/experiments/): given the KB's Searcher, a function of
# (query, the search's passages' texts) whose features join the product's in each row.
ExtraFeatures = Callable[[Any, Path], Callable[[str, list[str]], dict[str, float]]]


def outcome_rows(kb: Path, corpus: str, evidence: dict[str, set[str]], no_answer: set[str],
                 extra_features: ExtraFeatures | None = None) -> list[Outcome]:
    """Every question through the KB's own Searcher, as eval outcome rows with their features."""
    from pinakes.eval.runner import first_relevant_rank
    from pinakes.search.core import Searcher

    build = tune_retrieval.build_corpus(corpus, CACHE, quiet=True)
    rows: list[Outcome] = []
    with Searcher.for_kb(kb, offline=True) as searcher:
        extra = extra_features(searcher, kb) if extra_features is not None else None
        for question in build.questions:
            if question.id not in evidence:
                continue
            result = searcher.search(question.query, mode="hybrid")
            confidence = result.confidence
            features = dict(confidence.features) if confidence.features is not None else None
            if extra is not None and features is not None and result.passages:
                features.update(extra(question.query, [passage.text for passage in result.passages]))
            if question.id in no_answer:
                rows.append(Outcome(question.id, "no-answer", None, None, confidence.level, confidence.signal,
                                    features=features))
                continue
            rank = first_relevant_rank(result.passages, sorted(evidence[question.id]))
            rows.append(Outcome(question.id, "simple-lookup", rank is not None, rank, confidence.level,
                                confidence.signal, 0, len(result.passages), features=features))
    return rows


def collect(corpus: str, seed: int, share: float, work: Path,
            extra_features: ExtraFeatures | None = None) -> list[Outcome]:
    """The seed's outcome rows, cached beside the KBs (a re-analysis needs no re-run)."""
    cached = work / f"{corpus}-{seed}-{share}.json"
    if cached.exists():
        return [Outcome.from_dict(row, f"{cached} row") for row in json.loads(cached.read_text())]
    evidence = evidence_of(corpus)
    no_answer, dropped = choose_no_answer(evidence, share, seed)
    evidence = {qid: docs for qid, docs in evidence.items() if qid not in dropped}
    removed = set[str]().union(*(evidence[qid] for qid in no_answer))
    build = tune_retrieval.build_corpus(corpus, CACHE, quiet=True)
    started = time.perf_counter()
    kb = seed_kb(corpus, build.root, removed, seed, work)
    synced = time.perf_counter() - started
    rows = outcome_rows(kb, corpus, evidence, no_answer, extra_features)
    print(f"  {corpus} seed {seed}: {len(no_answer)} no-answer / {len(rows)} questions ({len(dropped)} dropped), "
          f"{len(removed)} documents "
          f"removed, sync {synced:.0f} s, searches {time.perf_counter() - started - synced:.0f} s", flush=True)
    cached.write_text(json.dumps([row.to_dict() for row in rows]))
    shutil.rmtree(kb)
    return rows


# -- fitting on one half, scoring on the other ------------------------------------------------------


def halves(rows: Sequence[Outcome], seed: int) -> tuple[list[Outcome], list[Outcome]]:
    rng = random.Random(seed * 7919 + 1)
    first: list[Outcome] = []
    second: list[Outcome] = []
    for answerable in (False, True):
        group = sorted((row for row in rows if (row.kind != "no-answer") == answerable), key=lambda row: row.id)
        rng.shuffle(group)
        middle = len(group) // 2
        first += group[:middle]
        second += group[middle:]
    return first, second


PRIORS: dict[str, SignalModel] = {}  # corpus -> the model fitted on every other corpus's rows


def fit_candidate(candidate: Candidate, rows: Sequence[Outcome], ceiling: float, corpus: str = "") -> ConfidenceFit:
    if candidate.signal == TOP_SCORE:
        return fit_thresholds(rows, candidate.name, max_false_confidence=ceiling)
    prior = PRIORS.get(corpus) if candidate.prior else None
    if candidate.prior and prior is None:
        raise FitError(f"no development prior for {corpus}")
    return fit_confidence(rows, candidate.name, features=candidate.features or None, penalty=candidate.penalty,
                          prior=prior, cross_fit=candidate.cross_fit, max_false_confidence=ceiling,
                          feature_sets=candidate.feature_sets)


@dataclass
class Tally:
    false_abstain: int = 0
    answerable: int = 0
    false_confident: int = 0
    no_answer: int = 0
    found_abstain: int = 0  # answerable questions whose evidence was in the top k, called low
    found: int = 0

    def add(self, fit: ConfidenceFit, held_out: Sequence[Outcome]) -> tuple[float, float]:
        fa, fc = score_fit(fit, held_out)
        found, _ = score_fit(fit, [row for row in held_out if row.kind == "no-answer" or row.hit])
        self.found_abstain += int(found.numerator)
        self.found += found.denominator
        self.false_abstain += int(fa.numerator)
        self.answerable += fa.denominator
        self.false_confident += int(fc.numerator)
        self.no_answer += fc.denominator
        return fa.numerator / fa.denominator, fc.numerator / fc.denominator


def wilson(successes: int, trials: int) -> tuple[float, float]:
    if trials == 0:
        return (math.nan, math.nan)
    p = successes / trials
    centre = (p + Z95**2 / (2 * trials)) / (1 + Z95**2 / trials)
    half = Z95 * math.sqrt(p * (1 - p) / trials + Z95**2 / (4 * trials**2)) / (1 + Z95**2 / trials)
    return (round(max(0.0, centre - half), 3), round(min(1.0, centre + half), 3))


def rate(numerator: int, denominator: int) -> dict[str, object]:
    return {"value": round(numerator / denominator, 3) if denominator else None, "numerator": numerator,
            "denominator": denominator, "wilson95": wilson(numerator, denominator)}


def auc(rows: Sequence[Outcome], fit: ConfidenceFit) -> float:
    """How often an answerable question outscores a no-answer one (ties half): the signal's
    separation on held-out rows, whatever the threshold."""
    signals = [(fit.row_signal(row), row.kind != "no-answer") for row in rows]
    return pairwise_auc([s if s is not None else -math.inf for s, answerable in signals if answerable],
                        [s if s is not None else -math.inf for s, answerable in signals if not answerable])


def pairwise_auc(positive: Sequence[float], negative: Sequence[float]) -> float:
    """The share of (positive, negative) pairs the positive outscores, ties counting half."""
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in positive for n in negative)
    return wins / max(1, len(positive) * len(negative))


def evaluate(corpus: str, runs: dict[int, list[Outcome]], ceiling: float) -> dict[str, object]:
    report: dict[str, object] = {}
    per_fold: dict[str, list[float]] = {}
    for candidate in CANDIDATES:
        tally = Tally()
        balanced: list[float] = []
        areas: list[float] = []
        curve = {c: Tally() for c in FALSE_CONFIDENCE_CEILINGS}
        for seed, rows in sorted(runs.items()):
            first, second = halves(rows, seed)
            for fit_on, score_on in ((first, second), (second, first)):
                try:
                    fit = fit_candidate(candidate, fit_on, ceiling, corpus)
                except FitError:
                    continue
                fa, fc = tally.add(fit, score_on)
                balanced.append((fa + fc) / 2)
                areas.append(auc(score_on, fit))
                for point, point_tally in curve.items():
                    point_tally.add(fit_candidate(candidate, fit_on, point, corpus), score_on)
        per_fold[candidate.name] = balanced
        report[candidate.name] = {
            "false_abstain": rate(tally.false_abstain, tally.answerable),
            "false_confidence": rate(tally.false_confident, tally.no_answer),
            "false_abstain_when_found": rate(tally.found_abstain, tally.found),
            "balanced_error_mean": round(statistics.fmean(balanced), 4) if balanced else None,
            "balanced_error_range": [round(min(balanced), 3), round(max(balanced), 3)] if balanced else None,
            "auc_mean": round(statistics.fmean(areas), 4) if areas else None,
            "curve": [{"fit_ceiling": point, "false_abstain": rate(t.false_abstain, t.answerable),
                       "false_confidence": rate(t.false_confident, t.no_answer)} for point, t in curve.items()],
            "folds": len(balanced),
        }
    for candidate in CANDIDATES[1:]:
        entry = report[candidate.name]
        assert isinstance(entry, dict)
        entry["vs_old"] = _paired(per_fold[candidate.name], per_fold[CANDIDATES[0].name])
    if SHIPPED in per_fold and BEFORE_RELATIONS in per_fold:
        entry = report[SHIPPED]
        assert isinstance(entry, dict)
        entry["vs_before_relations"] = _paired(per_fold[SHIPPED], per_fold[BEFORE_RELATIONS])
    return report


def _paired(new: list[float], old: list[float]) -> dict[str, object] | None:
    """Fold by fold balanced errors: how many folds fell / rose, the mean difference, the sign test."""
    if len(new) != len(old) or not new:
        return None
    better = sum(1 for a, b in zip(new, old, strict=True) if a < b)
    worse = sum(1 for a, b in zip(new, old, strict=True) if a > b)
    return {"better_folds": better, "worse_folds": worse,
            "mean_difference": round(statistics.fmean(a - b for a, b in zip(new, old, strict=True)), 4),
            "sign_test_p": round(sign_test(better, worse), 4)}


def development_prior(runs: dict[str, dict[int, list[Outcome]]], leave_out: str | None = None) -> SignalModel:
    """The shipped features' model fitted on every development corpus's rows (but `leave_out`'s),
    each corpus weighing the same: the prior a KB's own fit is shrunk towards."""
    rows: list[Outcome] = []
    for corpus, corpus_runs in runs.items():
        if corpus == leave_out:
            continue
        rows += [row for seed_rows in corpus_runs.values() for row in seed_rows]
    return fit_model(rows, MODEL_FEATURES)


def load_runs(corpora: Sequence[str], seeds: int, share: float, work: Path) -> dict[str, dict[int, list[Outcome]]]:
    """The cached per-seed rows of every corpus that has them (for the priors)."""
    runs: dict[str, dict[int, list[Outcome]]] = {}
    for corpus in corpora:
        found = {seed: work / f"{corpus}-{seed}-{share}.json" for seed in range(1, seeds + 1)}
        if all(path.exists() for path in found.values()):
            runs[corpus] = {seed: [Outcome.from_dict(row, str(path)) for row in json.loads(path.read_text())]
                            for seed, path in found.items()}
    return runs


def render(corpus: str, report: dict[str, object]) -> str:
    lines = [f"== {corpus}", f"{'signal':45} {'false-abstain':>26} {'false-confidence':>26} {'bal.err':>8} "
             f"{'AUC':>6}  vs old (better/worse, p)"]
    for name, entry in report.items():
        assert isinstance(entry, dict)
        entry = cast(dict[str, Any], entry)
        fa, fc = entry["false_abstain"], entry["false_confidence"]
        versus = entry.get("vs_old")
        lines.append(
            f"{name:45} {_cell(fa):>26} {_cell(fc):>26} {entry['balanced_error_mean']!s:>8} "
            f"{entry['auc_mean']!s:>6}  "
            + (f"{versus['better_folds']}/{versus['worse_folds']}, p={versus['sign_test_p']}, "
               f"d={versus['mean_difference']}" if versus else ""))
    shipped = report[SHIPPED]
    assert isinstance(shipped, dict)
    shipped = cast(dict[str, Any], shipped)
    if (before := shipped.get("vs_before_relations")) is not None:
        lines.append(f"shipped vs {BEFORE_RELATIONS}: {before['better_folds']}/{before['worse_folds']} folds, "
                     f"p={before['sign_test_p']}, d={before['mean_difference']}")
    lines.append("false-abstain among answerable questions whose evidence was in the top 8: "
                 + ", ".join(f"{name}: {_cell(cast(dict[str, Any], report[name])['false_abstain_when_found'])}"
                             for name in (CANDIDATES[0].name, SHIPPED)))
    lines.append("trade-off curve of the shipped signal (fit's false-confidence ceiling -> held-out):")
    for point in shipped["curve"]:
        lines.append(f"  ceiling {point['fit_ceiling']:.2f}: false-abstain {_cell(point['false_abstain'])}, "
                     f"false-confidence {_cell(point['false_confidence'])}")
    old = report[CANDIDATES[0].name]
    assert isinstance(old, dict)
    old = cast(dict[str, Any], old)
    lines.append("trade-off curve of the old signal (best cosine):")
    for point in old["curve"]:
        lines.append(f"  ceiling {point['fit_ceiling']:.2f}: false-abstain {_cell(point['false_abstain'])}, "
                     f"false-confidence {_cell(point['false_confidence'])}")
    return "\n".join(lines)


def _cell(entry: dict[str, Any]) -> str:
    low, high = entry["wilson95"]
    return f"{entry['value']} ({entry['numerator']}/{entry['denominator']}) [{low}, {high}]"


# -- what the features cost a search ----------------------------------------------------------------


class _HashedVectors:
    """tests/fakes.FakeEmbedder (hashed words, 384 dimensions) with what bench_search's builder
    asks of an embedder: the latency of the features does not depend on what the vectors mean."""

    def __init__(self) -> None:
        from tests.fakes import FakeEmbedder

        self._fake = FakeEmbedder()
        self.identity = self._fake.identity
        self.embedded = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self._fake, name)

    def save(self) -> None:
        pass


def latency(size: int, cache: Path, queries: int = 150, rounds: int = 3) -> dict[str, object]:
    """Hybrid search at `size` chunks with the features and without them, paired per query and
    interleaved (drift on a shared machine hits both arms alike); plus the feature computation
    timed alone, WordNet's relatives of the query's words looked up afresh each time (no search
    finds them cached from an earlier one). The index is bench_search's (both corpora's documents, copied until it holds
    `size` chunks, built by the sync) with hashed vectors."""
    import bench_search

    import pinakes.search.signals as signals
    from pinakes.lexical.relations import packaged
    from pinakes.search.core import Searcher, SearchSettings

    embedder = _HashedVectors()
    # _HashedVectors has the VectorsByText surface build_sized_kb uses (duck-typed, not a subclass)
    index = bench_search.build_sized_kb(cache / f"latency-kb-{size}", size,
                                        cast("bench_search.VectorsByText", embedder))
    asked = bench_search.questions()
    chosen = asked[:: max(1, len(asked) // queries)][:queries]
    real = signals.search_features
    alone: list[float] = []

    def timed(*args: Any, **kwargs: Any) -> dict[str, float]:  # the search's own arguments, passed through
        started = time.perf_counter()
        result = real(*args, **kwargs)
        alone.append((time.perf_counter() - started) * 1000)
        return result

    def skipped(*_args: object, **_kwargs: object) -> dict[str, float]:
        return {}

    on: list[float] = []
    off: list[float] = []
    # _HashedVectors delegates the Embedder surface to its FakeEmbedder (duck-typed)
    with Searcher(index, SearchSettings(rerank=False), embedder=cast("Embedder", embedder)) as searcher:
        for query in chosen[:10]:
            searcher.search(query)
        for _ in range(rounds):
            for number, query in enumerate(chosen):
                arms = [("on", timed), ("off", skipped)]
                if number % 2:
                    arms.reverse()
                for arm, function in arms:
                    signals.search_features = function
                    packaged().relatives.cache_clear()  # each search meets its words' relatives cold
                    started = time.perf_counter()
                    searcher.search(query)
                    (on if arm == "on" else off).append((time.perf_counter() - started) * 1000)
        generation = searcher._generation  # pyright: ignore[reportPrivateUsage] -- the index's size, as loaded
        chunks = generation.chunk_count if generation else None
    signals.search_features = real
    differences = sorted(a - b for a, b in zip(on, off, strict=True))
    return {"chunks": chunks, "searches_per_arm": len(on),
            "hybrid_p50_ms_with_features": round(statistics.median(on), 3),
            "hybrid_p50_ms_without": round(statistics.median(off), 3),
            "paired_difference_p50_ms": round(statistics.median(differences), 3),
            "paired_difference_p90_ms": round(differences[int(0.9 * (len(differences) - 1))], 3),
            "features_alone_p50_ms": round(statistics.median(alone), 3),
            "features_alone_p95_ms": round(sorted(alone)[int(0.95 * (len(alone) - 1))], 3),
            "load_average": [round(value, 2) for value in os.getloadavg()]}


def sources_latency(size: int, cache: Path, queries: int = 150, rounds: int = 2) -> dict[str, object]:
    """What choosing the confidence source costs a hybrid search (issue #41): the same Searcher with
    its block handed over as before (a fitted block, no file to look at) and with the KB's sources
    (search/calibrated.py: a stored self-calibration, re-read only when its file changes, one `stat`
    a search). Each query is searched in both arms in both orders (`rounds` even): the second search
    of a pair is quicker (caches), and a difference taken in one order only measures that. The
    per-query difference is the mean over its rounds; its median over queries, with a bootstrap 95%
    interval, is the reading. The index is bench_search's, with hashed vectors."""
    import dataclasses
    import random

    import bench_search

    from pinakes.kb import KBPaths
    from pinakes.search.calibrated import KBConfidence, block_from, self_calibration_path
    from pinakes.search.confidence import assess
    from pinakes.search.core import Searcher, SearchSettings

    embedder = _HashedVectors()
    # _HashedVectors has the VectorsByText surface build_sized_kb uses (duck-typed, not a subclass)
    index = bench_search.build_sized_kb(cache / f"latency-kb-{size}", size,
                                        cast("bench_search.VectorsByText", embedder))
    paths = KBPaths(index.parent.parent)
    block = {"signal": "model", "features": ["cosine", "related_share"], "weights": [2.3, 3.9], "bias": -3.2,
             "high": 0.6, "low": 0.4, "fitted_for": f"{embedder.identity.model} (evidence model, rerank off), bench"}
    stored = self_calibration_path(paths)
    stored.write_text(json.dumps({"format": "pinakes-self-calibration/1", "confidence": block}))
    fitted = block_from(block)
    sources = KBConfidence.for_kb(paths, None)
    asked = bench_search.questions()
    chosen = asked[:: max(1, len(asked) // queries)][:queries]
    arms = {"fitted block": fitted, "the KB's sources": sources}
    times: dict[str, list[float]] = {arm: [] for arm in arms}
    per_query: list[float] = []
    # _HashedVectors delegates the Embedder surface to its FakeEmbedder (duck-typed)
    with Searcher(index, SearchSettings(rerank=False, confidence=fitted),
                  embedder=cast("Embedder", embedder)) as searcher:
        for query in chosen[:10]:
            searcher.search(query)
        result = None
        for number, query in enumerate(chosen):
            differences: list[float] = []
            for round_number in range(rounds):
                order = list(arms)
                if (number + round_number) % 2:
                    order.reverse()
                took: dict[str, float] = {}
                for arm in order:
                    searcher.settings = dataclasses.replace(searcher.settings, confidence=arms[arm])
                    started = time.perf_counter()
                    result = searcher.search(query)
                    took[arm] = (time.perf_counter() - started) * 1000
                    times[arm].append(took[arm])
                    assert result.confidence.source in ("fitted", "self-calibrated")
                differences.append(took["the KB's sources"] - took["fitted block"])
            per_query.append(statistics.fmean(differences))
    # The part that changed, alone: assess() over the same features, the block handed over or chosen.
    assert result is not None
    features = dict(result.confidence.features or {})
    alone: dict[str, float] = {}
    for arm, confidence in list(arms.items()) * 2:
        started = time.perf_counter()
        for _ in range(20000):
            assess(passage_count=8, rerank_top=None, best_cosine=0.5, thresholds=confidence, reranker_model=None,
                   embedding_model=embedder.identity.model, features=features)
        alone[arm] = (time.perf_counter() - started) / 20000 * 1e6
    stored.unlink()
    rng = random.Random(41)
    medians = sorted(statistics.median(rng.choices(per_query, k=len(per_query))) for _ in range(2000))
    return {"chunks": size, "queries": len(per_query), "searches_per_arm": len(times["fitted block"]),
            "hybrid_p50_ms_fitted_block": round(statistics.median(times["fitted block"]), 3),
            "hybrid_p50_ms_kb_sources": round(statistics.median(times["the KB's sources"]), 3),
            "per_query_difference_p50_ms": round(statistics.median(per_query), 4),
            "per_query_difference_p50_ci95_ms": [round(medians[49], 4), round(medians[1949], 4)],
            "assess_alone_us": {arm: round(value, 2) for arm, value in alone.items()},
            "load_average": [round(value, 2) for value in os.getloadavg()]}


def cosine_signal(row: Outcome) -> Outcome:
    """The row with the old signal (the best cosine; a chain's weakest hop's) as its `signal`,
    whatever block the run that wrote it compared against."""
    from dataclasses import replace

    if row.hop_features is not None:
        cosines = [hop.get("cosine") for hop in row.hop_features if hop is not None]
        return replace(row, signal=min(c for c in cosines if c is not None) if cosines else row.signal)
    if row.features is not None and "cosine" in row.features:
        return replace(row, signal=row.features["cosine"])
    return row


def main(argv: Sequence[str] | None = None) -> int:
    global CACHE
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--corpus", choices=CORPORA, action="append")
    parser.add_argument("--seeds", type=int, default=SEEDS)
    parser.add_argument("--share", type=float, default=SHARE, help="share of questions made no-answer")
    parser.add_argument("--ceiling", type=float, default=None,
                        help="the fit's false-confidence ceiling (default: the product's)")
    parser.add_argument("--cache", type=Path, default=None, help="where the built KBs and per-seed rows live (/work/cache/pnk-conf)")
    parser.add_argument("--json", type=Path, help="write the whole report here")
    parser.add_argument("--outcomes", type=Path, metavar="FILE",
                        help="instead: the candidates on a golden set's eval/outcomes.json (no removal: its own "
                             "no-answer questions), halves over --seeds seeds")
    parser.add_argument("--latency", type=int, metavar="CHUNKS",
                        help="instead: what the features add to a hybrid search at this many chunks (paired)")
    parser.add_argument("--sources-latency", type=int, metavar="CHUNKS",
                        help="instead: what choosing the confidence source adds to a hybrid search (paired)")
    args = parser.parse_args(argv)
    if args.sources_latency:
        result = sources_latency(args.sources_latency, args.cache or CACHE)
        print(json.dumps(result, indent=2))
        if args.json:
            args.json.write_text(json.dumps(result, indent=2))
        return 0
    if args.latency:
        result = latency(args.latency, args.cache or CACHE)
        print(json.dumps(result, indent=2))
        if args.json:
            args.json.write_text(json.dumps(result, indent=2))
        return 0
    CACHE = args.cache or CACHE  # pyright: ignore[reportConstantRedefinition] -- --cache replaces the module's default
    if args.outcomes:
        from pinakes.eval.outcomes import read_outcomes

        rows = [cosine_signal(row) for row in read_outcomes(args.outcomes).rows]
        every = load_runs(CORPORA, SEEDS, SHARE, (args.cache or CACHE) / "seeds")
        if every:
            PRIORS[str(args.outcomes)] = development_prior(every)
        report = evaluate(str(args.outcomes), {seed: rows for seed in range(1, args.seeds + 1)},
                          MAX_FALSE_CONFIDENCE if args.ceiling is None else args.ceiling)
        print(render(str(args.outcomes), report))
        if args.json:
            args.json.write_text(json.dumps(report, indent=2))
        return 0
    ceiling = MAX_FALSE_CONFIDENCE if args.ceiling is None else args.ceiling
    work = CACHE / "seeds"
    work.mkdir(parents=True, exist_ok=True)
    corpora = args.corpus or list(CORPORA)
    runs: dict[str, dict[int, list[Outcome]]] = {}
    for corpus in corpora:
        tune_retrieval.build_corpus(corpus, CACHE, quiet=True)
        runs[corpus] = {seed: collect(corpus, seed, args.share, work) for seed in range(1, args.seeds + 1)}
    every = {**load_runs(CORPORA, args.seeds, args.share, work), **runs}
    for corpus in corpora:
        if len(set(every) - {corpus}) >= 1:
            PRIORS[corpus] = development_prior(every, leave_out=corpus)
    reports = {corpus: evaluate(corpus, runs[corpus], ceiling) for corpus in corpora}
    for corpus in corpora:
        print(render(corpus, reports[corpus]))
    model = development_prior(every)
    prior = {"corpora": sorted(every), "features": list(model.features), "weights": list(model.weights),
             "bias": model.bias}
    print(f"development prior (shipped features, every corpus's rows): {prior}")
    if args.json:
        args.json.write_text(json.dumps({"share": args.share, "seeds": args.seeds, "ceiling": ceiling,
                                         "reports": reports, "prior": prior}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
