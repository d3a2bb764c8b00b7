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
    entries = cache.entries()
    doomed = [e for e in entries if include_paid or not e.paid]
    kept_paid = len(entries) - len(doomed)
    total = sum(e.size for e in doomed)
    if not doomed:
        return 0, 0
    prompt = f"remove {len(doomed)} extraction-cache entries ({total:,} bytes) from {directory}?"
    if not assume_yes:
        if not sys.stdin.isatty():
            raise UsageError(f"{prompt} There is no terminal to confirm on.",
                             remedy="add --yes to confirm non-interactively")
        answer = input(f"{prompt} [y/N] ").strip().lower()
        if answer != "y":
            raise UsageError("cache left untouched", remedy="answer y to clear it")
    for entry in doomed:
        entry.path.unlink(missing_ok=True)
    if not quiet:
        print(f"removed {len(doomed)} cache entries ({total:,} bytes)")
        if kept_paid:
            print(f"kept {kept_paid} paid extraction(s): remove them with --clear-cache=paid")
    return len(doomed), total
