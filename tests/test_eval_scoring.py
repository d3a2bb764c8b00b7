"""Scoring without an index: rates with numerators and denominators (null, never 0.0, over nothing),
the baseline gate, the sign test, paired comparison, threshold fitting and the outcomes file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pinakes.eval.baseline import Baseline, compare, read_baseline, write_baseline
from pinakes.eval.fitting import FitError, describe_fit, fit_confidence
from pinakes.eval.outcomes import Outcome, OutcomesError, OutcomesFile, read_outcomes, write_outcomes
from pinakes.eval.paired import compare_outcomes, sign_test
from pinakes.eval.scoreboard import ALL, Rate, score
from pinakes.manifest import parse_manifest
from pinakes.search.confidence import assess

THRESHOLDS = {"high": 0.7, "low": 0.4, "fitted_for": "m"}


def header(*, final_k: int = 8, rerank: bool = False, thresholds: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"embedding": {"model": "m"}, "reranker": None,
            "retrieval": {"final_k": final_k, "rerank": rerank, "confidence": thresholds}}


def outcomes(rows: list[Outcome], **kwargs: Any) -> OutcomesFile:
    return OutcomesFile(header(**kwargs), tuple(rows))


def row(qid: str, kind: str, rank: int | None, confidence: str = "unknown", signal: float | None = 0.5,
        relevant: int = 0, returned: int = 0) -> Outcome:
    hit = None if kind == "no-answer" else rank is not None
    return Outcome(qid, kind, hit, rank, confidence, signal, relevant, returned)


# ------------------------------------------------------------------------------------------------
# Rates


def test_a_rate_over_nothing_is_null_with_a_reason_never_zero() -> None:
    empty = Rate(0, 0)
    assert empty.value is None
    assert empty.to_dict() == {"value": None, "numerator": 0, "denominator": 0, "reason": "the denominator is zero"}
    assert Rate(0, 4).value == 0.0 and Rate(3, 4).to_dict()["value"] == 0.75
    assert Rate.from_dict(Rate(0, 0, "why").to_dict()).reason == "why"


def test_recall_and_mrr_count_answerable_questions_with_their_denominators() -> None:
    board = score(outcomes([
        row("a", "lexical", 1), row("b", "lexical", 4), row("c", "lexical", None),
        row("n", "no-answer", None),
    ]))
    lexical = board.classes["lexical"]
    assert lexical.questions == 3
    assert lexical.metrics["recall@k"].to_dict() == {"value": round(2 / 3, 6), "numerator": 2, "denominator": 3}
    assert lexical.metrics["mrr"].numerator == pytest.approx(1.25)
    assert lexical.metrics["mrr"].denominator == 3
    no_answer = board.classes["no-answer"]
    assert no_answer.metrics["recall@k"].value is None
    assert no_answer.metrics["recall@k"].reason == "no answerable questions in this class"
    assert board.classes[ALL].questions == 4 and board.classes[ALL].metrics["recall@k"].denominator == 3
    # A class with no questions at all is still on the board, with a count of 0 and null rates.
    assert board.classes["paraphrase"].questions == 0
    assert all(rate.value is None for rate in board.classes["paraphrase"].metrics.values())


def test_rerank_precision_is_null_when_rerank_is_off_and_a_ratio_when_on() -> None:
    rows = [row("a", "lexical", 1, relevant=3, returned=8), row("b", "lexical", 2, relevant=1, returned=8)]
    off = score(outcomes(rows)).classes[ALL].metrics["rerank_precision"]
    assert off.value is None and "rerank is off" in (off.reason or "")
    on = score(outcomes(rows, rerank=True)).classes[ALL].metrics["rerank_precision"]
    assert (on.numerator, on.denominator, on.value) == (4, 16, 0.25)


def test_abstention_rates_are_null_without_thresholds_even_when_a_search_was_low() -> None:
    rows = [row("a", "lexical", 1, "low", None), row("n", "no-answer", None, "low", None)]
    metrics = score(outcomes(rows)).classes[ALL].metrics
    for name in ("false_abstain", "false_confidence"):
        assert metrics[name].value is None
        assert "no [retrieval.confidence] thresholds" in (metrics[name].reason or "")


def test_abstention_rates_count_only_calibrated_levels() -> None:
    rows = [
        row("a", "lexical", 1, "high"), row("b", "lexical", 1, "low"), row("c", "lexical", 1, "medium"),
        row("d", "lexical", 1, "unknown"),
        row("n1", "no-answer", None, "low"), row("n2", "no-answer", None, "medium"),
        row("n3", "no-answer", None, "high"), row("n4", "no-answer", None, "unknown"),
    ]
    board = score(outcomes(rows, thresholds=THRESHOLDS))
    metrics = board.classes[ALL].metrics
    assert (metrics["false_abstain"].numerator, metrics["false_abstain"].denominator) == (1, 3)
    assert (metrics["false_confidence"].numerator, metrics["false_confidence"].denominator) == (2, 3)
    assert board.classes[ALL].confidence_unknown == 2
    all_unknown = score(outcomes([row("d", "lexical", 1, "unknown")], thresholds=THRESHOLDS))
    rate = all_unknown.classes[ALL].metrics["false_abstain"]
    assert rate.value is None and "every level was unknown" in (rate.reason or "")


# ------------------------------------------------------------------------------------------------
# The gate


def board_of(rows: list[Outcome], **kwargs: Any) -> Any:
    return score(outcomes(rows, **kwargs))


def test_the_gate_passes_an_identical_run_and_a_drop_within_tolerance() -> None:
    rows = [row(f"q{i}", "lexical", 1) for i in range(50)]
    assert compare(board_of(rows), board_of(rows)) == []
    # One question moving from rank 1 to rank 2 costs MRR 0.01: inside 0.02.
    nudged = [*rows[:-1], row("q49", "lexical", 2)]
    assert compare(board_of(rows), board_of(nudged)) == []


def test_the_gate_fails_on_a_drop_beyond_tolerance_naming_class_and_metric() -> None:
    before = board_of([row("a", "lexical", 1), row("b", "lexical", 1), row("c", "paraphrase", 1)])
    after = board_of([row("a", "lexical", 1), row("b", "lexical", None), row("c", "paraphrase", 1)])
    regressions = {(r.class_name, r.metric) for r in compare(before, after)}
    assert {("lexical", "recall@k"), ("lexical", "mrr"), (ALL, "recall@k"), (ALL, "mrr")} <= regressions
    assert not any(name == "paraphrase" for name, _ in regressions)
    rendered = compare(before, after)[0].render()
    assert "recall@k [lexical]: 1.000 (2/2) -> 0.500 (1/2)" in rendered and "beyond the 0.02 tolerance" in rendered


def test_the_question_count_is_gated_exactly_in_both_directions() -> None:
    two = board_of([row("a", "lexical", 1), row("b", "lexical", 1)])
    three = board_of([row("a", "lexical", 1), row("b", "lexical", 1), row("c", "lexical", 1)])
    for before, after in ((two, three), (three, two)):
        metrics = {(r.class_name, r.metric) for r in compare(before, after)}
        assert ("lexical", "questions") in metrics and (ALL, "questions") in metrics


def test_a_rising_false_confidence_and_a_rate_becoming_null_are_regressions() -> None:
    calibrated = [row("a", "lexical", 1, "high"), row("n", "no-answer", None, "low")]
    before = board_of(calibrated, thresholds=THRESHOLDS)
    confident = board_of([row("a", "lexical", 1, "high"), row("n", "no-answer", None, "high")], thresholds=THRESHOLDS)
    assert ("no-answer", "false_confidence") in {(r.class_name, r.metric) for r in compare(before, confident)}
    uncalibrated = board_of(calibrated)
    nulls = [r for r in compare(before, uncalibrated) if r.metric == "false_abstain"]
    assert nulls and nulls[0].after == "null" and "no longer measured" in nulls[0].why
    # The other way round (null -> a number) is not a regression.
    assert compare(uncalibrated, before) == []


def test_a_baseline_round_trips_through_its_file(tmp_path: Path) -> None:
    board = board_of([row("a", "lexical", 3), row("n", "no-answer", None, "low")], thresholds=THRESHOLDS)
    write_baseline(tmp_path / "baseline.json", Baseline(header(thresholds=THRESHOLDS), board))
    again = read_baseline(tmp_path / "baseline.json")
    assert again.scoreboard.to_dict() == board.to_dict()
    assert compare(again.scoreboard, board) == []


# ------------------------------------------------------------------------------------------------
# Sign test and paired comparison


def test_sign_test_is_exact_and_one_sided_as_spec_7_3_quotes() -> None:
    assert sign_test(4, 0) == 0.0625  # spec §7.3: "the project's own sign_test(4, 0) returns 0.0625"
    assert sign_test(4, 0, two_sided=True) == 0.125
    assert sign_test(5, 0) == 0.03125
    assert sign_test(3, 1) == 5 / 16
    assert sign_test(0, 4) == 1.0
    assert sign_test(0, 0) == 1.0
    assert sign_test(2, 2, two_sided=True) == 1.0
    assert sign_test(10, 2, two_sided=True) == pytest.approx(2 * 79 / 4096)
    with pytest.raises(ValueError):
        sign_test(-1, 0)


def test_paired_comparison_pairs_by_id_and_counts_moves() -> None:
    before = outcomes([row("a", "lexical", None), row("b", "lexical", 1), row("c", "lexical", None),
                       row("n", "no-answer", None, "medium"), row("gone", "lexical", 1),
                       row("x", "lexical", 1)], thresholds=THRESHOLDS)
    after = OutcomesFile(header(final_k=4, thresholds=THRESHOLDS), (
        row("a", "lexical", 2), row("b", "lexical", None), row("c", "lexical", None),
        row("n", "no-answer", None, "low"), row("new", "lexical", 1), row("x", "paraphrase", 1)))
    result = compare_outcomes(before, after)
    assert result.improved == ["a", "n"] and result.worsened == ["b"]
    assert result.paired == 4 and result.improvable_pool == 3
    assert result.only_before == ["gone"] and result.only_after == ["new"] and result.kind_changed == ["x"]
    assert result.p_value == sign_test(2, 1)
    assert result.best_possible_p == sign_test(3, 0) == 0.125
    assert result.to_dict()["can_license_improvement"] is False
    assert "retrieval.final_k: 8 -> 4" in result.header_changes


# ------------------------------------------------------------------------------------------------
# Fitting


def fit_rows(answerable: list[float], no_answer: list[float]) -> list[Outcome]:
    rows = [row(f"a{i}", "lexical", 1, "unknown", s) for i, s in enumerate(answerable)]
    rows += [row(f"n{i}", "no-answer", None, "unknown", s) for i, s in enumerate(no_answer)]
    return rows


def test_a_separable_set_fits_with_no_errors_and_the_thresholds_between_the_classes() -> None:
    fit = fit_confidence(fit_rows([0.8, 0.9, 0.7], [0.2, 0.3]), "m", signal="top-score")
    assert 0.3 < fit.low <= 0.7 and fit.low <= fit.high <= 0.7 and fit.high > 0.3
    assert (fit.false_abstain.numerator, fit.false_abstain.denominator) == (0, 3)
    assert (fit.false_confidence.numerator, fit.false_confidence.denominator) == (0, 2)


def test_an_overlapping_set_abstains_least_within_the_false_confidence_ceiling() -> None:
    answerable = [0.2, 0.5, 0.6, 0.7, 0.8]
    no_answer = [0.3, 0.55]
    fit = fit_confidence(fit_rows(answerable, no_answer), "m", signal="top-score")

    def errors(low: float) -> tuple[int, int]:
        return sum(s < low for s in answerable), sum(s >= low for s in no_answer)

    # With 2 no-answer questions, a 0.10 ceiling allows none to be confident: the fewest
    # abstentions among the thresholds above both no-answer signals.
    allowed = [t for t in [0.0, 0.25, 0.4, 0.525, 0.575, 0.65, 0.75, 1.0] if errors(t)[1] == 0]
    assert errors(fit.low) == min(errors(t) for t in allowed) == (2, 0)
    assert fit.false_abstain.numerator == sum(s < fit.low for s in answerable)
    # A looser ceiling buys fewer abstentions with one confident no-answer question, once it holds
    # for a new question: 1 of 2 is a half, but (1 + 1) / (2 + 1) is two thirds.
    half = fit_confidence(fit_rows(answerable, no_answer), "m", signal="top-score", max_false_confidence=0.5)
    assert errors(half.low) == (2, 0)
    loose = fit_confidence(fit_rows(answerable, no_answer), "m", signal="top-score", max_false_confidence=0.7)
    assert errors(loose.low) == (1, 1)
    # `high` sits above every no-answer question.
    assert fit.high > max(no_answer) and fit.no_answer_high.numerator == 0


def test_a_search_that_returned_nothing_always_abstains_and_one_without_a_score_is_excluded() -> None:
    rows = [*fit_rows([0.8, 0.9], [0.2]), row("empty", "no-answer", None, "low", None),
            row("bm25", "lexical", 1, "unknown", None)]
    fit = fit_confidence(rows, "m", signal="top-score")
    assert fit.excluded == ("bm25",)
    assert (fit.false_confidence.numerator, fit.false_confidence.denominator) == (0, 2)


def test_fitting_needs_both_classes() -> None:
    with pytest.raises(FitError):
        fit_confidence(fit_rows([0.5], []), "m", signal="top-score")


def test_the_fitted_block_loads_as_a_manifest_and_confidence_py_agrees_with_the_fit(tmp_path: Path) -> None:
    answerable = [0.31, 0.45, 0.52, 0.66, 0.71, 0.9]
    no_answer = [0.28, 0.4, 0.5]
    fitted_for = describe_fit("sentence-transformers/all-MiniLM-L6-v2", None, "eval/questions.yaml", 9, "final_k=8",
                              signal="top-score")
    fit = fit_confidence(fit_rows(answerable, no_answer), fitted_for, signal="top-score")
    manifest_text = (
        '[kb]\nname = "t"\nid = "01M8P05RX7E8691VQVZ35N5HS3"\n[sources]\nroots = ["docs"]\n'
        '[embedding]\nprovider = "sentence-transformers"\nmodel = "sentence-transformers/all-MiniLM-L6-v2"\n'
        "dim = 384\n[retrieval]\nrerank = false\n" + fit.manifest_block()
    )
    manifest = parse_manifest(manifest_text, path=tmp_path / "pinakes.toml")
    thresholds = manifest.retrieval.confidence
    assert thresholds is not None and (thresholds.low, thresholds.high) == (fit.low, fit.high)

    def level(signal: float) -> str:
        return assess(passage_count=1, rerank_top=None, best_cosine=signal, thresholds=thresholds,
                      reranker_model=None, embedding_model="sentence-transformers/all-MiniLM-L6-v2").level

    assert sum(level(s) == "low" for s in answerable) == fit.false_abstain.numerator
    assert sum(level(s) != "low" for s in no_answer) == fit.false_confidence.numerator
    # A cosine fit names no reranker: a search that reranks is not compared against it.
    reranked = assess(passage_count=1, rerank_top=0.9, best_cosine=0.9, thresholds=thresholds,
                      reranker_model="BAAI/bge-reranker-base", embedding_model="x")
    assert reranked.level == "unknown"


# ------------------------------------------------------------------------------------------------
# The outcomes file


def test_outcomes_round_trip_and_rescoring_needs_only_the_file(tmp_path: Path) -> None:
    original = outcomes([row("a", "lexical", 2, "high", 0.8, 1, 8), row("n", "no-answer", None, "low", 0.1)],
                        thresholds=THRESHOLDS)
    path = tmp_path / "outcomes.json"
    write_outcomes(path, original)
    again = read_outcomes(path)
    assert again.rows == original.rows and again.header == original.header
    assert score(again).to_dict() == score(original).to_dict()
    first = path.read_bytes()
    write_outcomes(path, again)
    assert path.read_bytes() == first


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("[]", "the top level is not an object"),
        ('{"format": "other"}', "not an outcomes file"),
        ('{"format": "pinakes-eval-outcomes/1", "header": {}, "rows": []}', "retrieval settings"),
        ('{"format": "pinakes-eval-outcomes/1", "header": {"retrieval": {"final_k": 8, "rerank": false}},'
         ' "rows": [{"id": "a"}]}', "row 1 is not an outcome row"),
        ('{"format": "pinakes-eval-outcomes/1", "header": {"retrieval": {"final_k": 8, "rerank": false}},'
         ' "rows": [{"id": "a", "kind": "lexical", "hit": true, "hit_rank": 1, "confidence": "sure"}]}',
         "confidence 'sure'"),
        ("{not json", "cannot read"),
    ],
)
def test_a_malformed_outcomes_file_is_a_named_error(tmp_path: Path, content: str, fragment: str) -> None:
    path = tmp_path / "outcomes.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(OutcomesError) as caught:
        read_outcomes(path)
    assert fragment in caught.value.message and caught.value.path == path


def test_the_committed_demo_outcomes_rescore_to_the_committed_baseline() -> None:
    """Offline, no weights: the committed artifact reproduces the committed scoreboard."""
    demo_eval = Path(__file__).resolve().parent / "demo-kb" / "eval"
    if not (demo_eval / "outcomes.json").exists() or not (demo_eval / "baseline.json").exists():
        pytest.skip("tests/demo-kb/eval has no committed outcomes.json + baseline.json yet")
    committed = read_outcomes(demo_eval / "outcomes.json")
    baseline = read_baseline(demo_eval / "baseline.json")
    assert score(committed).to_dict() == baseline.scoreboard.to_dict()
    assert committed.header == baseline.header
    assert json.loads((demo_eval / "baseline.json").read_text())["header"]["embedding"]["revision"] != "fake"


def test_rises_and_falls_pairs_by_key_and_treats_float_noise_as_a_tie() -> None:
    from pinakes.eval.paired import rises_and_falls

    after = {"q1": 0.5, "q2": 0.2, "q3": 0.3 + 1e-12, "q4": 1.0, "extra": 0.9}
    before = {"q1": 0.4, "q2": 0.3, "q3": 0.3, "q4": 1.0}
    assert rises_and_falls(after, before) == (1, 1)
    assert rises_and_falls(before, after) == (1, 1)
    assert rises_and_falls({"q1": 1.0, "q2": 1.0}, {"q1": 0.0, "q2": 0.5}) == (2, 0)
