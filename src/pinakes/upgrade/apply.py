"""`pnk upgrade --apply`: the template's changes written into a KB's pinakes.toml (spec §2.1).

Only what the report printed reaches the file, and only when all of it fits: any conflict refuses
the whole upgrade and leaves the file byte-identical. A moved budget cap needs its own confirmation.
The file is backed up first, written atomically, re-read, and restored from the backup if the result
does not load. A manifest edited between the report and the write is refused, not overwritten.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pinakes.errors import TemplateNotArchivedError, UpgradeRefusedError
from pinakes.manifest.rewrite import replace_manifest
from pinakes.upgrade.plan import UpgradePlan


@dataclass(frozen=True)
class AppliedUpgrade:
    path: Path
    backup: Path | None  # None: nothing was written
    recorded: str | None  # the version the manifest records now


def cannot_compare_error(plan: UpgradePlan) -> TemplateNotArchivedError:
    """There is nothing to diff (the recorded version was never archived, is newer than the installed
    one, or names a template not installed): an error with its remedy, for the report and --apply."""
    return TemplateNotArchivedError(f"cannot compare: {plan.reason}; nothing was changed",
                                    remedy="keep the manifest as it is, or compare it by hand with "
                                           "`pnk init --template NAME` in a scratch directory",
                                    path=plan.manifest_path)


def apply_upgrade(plan: UpgradePlan, *, budget_confirmed: bool) -> AppliedUpgrade:
    """Write `plan`'s result, or raise without touching the file."""
    if plan.status in ("no-template", "current"):
        return AppliedUpgrade(plan.manifest_path, None, plan.recorded)
    if plan.status == "cannot-compare":
        raise cannot_compare_error(plan)
    if plan.conflicts:
        error = UpgradeRefusedError(
            f"{len(plan.conflicts)} of the template's changes do not apply to your manifest; nothing was "
            "changed", remedy="set each key listed to the value you want (the installed template's value "
                              "counts as applied), then run `pnk upgrade --apply` again",
            path=plan.manifest_path)
        error.details = [f"does not apply: {h.change.label}: {h.reason}" for h in plan.conflicts]
        raise error
    if plan.result_problem is not None or plan.new_text is None:
        raise UpgradeRefusedError(f"the upgrade was refused: {plan.result_problem}; nothing was changed",
                                  remedy="take the printed changes by hand", path=plan.manifest_path)
    if plan.budget_moves and not budget_confirmed:
        raise UpgradeRefusedError(
            "the upgrade would move budget caps (printed above) and that was not confirmed; nothing was changed",
            remedy="read the budget caps heading, then answer y on a terminal or pass --yes",
            path=plan.manifest_path)
    path = plan.manifest_path
    if path.read_bytes() != plan.original:
        raise UpgradeRefusedError("pinakes.toml changed since the upgrade was planned; nothing was changed",
                                  remedy="run `pnk upgrade` again to see the changes against it", path=path)
    backup = replace_manifest(path, plan.original, plan.new_text, plan.recorded or "unknown")
    return AppliedUpgrade(path, backup, plan.installed)
