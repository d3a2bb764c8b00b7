"""`pnk sync --clear-cache`: empty the extraction cache (or, `=transcripts`, the kept transcripts of
paid `ask --deep` runs) after saying what would go.

A confirmation prices what is about to be destroyed (entries, bytes). `--yes` skips the question for
cron, but never authorises dropping what a paid backend wrote: that takes `--clear-cache=paid`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes.errors import PinakesError, UsageError
from pinakes.kb import KBPaths, find_kb_root
from pinakes.wording import counted

if TYPE_CHECKING:
    from pinakes.extract.cache import ExtractCache


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
    scope = ("every entry, paid extractions included" + _paid_price(paths, cache) if include_paid
             else "free entries (paid ones are kept)")
    prompt = (f"the extraction cache holds {counted(stats.entries, 'entry', 'entries')} ({stats.bytes:,} bytes); remove "
              f"{scope}?")
    _confirm(prompt, assume_yes, "cache")
    removed = cache.clear(include_paid=include_paid)
    freed = stats.bytes - cache.stats().bytes
    if not quiet:
        print(f"removed {counted(removed, 'cache entry', 'cache entries')} ({freed:,} bytes)")
    return removed, freed


def clear_transcripts(start: Path | str | None, *, assume_yes: bool, quiet: bool) -> tuple[int, int]:
    """Remove the kept `pnk ask --deep` transcripts (.pinakes/transcripts/); returns (files, bytes)."""
    directory = KBPaths(find_kb_root(start)).transcripts
    files = sorted(path for path in directory.glob("*.json") if path.is_file()) if directory.is_dir() else []
    if not files:
        if not quiet:
            print("no kept transcripts")
        return 0, 0
    size = sum(path.stat().st_size for path in files)
    _confirm(f"{directory} holds {counted(len(files), 'kept transcript')} of paid `ask --deep` runs ({size:,} "
             "bytes: the questions and passages sent); remove them?", assume_yes, "transcripts")
    for path in files:
        path.unlink(missing_ok=True)
    if not quiet:
        print(f"removed {counted(len(files), 'kept transcript')} ({size:,} bytes)")
    return len(files), size


def _confirm(prompt: str, assume_yes: bool, what: str) -> None:
    if assume_yes:
        return
    if not sys.stdin.isatty():
        raise UsageError(f"{prompt} There is no terminal to confirm on.",
                         remedy="add --yes to confirm non-interactively")
    answer = input(f"{prompt} [y/N] ").strip().lower()
    if answer != "y":
        raise UsageError(f"{what} left untouched", remedy="answer y to clear it")


def _paid_price(paths: KBPaths, cache: ExtractCache) -> str:
    """What the paid entries about to go cost, from the ledger, joined on each entry's own call_ids
    (an operation_id prices a whole run and would charge every document with all of it)."""
    paid = [entry for _path, entry in cache.paid_entries()]
    if not paid:
        return " (none of them paid)"
    call_ids = [call_id for entry in paid for call_id in entry.call_ids or ()]
    try:
        from pinakes.budget import Accountant
        from pinakes.budget.money import format_eur
        from pinakes.manifest import load_manifest

        report = Accountant.for_report(paths.root, load_manifest(paths.manifest).budget).report()
        cost = format_eur(report.cost_of_calls(call_ids))
    except PinakesError as exc:
        return f" ({counted(len(paid), 'paid extraction')}; the ledger cannot price them: {exc.message})"
    return f" ({counted(len(paid), 'paid extraction')} that cost {cost} by the ledger, paid again if re-extracted)"
