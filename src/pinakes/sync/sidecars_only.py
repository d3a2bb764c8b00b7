"""`pnk sync --sidecars-only [--stage]`: mint IDs for new documents, never writing the index.

This is what the pre-commit hook runs, so a document and its ID land in the same commit. With
--stage it considers only staged documents (so `git add -p` stays honest), `git add`s the sidecars
it writes, and moves the sidecar of a staged rename along with its document so the ID survives.

A rename git did not see (an edit too large for its rename detection, or the old path's deletion left
unstaged) gets a fresh ID here, and the next sync soft-deletes the old one. So when it mints, it reads
the index (read-only, when there is one) for indexed documents whose file is gone, and warns, one line
each, about those the sync's own likely-move rule pairs with a document it just minted for, naming the
`pnk adopt` command that keeps the old ID. A warning, never a refusal: the rule is a likelihood, the
commit loses nothing, and the command works as well after the commit.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes.errors import PinakesError, UsageError
from pinakes.kb import SIDECAR_SUFFIX, KBPaths
from pinakes.pipeline.report import SyncReport
from pinakes.sync import SyncOptions

if TYPE_CHECKING:
    from pinakes.manifest import Manifest
    from pinakes.pipeline.likely_moves import LikelyMove
    from pinakes.pipeline.types import IndexedDoc


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


def run_sidecars_only(paths: KBPaths, manifest: Manifest, options: SyncOptions, report: SyncReport) -> None:
    from pinakes.ids import new_ulid
    from pinakes.sidecar import write_new_sidecar
    from pinakes.sources.walk import walk

    only: set[str] | None = None
    renames: list[tuple[str, str]] = []
    if options.stage:
        only, renames = _staged(paths)
    result = walk(paths.root, manifest.sources, {}, hash_contents=False, only=only)
    to_stage: list[str] = []
    minted: list[str] = []
    for old, new in renames:
        old_sidecar = paths.root / (old + SIDECAR_SUFFIX)
        if new in result.docs and new not in result.sidecars and old_sidecar.exists():
            _git(paths.root, "mv", old + SIDECAR_SUFFIX, new + SIDECAR_SUFFIX)
            result.sidecars[new] = result.docs[new]
            report.sidecars_written.add(new)
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
        report.sidecars_written.add(path)
        to_stage.append(rel)
        minted.append(path)
    if options.stage and to_stage:
        _git(paths.root, "add", "--", *to_stage)
    report.orphaned_sidecars.extend(result.orphan_sidecars)
    report.warnings.extend(likely_move_warning(move) for move in _likely_moves_to(paths, minted, result.source_types))


def _likely_moves_to(paths: KBPaths, minted: Sequence[str], source_types: Mapping[str, str]) -> list[LikelyMove]:
    """The sync's likely-move rule between the indexed documents whose file is gone and the
    documents just minted for: what the next sync would soft-delete and index afresh."""
    if not minted or not paths.index_db.exists():
        return []
    from pinakes.index.schema import open_reader
    from pinakes.pipeline.likely_moves import MoveEvidence, likely_moves
    from pinakes.pipeline.pair import load_indexed

    root = paths.root
    try:
        conn = open_reader(paths.index_db)
    except PinakesError:
        return []  # an index this build cannot read: the hint is not worth failing a commit over
    try:
        gone, left_behind = _gone_from_disk(root, [doc for doc in load_indexed(conn) if doc.state == "active"])
        if not left_behind:
            return []
        arrivals = {path: _content_hash(root / path) for path in minted}  # the walk here hashes nothing
        return likely_moves(gone, arrivals, left_behind, MoveEvidence(conn, root, source_types))
    except sqlite3.Error:
        return []
    finally:
        conn.close()


def _content_hash(path: Path) -> str:
    from pinakes.sources.walk import hash_file

    try:
        return hash_file(path)
    except OSError:
        return ""  # compared by name and lines only


def _gone_from_disk(root: Path, indexed: Sequence[IndexedDoc]) -> tuple[list[IndexedDoc], list[str]]:
    """The indexed documents whose file is gone, and the sidecars they left behind. Each folder is
    listed once: a stat per document costs about a second per 100,000 documents in a commit."""
    listings: dict[str, set[str]] = {}
    gone: list[IndexedDoc] = []
    left_behind: list[str] = []
    for doc in indexed:
        folder, _, name = doc.path.rpartition("/")
        names = listings.get(folder)
        if names is None:
            try:
                names = listings[folder] = set(os.listdir(root / folder))
            except OSError:
                names = listings[folder] = set()
        if name not in names:
            gone.append(doc)
            if name + SIDECAR_SUFFIX in names:
                left_behind.append(doc.path + SIDECAR_SUFFIX)
    return gone, left_behind


def likely_move_warning(move: LikelyMove) -> str:
    """What the pre-commit hook says: the ID is not lost yet, and the command keeps it."""
    doc = move.doc
    return (f"likely moved without its sidecar: {doc.path} -> {move.new_path} ({move.why}); {move.new_path} "
            f"got a new ID, and the next sync soft-deletes {doc.path}'s ID {doc.id}, which breaks links to "
            f"it. To keep the old ID: {move.adopt} && pnk sync (then commit the sidecar)")
