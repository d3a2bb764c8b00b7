"""Doctor: the budget — the price table's age, the ledger's integrity, unknown outcomes past a
quarter of a window, overruns (calls whose answers reported usage above their reservations), paid orphans in the extraction cache priced from the ledger, and the split
between hooks (which force the free extractor) and a manifest that names a paid one (spec §5, §6.3).

Nothing here imports a paid client, and nothing writes: the ledger is read without its lock.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes.budget.money import format_eur
from pinakes.doctor import Check, DoctorContext
from pinakes.doctor.index_reading import readable_index
from pinakes.errors import PinakesError
from pinakes.kb import KBPaths
from pinakes.wording import counted, noun_for

if TYPE_CHECKING:
    from pinakes.budget import BudgetReport
    from pinakes.manifest import Manifest

# spec §5: unknown outcomes warn "once their total passes a quarter of a window".
UNKNOWN_OUTCOME_SHARE = Decimal("0.25")
FREE_EXTRACT_FLAG = "--extract=pypdfium2"
# A command line that runs `pnk sync` (as the hooks write it: run_pnk, pnk, or python -m pinakes);
# an echo that merely mentions `pnk sync` is not one.
_SYNC_COMMAND = re.compile(r"^\s*(?:run_pnk|pnk|\S*python[\w.]*\s+-m\s+pinakes)\s(?:.*\s)?sync(?:\s|$)")


def checks(ctx: DoctorContext) -> Iterator[Check]:
    from pinakes.budget import Accountant
    from pinakes.manifest import load_manifest

    assert ctx.kb_root is not None
    paths = KBPaths(ctx.kb_root)
    try:
        manifest = load_manifest(paths.manifest)
    except PinakesError:
        return  # the manifest checks report it
    paid_backend = _paid_backend(manifest)
    yield _price_table(manifest, paid_backend)
    report = Accountant.for_report(ctx.kb_root, manifest.budget).report()
    yield _ledger(paths, report)
    yield from _unknown_outcomes(manifest, report)
    yield from _overruns(report)
    yield from _paid_orphans(paths, report)
    yield from _hook_split(paths, paid_backend)


def _paid_backend(manifest: Manifest) -> str | None:
    from pinakes.extract.registry import EXTRACTORS

    spec = EXTRACTORS.get(manifest.extraction.backend)
    return spec.name if spec is not None and spec.paid else None


def _price_table(manifest: Manifest, paid_backend: str | None) -> Check:
    from pinakes.budget import load_prices
    from pinakes.distribution import pip_upgrade

    try:
        table = load_prices()
    except PinakesError as exc:
        return Check("price table", "FAIL", exc.message, exc.remedy)
    limit = manifest.budget.max_price_age_days
    age = table.age_days(datetime.now(UTC).date())
    detail = (f"prices as of {table.as_of}, {table.usd_per_eur} USD/EUR as of {table.rate_as_of}: "
              f"{age} days old (paid runs refuse past max_price_age_days = {limit})")
    if age <= limit:
        return Check("price table", "OK", detail)
    if paid_backend is None:
        return Check("price table", "OK", f"{detail}; stale, but nothing here spends by default "
                     "(the extraction backend is free; `pnk ask --deep` would refuse)")
    return Check("price table", "WARN", f"{detail}: stale, so {paid_backend} extraction refuses",
                 f"upgrade Pinakes for a current table ({pip_upgrade()}), or, having checked "
                 "today's prices yourself, raise [budget] max_price_age_days")


def _ledger(paths: KBPaths, report: BudgetReport) -> Check:
    if report.damaged:
        listed = "; ".join(line.describe() for line in report.damaged[:5])
        them, they = ("it", "it") if len(report.damaged) == 1 else ("them", "they")
        return Check("spending ledger", "FAIL",
                     f"{counted(len(report.damaged), 'line')} of {paths.ledger.name} "
                     f"{'fails its' if len(report.damaged) == 1 else 'fail their'} check and "
                     f"{'is' if len(report.damaged) == 1 else 'are'} not counted, so no paid call runs: {listed}",
                     f"restore the {noun_for(len(report.damaged), 'line')} from a backup, or delete {them} by hand "
                     f"if you accept that what {they} recorded is no longer counted (`pnk budget` lists {them})")
    if not report.operations:
        return Check("spending ledger", "OK", "no paid calls recorded")
    month = report.windows[2]
    torn = "; an interrupted last write is set aside by the next paid call" if report.torn_tail else ""
    return Check("spending ledger", "OK",
                 f"{counted(len(report.call_eur), 'paid call')} in {counted(len(report.operations), 'operation')}, "
                 "every line "
                 f"intact; this month {format_eur(month.spent)} of {format_eur(month.cap, 2)}{torn}")


def _unknown_outcomes(manifest: Manifest, report: BudgetReport) -> Iterator[Check]:
    if not report.unknown:
        yield Check("unknown outcomes", "OK", "every reserved call has a recorded outcome")
        return
    budget = manifest.budget
    breaches = [
        f"{window.window} {window.period}: {format_eur(window.unknown)} of {format_eur(window.cap, 2)}"
        for window in report.windows[1:]  # daily and monthly: the windows a sequence of runs fills
        if window.unknown > window.cap * UNKNOWN_OUTCOME_SHARE
    ]
    detail = (f"{counted(len(report.unknown), 'call')} with no recorded outcome, counted at "
              f"{'its' if len(report.unknown) == 1 else 'their'} reserved amount "
              f"({format_eur(report.unknown_eur)})")
    if not breaches:
        yield Check("unknown outcomes", "OK", f"{detail}; under a quarter of every window")
        return
    yield Check("unknown outcomes", "WARN",
                f"{detail}, past a quarter of {'; '.join(breaches)}: they hold headroom the calls may "
                f"never have spent (daily cap {format_eur(budget.daily_eur, 2)}, monthly "
                f"{format_eur(budget.monthly_eur, 2)})",
                "check the provider's console and close each: pnk budget --resolve CALL_ID --actual EUR "
                "(`pnk budget` lists the call_ids)")


def _overruns(report: BudgetReport) -> Iterator[Check]:
    """A call reported usage above its reservation: counted as reported, and every paid call stops
    until a person resolves it (budget/overrun.py)."""
    if not report.overruns:
        if report.operations:
            yield Check("overruns", "OK", "every reconciled call billed within its reservation")
        return
    listed = "; ".join(overrun.describe() for overrun in report.overruns[:3])
    more = f"; and {len(report.overruns) - 3} more" if len(report.overruns) > 3 else ""
    yield Check("overruns", "WARN",
                f"{counted(len(report.overruns), 'call')} reported usage above "
                f"{'its' if len(report.overruns) == 1 else 'their'} reservation, so no paid call runs until "
                f"{'it is' if len(report.overruns) == 1 else 'each is'} resolved: {listed}{more}",
                "look each call up on the provider's usage page and record what it billed: "
                "pnk budget --resolve CALL_ID --actual EUR (`pnk budget` lists them under OVERRUNS)")


def _paid_orphans(paths: KBPaths, report: BudgetReport) -> Iterator[Check]:
    """Paid extractions whose document is no longer active, priced from the ledger by call_ids."""
    from pinakes.extract.cache import CachedExtraction, ExtractCache

    if not paths.index_db.exists():
        return  # without an index nothing is active, and calling every entry an orphan would be false
    active = _active_hashes(paths)
    if active is None:
        return  # the index checks report an unreadable index
    cache = ExtractCache(paths.extract_cache)
    orphans: list[CachedExtraction] = []
    for entry_path in sorted(paths.extract_cache.glob("*-*.json")):
        content_hash, _, fingerprint = entry_path.stem.partition("-")
        if content_hash in active:
            continue
        try:
            entry = cache.get(content_hash, fingerprint)
        except ValueError:
            continue
        if entry is not None and entry.paid:
            orphans.append(entry)
    if not orphans:
        yield Check("paid orphans", "OK", "every paid extraction in the cache belongs to an active document")
        return
    call_ids = [call_id for entry in orphans for call_id in (entry.call_ids or ())]
    unpriced = sum(1 for entry in orphans if not entry.call_ids)
    priced = f"worth {format_eur(report.cost_of_calls(call_ids))} by the ledger (joined on their call_ids)"
    if unpriced:
        priced += f"; {unpriced} carry no call_ids to price them by"
    yield Check("paid orphans", "WARN",
                f"{counted(len(orphans), 'paid extraction')} {'belongs' if len(orphans) == 1 else 'belong'} "
                f"to no active document, {priced}; kept, never "
                "swept automatically",
                "keep them if the documents may come back (a re-add is free); otherwise "
                "`pnk sync --clear-cache=paid` removes them, after showing what they cost")


def _active_hashes(paths: KBPaths) -> set[str] | None:
    with readable_index(paths.index_db) as conn:
        if conn is None:
            return None
        return {row[0] for row in conn.execute("SELECT content_hash FROM documents WHERE state = 'active'")}


def _hook_split(paths: KBPaths, paid_backend: str | None) -> Iterator[Check]:
    """Hooks force the free extractor; a manifest naming a paid one makes that a visible split."""
    if paid_backend is None:
        return  # nothing to split: the hooks and a manual sync extract alike
    from pinakes.hooks import HOOK_COMMANDS, git_hooks_dir, git_toplevel

    if git_toplevel(paths.root) is None:
        yield Check("hooks and paid backend", "OK",
                    f"the manifest names {paid_backend}; the KB is not a git repository, so every sync is "
                    "a run you start (and confirm) yourself")
        return
    hooks_dir = git_hooks_dir(paths.root)
    unforced = [name for name in HOOK_COMMANDS if _runs_sync_without_free_flag(hooks_dir / name)]
    if unforced:
        yield Check("hooks and paid backend", "FAIL",
                    f"the manifest names {paid_backend} and the {', '.join(unforced)} "
                    f"{'hook runs' if len(unforced) == 1 else 'hooks run'} `pnk sync` "
                    f"without {FREE_EXTRACT_FLAG}: a hook has no terminal to confirm a spend on, so every "
                    "commit's sync would abort (or, with a --yes, spend afresh)",
                    "pnk install-hooks (its hooks force the free extractor)")
        return
    pending = _pending_paid_documents(paths, paid_backend)
    installed = [name for name in HOOK_COMMANDS if (hooks_dir / name).exists()]
    if not installed:
        return  # no hooks, no split; the sync checks report missing hooks
    detail = (f"the hooks force the free extractor while the manifest names {paid_backend}: commits index "
              "a scanned PDF's (empty) free text, never a paid extraction")
    if not pending:
        yield Check("hooks and paid backend", "OK", f"{detail}; no document is waiting for a paid run")
        return
    yield Check("hooks and paid backend", "WARN",
                f"{detail}; {counted(pending, 'PDF')} indexed by a free extractor "
                f"{'is' if pending == 1 else 'are'} stale until a paid run",
                f"run `pnk sync` yourself, from a terminal, to extract them with {paid_backend} (it prices "
                "the run first and asks above confirm_above_eur)")


def _runs_sync_without_free_flag(hook: Path) -> bool:
    """A hook line that starts a sync that extracts (not --sidecars-only) without forcing the free backend."""
    try:
        text = hook.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return any(_SYNC_COMMAND.match(line) and FREE_EXTRACT_FLAG not in line and "--sidecars-only" not in line
               for line in text.splitlines())


def _pending_paid_documents(paths: KBPaths, paid_backend: str) -> int:
    from pinakes.extract.registry import EXTRACTORS

    pdf_backends = [name for name, spec in EXTRACTORS.items() if "pdf" in spec.source_types and not spec.paid]
    with readable_index(paths.index_db) as conn:
        if conn is None:
            return 0
        marks = ",".join("?" * len(pdf_backends))
        row = conn.execute(f"SELECT COUNT(*) FROM documents WHERE state = 'active' AND extraction_backend "
                           f"IN ({marks})", pdf_backends).fetchone()
    del paid_backend
    return int(row[0])
