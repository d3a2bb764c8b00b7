"""`pnk upgrade`'s report: each template change as a hunk against the user's own manifest, and
whether it applies (spec §6.1).

A change applies when the user's file still holds what the recorded version rendered (or, for a key
the template adds, does not set it at all): then the hunk replaces exactly that value and the rest
of the line, its comment included, stays. A change the file already reflects is "already". Anything
else is a conflict — the user set that key themselves — and `--apply` refuses the whole upgrade
rather than merge, so nothing the user chose is overwritten and nothing is half-applied.

The manifest after every hunk is built here, in memory, and checked twice before `--apply` may
write it: re-read with tomllib it must hold exactly the user's values with the hunks applied (no
other key moved), and it must load under the strict manifest rules.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pinakes.errors import PinakesError
from pinakes.kb import KBPaths, find_kb_root
from pinakes.manifest import load_manifest, parse_manifest
from pinakes.manifest.lines import FileLayout, layout
from pinakes.template_catalog import RenderValues, TemplateCatalog, parse_ref, render, version_key
from pinakes.upgrade.changes import TEMPLATE_KEY, TemplateChange, flatten, same, template_changes

PlanStatus = Literal["no-template", "current", "changes", "cannot-compare"]
HunkStatus = Literal["applies", "already", "conflict"]


@dataclass(frozen=True)
class Hunk:
    change: TemplateChange
    status: HunkStatus
    user: object  # the user's current value (None when the file does not set the key)
    before: tuple[str, ...]  # the user's lines this hunk replaces (none for an added key)
    after: tuple[str, ...]  # what they become (none for a removed key)
    reason: str = ""  # why it is "already" or a conflict

    def to_dict(self) -> dict[str, object]:
        return {"section": self.change.section, "key": self.change.key, "kind": self.change.kind,
                "recorded": self.change.old, "installed": self.change.new, "yours": self.user,
                "status": self.status, "reason": self.reason or None, "budget_cap": self.change.budget_cap,
                "before": list(self.before), "after": list(self.after)}


@dataclass(frozen=True)
class UpgradePlan:
    manifest_path: Path
    status: PlanStatus
    recorded: str | None  # NAME@VERSION the manifest records
    installed: str | None  # NAME@VERSION installed now
    reason: str = ""  # for "no-template" and "cannot-compare": why there is nothing to diff
    hunks: tuple[Hunk, ...] = ()
    ref_hunk: tuple[tuple[str, ...], tuple[str, ...]] | None = None  # [kb] template: before, after
    new_text: str | None = None  # the manifest after every hunk (None when nothing can be applied)
    result_problem: str | None = None  # why the result of the hunks would be refused
    original: bytes = field(default=b"", repr=False)

    @property
    def conflicts(self) -> tuple[Hunk, ...]:
        return tuple(h for h in self.hunks if h.status == "conflict")

    @property
    def budget_moves(self) -> tuple[Hunk, ...]:
        """The caps this upgrade would move: printed under their own heading, confirmed on --apply."""
        return tuple(h for h in self.hunks if h.change.budget_cap and h.status == "applies")

    @property
    def applicable(self) -> bool:
        return self.status == "changes" and not self.conflicts and self.result_problem is None

    def to_dict(self) -> dict[str, object]:
        return {"ok": True, "manifest": str(self.manifest_path), "status": self.status,
                "recorded": self.recorded, "installed": self.installed, "reason": self.reason or None,
                "changes": [hunk.to_dict() for hunk in self.hunks],
                "conflicts": len(self.conflicts), "budget_caps_moving": [h.change.key for h in self.budget_moves],
                "applicable": self.applicable, "result_problem": self.result_problem}


def plan_upgrade(kb_dir: Path | str | None = None, catalog: TemplateCatalog | None = None) -> UpgradePlan:
    """Diff the KB's recorded template version against the installed one; changes nothing."""
    catalog = catalog or TemplateCatalog()
    path = KBPaths(find_kb_root(kb_dir)).manifest
    manifest = load_manifest(path)  # a manifest that does not load is reported by the loader, not here
    original = path.read_bytes()
    text = original.decode("utf-8")
    recorded = manifest.kb.template
    if recorded is None:
        return UpgradePlan(path, "no-template", None, None, original=original,
                           reason="the manifest records no [kb] template, so there is no version to compare")
    name, version = parse_ref(recorded)
    if name not in catalog.names():
        return UpgradePlan(path, "cannot-compare", recorded, None, original=original,
                           reason=f"no template named {name!r} is installed (installed: "
                                  f"{', '.join(catalog.names())})")
    info = catalog.get(name)
    if version == info.version:
        return UpgradePlan(path, "current", recorded, info.ref, original=original)
    if version_key(version) > version_key(info.version):
        return UpgradePlan(path, "cannot-compare", recorded, info.ref, original=original,
                           reason=f"the KB records {recorded}, newer than the installed {info.ref}: "
                                  "it was made by a newer Pinakes (upgrade Pinakes to compare)")
    old_source = catalog.archived_manifest_source(name, version)
    if old_source is None:
        return UpgradePlan(path, "cannot-compare", recorded, info.ref, original=original,
                           reason=f"{recorded} was never archived, so its content is unknown; nothing is "
                                  "diffed from a reconstruction")
    values = RenderValues(manifest.kb.name, manifest.kb.id, manifest.embedding.provider)
    changes = template_changes(render(old_source, values, recorded),
                               render(catalog.manifest_source(name), values, info.ref))
    user_layout = layout(text)
    user_values = flatten(tomllib.loads(text))
    hunks = tuple(_hunk(change, user_layout, user_values) for change in changes)
    ref_hunk = _ref_hunk(user_layout, info.ref)
    new_text, problem = _result(text, user_layout, user_values, hunks, ref_hunk, info.ref, path)
    return UpgradePlan(path, "changes", recorded, info.ref, hunks=hunks, ref_hunk=ref_hunk,
                       new_text=new_text, result_problem=problem, original=original)


