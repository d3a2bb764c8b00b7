"""Confidence: thresholds map a signal to high/medium/low; without them, `unknown` (spec §4.2)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from pinakes.lexical.filters import make_filters
from pinakes.search.confidence import assess
from pinakes.search.core import Searcher, SearchSettings
from tests.fakes import HashEmbedder
from tests.kb_helpers import build_kb, build_search_kb, searchable

RERANKER = "BAAI/bge-reranker-base"
EMBEDDING = "sentence-transformers/all-MiniLM-L6-v2"


@dataclass(frozen=True)
class Thresholds:
    high: float
    low: float
    fitted_for: str


RERANK_FIT = Thresholds(high=0.8, low=0.3, fitted_for="all-MiniLM-L6-v2 + bge-reranker-base, demo golden set")
COSINE_FIT = Thresholds(high=0.6, low=0.35, fitted_for="all-MiniLM-L6-v2, demo golden set")


def level(**overrides: Any) -> str:
    arguments: dict[str, Any] = dict(passage_count=3, rerank_top=None, best_cosine=None, thresholds=None,
                                     reranker_model=RERANKER, embedding_model=EMBEDDING)
    arguments.update(overrides)
    return assess(**arguments).level


@pytest.mark.parametrize(("signal", "expected"), [
    (0.95, "high"), (0.8, "high"), (0.79, "medium"), (0.3, "medium"), (0.29, "low"), (0.0, "low"),
])
def test_rerank_signal_against_thresholds(signal: float, expected: str):
    assert level(rerank_top=signal, thresholds=RERANK_FIT) == expected


@pytest.mark.parametrize(("cosine", "expected"), [(0.7, "high"), (0.5, "medium"), (0.2, "low")])
def test_cosine_signal_against_thresholds_fitted_without_rerank(cosine: float, expected: str):
    assert level(best_cosine=cosine, thresholds=COSINE_FIT, reranker_model=None) == expected


@pytest.mark.parametrize("cosine", [0.2, 0.3499, 0.35, 0.5, 0.9])
def test_medium_exists_only_where_the_fit_has_a_band(cosine: float):
    """A fit whose low equals its high has no band: every search is high or low, never medium, and
    the reason says why; the same signal under a fit with a band may be medium."""
    one_threshold = Thresholds(high=0.35, low=0.35, fitted_for="all-MiniLM-L6-v2, demo golden set")
    confidence = assess(passage_count=3, rerank_top=None, best_cosine=cosine, thresholds=one_threshold,
                        reranker_model=None, embedding_model=EMBEDDING)
    assert confidence.level == ("high" if cosine >= 0.35 else "low")
    assert "low = high: this fit has no medium band" in confidence.reason
    banded = level(best_cosine=cosine, thresholds=COSINE_FIT, reranker_model=None)
    assert banded == ("medium" if 0.35 <= cosine < 0.6 else "high" if cosine >= 0.6 else "low")


def test_no_thresholds_is_unknown_with_the_signal_still_reported():
    confidence = assess(passage_count=3, rerank_top=0.99, best_cosine=None, thresholds=None,
                        reranker_model=RERANKER, embedding_model=EMBEDDING)
    assert confidence.level == "unknown"
    assert confidence.signal == 0.99 and confidence.scorer == f"rerank:{RERANKER}"
    assert "[retrieval.confidence]" in confidence.reason


def test_thresholds_fitted_for_another_scorer_are_not_applied():
    # Rerank thresholds, but this search did not rerank: a cosine is not a cross-encoder score.
    assert level(best_cosine=0.99, thresholds=RERANK_FIT) == "unknown"
    # Cosine thresholds, but this search reranked.
    assert level(rerank_top=0.99, thresholds=COSINE_FIT) == "unknown"
    # Thresholds fitted for another reranker model.
    assert level(rerank_top=0.99, thresholds=RERANK_FIT, reranker_model="jinaai/jina-reranker-v1-tiny-en") \
        == "unknown"
    # Cosine thresholds fitted for another embedding model.
    assert level(best_cosine=0.99, thresholds=COSINE_FIT, reranker_model=None,
                 embedding_model="BAAI/bge-small-en-v1.5") == "unknown"


def test_keyword_only_without_rerank_has_no_calibrated_signal():
    assert level(thresholds=RERANK_FIT) == "unknown"


def test_nothing_retrieved_is_low():
    assert level(passage_count=0, thresholds=None) == "low"


# -- through the Searcher -----------------------------------------------------------------------


class ConstantReranker:
    model = RERANKER

    def __init__(self, value: float):
        self.value = value

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        return [self.value - 0.01 * index for index in range(len(texts))]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, HashEmbedder]:
    embedder = HashEmbedder()
    return build_search_kb(tmp_path_factory.mktemp("confidence") / "kb", embedder), embedder


@pytest.mark.parametrize(("top", "expected"), [(0.9, "high"), (0.5, "medium"), (0.1, "low")])
def test_search_reports_the_rerank_level_and_suggests_only_when_weak(
    index: tuple[Path, HashEmbedder], top: float, expected: str
):
    path, embedder = index
    settings = SearchSettings(rerank=True, confidence=RERANK_FIT)
    with Searcher(path, settings, embedder=embedder, reranker=ConstantReranker(top)) as searcher:
        result = searcher.search("replication copies")
    assert result.confidence.level == expected
    assert result.confidence.signal == pytest.approx(top)
    assert (result.suggested_next is None) == (expected in ("high", "medium"))


def test_uncalibrated_search_is_unknown_and_suggests_a_next_search(index: tuple[Path, HashEmbedder]):
    path, embedder = index
    with Searcher(path, SearchSettings(rerank=False), embedder=embedder) as searcher:
        result = searcher.search("replication copies")
    assert result.confidence.level == "unknown"
    assert result.suggested_next is not None
    assert result.suggested_next.query.startswith("replication copies ")


def test_suggestion_drops_words_the_index_never_saw(index: tuple[Path, HashEmbedder]):
    path, embedder = index
    with Searcher(path, SearchSettings(rerank=False), embedder=embedder) as searcher:
        result = searcher.search("zarquon kafka replication")
    assert result.suggested_next is not None
    assert result.suggested_next.query == "kafka replication"
    assert "zarquon" in result.suggested_next.reason


def test_suggestion_without_an_unknown_word_reads_as_a_phrase(index: tuple[Path, HashEmbedder]):
    """Issue #40: "what is the X for the base" was suggested as "what is the for the base"."""
    path, embedder = index
    with Searcher(path, SearchSettings(rerank=False), embedder=embedder) as searcher:
        result = searcher.search("what is the zarquon for the kafka replication")
    assert result.suggested_next is not None
    assert result.suggested_next.query == "kafka replication"


