"""`pnk install-hooks`: the three git hooks that keep a KB fresh (spec §6.3).

pre-commit mints sidecars for staged new documents and stages them (so a document and its ID land in
one commit), and warns, one line each, about a document it minted for that is likely an indexed one
moved without its sidecar, naming the `pnk adopt` command that keeps the old ID (sync/sidecars_only.py;
a warning, never a blocked commit, `pinakes.strictHooks` or not); post-commit and post-merge update the
index without touching the tree. Every hook forces
the free extractor: a hook has no terminal to confirm a spend on, so paid extraction stays a
deliberate human invocation. An existing user hook is kept (renamed to `<hook>.local`) and run first.

The hooks hold no absolute path they depend on. Each finds the KB from the repository it runs in (the
KB's path relative to `git rev-parse --show-toplevel`, so a KB may be a subdirectory and the whole
repository may move or be cloned) and `pnk` from the environment at commit time: `pnk` on PATH, then
the interpreter `pnk install-hooks` ran under if it still exists and imports pinakes, then
`python3 -m pinakes`. When none works, or the KB is not where the hook expects it, a hook prints one
line naming the remedy and lets git go on (see `_SKIP_POLICY`).

`hooks_status` is what `pnk doctor` reports: it runs each hook in probe mode (PINAKES_HOOK_PROBE=1:
resolve the KB and `pnk`, print them, exit before running anything) so that "installed" means
"executable, ours, current, resolving this KB and a `pnk`", not merely "a file with our marker".
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pinakes.errors import UsageError

MARKER = "# pinakes-hook: managed by `pnk install-hooks`"
# Hooks written before this line existed held absolute paths (interpreter and KB); re-running
# `pnk install-hooks` replaces them in place.
FORMAT_MARKER = "# pinakes-hook-format: 2"
FREE_EXTRACTOR_NOTE = ("# Forces the free extractor (--extract=pypdfium2): a hook cannot confirm a spend, "
                       "so paid extraction stays a deliberate human run.")
HOOK_COMMANDS = {
    "pre-commit": "sync --sidecars-only --stage --extract=pypdfium2",
    "post-commit": "sync --index-only --quiet --extract=pypdfium2",
    "post-merge": "sync --index-only --quiet --extract=pypdfium2",
}
PROBE_ENV = "PINAKES_HOOK_PROBE"
# `git config pinakes.strictHooks true`: the pre-commit hook blocks a commit it could not mint
# sidecars for, instead of warning and letting it through.
STRICT_CONFIG = "pinakes.strictHooks"

# What a hook does when it cannot run `pnk` (none found, or the one on PATH does not start) or the KB
# is not where it expects it. The post-commit and post-merge hooks cannot block anything: they print
# one line and exit 0. The pre-commit hook also lets the commit through by default, because
#  - nothing is lost: a document committed without its sidecar gets one (and its ID) from the next
#    `pnk sync` anywhere, which shows it as a new file to commit;
#  - blocking would stop every commit of a collaborator who does not use Pinakes, or of a GUI client
#    whose PATH lacks the environment, including commits that touch no document, and the only way
#    past it, `--no-verify`, also skips their own chained <hook>.local;
# and a team that wants the guarantee that a document and its ID always land together turns on
# `git config pinakes.strictHooks true`, which makes the same one line block the commit.
_SKIP_POLICY = """\
# When pnk cannot run or the KB is missing, say so in one line and let git go on: a document
# committed without its sidecar gets its ID from the next `pnk sync` anywhere, and blocking would stop
# every commit of anyone without Pinakes (whose only way past, --no-verify, also skips their own
# <hook>.local). `git config pinakes.strictHooks true` makes the pre-commit hook block instead."""


@dataclass(frozen=True)
class InstalledHook:
    name: str
    path: Path
    preserved: Path | None  # the user's own hook, kept and chained
    upgraded: bool = False  # an older Pinakes hook (absolute paths) was replaced


def git_hooks_dir(kb_root: Path) -> Path:
    try:
        out = subprocess.run(["git", "rev-parse", "--git-path", "hooks"], cwd=kb_root,
                             capture_output=True, text=True, check=True).stdout.strip()
    except (FileNotFoundError, subprocess.CalledProcessError) as exc:
        raise UsageError(f"{kb_root} is not inside a git repository",
                         remedy="run `git init` first (freshness is git-triggered), or sync by hand/cron") from exc
    hooks = Path(out)
    return hooks if hooks.is_absolute() else (kb_root / hooks).resolve()


