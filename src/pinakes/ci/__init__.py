"""Pinakes in CI workflows (spec §6.3): `pnk ci init` / `pnk init --ci` write a GitHub Actions workflow
that keeps a KB's index fresh and gates its retrieval quality; the same steps are documented for
GitLab CI; `contract` is what sync, eval and doctor promise a CI step (exit codes, `--json`).

The workflow goes to `.github/workflows/` at the top of the git working tree holding the KB (the
KB's own directory when it is not in one yet: a KB is normally its own repository). A file
Pinakes wrote (it carries `github.MARKER`) is regenerated in place; any other file of that name is
refused, never overwritten.

The workflow installs exactly the Pinakes that wrote it, from where it came (`install_requirement`):
the git URL and commit, the archive URL, or the release of `pinakes-kb` on the index, as PEP 610's
record of the installed distribution says; or the manifest's `[ci] install`. An install a runner
cannot reach (an editable checkout, a local file) is refused with the remedy naming `[ci] install`,
rather than written as a workflow that would fail on its first run or install something else.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pinakes import __version__
from pinakes.atomic import atomic_write_bytes
from pinakes.ci.github import MARKER, render_workflow, workflow_name
from pinakes.ci.steps import InstallRequirement, extras_for
from pinakes.distribution import Origin, installed_origin, requirement
from pinakes.errors import UsageError

if TYPE_CHECKING:
    from pinakes.manifest import Manifest

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


def install_requirement(manifest: Manifest | None, extras: tuple[str, ...],
                        origin: Origin | None = None) -> InstallRequirement:
    """What the workflow installs: the manifest's `[ci] install` when set, else exactly this Pinakes
    with `extras`, from where it was installed. Raises UsageError when a runner could not install it."""
    if manifest is not None and manifest.ci.install is not None:
        return InstallRequirement(manifest.ci.install, "the manifest's [ci] install")
    origin = origin if origin is not None else installed_origin()
    resolved = origin.requirement(extras)
    if resolved is None:
        raise UsageError(
            f"a CI runner could not install this Pinakes: it came from {origin.describe()}, which is "
            "on this machine only; no workflow was written",
            remedy=("create the KB without --ci, then " if manifest is None else "")
                   + "name what CI should install in pinakes.toml: [ci] install = "
                   + f"{json.dumps(_suggested_requirement(origin, extras))} (docs/MANIFEST.md), then run "
                   "`pnk ci init`; or install Pinakes itself from a git URL or a release",
            path=manifest.path if manifest is not None else None)
    return InstallRequirement(resolved, f"the Pinakes that wrote this file, from {origin.describe()}")


def _suggested_requirement(origin: Origin, extras: tuple[str, ...]) -> str:
    """For the remedy: the checkout's remote at its HEAD when the origin is a git checkout with an
    https remote (the user still has to push that commit), else a placeholder to fill in."""
    from urllib.parse import unquote, urlsplit

    placeholder = requirement(extras, " @ git+https://<host>/<repository>@<commit>")
    if origin.kind != "directory" or origin.url is None or not origin.url.startswith("file://"):
        return placeholder
    checkout = Path(unquote(urlsplit(origin.url).path))
    remote = _git(checkout, "remote", "get-url", "origin")
    head = _git(checkout, "rev-parse", "HEAD")
    if remote is None or head is None or not remote.startswith("https://"):
        return placeholder
    return requirement(extras, f" @ git+{remote}@{head}")


def _git(cwd: Path, *argv: str) -> str | None:
    import subprocess

    try:
        done = subprocess.run(["git", *argv], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None


def write_workflow(kb_root: Path, version: str = __version__, origin: Origin | None = None) -> WorkflowResult:
    """Write (or regenerate) the GitHub Actions workflow for the KB at `kb_root`; `origin` (default:
    where this Pinakes was installed from) decides what it installs unless the manifest says."""
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
    extras = extras_for(manifest)
    text = render_workflow(manifest.kb.name, kb_relative, version,
                           install_requirement(manifest, extras, origin), extras)
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
