"""`pnk adopt SIDECAR DOCUMENT`: give a moved document back the permanent ID it had before.

A document moved (and edited) without its sidecar gets a new ID from the next sync, and its old ID is
soft-deleted with the sidecar left behind; sync names the likely pair but never decides it, because
attaching an ID to the wrong file silently redirects every inbound link. This is the human decision:
the left-behind sidecar moves beside the named document, replacing the sidecar minted for it, and the
next sync continues the old ID there (reported as a move). Nothing else is written.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from pinakes.errors import SidecarError, UsageError
from pinakes.kb import SIDECAR_SUFFIX, KBPaths, find_kb_root


@dataclass(frozen=True)
class Adopted:
    sidecar: str  # KB-relative path of the sidecar now beside the document
    document: str
    doc_id: str  # the ID the document carries from now on
    replaced_id: str | None  # the ID of the sidecar that was beside it, now retired


def adopt_command(document_was: str, document_now: str) -> str:
    """The `pnk adopt` line that keeps the ID of the document that was at `document_was` (KB-relative
    paths, quoted for a shell): what sync, `pnk status` and the pre-commit hook print for a likely move."""
    return f"pnk adopt {shlex.quote(document_was + SIDECAR_SUFFIX)} {shlex.quote(document_now)}"


def adopt_sidecar(start: Path | str | None, sidecar: Path | str, document: Path | str) -> Adopted:
    from pinakes.atomic import atomic_move
    from pinakes.extract.source_types import source_type_for
    from pinakes.manifest import load_manifest
    from pinakes.sidecar import read_sidecar, sidecar_path_for

    root = find_kb_root(start)
    manifest = load_manifest(KBPaths(root).manifest)
    sidecar_path, document_path = _inside(root, sidecar), _inside(root, document)
    if not sidecar_path.name.endswith(SIDECAR_SUFFIX) or not sidecar_path.is_file():
        raise UsageError(f"{_rel(root, sidecar_path)} is not a sidecar ({SIDECAR_SUFFIX} file)",
                         remedy="name the sidecar the document left behind (sync lists orphaned sidecars)")
    if sidecar_path.with_name(sidecar_path.name[: -len(SIDECAR_SUFFIX)]).exists():
        raise UsageError(f"{_rel(root, sidecar_path)} is not an orphaned sidecar: its document is beside it",
                         remedy="adopt only a sidecar whose document is gone")
    if not document_path.is_file():
        raise UsageError(f"there is no document at {_rel(root, document_path)}",
                         remedy="name the document as it is now, e.g. docs/notes/plan.md")
    relative = _rel(root, document_path)
    if source_type_for(relative) is None or not manifest.sources.selects(relative):
        raise UsageError(f"{relative} is not a source document of this KB",
                         remedy="check [sources] in pinakes.toml")
    kept = read_sidecar(sidecar_path, kb_id=manifest.kb.id)  # refuses a sidecar that does not parse
    target = sidecar_path_for(document_path)
    replaced: str | None = None
    if target.exists():
        try:
            replaced = read_sidecar(target, kb_id=manifest.kb.id).id
        except SidecarError:
            replaced = None
    atomic_move(sidecar_path, target)
    return Adopted(_rel(root, target), relative, kept.id, replaced)


def _inside(root: Path, path: Path | str) -> Path:
    """Where the typed path points, as every command that names a document reads a path; it must
    lie inside the KB (adopt moves a sidecar within one KB)."""
    from pinakes.links.addresses import typed_path

    resolved = typed_path(root, path).resolve()
    if not resolved.is_relative_to(root.resolve()):
        raise UsageError(f"{path} is outside the KB at {root}", remedy="name files inside the KB")
    return resolved


def _rel(root: Path, path: Path) -> str:
    return path.relative_to(root.resolve()).as_posix()