def git_toplevel(kb_root: Path) -> Path | None:
    """The top of the working tree holding `kb_root`; None outside one (or in a bare repository)."""
    try:
        out = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=kb_root,
                             capture_output=True, text=True, check=True).stdout.strip()
    except (FileNotFoundError, subprocess.CalledProcessError):
        return None
    return Path(out).resolve() if out else None


def kb_relative_path(kb_root: Path) -> str:
    """The KB's path relative to the top of its working tree, as the hooks store it ("." at the top)."""
    top = git_toplevel(kb_root)
    if top is None:
        raise UsageError(f"{kb_root} is not inside a git working tree",
                         remedy="run `git init` first (freshness is git-triggered), or sync by hand/cron")
    try:
        return kb_root.resolve().relative_to(top).as_posix()
    except ValueError as exc:
        raise UsageError(f"{kb_root} is not inside the working tree at {top}",
                         remedy="run `pnk install-hooks` from the KB's own directory") from exc


def hook_script(name: str, kb_relative: str, installer_python: str | None = None) -> str:
    """The hook `name` for a KB at `kb_relative` (from the working tree's top), in POSIX sh."""
    python = sys.executable if installer_python is None else installer_python
    if name == "pre-commit":
        # skip REASON REMEDY: one line, then let the commit through (or block it when strict)
        skip = f"""skip() {{
    if [ "$(git config --bool {STRICT_CONFIG} 2>/dev/null)" = true ]; then
        echo "pinakes: $1; commit blocked ({STRICT_CONFIG} is set) — $2, or commit with --no-verify" >&2
        exit 1
    fi
    echo "pinakes: $1; new documents get no sidecar in this commit (the next \\`pnk sync\\` mints it) — $2" >&2
    exit 0
}}"""
        finish = 'exit "$status"'
    else:
        skip = """skip() {
    echo "pinakes: $1; the index was not refreshed — $2, then run \\`pnk sync\\`" >&2
    exit 0
}"""
        finish = "exit 0  # a post-commit/post-merge failure must never block git; pnk has said what failed"
    return f"""#!/bin/sh
{MARKER}
{FORMAT_MARKER} (finds the KB from the repository and pnk from the environment)
{FREE_EXTRACTOR_NOTE}
{_SKIP_POLICY}

# The KB, relative to the top of the working tree this hook runs in.
kb_rel={shlex.quote(kb_relative)}
# The interpreter `pnk install-hooks` ran under: tried after PATH, and skipped once it is gone.
installer_python={shlex.quote(python)}

{skip}

top=$(git rev-parse --show-toplevel 2>/dev/null) || top=$(pwd)
if [ "$kb_rel" = . ]; then kb=$top; else kb=$top/$kb_rel; fi

how=
shown=
if command -v pnk >/dev/null 2>&1; then
    how=pnk
    shown=$(command -v pnk)
elif [ -x "$installer_python" ] && "$installer_python" -c 'import pinakes' >/dev/null 2>&1; then
    how=$installer_python
elif command -v python3 >/dev/null 2>&1 && python3 -c 'import pinakes' >/dev/null 2>&1; then
    how=python3
fi
[ "$how" = pnk ] || [ -z "$how" ] || shown="$how -m pinakes"
run_pnk() {{
    if [ "$how" = pnk ]; then pnk "$@"; else "$how" -m pinakes "$@"; fi
}}

if [ -n "${{{PROBE_ENV}:-}}" ]; then  # `pnk doctor` asks what this hook would run, and nothing more
    printf 'kb=%s\npnk=%s\n' "$kb" "$shown"
    exit 0
fi

local_hook="${{0%/*}}/{name}.local"
if [ -x "$local_hook" ]; then "$local_hook" "$@" || exit $?; fi

[ -n "$how" ] || skip "pnk not found on PATH (nor python3 -m pinakes)" "activate the environment with pinakes"
[ -f "$kb/pinakes.toml" ] || skip "no KB at $kb (moved inside the repository?)" "run \\`pnk install-hooks\\` in the KB"

run_pnk -C "$kb" {HOOK_COMMANDS[name]}
status=$?
# 126/127: the pnk found was not able to start (a moved or deleted virtual environment)
if [ "$status" -eq 126 ] || [ "$status" -eq 127 ]; then
    skip "$shown did not start" "activate (or recreate) the environment with pinakes"
fi
{finish}
"""


