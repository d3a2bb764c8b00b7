"""A passage's shown title, tags and headings (search/passages.py) against a plain statement of them.

`to_passage` keeps what it shows of a row's stored JSON in small caches (the same documents come
back search after search: #45); a passage made from a cached answer must be the one made from
decoding the row, for every kind of stored value, the first time and every time after.
"""

from __future__ import annotations

import json
from typing import cast

from pinakes.extract.titles import display_title
from pinakes.lexical.filters import document_tags
from pinakes.search.fusion import Candidate
from pinakes.search.passages import ChunkRow, to_passage
from pinakes.search.results import shown_headings


def shown_by_rule(row: ChunkRow) -> tuple[str, tuple[str, ...], tuple[str, ...] | None]:
    def parsed(value: str | None) -> object:
        try:
            return json.loads(value) if value else None
        except ValueError:
            return None

    metadata = parsed(row["metadata"])
    fields = cast("dict[str, object]", metadata) if isinstance(metadata, dict) else {}
    declared = fields.get("title")
    title = display_title(row["title"] or (declared if isinstance(declared, str) else None), row["path"])
    return title, tuple(document_tags(fields)), shown_headings(parsed(row["heading_path"]))


def row(chunk_id: int, *, title: str | None, metadata: str | None, heading_path: str | None,
        path: str = "docs/a/b.md") -> ChunkRow:
    return ChunkRow(id=chunk_id, doc_id=f"d{chunk_id}", ordinal=0, text="t", char_start=0, char_end=1,
                    heading_path=heading_path, page_start=None, page_end=None, path=path, title=title,
                    metadata=metadata, source_type="markdown")


def test_a_passage_shows_what_its_row_holds_cached_or_not() -> None:
    metadata = [None, "", "not json", "[1, 2]", '{"title": "Declared"}', '{"title": 7, "tags": ["x", "y", "x"]}',
                '{"tags": "one", "front_matter_tags": ["two", "one"]}', '{"title": null, "tags": []}']
    headings = [None, "", "not json", '"a string"', '["Top"]', '["A", "B", "C", "D", "E", "F", "G", "H", "I", "J"]',
                json.dumps(["x" * 500, "y"])]
    rows = [row(number, title=title, metadata=stored, heading_path=heading, path=path)
            for number, (title, stored, heading, path) in enumerate(
                (title, stored, heading, path) for title in (None, "", "Stored") for stored in metadata
                for heading in headings for path in ("docs/a/b.md", "top.txt"))]
    for _ in range(2):  # the second round from the caches
        for each in rows:
            passage = to_passage(Candidate(each["id"], bm25_rank=1, bm25_score=1.5), each, {})
            assert (passage.title, passage.tags, passage.heading_path) == shown_by_rule(each), each


def test_a_huge_stored_text_is_shown_right_and_never_kept_by_the_caches() -> None:
    """A cache keeps its keys alive: a server meeting documents of huge metadata or heading paths would
    hold ~1,000 of them. Past SHOWN_CACHE_CHARS they are decoded every time, shown the same."""
    from pinakes.search import passages

    huge_metadata = json.dumps({"title": "Big", "tags": ["a"], "notes": "n" * 3 * passages.SHOWN_CACHE_CHARS})
    huge_headings = json.dumps(["h" * 3 * passages.SHOWN_CACHE_CHARS, "Section"])
    passages._document_shown_cached.cache_clear()  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose
    passages._headings_shown_cached.cache_clear()  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose
    for number in range(3):
        each = row(10_000 + number, title=None, metadata=huge_metadata + " " * number,
                   heading_path=huge_headings + " " * number)
        passage = to_passage(Candidate(each["id"], bm25_rank=1, bm25_score=1.5), each, {})
        assert (passage.title, passage.tags, passage.heading_path) == shown_by_rule(each)
    assert (passages._document_shown_cached.cache_info().currsize,  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose
            passages._headings_shown_cached.cache_info().currsize) == (0, 0)  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose
    small = row(20_000, title=None, metadata='{"title": "Small"}', heading_path='["Top"]')
    to_passage(Candidate(small["id"], bm25_rank=1, bm25_score=1.5), small, {})
    assert (passages._document_shown_cached.cache_info().currsize,  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose
            passages._headings_shown_cached.cache_info().currsize) == (1, 1)  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose
