"""The document filter flags as typed arguments: what `cmd_search.add_filter_arguments` registers for
`pnk search`, `pnk list` and `pnk ask`."""

from __future__ import annotations

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