def test_suggestions_from_real_questions_keep_every_content_word_and_no_dangling_one():
    """The demo KB's 85 golden questions, each with a word the index never saw put in three places:
    what is suggested starts and ends with a content word, keeps every content word of the question in
    order, and joins them by no function word that joined the dropped one."""
    from ruamel.yaml import YAML

    from pinakes.lexical.tokenizer import FUNCTION_WORDS, split_words
    from pinakes.search.suggest import without_words
    from tests.conftest import REPO_ROOT

    golden = cast(dict[str, Any], YAML(typ="safe", pure=True).load((REPO_ROOT / "tests/demo-kb/eval/questions.yaml").read_text(encoding="utf-8")))
    queries = [question["query"] for question in golden["questions"]]
    assert len(queries) >= 80
    for query in queries:
        words = split_words(query)
        content = [word for word in words if word.lower() not in FUNCTION_WORDS]
        for where in (0, len(words) // 2, len(words)):
            suggested = without_words(" ".join([*words[:where], "zarquon", *words[where:]]), {"zarquon"})
            shown = suggested.split()
            assert [word for word in shown if word.lower() not in FUNCTION_WORDS] == content, (query, suggested)
            if shown:
                assert shown[0].lower() not in FUNCTION_WORDS and shown[-1].lower() not in FUNCTION_WORDS, suggested
            assert "the for" not in suggested.lower() and "of the of" not in suggested.lower()


def test_suggestion_widens_a_filtered_search(index: tuple[Path, HashEmbedder]):
    path, embedder = index
    with Searcher(path, SearchSettings(rerank=False), embedder=embedder) as searcher:
        result = searcher.search("kafka replication", filters=make_filters(tags=["home"]))
    assert result.suggested_next is not None
    assert result.suggested_next.filters == {}


class ParaphraseEmbedder(HashEmbedder):
    """Every text and query points the same way: all are paraphrases of each other."""

    def _vector(self, text: str) -> np.ndarray:
        vector = np.zeros(self.identity.dim, dtype=np.float32)
        vector[0] = 1.0
        return vector


def test_coverage_is_a_tiebreak_and_never_removes_a_paraphrase(tmp_path: Path):
    embedder = ParaphraseEmbedder()
    index = build_kb(tmp_path / "kb", searchable({
        "a-paraphrase.md": "Copies of every partition live on several machines.\n",
        "b-literal.md": "Kafka replication.\n",
    }), embedder)
    with Searcher(index, SearchSettings(rerank=False), embedder=embedder) as searcher:
        result = searcher.search("kafka replication", mode="vector")
    # Equal cosines, so equal fused scores: coverage puts the literal match first ...
    assert [p.path for p in result.passages] == ["docs/b-literal.md", "docs/a-paraphrase.md"]
    # ... and the paraphrase sharing no query word is still returned.
    assert [p.scores.coverage for p in result.passages] == [1.0, 0.0]
