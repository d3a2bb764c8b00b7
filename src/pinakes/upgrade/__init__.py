"""`pnk upgrade`: the template diff between the version a KB records and the installed one, and
`--apply`, which writes it only when all of it fits (spec §6.1, §2.1).

Upgrading a template is never a migration: that word belongs to the index schema, which has none.
The parts: `changes` (what the template changed,
from two archived renderings), `plan` (each change as a hunk against the user's file, and the
result), `apply` (the guarded write), `report` (the text the CLI prints). Where each key of the
user's file is comes from `pinakes.manifest.lines`, the reader every manifest rewrite shares.
"""

from pinakes.upgrade.apply import AppliedUpgrade, apply_upgrade
from pinakes.upgrade.changes import BUDGET_CAPS, TemplateChange
from pinakes.upgrade.plan import Hunk, UpgradePlan, plan_upgrade

__all__ = ["BUDGET_CAPS", "AppliedUpgrade", "Hunk", "TemplateChange", "UpgradePlan", "apply_upgrade",
           "plan_upgrade"]
