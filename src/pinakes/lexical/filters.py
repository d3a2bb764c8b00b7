"""Metadata filters, compiled to one SQL WHERE over `documents` that both retrievers apply.

The filter narrows the candidate documents *before* BM25 and vector search run, never after: a
filter applied to ranked rows drops good rows off the end of a top-k before anything looked at
them. Every filter is validated here, so a bad value is a `UsageError` and never a SQL error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import cast

from pinakes.errors import UsageError

SOURCE_TYPES = ("markdown", "text", "code", "pdf", "html", "epub", "docx", "odt", "image")  # extract.source_types's
# The keys of documents.metadata that hold a document's tags: its sidecar's, then the ones its front
# matter declares (docs/SIDECAR.md, "Tags in front matter"). A tag filter matches either.
TAG_KEYS = ("tags", "front_matter_tags")


def document_tags(metadata: Mapping[str, object]) -> list[str]:
    """A document's tags: the union of its sidecar's and its front matter's, each once, the
    sidecar's first."""
    tags: dict[str, None] = {}
    for key in TAG_KEYS:
        value = metadata.get(key)
        if not value:
            continue
        if isinstance(value, str):
            tags[value] = None
        elif isinstance(value, list):
            tags.update((str(tag), None) for tag in cast("list[object]", value))  # parsed JSON
    return list(tags)


@dataclass(frozen=True)
class SearchFilters:
    """What a search may return. Empty fields filter nothing.

    `tags` match any of them unless `all_tags`; `path_prefix` is a plain string prefix of the
    KB-relative POSIX path (`docs/api/` or `docs/api/auth.md`); `since`/`until` bound the
    document's mtime (seconds since the epoch, `since` inclusive, `until` exclusive).
    """

    tags: tuple[str, ...] = ()
    all_tags: bool = False
    path_prefix: str | None = None
    since: float | None = None
    until: float | None = None
    source_types: tuple[str, ...] = ()
    # Only these documents (ids, not a user-facing filter): `pnk links --query` ranks a document's
    # neighbours with the one search pipeline by restricting it to them.
    doc_ids: tuple[str, ...] = ()
    # Never these documents (ids, not a user-facing filter): self-calibration asks a question made
    # from a document with that document and its near-duplicates left out (calibration/questions.py).
    exclude_doc_ids: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        return bool(
            self.tags or self.path_prefix or self.since is not None or self.until is not None
            or self.source_types or self.doc_ids or self.exclude_doc_ids
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "tags": list(self.tags),
            "all_tags": self.all_tags,
            "path_prefix": self.path_prefix,
            "since": self.since,
            "until": self.until,
            "source_types": list(self.source_types),
        }


def make_filters(
    *,
    tags: list[str] | tuple[str, ...] | None = None,
    all_tags: bool = False,
    path_prefix: str | None = None,
    since: str | float | date | None = None,
    until: str | float | date | None = None,
    source_types: list[str] | tuple[str, ...] | str | None = None,
) -> SearchFilters:
    """Validate user-facing filter values (strings from a CLI or an MCP call) into SearchFilters."""
    clean_tags = tuple(dict.fromkeys(_clean_tag(tag) for tag in (tags or ())))
    if all_tags and not clean_tags:
        raise UsageError("--all-tags needs at least one --tag", remedy="add --tag NAME, or drop --all-tags")
    if isinstance(source_types, str):
        source_types = (source_types,)
    types = tuple(dict.fromkeys(_clean_source_type(value) for value in (source_types or ())))
    start = parse_time_bound(since, "since", end_of_day=False) if since is not None else None
    end = parse_time_bound(until, "until", end_of_day=True) if until is not None else None
    if start is not None and end is not None and start >= end:
        raise UsageError(
            f"the date range is empty: since ({since}) is not before until ({until})",
            remedy="swap the two dates, or widen the range",
        )
    return SearchFilters(
        tags=clean_tags,
        all_tags=all_tags,
        path_prefix=_clean_path_prefix(path_prefix) if path_prefix is not None else None,
        since=start,
        until=end,
        source_types=types,
    )


def _clean_tag(tag: object) -> str:
    if not isinstance(tag, str) or not tag.strip():
        raise UsageError(f"a tag filter must be a non-empty string, got {tag!r}", remedy="pass --tag NAME")
    return tag.strip()


