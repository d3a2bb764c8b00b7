"""`pnk sync --clear-cache`: empty the extraction cache after saying what would go.

A confirmation prices what is about to be destroyed (entries, bytes). `--yes` skips the question for
cron, but never authorises dropping what a paid backend wrote: that takes `--clear-cache=paid`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pinakes.errors import UsageError
from pinakes.kb import KBPaths, find_kb_root


def clear_extract_cache(start: Path | str | None, *, include_paid: bool, assume_yes: bool,
                        quiet: bool) -> tuple[int, int]:
    """Remove cache entries; returns (entries removed, bytes removed)."""
    from pinakes.extract.cache import ExtractCache

    paths = KBPaths(find_kb_root(start))
    directory = paths.extract_cache
    if not directory.is_dir():
        return 0, 0
    cache = ExtractCache(directory)
    stats = cache.stats()
    if not stats.entries:
        return 0, 0
    scope = "every entry, paid extractions included" if include_paid else "free entries (paid ones are kept)"
    prompt = (f"the extraction cache holds {stats.entries} entries ({stats.bytes:,} bytes); remove "
              f"{scope}?")
    if not assume_yes:
        if not sys.stdin.isatty():
            raise UsageError(f"{prompt} There is no terminal to confirm on.",
                             remedy="add --yes to confirm non-interactively")
        answer = input(f"{prompt} [y/N] ").strip().lower()
        if answer != "y":
            raise UsageError("cache left untouched", remedy="answer y to clear it")
    removed = cache.clear(include_paid=include_paid)
    freed = stats.bytes - cache.stats().bytes
    if not quiet:
        print(f"removed {removed} cache entries ({freed:,} bytes)")
    return removed, freed
