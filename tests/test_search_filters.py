"""Filters are a SQL WHERE applied before both retrievers; bad values are UsageErrors."""

from __future__ import annotations

from collections.abc import Generator
from datetime import date, datetime, time
from pathlib import Path
from typing import Any

import pytest

from pinakes.errors import UsageError
from pinakes.lexical.filters import SearchFilters, document_where, make_filters, parse_time_bound
from pinakes.search.core import Searcher, SearchSettings
from pinakes.search.results import SearchResult
from tests.fakes import HashEmbedder
from tests.kb_helpers import JAN_10_2026, Doc, build_kb, build_search_kb

# Words spread over every document of the corpus, so an unfiltered search returns all of them.
BROAD_QUERY = "kafka replication postgres vacuum tomatoes retry backoff revenue brokers"


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_search_kb(tmp_path_factory.mktemp("filters") / "kb", HashEmbedder())


@pytest.fixture
def searcher(index: Path) -> Generator[Searcher, None, None]:
    with Searcher(index, SearchSettings(rerank=False, final_k=20), embedder=HashEmbedder()) as searcher:
        yield searcher


def paths(result: SearchResult) -> set[str]:
    return {passage.path for passage in result.passages}


@pytest.mark.parametrize("mode", ["bm25", "vector"])
def test_unfiltered_search_reaches_every_active_document(searcher: Searcher, mode: str) -> None:
    assert paths(searcher.search(BROAD_QUERY, mode=mode)) == {
        "docs/kafka.md", "docs/postgres.md", "notes/garden.txt", "src/retry.py", "reports/annual.pdf"}


@pytest.mark.parametrize("mode", ["bm25", "vector", "hybrid"])
@pytest.mark.parametrize(("filters", "expected"), [
    ({"tags": ["database"]}, {"docs/postgres.md"}),
    ({"tags": ["database", "home"]}, {"docs/postgres.md", "notes/garden.txt"}),
    ({"tags": ["ops", "streaming"], "all_tags": True}, {"docs/kafka.md"}),
    ({"tags": ["ops", "database"], "all_tags": True}, {"docs/postgres.md"}),
    ({"path_prefix": "docs/"}, {"docs/kafka.md", "docs/postgres.md"}),
    ({"path_prefix": "./src/retry"}, {"src/retry.py"}),
    ({"source_types": ["code"]}, {"src/retry.py"}),
    ({"source_types": ["pdf", "text"]}, {"reports/annual.pdf", "notes/garden.txt"}),
    ({"since": JAN_10_2026 + 5 * 86_400}, {"docs/postgres.md", "src/retry.py", "reports/annual.pdf"}),
    ({"until": JAN_10_2026 + 1}, {"docs/kafka.md", "notes/garden.txt"}),
    ({"since": JAN_10_2026 + 5 * 86_400, "until": JAN_10_2026 + 15 * 86_400}, {"src/retry.py"}),
    ({"tags": ["nosuchtag"]}, set[str]()),
])
def test_filters_narrow_every_retriever(searcher: Searcher, mode: str, filters: dict[str, Any],
                                        expected: set[str]) -> None:
    result = searcher.search(BROAD_QUERY, mode=mode, filters=make_filters(**filters))
    assert paths(result) == expected


def test_a_deleted_document_is_never_returned_even_when_it_matches_best(searcher: Searcher) -> None:
    for mode in ("bm25", "vector", "hybrid"):
        assert "docs/legacy.md" not in paths(searcher.search("kafka legacy zookeeper notes", mode=mode))
        assert "docs/legacy.md" not in paths(
            searcher.search("kafka legacy zookeeper", mode=mode, filters=make_filters(tags=["streaming"])))


def test_a_filter_is_applied_before_the_top_k_cut(tmp_path: Path) -> None:
    """Ranking first and filtering after would leave nothing: the tagged document ranks last."""
    docs = [Doc(f"docs/d{i}.md", "alpha alpha alpha alpha\n") for i in range(30)]
    docs.append(Doc("docs/wanted.md", "alpha and a great deal of other text that dilutes it\n", tags=["keep"]))
    embedder = HashEmbedder()
    index = build_kb(tmp_path / "kb", docs, embedder)
    settings = SearchSettings(rerank=False, candidates_per_source=5, fusion_top_k=5, final_k=5)
    with Searcher(index, settings, embedder=embedder) as searcher:
        for mode in ("bm25", "vector"):
            assert "docs/wanted.md" not in paths(searcher.search("alpha", mode=mode))  # ranks below the cut
            result = searcher.search("alpha", mode=mode, filters=make_filters(tags=["keep"]))
            assert paths(result) == {"docs/wanted.md"}


def test_iso_dates_mean_local_calendar_days() -> None:
    start = parse_time_bound("2026-03-01", "since", end_of_day=False)
    end = parse_time_bound("2026-03-01", "until", end_of_day=True)
    assert start == datetime.combine(date(2026, 3, 1), time.min).astimezone().timestamp()
    assert end - start in (86_400, 82_800, 90_000)  # a day, or a DST day
    assert parse_time_bound("2026-03-01T12:00:00+00:00", "since", end_of_day=False) == 1_772_366_400.0
    assert parse_time_bound("2026-03-01T12:00:00Z", "since", end_of_day=False) == 1_772_366_400.0


@pytest.mark.parametrize(("kwargs", "fragment"), [
    ({"source_types": ["xlsx"]}, "unknown source type"),
    ({"source_types": "Markdown2"}, "unknown source type"),
    ({"since": "yesterday"}, "not an ISO date"),
    ({"until": "2026-13-45"}, "not an ISO date"),
    ({"since": "2026-05-01", "until": "2026-04-01"}, "date range is empty"),
    ({"tags": [""]}, "tag filter"),
    ({"tags": []  , "all_tags": True}, "--all-tags"),
    ({"path_prefix": "/etc/passwd"}, "absolute"),
    ({"path_prefix": "  "}, "path filter"),
])
def test_bad_filter_values_are_usage_errors(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(UsageError) as caught:
        make_filters(**kwargs)
    assert fragment in caught.value.message
    assert caught.value.remedy


def test_source_types_and_tags_are_normalised() -> None:
    filters = make_filters(source_types=["PDF", "pdf", " code "], tags=[" ops ", "ops"])
    assert filters.source_types == ("pdf", "code")
    assert filters.tags == ("ops",)


def test_a_filter_that_only_leaves_out_allows_the_rows_the_documents_query_allows(searcher: Searcher) -> None:
    # vector_tier.allowed_rows answers a leave-out-only filter from the matrix (it holds the active
    # documents only) instead of asking the documents table: the same mask as asking it.
    from pinakes.search import vector_tier, vectors

    with searcher.snapshot() as generation:
        matrix = vector_tier.full_matrix(generation, searcher.index_path)
        every = [str(row[0]) for row in generation.conn.execute("SELECT id FROM documents ORDER BY path")]
        inactive = [str(row[0]) for row in generation.conn.execute("SELECT id FROM documents WHERE state != 'active'")]
        assert inactive and len(every) > 3  # the deleted document is among those left out below
        for left_out in ([every[0]], every[1:3], [*inactive, every[-1]], ["no-such-document"], every):
            filters = SearchFilters(exclude_doc_ids=tuple(left_out))
            where, params = document_where(filters, "d")
            asked = {row[0] for row in generation.conn.execute(f"SELECT d.id FROM documents d WHERE {where}", params)}
            mask = vector_tier.allowed_rows(generation, matrix, filters)
            assert mask is not None and mask.tolist() == vectors.row_mask(matrix, asked).tolist()