def _hunk(change: TemplateChange, user_layout: FileLayout, user_values: dict[tuple[str, str], object]) -> Hunk:
    address = (change.section, change.key)
    present = address in user_values
    user = user_values.get(address)
    span = user_layout.keys.get(address)
    before = tuple(user_layout.lines[span.start:span.end]) if span else ()
    if change.kind == "removed":
        if not present:
            return Hunk(change, "already", None, (), (), "your manifest does not set it")
        if not same(user, change.old):
            return Hunk(change, "conflict", user, before, (), "you set it yourself: the template's removal "
                        "would drop your value")
        if span is None:
            return Hunk(change, "conflict", user, (), (), "its line cannot be placed (a dotted key or an "
                        "inline table)")
        return Hunk(change, "applies", user, before, ())
    if present and same(user, change.new):
        return Hunk(change, "already", user, before, before, "your manifest already has the new value")
    if change.kind == "added":
        if present:
            return Hunk(change, "conflict", user, before, (), "you set it yourself")
        return Hunk(change, "applies", None, (), _with_newline(change.new_lines, user_layout.newline))
    if not present:
        return Hunk(change, "conflict", None, (), (), "you removed it (taking its default)")
    if not same(user, change.old):
        return Hunk(change, "conflict", user, before, (), "you set it yourself")
    if span is None:
        return Hunk(change, "conflict", user, (), (), "its line cannot be placed (a dotted key or an inline table)")
    assert change.new_value_text is not None
    return Hunk(change, "applies", user, before, (span.prefix + change.new_value_text + span.suffix,))


def _with_newline(lines: tuple[str, ...], newline: str) -> tuple[str, ...]:
    return tuple(line.rstrip("\r\n") + newline for line in lines)


def _ref_hunk(user_layout: FileLayout, ref: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    span = user_layout.keys.get(TEMPLATE_KEY)
    if span is None:
        return None
    return tuple(user_layout.lines[span.start:span.end]), (f'{span.prefix}"{ref}"{span.suffix}',)


def _result(text: str, user_layout: FileLayout, user_values: dict[tuple[str, str], object], hunks: tuple[Hunk, ...],
            ref_hunk: tuple[tuple[str, ...], tuple[str, ...]] | None, ref: str, path: Path
            ) -> tuple[str | None, str | None]:
    """The manifest with every hunk applied, and why it would be refused (None: it would not be)."""
    if any(h.status == "conflict" for h in hunks):
        return None, None
    if ref_hunk is None:
        return None, "the [kb] template line cannot be placed (a dotted key or an inline table)"
    lines = list(user_layout.lines)
    edits: list[tuple[int, int, tuple[str, ...]]] = []  # (start, end, replacement), by position
    span = user_layout.keys[TEMPLATE_KEY]
    edits.append((span.start, span.end, ref_hunk[1]))
    appended: list[str] = []
    expected = dict(user_values)
    expected[TEMPLATE_KEY] = ref
    for hunk in hunks:
        if hunk.status != "applies":
            continue
        change = hunk.change
        address = (change.section, change.key)
        if change.kind == "added":
            expected[address] = change.new
            end = user_layout.section_ends.get(change.section)
            if end is None:
                newline = user_layout.newline
                appended += [newline, f"[{change.section}]{newline}", *hunk.after]
            else:
                edits.append((end, end, hunk.after))
            continue
        key_span = user_layout.keys[address]
        edits.append((key_span.start, key_span.end, hunk.after))
        if change.kind == "removed":
            expected.pop(address)
        else:
            expected[address] = change.new
    for start, end, replacement in sorted(edits, key=lambda edit: (edit[0], edit[1]), reverse=True):
        lines[start:end] = replacement
    if appended and lines and not lines[-1].endswith("\n"):
        lines[-1] += user_layout.newline
    new_text = "".join(lines) + "".join(appended)
    try:
        result = flatten(tomllib.loads(new_text))
    except tomllib.TOMLDecodeError as exc:
        return None, f"the edited manifest would not parse ({exc})"
    moved = sorted({*result, *expected} - {a for a in result if a in expected and same(result[a], expected[a])})
    if moved:
        return None, "the edit would also move " + ", ".join(f"[{s}] {k}" for s, k in moved)
    try:
        parse_manifest(new_text, path=path)
    except PinakesError as exc:
        return None, f"the edited manifest would not load: {exc.render()}"
    return new_text, None
