"""The evidence features and the fitted confidence model (issue #25): each feature computed from a
KB built through the sync where every number can be checked by hand, the model's fit, its level
through the Searcher, `unknown` where it is no calibration, and the manifest keys it is written in."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pinakes.eval.fitting import (
    FEATURE_SETS,
    FEATURE_SETS_BEFORE_RELATIONS,
    FitError,
    SignalModel,
    allowed_false_confidences,
    fit_confidence,
    fit_model,
    fit_thresholds,
    no_answer_needed,
    score_fit,
)
from pinakes.eval.outcomes import Outcome
from pinakes.manifest import InvalidManifestError, load_manifest
from pinakes.search.confidence import assess
from pinakes.search.core import Searcher, SearchSettings
from pinakes.search.signals import FEATURES, agreement, vector_features
from tests.fakes import VectorTableEmbedder
from tests.kb_helpers import build_kb, searchable

EMBEDDING = "test/vector-table"


# -- the features, on a KB whose numbers are known ----------------------------------------------

# Four one-chunk documents; the query points along the first axis, so the cosines are 1.0 (alpha),
# 0.8 (zeta), 0.6 (gamma) and 0 (epsilon, dropped as no evidence).
PLACED = {"alpha beta": [1.0, 0.0, 0.0], "zeta": [0.8, 0.6, 0.0], "gamma delta": [0.6, 0.8, 0.0],
          "epsilon": [0.0, 0.0, 1.0]}
QUERY = "alpha gamma zzzunheard"  # two words the index holds once each, one it never saw


@pytest.fixture(scope="module")
def placed_kb(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, VectorTableEmbedder]:
    embedder = VectorTableEmbedder(PLACED, query=[1.0, 0.0, 0.0])
    index = build_kb(tmp_path_factory.mktemp("signals") / "kb",
                     searchable({f"{text.split()[0]}.md": f"{text}\n" for text in PLACED}), embedder)
    return index, embedder


def lucene_idf(document_frequency: int, chunks: int) -> float:
    return math.log(1.0 + (chunks - document_frequency + 0.5) / (document_frequency + 0.5))


def test_each_feature_is_what_its_definition_says(placed_kb: tuple[Path, VectorTableEmbedder]):
    index, embedder = placed_kb
    with Searcher(index, SearchSettings(rerank=False, final_k=10), embedder=embedder) as searcher:
        result = searcher.search(QUERY)
    features = result.confidence.features
    assert features is not None and set(features) == set(FEATURES)
    assert features["cosine"] == pytest.approx(1.0)
    assert features["cosine_margin"] == pytest.approx(1.0 - 0.8, abs=1e-5)
    assert features["cosine_spread"] == pytest.approx(1.0 - 0.6, abs=1e-5)  # fewer than 10: the last one
    # Keyword list: alpha's and gamma's chunks; vector list: alpha, zeta, gamma -> 2 of 3 agree.
    assert features["agreement"] == pytest.approx(2 / 3, abs=1e-5)
    # Each held word weighs idf(df 1 of 4 chunks); the unheard word the highest idf (df 0), and no
    # passage holds it: the best passage holds one held word.
    held, unheard = lucene_idf(1, 4), lucene_idf(0, 4)
    total = 2 * held + unheard
    assert features["keyword_share"] == pytest.approx(held / total, abs=1e-5)
    # The top passage (alpha beta) holds alpha; WordNet relates gamma to letter, alphabet, unit...,
    # none of which it holds, and knows nothing of the unheard word.
    assert features["related_share"] == pytest.approx(held / total, abs=1e-5)
    best_bm25 = max(p.scores.bm25_score for p in result.passages if p.scores.bm25_score is not None)
    assert features["bm25_ratio"] == pytest.approx(best_bm25 / (total * (2.5 + 1.0)), abs=1e-5)
    # The top passage (alpha) among the vector list's other candidates, zeta (cosine with alpha 0.8)
    # and gamma (0.6): epsilon, no candidate, is not its neighbour, though the KB holds it.
    assert result.passages[0].path == "docs/alpha.md"
    assert features["crowding"] == pytest.approx((0.8 + 0.6) / 2, abs=1e-5)
    # csls = 2 cos(q, alpha) - the query's mean candidate cosine - alpha's crowding.
    assert features["csls"] == pytest.approx(2 * 1.0 - (1.0 + 0.8 + 0.6) / 3 - 0.7, abs=1e-5)


def test_a_query_every_word_of_which_one_passage_holds_has_full_keyword_share(
        placed_kb: tuple[Path, VectorTableEmbedder]):
    index, embedder = placed_kb
    with Searcher(index, SearchSettings(rerank=False), embedder=embedder) as searcher:
        features = searcher.search("alpha beta").confidence.features
    assert features is not None and features["keyword_share"] == pytest.approx(1.0)


def test_keyword_only_search_has_no_features(placed_kb: tuple[Path, VectorTableEmbedder]):
    index, embedder = placed_kb
    with Searcher(index, SearchSettings(rerank=False), embedder=embedder) as searcher:
        assert searcher.search("alpha", mode="bm25").confidence.features is None


def test_vector_features_and_agreement_on_lists():
    assert vector_features([]) == {"cosine": 0.0, "cosine_margin": 0.0, "cosine_spread": 0.0}
    # One passage: the missing second and tenth count as no evidence (0).
    assert vector_features([(1, 0.5)]) == {"cosine": 0.5, "cosine_margin": 0.5, "cosine_spread": 0.5}
    cosines = [(i, 1.0 - 0.05 * i) for i in range(20)]
    assert vector_features(cosines)["cosine_spread"] == pytest.approx(0.05 * 9)  # against the 10th
    assert agreement([(1, 9.0), (2, 8.0)], []) == 0.0
    assert agreement([(i, 1.0) for i in range(5, 15)], [(i, 1.0) for i in range(10)]) == pytest.approx(0.5)


# -- the model ----------------------------------------------------------------------------------


def row(qid: str, answerable: bool, **features: float) -> Outcome:
    kind = "simple-lookup" if answerable else "no-answer"
    return Outcome(qid, kind, True if answerable else None, 1 if answerable else None, "unknown",
                   features.get("cosine"), features=features)


def separable_rows() -> list[Outcome]:
    """Answerable questions hold more of their keywords; cosine says nothing (the same spread in
    both classes)."""
    rows: list[Outcome] = []
    for i in range(20):
        cosine = 0.3 + 0.02 * (i % 10)
        rows.append(row(f"a{i}", True, cosine=cosine, keyword_share=0.6 + 0.02 * i))
        rows.append(row(f"n{i}", False, cosine=cosine, keyword_share=0.1 + 0.02 * i))
    return rows


def test_the_model_weighs_the_feature_that_separates():
    model = fit_model(separable_rows(), ("cosine", "keyword_share"))
    assert dict(zip(model.features, model.weights, strict=True))["keyword_share"] > 0
    fit = fit_confidence(separable_rows(), "fit", features=("cosine", "keyword_share"))
    assert (fit.false_abstain.numerator, fit.false_confidence.numerator) == (0, 0)
    # On rows it was not fitted on, the same rule holds.
    held_out = [row("x1", True, cosine=0.9, keyword_share=0.95), row("x2", False, cosine=0.9, keyword_share=0.05)]
    false_abstain, false_confidence = score_fit(fit, held_out)
    assert (false_abstain.numerator, false_confidence.numerator) == (0, 0)


def test_the_thresholds_are_chosen_on_scores_from_models_that_did_not_see_the_question():
    # keyword_share separates; "noise" is a feature that fits this very set by accident (it
    # alternates with the id), so a model judged on its own rows looks better than it is.
    rows: list[Outcome] = []
    for i in range(30):
        rows.append(row(f"a{i}", True, keyword_share=0.45 + 0.01 * i, noise=float(i % 2)))
        rows.append(row(f"n{i}", False, keyword_share=0.30 + 0.01 * i, noise=float((i + 1) % 2)))
    fit = fit_confidence(rows, "fit", features=("keyword_share", "noise"))
    assert fit.cross_validated is not None
    forecast_abstain, forecast_confident = fit.cross_validated
    assert (forecast_abstain.denominator, forecast_confident.denominator) == (30, 30)
    # The rates scored on the fitted rows are those of the thresholds written, under the final model.
    assert (fit.false_abstain.numerator, fit.false_confidence.numerator) == tuple(
        int(rate.numerator) for rate in score_fit(fit, rows))
    in_sample = fit_confidence(rows, "fit", features=("keyword_share", "noise"), cross_fit=False)
    assert in_sample.cross_validated is None


def test_the_fit_chooses_the_wordnet_set_where_only_related_share_tells_the_classes_apart():
    # Paraphrase-like rows: the cosine and the keyword share overlap across the classes (the same
    # spread in both); related_share separates them. The choice among FEATURE_SETS takes the set
    # that holds it; told to choose among the sets before (i), it cannot, and abstains more.
    rows: list[Outcome] = []
    for i in range(20):
        spread = dict(cosine=0.3 + 0.01 * i, cosine_spread=0.1, keyword_share=0.2 + 0.01 * i, bm25_ratio=0.2,
                      agreement=0.3, csls=0.01 * i, crowding=0.5)
        rows.append(row(f"a{i}", True, related_share=0.55 + 0.01 * i, **spread))
        rows.append(row(f"n{i}", False, related_share=0.25 + 0.01 * i, **spread))
    chosen = fit_confidence(rows, "fit")
    assert chosen.model is not None and "related_share" in chosen.model.features
    assert chosen.model.features in [tuple(choice) for choice in FEATURE_SETS]
    before = fit_confidence(rows, "fit", feature_sets=FEATURE_SETS_BEFORE_RELATIONS)
    assert before.model is not None and "related_share" not in before.model.features
    assert chosen.false_abstain.numerator < before.false_abstain.numerator


def test_the_model_learns_a_feature_that_points_the_other_way():
    # No-answer questions here find a near-duplicate of the topic: a higher cosine, not a lower one.
    rows = [row(f"a{i}", True, cosine=0.3 + 0.01 * i, keyword_share=0.5) for i in range(15)]
    rows += [row(f"n{i}", False, cosine=0.35 + 0.01 * i, keyword_share=0.5) for i in range(15)]
    model = fit_model(rows, ("cosine", "keyword_share"))
    assert model.weights[0] < 0
    assert model.weights[1] == 0.0  # a constant feature carries no weight


def test_the_threshold_keeps_false_confidence_under_the_ceiling_for_a_new_question_with_fewest_abstentions():
    # Signals: answerable 0.05 .. 1.0, no-answer 0.025 .. 0.975 (overlapping), 20 of each.
    rows = [Outcome(f"a{i}", "simple-lookup", True, 1, "unknown", 0.05 * i) for i in range(1, 21)]
    rows += [Outcome(f"n{i}", "no-answer", None, None, "unknown", 0.05 * i - 0.025) for i in range(1, 21)]
    # A ceiling of 0.10 on 20 no-answer questions allows one confident one: (1 + 1) / 21 <= 0.10.
    fit = fit_thresholds(rows, "fit")
    assert fit.false_confidence.numerator == 1  # only n20 (0.975) is above low
    assert fit.low == pytest.approx(0.95, abs=0.025) and fit.false_abstain.numerator == 18
    # On 10 of them 1/10 is within the ceiling, but a new question would cross that threshold more
    # often: (1 + 1) / 11 > 0.10, so none may be confident.
    ten = [row for row in rows if row.kind != "no-answer" or int(row.id[1:]) > 10]
    fit_on_ten = fit_thresholds(ten, "fit")
    assert fit_on_ten.false_confidence.numerator == 0 and fit_on_ten.false_abstain.numerator == 19
    strict = fit_thresholds(rows, "fit", max_false_confidence=0.0)
    assert strict.false_confidence.numerator == 0 and strict.false_abstain.numerator == 19


def test_allowed_false_confidences_follow_conformal_risk_control():
    assert [allowed_false_confidences(n, 0.10) for n in (0, 5, 8, 9, 18, 19, 20, 29, 30, 100)] == \
        [0, 0, 0, 0, 0, 1, 1, 2, 2, 9]
    assert [no_answer_needed(c) for c in (0.10, 0.05, 0.20, 0.0)] == [9, 19, 4, None]
    for ceiling in (0.05, 0.10, 0.20):  # at the needed count, leaving none confident just meets it
        needed = no_answer_needed(ceiling)
        assert needed is not None and 1 / (needed + 1) <= ceiling < 1 / needed


def test_the_new_rule_keeps_its_promise_on_new_questions_where_the_plain_share_does_not():
    """Thresholds fitted on 20 + 20 questions of known score distributions, scored exactly on the
    no-answer distribution: averaged over many fits, the false-confidence a new question meets stays
    within the ceiling; leaving k/n within it on the fitted questions (the rule before) exceeds it."""
    import random

    from pinakes.calibration import fitting

    rng = random.Random(25)
    ceiling, trials = 0.10, 300

    def fitted_rows() -> list[Outcome]:
        # Answerable questions crowd the top, so the ceiling binds: every confident no-answer question
        # it allows buys fewer abstentions.
        rows = [Outcome(f"a{i}", "simple-lookup", True, 1, "unknown", rng.uniform(0.5, 1.0)) for i in range(20)]
        return rows + [Outcome(f"n{i}", "no-answer", None, None, "unknown", rng.random()) for i in range(20)]

    def new_question_false_confidence(low: float) -> float:
        return min(1.0, max(0.0, 1.0 - low))  # the share of uniform [0, 1] no-answer scores at or above low

    def plain_share(n: int, ceiling: float) -> int:
        return int(ceiling * n + 1e-9)

    samples = [fitted_rows() for _ in range(trials)]
    shipped = [new_question_false_confidence(fit_thresholds(rows, "fit").low) for rows in samples]
    original = fitting.allowed_false_confidences
    fitting.allowed_false_confidences = plain_share
    try:
        plain = [new_question_false_confidence(fit_thresholds(rows, "fit").low) for rows in samples]
    finally:
        fitting.allowed_false_confidences = original
    assert sum(shipped) / trials <= ceiling
    assert sum(plain) / trials > ceiling


def test_a_model_needs_features_on_both_classes():
    rows = [Outcome("a", "simple-lookup", True, 1, "unknown", 0.5), Outcome("n", "no-answer", None, None, "unknown", 0.2)]
    with pytest.raises(FitError, match="evidence features"):
        fit_confidence(rows, "fit")


def test_a_chain_is_scored_at_its_weakest_hop_and_its_features_survive_the_outcomes_file(tmp_path: Path):
    from pinakes.eval.outcomes import OutcomesFile, read_outcomes, write_outcomes

    model = SignalModel(("keyword_share",), (4.0,), -2.0)
    chain = Outcome("mh-1", "multi-hop", True, 2, "unknown", None, hop_ranks=(1, 2),
                    hop_features=({"keyword_share": 1.0}, {"keyword_share": 0.25}))
    weakest = 1.0 / (1.0 + math.exp(-(-2.0 + 4.0 * 0.25)))
    assert model.row_probability(chain) == pytest.approx(weakest)
    broken = Outcome("mh-2", "multi-hop", False, None, "low", None, hop_ranks=(1, None),
                     hop_features=({"keyword_share": 1.0}, None))
    assert model.row_probability(broken) is None  # a hop without evidence: low whatever the model
    header = {"retrieval": {"final_k": 8, "rerank": False}}
    rows = (chain, broken, row("a1", True, cosine=0.5, keyword_share=0.75))
    write_outcomes(tmp_path / "outcomes.json", OutcomesFile(header, rows))
    assert read_outcomes(tmp_path / "outcomes.json").rows == rows


# -- the level, through the Searcher ------------------------------------------------------------


@dataclass(frozen=True)
class ModelBlock:
    high: float
    low: float
    fitted_for: str
    signal: str = "model"
    features: tuple[str, ...] = ("cosine", "keyword_share")
    weights: tuple[float, ...] = (2.0, 4.0)
    bias: float = -3.0
    extra: dict[str, object] = field(default_factory=dict[str, object])


def probability(cosine: float, keyword_share: float, block: ModelBlock) -> float:
    return 1.0 / (1.0 + math.exp(-(block.bias + block.weights[0] * cosine + block.weights[1] * keyword_share)))


def test_the_searcher_compares_the_models_probability(placed_kb: tuple[Path, VectorTableEmbedder]):
    index, embedder = placed_kb
    block = ModelBlock(high=0.9, low=0.6, fitted_for=f"{EMBEDDING} (evidence model, rerank off)")
    with Searcher(index, SearchSettings(rerank=False, confidence=block), embedder=embedder) as searcher:
        partial = searcher.search(QUERY).confidence
        full = searcher.search("alpha beta").confidence
    assert partial.features is not None and full.features is not None
    expected_partial = probability(1.0, partial.features["keyword_share"], block)  # 1 / (1 + e^-(-1 + 4 × 0.256)) = 0.505
    assert partial.signal == pytest.approx(expected_partial, abs=1e-5)
    assert partial.level == "low" and partial.scorer == f"model:{EMBEDDING}"
    assert full.signal == pytest.approx(probability(1.0, 1.0, block), abs=1e-5)  # e^3 / (1 + e^3) = 0.953
    assert full.level == "high"


def test_model_thresholds_are_unknown_where_they_are_no_calibration():
    features = {"cosine": 0.9, "keyword_share": 1.0}
    ours = ModelBlock(high=0.9, low=0.5, fitted_for=f"{EMBEDDING} (evidence model, rerank off)")

    def level(**overrides: object) -> str:
        arguments: dict[str, Any] = dict(passage_count=3, rerank_top=None, best_cosine=0.9, thresholds=ours,
                               reranker_model=None, embedding_model=EMBEDDING, features=features)
        arguments.update(overrides)
        return assess(**arguments).level

    assert level() == "high"
    assert level(thresholds=None) == "unknown"  # nobody calibrated this KB
    assert level(embedding_model="BAAI/bge-small-en-v1.5") == "unknown"  # fitted for another model
    assert level(rerank_top=3.2, reranker_model="BAAI/bge-reranker-base") == "unknown"  # fitted without rerank
    assert level(features=None) == "unknown"  # a keyword-only search has no evidence to weigh
    assert level(passage_count=0, features=None) == "low"


# -- the manifest -------------------------------------------------------------------------------

MANIFEST = ('[kb]\nname = "archive"\nid = "01M8P05RX7E8691VQVZ35N5HS3"\n[sources]\nroots = ["docs"]\n'
            '[embedding]\nprovider = "fastembed"\nmodel = "sentence-transformers/all-MiniLM-L6-v2"\ndim = 384\n')


def load(tmp_path: Path, block: str):
    path = tmp_path / "pinakes.toml"
    path.write_text(MANIFEST + block, encoding="utf-8")
    return load_manifest(path)


def test_a_fitted_block_round_trips_through_the_manifest(tmp_path: Path):
    fit = fit_confidence(separable_rows(), "minilm (evidence model, rerank off), golden (40 questions)",
                         features=("cosine", "keyword_share"))
    confidence = load(tmp_path, fit.manifest_block()).retrieval.confidence
    assert confidence is not None and fit.model is not None
    assert confidence.signal == "model"
    assert confidence.features == fit.model.features and confidence.weights == fit.model.weights
    assert (confidence.bias, confidence.high, confidence.low) == (fit.model.bias, fit.high, fit.low)
    # What the manifest holds scores a row exactly as the fit did.
    reread = SignalModel(confidence.features, confidence.weights, confidence.bias)
    assert [reread.probability(r.features) for r in separable_rows()] == \
        [fit.model.probability(r.features) for r in separable_rows()]


def test_an_old_block_without_a_signal_is_the_top_score(tmp_path: Path):
    confidence = load(tmp_path, '[retrieval.confidence]\nhigh = 0.6\nlow = 0.4\nfitted_for = "x"\n').retrieval.confidence
    assert confidence is not None and (confidence.signal, confidence.features, confidence.weights) == ("top-score", (), ())


@pytest.mark.parametrize(("block", "key", "fragment"), [
    ('signal = "model"\nfeatures = ["cosine", "vibes"]\nweights = [1.0, 2.0]\nbias = 0.0\n', "features",
     "vibes"),
    ('signal = "model"\nfeatures = ["cosine"]\nweights = [1.0, 2.0]\nbias = 0.0\n', "weights",
     "2 numbers for 1 features"),
    ('signal = "model"\nfeatures = ["cosine"]\nbias = 0.0\n', "weights", "is required"),
    ('signal = "model"\nfeatures = ["cosine"]\nweights = [1.0]\n', "bias", "is required"),
    ('signal = "model"\nfeatures = ["cosine"]\nweights = ["heavy"]\nbias = 0.0\n', "weights", "finite number"),
    ('signal = "cosine-ish"\n', "signal", "not one of"),
    ('features = ["cosine"]\nweights = [1.0]\n', "signal", "takes no features"),
    ('bias = 1.0\n', "bias", 'only read with signal = "model"'),
    ('signal = "model"\nfeatures = ["cosine"]\nweights = [1.0]\nbias = 0.0\nweight = 2\n', "weight",
     "unknown key"),
])
def test_the_manifest_refuses_a_malformed_model(tmp_path: Path, block: str, key: str, fragment: str):
    with pytest.raises(InvalidManifestError) as excinfo:
        load(tmp_path, f'[retrieval.confidence]\nhigh = 0.6\nlow = 0.4\nfitted_for = "x"\n{block}')
    messages = [f"{problem.key}: {problem.problem}" for problem in excinfo.value.problems]
    assert any(f"retrieval.confidence.{key}" in message and fragment in message for message in messages), messages


def test_crowding_needs_a_neighbour_among_the_candidates_and_the_top_passage_itself():
    import numpy as np

    from pinakes.search.signals import crowding_features
    from pinakes.search.vectors import VectorMatrix

    rows = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]], dtype=np.float32)
    matrix = VectorMatrix(rows, np.array([3, 5, 9], dtype=np.int64), np.zeros(3, dtype=np.int32), ("d",))
    query = np.array([1.0, 0.0], dtype=np.float32)
    # One candidate, the top passage alone: no neighbourhood to measure.
    assert crowding_features(matrix, query, [(3, 1.0)], 3) == {"crowding": 0.0, "csls": 0.0}
    # A top passage the matrix does not hold (a chunk indexed after the matrix was read).
    assert crowding_features(matrix, query, [(3, 1.0), (5, 0.6)], 4) == {"crowding": 0.0, "csls": 0.0}
    measured = crowding_features(matrix, query, [(3, 1.0), (5, 0.6)], 3)
    assert measured["crowding"] == pytest.approx(0.6)
    assert measured["csls"] == pytest.approx(2 * 1.0 - (1.0 + 0.6) / 2 - 0.6)
    # The top passage need not lead the vector list (fusion may rank another first).
    assert crowding_features(matrix, query, [(3, 1.0), (5, 0.6), (9, 0.1)], 5)["crowding"] == pytest.approx((0.6 + 0.8) / 2)