def is_pinakes_hook(path: Path) -> bool:
    try:
        return MARKER in path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def is_current_hook(path: Path) -> bool:
    try:
        return FORMAT_MARKER in path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def install_hooks(kb_root: Path) -> list[InstalledHook]:
    """Write (or upgrade in place) the three hooks; idempotent."""
    hooks_dir = git_hooks_dir(kb_root)
    kb_relative = kb_relative_path(kb_root)
    hooks_dir.mkdir(parents=True, exist_ok=True)
    installed: list[InstalledHook] = []
    for name in HOOK_COMMANDS:
        path = hooks_dir / name
        preserved = None
        upgraded = is_pinakes_hook(path) and not is_current_hook(path)
        if path.exists() and not is_pinakes_hook(path):
            preserved = hooks_dir / f"{name}.local"
            if preserved.exists():
                raise UsageError(f"both {path} and {preserved} exist and neither is managed by Pinakes",
                                 remedy=f"merge them into {preserved} and remove {path}")
            path.rename(preserved)
        elif (hooks_dir / f"{name}.local").exists():
            preserved = hooks_dir / f"{name}.local"
        path.write_text(hook_script(name, kb_relative), encoding="utf-8")
        path.chmod(0o755)
        installed.append(InstalledHook(name, path, preserved, upgraded))
    return installed


# --- what doctor reports ----------------------------------------------------------------------------

HookProblem = Literal["missing", "foreign", "not-executable", "old-style", "old-style-broken",
                      "does-not-run", "other-kb", "no-pnk"]


@dataclass(frozen=True)
class HookState:
    name: str
    path: Path
    problem: HookProblem | None  # None: installed, current, and it resolves this KB and a pnk
    detail: str = ""
    pnk: str | None = None  # what the hook would run, when it was probed

    @property
    def ok(self) -> bool:
        return self.problem is None


PROBE_TIMEOUT_S = 15.0


def hooks_status(kb_root: Path) -> dict[str, HookState] | None:
    """Each hook's state, checked by running it in probe mode; None when the KB is not in a git repository."""
    try:
        hooks_dir = git_hooks_dir(kb_root)
    except UsageError:
        return None
    top = git_toplevel(kb_root)
    return {name: _hook_state(name, hooks_dir / name, kb_root, top) for name in HOOK_COMMANDS}


def _hook_state(name: str, path: Path, kb_root: Path, top: Path | None) -> HookState:
    if not path.exists():
        return HookState(name, path, "missing", "not installed")
    if not is_pinakes_hook(path):
        return HookState(name, path, "foreign", "a hook Pinakes did not write "
                         f"(`pnk install-hooks` keeps it as {name}.local and runs it first)")
    if not is_current_hook(path):
        return _old_style_state(name, path, kb_root)
    if not os.access(path, os.X_OK):
        return HookState(name, path, "not-executable", "not executable: git skips it")
    env = {**os.environ, PROBE_ENV: "1"}
    try:
        probe = subprocess.run([str(path)], cwd=top or kb_root, env=env, capture_output=True, text=True,
                               timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return HookState(name, path, "does-not-run", f"does not run: {exc}")
    values: dict[str, str] = {}
    for line in probe.stdout.splitlines():
        key, _, value = line.partition("=")
        values[key] = value
    if probe.returncode != 0 or "kb" not in values:
        said = (probe.stderr.strip().splitlines() or [f"exit {probe.returncode}"])[-1]
        return HookState(name, path, "does-not-run", f"does not run: {said}")
    resolved = Path(values["kb"])
    if not _same_dir(resolved, kb_root):
        return HookState(name, path, "other-kb", f"syncs {resolved}, not this KB")
    pnk = values.get("pnk") or None
    if pnk is None:
        return HookState(name, path, "no-pnk", "finds no pnk from this environment (PATH, the installing "
                         "interpreter, python3): commits go ahead without minting sidecars or indexing")
    return HookState(name, path, None, pnk=pnk)


def _old_style_state(name: str, path: Path, kb_root: Path) -> HookState:
    """A hook from before FORMAT_MARKER: `<python> -m pinakes -C <kb> sync ...`, both absolute."""
    python = kb = None
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if " -m pinakes -C " in line:
            try:
                words = shlex.split(line, comments=True)
            except ValueError:
                break
            if len(words) > 4 and words[1:4] == ["-m", "pinakes", "-C"]:
                python, kb = words[0], words[4]
            break
    if python is None or kb is None:
        return HookState(name, path, "old-style-broken", "an older Pinakes hook this version cannot read")
    if not Path(python).exists():
        return HookState(name, path, "old-style-broken", f"an older hook runs {python}, which no longer exists")
    if not Path(kb).is_dir():
        return HookState(name, path, "old-style-broken", f"an older hook syncs {kb}, which no longer exists")
    if not _same_dir(Path(kb), kb_root):
        return HookState(name, path, "old-style-broken", f"an older hook syncs {kb}, not this KB")
    return HookState(name, path, "old-style", "an older hook with absolute paths: it breaks when the KB "
                     "or its environment moves")


def _same_dir(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except OSError:
        return False
