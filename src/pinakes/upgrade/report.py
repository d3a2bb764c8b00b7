"""The text `pnk upgrade` prints: the template diff as hunks against the user's manifest, budget caps
under their own heading (printed exactly when a cap would move), and what `--apply` would do."""

from __future__ import annotations

import json

from pinakes.display import printable
from pinakes.upgrade.plan import Hunk, UpgradePlan
from pinakes.wording import counted

NO_CHANGE = "no change"


def render_plan(plan: UpgradePlan) -> str:
    if plan.status == "no-template":
        return f"{NO_CHANGE}: {plan.reason}"
    if plan.status == "current":
        return f"{NO_CHANGE}: the KB records {plan.recorded}, which is the installed version"
    if plan.status == "cannot-compare":
        return f"cannot compare: {plan.reason}"
    lines = [f"template {plan.recorded} (recorded) -> {plan.installed} (installed): a template diff, "
             "computed from both archived versions"]
    changed = [h for h in plan.hunks if h.status != "already"]
    if not plan.hunks:
        lines.append("no key changed between the two versions (comments or prompts only)")
    else:
        lines.append(f"{counted(len(plan.hunks), 'key')} changed by the template"
                     + (f", {len(plan.hunks) - len(changed)} already as the installed version has them"
                        if len(changed) < len(plan.hunks) else ""))
    for hunk in plan.hunks:
        lines += ["", *_hunk_lines(hunk)]
    if plan.budget_moves:
        lines += ["", "Budget caps: this upgrade moves spending limits (--apply asks before writing them)"]
        lines += [f"  [budget] {h.change.key}: {_value(h.user)} -> {_value(h.change.new)}" for h in plan.budget_moves]
    if plan.ref_hunk is not None:
        lines += ["", "@@ [kb] template @@", *(f"-{_line(line)}" for line in plan.ref_hunk[0]),
                  *(f"+{_line(line)}" for line in plan.ref_hunk[1])]
    lines.append("")
    if plan.conflicts:
        lines.append(f"{counted(len(plan.conflicts), 'change')} {'does' if len(plan.conflicts) == 1 else 'do'} "
                     "not apply to your manifest: --apply refuses until "
                     "each key listed is set to the value you want")
    elif plan.result_problem:
        lines.append(f"--apply would refuse: {plan.result_problem}")
    else:
        lines.append(f"`pnk upgrade --apply` writes exactly this and records {plan.installed} "
                     "(pinakes.toml is backed up first)")
    return "\n".join(lines)


def _hunk_lines(hunk: Hunk) -> list[str]:
    change = hunk.change
    if hunk.status == "conflict":
        head = (f"@@ {change.label} @@ does not apply: {hunk.reason} (yours: {_value(hunk.user)}; "
                f"{_value(change.old)} -> {_value(change.new)} in the template)")
        return [head]
    if hunk.status == "already":
        return [f"@@ {change.label} @@ already applied: {hunk.reason}"]
    return [f"@@ {change.label} @@ {change.kind}", *(f"-{_line(line)}" for line in hunk.before),
            *(f"+{_line(line)}" for line in hunk.after)]


def _line(line: str) -> str:
    return printable(line.rstrip("\r\n"))


def _value(value: object) -> str:
    return "(not set)" if value is None else printable(json.dumps(value, ensure_ascii=False, default=str))
