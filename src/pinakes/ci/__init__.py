"""Pinakes in CI workflows (spec §6.3): `pnk ci init` / `pnk init --ci` write a GitHub Actions workflow
that keeps a KB's index fresh and gates its retrieval quality; the same steps are documented for
GitLab CI; `contract` is what sync, eval and doctor promise a CI step (exit codes, `--json`).

The workflow goes to `.github/workflows/` at the top of the git working tree holding the KB (the
KB's own directory when it is not in one yet: a KB is normally its own repository). A file
Pinakes wrote (it carries `github.MARKER`) is regenerated in place; any other file of that name is
refused, never overwritten.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pinakes import __version__
from pinakes.atomic import atomic_write_bytes
from pinakes.ci.github import MARKER, render_workflow, workflow_name
from pinakes.ci.steps import extras_for
from pinakes.errors import UsageError

WORKFLOWS_DIR = Path(".github") / "workflows"
GOLDEN_SET_RELPATH = Path("eval") / "questions.yaml"
# A KB path the workflow can name in cache paths, hashFiles() and working-directory without quoting
# rules of three languages in play (YAML, Actions expressions, glob patterns).
_SAFE_PATH = re.compile(r"[\w.@+-]+(?:/[\w.@+-]+)*")

WorkflowAction = Literal["created", "updated", "unchanged"]


@dataclass(frozen=True)
class WorkflowResult:
    path: Path
    action: WorkflowAction
    kb_relative: str  # the KB's path from the repository's top ("." there)
    in_git: bool  # False: not in a git working tree yet; the workflow assumes the KB is the repository
    has_golden_set: bool  # False: the eval step will print a skip until eval/questions.yaml exists


def write_workflow(kb_root: Path, version: str = __version__) -> WorkflowResult:
    """Write (or regenerate) the GitHub Actions workflow for the KB at `kb_root`."""
    from pinakes.hooks import git_toplevel
    from pinakes.kb import KBPaths
    from pinakes.manifest import load_manifest

    kb_root = Path(kb_root).resolve()
    manifest = load_manifest(KBPaths(kb_root).manifest)
    top = git_toplevel(kb_root)
    in_git = top is not None
    repository = top if top is not None else kb_root
    kb_relative = kb_root.relative_to(repository).as_posix() if kb_root != repository else "."
    if kb_relative != "." and not _SAFE_PATH.fullmatch(kb_relative):
        raise UsageError(f"the KB's path in its repository, {kb_relative!r}, has characters a workflow "
                         "cannot name safely (spaces, quotes, glob characters)",
                         remedy="rename the KB's directory with letters, digits, '.', '_', '-', '@', '+'",
                         path=kb_root)
    path = repository / WORKFLOWS_DIR / workflow_name(kb_relative)
    text = render_workflow(manifest.kb.name, kb_relative, version, extras_for(manifest))
    action: WorkflowAction = "created"
    if path.exists():
        existing = path.read_text(encoding="utf-8", errors="replace")
        if MARKER not in existing:
            raise UsageError(f"{path} exists and was not written by Pinakes; it was left as it is",
                             remedy="move it aside (or merge the steps from docs/GUIDE.md by hand), "
                                    "then run `pnk ci init` again", path=path)
        action = "unchanged" if existing == text else "updated"
    if action != "unchanged":
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, text.encode("utf-8"))
    return WorkflowResult(path=path, action=action, kb_relative=kb_relative, in_git=in_git,
                          has_golden_set=(kb_root / GOLDEN_SET_RELPATH).is_file())
