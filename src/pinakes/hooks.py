"""`pnk install-hooks`: the three git hooks that keep a KB fresh (spec §6.3).

pre-commit mints sidecars for staged new documents and stages them (so a document and its ID land in
one commit); post-commit and post-merge update the index without touching the tree. Every hook forces
the free extractor: a hook has no terminal to confirm a spend on, so paid extraction stays a
deliberate human invocation. An existing user hook is kept (renamed to `<hook>.local`) and run first.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from pinakes.errors import UsageError

MARKER = "# pinakes-hook: managed by `pnk install-hooks`"
FREE_EXTRACTOR_NOTE = ("# Forces the free extractor (--extract=pypdfium2): a hook cannot confirm a spend, "
                       "so paid extraction stays a deliberate human run.")
HOOK_COMMANDS = {
    "pre-commit": "sync --sidecars-only --stage --extract=pypdfium2",
    "post-commit": "sync --index-only --quiet --extract=pypdfium2",
    "post-merge": "sync --index-only --quiet --extract=pypdfium2",
}


@dataclass(frozen=True)
class InstalledHook:
    name: str
    path: Path
    preserved: Path | None  # the user's own hook, kept and chained


def git_hooks_dir(kb_root: Path) -> Path:
    try:
        out = subprocess.run(["git", "rev-parse", "--git-path", "hooks"], cwd=kb_root,
                             capture_output=True, text=True, check=True).stdout.strip()
    except (FileNotFoundError, subprocess.CalledProcessError) as exc:
        raise UsageError(f"{kb_root} is not inside a git repository",
                         remedy="run `git init` first (freshness is git-triggered), or sync by hand/cron") from exc
    hooks = Path(out)
    return hooks if hooks.is_absolute() else (kb_root / hooks).resolve()


def hook_script(name: str, kb_root: Path) -> str:
    pnk = f"{shlex.quote(sys.executable)} -m pinakes -C {shlex.quote(str(kb_root))}"
    local = f'"$(dirname "$0")/{name}.local"'
    chain = f'if [ -x {local} ]; then {local} "$@" || exit $?; fi'
    command = f"{pnk} {HOOK_COMMANDS[name]}"
    if name != "pre-commit":
        command += " || true  # a post-commit/post-merge failure must never block git"
    return f"#!/bin/sh\n{MARKER}\n{FREE_EXTRACTOR_NOTE}\n{chain}\n{command}\n"


def is_pinakes_hook(path: Path) -> bool:
    try:
        return MARKER in path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def install_hooks(kb_root: Path) -> list[InstalledHook]:
    hooks_dir = git_hooks_dir(kb_root)
    hooks_dir.mkdir(parents=True, exist_ok=True)
    installed = []
    for name in HOOK_COMMANDS:
        path = hooks_dir / name
        preserved = None
        if path.exists() and not is_pinakes_hook(path):
            preserved = hooks_dir / f"{name}.local"
            if preserved.exists():
                raise UsageError(f"both {path} and {preserved} exist and neither is managed by Pinakes",
                                 remedy=f"merge them into {preserved} and remove {path}")
            path.rename(preserved)
        elif (hooks_dir / f"{name}.local").exists():
            preserved = hooks_dir / f"{name}.local"
        path.write_text(hook_script(name, kb_root), encoding="utf-8")
        path.chmod(0o755)
        installed.append(InstalledHook(name, path, preserved))
    return installed


def hooks_status(kb_root: Path) -> dict[str, bool] | None:
    """Which hooks are installed; None when the KB is not in a git repository."""
    try:
        hooks_dir = git_hooks_dir(kb_root)
    except UsageError:
        return None
    return {name: is_pinakes_hook(hooks_dir / name) for name in HOOK_COMMANDS}
