"""The document filter flags of `pnk search`, `pnk list` and `pnk ask`: the flags, and the typed
arguments they parse to."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pinakes.cli.command import CommandArgs

if TYPE_CHECKING:
    from pinakes.lexical.filters import SearchFilters


@dataclass(frozen=True, kw_only=True)
class FilterArgs(CommandArgs):
    tags: list[str] | None
    all_tags: bool
    path_prefix: str | None
    since: str | None
    until: str | None
    source_types: list[str] | None

    def filters(self) -> SearchFilters:
        """The validated filters (a UsageError names a bad value)."""
        from pinakes.lexical.filters import make_filters

        return make_filters(tags=self.tags, all_tags=self.all_tags, path_prefix=self.path_prefix,
                            since=self.since, until=self.until, source_types=self.source_types)


def add_filter_arguments(parser: argparse.ArgumentParser) -> None:
    """The document filters (`pinakes.lexical.filters`), as `pnk search` and `pnk list` spell them."""
    parser.add_argument("--tag", dest="tags", action="append", metavar="TAG",
                        help="only documents with this tag (repeatable: any of them)")
    parser.add_argument("--all-tags", action="store_true", help="require every --tag instead of any")
    parser.add_argument("--path", dest="path_prefix", metavar="PREFIX",
                        help="only documents whose KB-relative path starts with PREFIX")
    parser.add_argument("--since", metavar="DATE", help="only documents modified on or after DATE (ISO)")
    parser.add_argument("--until", metavar="DATE", help="only documents modified on or before DATE (ISO)")
    parser.add_argument("--type", dest="source_types", action="append", metavar="TYPE",
                        help="only this source type: markdown, text, code or pdf (repeatable)")
