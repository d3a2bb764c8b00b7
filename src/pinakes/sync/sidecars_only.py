"""`pnk sync --sidecars-only [--stage]`: mint IDs for new documents, never opening the index.

This is what the pre-commit hook runs, so a document and its ID land in the same commit. With
--stage it considers only staged documents (so `git add -p` stays honest), `git add`s the sidecars
it writes, and moves the sidecar of a staged rename along with its document so the ID survives.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from pinakes.errors import PinakesError, UsageError
from pinakes.kb import SIDECAR_SUFFIX, KBPaths
from pinakes.sync.context import SyncOptions
from pinakes.sync.report import SyncReport


def _git(root: Path, *args: str) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True)
    except FileNotFoundError as exc:
        raise UsageError("--stage needs git, which is not installed", remedy="install git") from exc
    except subprocess.CalledProcessError as exc:
        raise UsageError(f"git {' '.join(args)} failed: {exc.stderr.strip()}",
                         remedy="run --stage inside a git work tree") from exc
    return done.stdout


def _staged(paths: KBPaths) -> tuple[set[str], list[tuple[str, str]]]:
    """KB-relative paths of staged added documents, and staged renames (old, new)."""
    top = Path(_git(paths.root, "rev-parse", "--show-toplevel").strip()).resolve()
    prefix = paths.root.resolve().relative_to(top).as_posix()
    prefix = "" if prefix == "." else prefix + "/"
    added: set[str] = set()
    renames: list[tuple[str, str]] = []
    fields = _git(paths.root, "diff", "--cached", "--name-status", "-M", "-z").split("\0")
    position = 0
    while position < len(fields) and fields[position]:
        status = fields[position]
        if status.startswith("R"):
            old, new = fields[position + 1], fields[position + 2]
            position += 3
            if old.startswith(prefix) and new.startswith(prefix):
                renames.append((old[len(prefix):], new[len(prefix):]))
                added.add(new[len(prefix):])
            continue
        path = fields[position + 1]
        position += 2
        if status in ("A", "C") and path.startswith(prefix):
            added.add(path[len(prefix):])
    return added, renames


def run_sidecars_only(paths: KBPaths, manifest: Any, options: SyncOptions, report: SyncReport) -> None:
    from pinakes.ids import new_ulid
    from pinakes.rules.walk import walk
    from pinakes.sidecar import write_new_sidecar

    only: set[str] | None = None
    renames: list[tuple[str, str]] = []
    if options.stage:
        only, renames = _staged(paths)
    result = walk(paths.root, manifest.sources, {}, hash_contents=False, only=only)
    to_stage: list[str] = []
    for old, new in renames:
        old_sidecar = paths.root / (old + SIDECAR_SUFFIX)
        if new in result.docs and new not in result.sidecars and old_sidecar.exists():
            _git(paths.root, "mv", old + SIDECAR_SUFFIX, new + SIDECAR_SUFFIX)
            result.sidecars[new] = result.docs[new]
            report.sidecars_written.append(new + SIDECAR_SUFFIX)
            report.notes.append(f"moved {old}{SIDECAR_SUFFIX} with its renamed document (the ID travels)")
    for path in sorted(result.docs):
        if path in result.sidecars:
            continue
        try:
            written = write_new_sidecar(paths.root / path, doc_id=new_ulid())
        except PinakesError as exc:
            report.fail(path, "sidecar", exc.render())
            continue
        rel = written.relative_to(paths.root).as_posix() if written.is_absolute() else str(written)
        report.sidecars_written.append(rel)
        to_stage.append(rel)
    if options.stage and to_stage:
        _git(paths.root, "add", "--", *to_stage)
    report.orphaned_sidecars.extend(result.orphan_sidecars)