def _clean_source_type(value: object) -> str:
    if not isinstance(value, str) or value.strip().lower() not in SOURCE_TYPES:
        raise UsageError(
            f"unknown source type {value!r}",
            remedy=f"use one of: {', '.join(SOURCE_TYPES)}",
        )
    return value.strip().lower()


def _clean_path_prefix(prefix: object) -> str:
    if not isinstance(prefix, str) or not prefix.strip():
        raise UsageError("a path filter must be a non-empty KB-relative path", remedy="pass --path docs/")
    cleaned = prefix.strip().replace("\\", "/")
    while cleaned.startswith("./"):
        cleaned = cleaned[2:]
    if cleaned.startswith("/") or (len(cleaned) > 1 and cleaned[1] == ":"):
        raise UsageError(
            f"the path filter {prefix!r} is absolute; indexed paths are relative to the KB root",
            remedy="pass a KB-relative prefix such as docs/",
        )
    if not cleaned or cleaned == ".":
        raise UsageError("a path filter must name something below the KB root", remedy="pass --path docs/")
    return cleaned


def parse_time_bound(value: str | float | date, name: str, *, end_of_day: bool) -> float:
    """An ISO date or datetime (or epoch seconds) as epoch seconds.

    A bare date means the local calendar day, because that is what a person typing
    `--since 2026-08-01` means of a file's mtime; as an `until` it includes that whole day.
    """
    if isinstance(value, bool):
        raise UsageError(f"--{name} must be an ISO date, got {value!r}", remedy="use YYYY-MM-DD")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, date):
        return _day_bound(value, end_of_day)
    text = str(value).strip()
    try:
        if len(text) == 10:
            return _day_bound(date.fromisoformat(text), end_of_day)
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise UsageError(
            f"--{name} {value!r} is not an ISO date",
            remedy="use YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS][+HH:MM]",
        ) from None


def _day_bound(day: date, end_of_day: bool) -> float:
    if end_of_day:
        day = day + timedelta(days=1)
    return datetime.combine(day, time.min).astimezone().timestamp()


def document_where(filters: SearchFilters, alias: str = "d") -> tuple[str, list[object]]:
    """The SQL condition (over `documents AS alias`) selecting active documents that pass."""
    clauses = [f"{alias}.state = 'active'"]
    params: list[object] = []
    if filters.doc_ids:
        clauses.append(f"{alias}.id IN ({', '.join('?' * len(filters.doc_ids))})")
        params.extend(filters.doc_ids)
    if filters.exclude_doc_ids:
        clauses.append(f"{alias}.id NOT IN ({', '.join('?' * len(filters.exclude_doc_ids))})")
        params.extend(filters.exclude_doc_ids)
    if filters.source_types:
        clauses.append(f"{alias}.source_type IN ({', '.join('?' * len(filters.source_types))})")
        params.extend(filters.source_types)
    if filters.path_prefix:
        clauses.append(f"substr({alias}.path, 1, ?) = ?")
        params.extend([len(filters.path_prefix), filters.path_prefix])
    if filters.since is not None:
        clauses.append(f"{alias}.mtime >= ?")
        params.append(filters.since)
    if filters.until is not None:
        clauses.append(f"{alias}.mtime < ?")
        params.append(filters.until)
    if filters.tags:
        marks = ", ".join("?" * len(filters.tags))
        # json_each over a malformed or tag-less metadata value yields no rows, so such a
        # document simply fails a tag filter instead of failing the query.
        metadata = f"CASE WHEN json_valid({alias}.metadata) THEN {alias}.metadata ELSE '{{}}' END"
        tagged = " UNION ".join(f"SELECT value FROM json_each({metadata}, '$.{key}')" for key in TAG_KEYS)
        tag_rows = f"SELECT value FROM ({tagged}) WHERE value IN ({marks})"
        if filters.all_tags:
            clauses.append(f"(SELECT count(*) FROM ({tag_rows})) = ?")
            params.extend([*filters.tags, len(filters.tags)])
        else:
            clauses.append(f"EXISTS ({tag_rows})")
            params.extend(filters.tags)
    return " AND ".join(clauses), params
