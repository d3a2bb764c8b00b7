"""The pipeline's stages: vectors, fusion, rerank, citations, widths, and the result's shape."""

from __future__ import annotations

import json
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import pytest

from pinakes.errors import ModelUnavailableError, UsageError
from pinakes.index.citations import citation, with_heading
from pinakes.manifest.sections import RerankSection
from pinakes.search.core import MAX_FINAL_K, Searcher, SearchSettings
from pinakes.search.fusion import Candidate, cut_with_ties, order_fused, reciprocal_rank_fusion
from pinakes.search.rerank import load_reranker
from pinakes.search.vectors import VectorMatrix, vector_search
from tests.fakes import HashEmbedder, VectorTableEmbedder
from tests.kb_helpers import (
    KAFKA_HEADING_CHUNK,
    SEARCH_CORPUS_CHUNKS,
    build_kb,
    build_search_kb,
    searchable,
)


@pytest.fixture
def embedder() -> HashEmbedder:
    return HashEmbedder()


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The search corpus, synced once; the tests here only read it."""
    return build_search_kb(tmp_path_factory.mktemp("pipeline") / "kb", HashEmbedder())


@pytest.fixture
def searcher(index: Path, embedder: HashEmbedder) -> Generator[Searcher, None, None]:
    with Searcher(index, SearchSettings(rerank=False), embedder=embedder) as searcher:
        yield searcher


# -- vectors ------------------------------------------------------------------------------------


def test_vector_search_drops_non_positive_cosines_instead_of_padding(tmp_path: Path) -> None:
    placed = {"same": [1.0, 0.0, 0.0], "close": [0.6, 0.8, 0.0], "orthogonal": [0.0, 1.0, 0.0],
              "opposite": [-1.0, 0.0, 0.0]}
    embedder = VectorTableEmbedder(placed, query=[1.0, 0.0, 0.0])
    index = build_kb(tmp_path / "kb", searchable({f"{word}.md": f"{word}\n" for word in placed}), embedder)
    assert sorted(embedder.embedded_chunks) == sorted(placed)  # every chunk got its placed vector
    with Searcher(index, SearchSettings(rerank=False, final_k=10), embedder=embedder) as searcher:
        result = searcher.search("anything", mode="vector")
    assert [(p.path, p.scores.cosine) for p in result.passages] == [("docs/same.md", 1.0), ("docs/close.md", 0.6)]
    assert [p.scores.vector_rank for p in result.passages] == [1, 2]


def test_vector_search_respects_the_mask_and_the_limit() -> None:
    matrix = VectorMatrix(
        vectors=np.eye(4, dtype=np.float32) * 0.5 + 0.5 / np.sqrt(4),
        chunk_ids=np.array([10, 11, 12, 13], dtype=np.int64),
        doc_rows=np.array([0, 0, 1, 1], dtype=np.int32),
        documents=("a", "b"),
    )
    query = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)
    assert [chunk for chunk, _ in vector_search(matrix, query, 2)] == [10, 11]
    masked = vector_search(matrix, query, 4, mask=np.array([False, False, True, True]))
    assert [chunk for chunk, _ in masked] == [12, 13]


def test_the_matrix_holds_only_active_chunks_in_one_contiguous_array(searcher: Searcher) -> None:
    searcher.search("kafka", mode="vector")
    assert searcher._generation is not None  # pyright: ignore[reportPrivateUsage] -- the test pins it
    matrix = searcher._generation.matrix  # pyright: ignore[reportPrivateUsage] -- the test pins it
    assert matrix is not None
    assert matrix.vectors.flags["C_CONTIGUOUS"] and matrix.vectors.dtype == np.float32
    assert len(matrix) == SEARCH_CORPUS_CHUNKS  # kafka, postgres, garden, retry, annual; legacy is deleted


# -- fusion ---------------------------------------------------------------------------------------


def test_rrf_sums_reciprocal_ranks_from_one() -> None:
    fused = reciprocal_rank_fusion([(1, 9.0), (2, 8.0)], [(2, 0.9), (3, 0.8)], k=60)
    scores = {candidate.chunk_id: candidate.rrf for candidate in fused}
    assert scores == pytest.approx({1: 1 / 61, 2: 1 / 62 + 1 / 61, 3: 1 / 62})
    assert [candidate.chunk_id for candidate in fused] == [2, 1, 3]
    two = next(candidate for candidate in fused if candidate.chunk_id == 2)
    assert (two.bm25_rank, two.vector_rank, two.bm25_score, two.cosine) == (2, 1, 8.0, 0.9)


def test_equal_scores_share_a_rank() -> None:
    fused = reciprocal_rank_fusion([], [(5, 0.9), (6, 0.7), (7, 0.7), (8, 0.1)], k=60)
    assert {c.chunk_id: c.vector_rank for c in fused} == {5: 1, 6: 2, 7: 2, 8: 4}
    assert fused[1].rrf == fused[2].rrf


def test_rrf_k_changes_the_weight_of_rank() -> None:
    fused = reciprocal_rank_fusion([(1, 1.0)], [], k=0)
    assert fused[0].rrf == 1.0


def test_cut_with_ties_keeps_every_candidate_tied_with_the_last() -> None:
    ranked = [Candidate(i, rrf=score) for i, score in enumerate([0.5, 0.4, 0.3, 0.3, 0.3, 0.1])]
    assert [c.chunk_id for c in cut_with_ties(ranked, 3)] == [0, 1, 2, 3, 4]
    assert [c.chunk_id for c in cut_with_ties(ranked, 2)] == [0, 1]


def test_coverage_breaks_exact_ties_and_nothing_else() -> None:
    ranked = [
        Candidate(1, rrf=0.5, coverage=0.0),
        Candidate(2, rrf=0.4, coverage=0.0),
        Candidate(3, rrf=0.4, coverage=1.0),
    ]
    assert [c.chunk_id for c in order_fused(ranked)] == [1, 3, 2]


def test_hybrid_fuses_both_lists(searcher: Searcher) -> None:
    result = searcher.search("kafka replication brokers")
    top = result.passages[0]
    assert top.path == "docs/kafka.md"
    assert top.scores.bm25_rank == 1 and top.scores.vector_rank is not None
    assert top.scores.rrf == pytest.approx(1 / 61 + 1 / (60 + top.scores.vector_rank), abs=1e-6)


# -- rerank ---------------------------------------------------------------------------------------


class LengthReranker:
    """Scores shorter passages higher, so its order visibly differs from the fused one."""

    model = "test/length-reranker"

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        self.calls.append((query, list(texts)))
        return [1.0 / (1.0 + len(text)) for text in texts]


def test_rerank_reorders_the_fused_pool_and_cuts_to_final_k(index: Path, embedder: HashEmbedder) -> None:
    reranker = LengthReranker()
    settings = SearchSettings(rerank=True, fusion_top_k=20, final_k=2)
    with Searcher(index, settings, embedder=embedder, reranker=reranker) as searcher:
        result = searcher.search("kafka brokers quarter revenue")
    query, pool = reranker.calls[0]
    assert query == "kafka brokers quarter revenue"
    shortest = sorted(pool, key=len)[:2]
    assert [passage.text for passage in result.passages] == shortest
    assert result.reranked and "rerank" in result.timings
    assert all(passage.scores.rerank is not None for passage in result.passages)


def test_rerank_false_for_one_call_skips_the_reranker(index: Path, embedder: HashEmbedder) -> None:
    reranker = LengthReranker()
    with Searcher(index, SearchSettings(rerank=True), embedder=embedder,
                  reranker=reranker) as searcher:
        result = searcher.search("kafka", rerank=False)
    assert reranker.calls == [] and not result.reranked
    assert any("rerank off" in note for note in result.notes)


def test_rerank_without_a_reranker_is_an_error_not_a_silent_skip(index: Path, embedder: HashEmbedder) -> None:
    with (Searcher(index, SearchSettings(rerank=True), embedder=embedder) as searcher,
          pytest.raises(ModelUnavailableError) as caught):
        searcher.search("kafka")
    assert "rerank = false" in (caught.value.remedy or "")


def rerank_section(provider: str) -> RerankSection:
    return RerankSection(provider, model="BAAI/bge-reranker-base", revision=None, batch_size=16)


def test_missing_reranker_weights_raise_model_unavailable_offline() -> None:
    """The HF cache is an empty per-test directory (conftest), so the weights cannot be there."""
    with pytest.raises(ModelUnavailableError) as caught:
        load_reranker(rerank_section("fastembed"), offline=True)
    message, remedy = caught.value.message, caught.value.remedy or ""
    assert "BAAI/bge-reranker-base" in message and "offline" in message
    assert "rerank = false" in remedy and "--no-rerank" in remedy


def test_unknown_rerank_provider_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        load_reranker(rerank_section("nonsense"), offline=True)


# -- citations and passages ---------------------------------------------------------------------


def test_citation_forms() -> None:
    assert citation("docs/a.md", 12, 480, None, None) == "docs/a.md:12-480"
    assert citation("r.pdf", 0, 10, 12, 12) == "r.pdf:p12"
    assert citation("r.pdf", 0, 10, 12, None) == "r.pdf:p12"
    assert citation("r.pdf", 0, 10, 12, 13) == "r.pdf:p12-13"
    assert with_heading("docs/a.md:1-2", ["A", "B"]) == "docs/a.md:1-2 (A > B)"
    assert with_heading("docs/a.md:1-2", None) == "docs/a.md:1-2"


def test_passages_carry_citations_pages_and_metadata(searcher: Searcher) -> None:
    result = searcher.search("kafka partition brokers revenue quarter", mode="bm25", final_k=10)
    by_text = {passage.text: passage for passage in result.passages}
    heading_chunk = KAFKA_HEADING_CHUNK
    kafka = by_text[heading_chunk]
    assert kafka.citation == f"docs/kafka.md:0-{len(heading_chunk)}"
    assert (kafka.char_start, kafka.char_end, kafka.page_start) == (0, len(heading_chunk), None)
    assert kafka.heading_path == ("Kafka",) and kafka.title == "Kafka"
    assert kafka.tags == ("streaming", "ops") and kafka.source_type == "markdown"
    single = by_text["Revenue grew strongly in the third quarter."]
    (spanning,) = [passage for passage in result.passages if passage.text.startswith("Cloud hosting costs")]
    assert spanning.text.endswith("across the quarter boundary.")  # page 3's line, then page 4's
    assert single.citation == "reports/annual.pdf:p2" and (single.page_start, single.page_end) == (2, 2)
    assert spanning.citation == "reports/annual.pdf:p3-4" and spanning.heading_path is None


def test_result_to_dict_is_json_with_every_field(searcher: Searcher) -> None:
    payload: dict[str, Any] = json.loads(json.dumps(searcher.search("kafka replication").to_dict()))
    passage = payload["passages"][0]
    assert set(passage) >= {"text", "citation", "path", "doc_id", "title", "tags", "heading_path",
                            "page_start", "page_end", "char_start", "char_end", "scores", "stale_extraction"}
    assert set(passage["scores"]) == {"bm25_rank", "bm25_score", "vector_rank", "cosine", "rrf", "rerank",
                                      "coverage", "graph_rank"}
    assert payload["confidence"]["level"] == "unknown"
    assert "total" in payload["timings_ms"]


# -- widths and arguments -------------------------------------------------------------------------


def test_final_k_limits_passages_and_is_clamped(searcher: Searcher) -> None:
    assert len(searcher.search("kafka brokers revenue tomatoes", final_k=1).passages) == 1
    result = searcher.search("kafka", final_k=MAX_FINAL_K + 50)
    assert any(f"at most {MAX_FINAL_K}" in note for note in result.notes)


@pytest.mark.parametrize("bad", [0, -3, True, 2.5, "8"])
def test_bad_final_k_is_a_usage_error(searcher: Searcher, bad: Any) -> None:
    with pytest.raises(UsageError):
        searcher.search("kafka", final_k=bad)


@pytest.mark.parametrize("query", ["", "   ", "\n\t"])
def test_empty_query_is_a_usage_error(searcher: Searcher, query: str) -> None:
    with pytest.raises(UsageError, match="empty"):
        searcher.search(query)


def test_unknown_mode_is_a_usage_error(searcher: Searcher) -> None:
    with pytest.raises(UsageError, match="mode"):
        searcher.search("kafka", mode="semantic")


def test_bm25_mode_never_loads_an_embedder(index: Path) -> None:
    def refuse() -> NoReturn:
        raise AssertionError("bm25 mode loaded the embedding model")

    with Searcher(index, SearchSettings(rerank=False), embedder_loader=refuse) as searcher:
        assert searcher.search("kafka", mode="bm25").passages


def test_vector_mode_without_an_embedder_is_a_usage_error(index: Path) -> None:
    with (Searcher(index, SearchSettings(rerank=False)) as searcher,
          pytest.raises(UsageError, match="embedding model")):
        searcher.search("kafka", mode="vector")


def test_a_search_the_vector_side_cannot_answer_still_answers_by_keyword(tmp_path: Path) -> None:
    """Every stored vector points away from the query (a sync embeds every chunk, so an index
    without vectors is not a state the product writes): hybrid falls back on the keyword side."""
    embedder = VectorTableEmbedder({"kafka brokers": [1.0, 0.0], "tomatoes": [0.0, 1.0]}, query=[-1.0, 0.0])
    index = build_kb(tmp_path / "kb", searchable({"a.md": "kafka brokers\n", "b.md": "tomatoes\n"}), embedder)
    with Searcher(index, SearchSettings(rerank=False), embedder=embedder) as searcher:
        assert searcher.search("kafka", mode="vector").passages == ()
        result = searcher.search("kafka")
    assert [passage.path for passage in result.passages] == ["docs/a.md"]
    assert result.passages[0].scores.vector_rank is None


def test_importing_search_and_its_cli_loads_no_numpy_or_model() -> None:
    """`pnk --help` and an MCP server's start must not pay for numpy or a model library."""
    import subprocess
    import sys

    probe = ("import sys, pinakes.search, pinakes.cli.cmd_search; "
             "print(sorted(m for m in ('numpy', 'torch', 'fastembed', 'sentence_transformers') if m in sys.modules))")
    completed = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert completed.stdout.strip() == "[]"
