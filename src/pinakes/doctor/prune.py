"""`pnk doctor --prune`: find the sidecars whose document is gone, and delete them on request (spec §6.4).

Deletion is soft: a sync that finds a document gone marks its row `deleted` and leaves the sidecar on
disk, because that sidecar is the document's permanent ID and deleting a person's file on a hash
mismatch cannot be undone. Pruning is the one place Pinakes deletes sidecars, and only after listing
them and an explicit yes (the CLI's job); this module decides *what* may go and deletes exactly that.

A sidecar is orphaned — listed for pruning — when all of these hold:

- it is a regular file (never a symbolic link) found by the same walk sync does: under the source
  roots, outside excluded directories, no directory link followed;
- nothing at all is at its document's path. A symbolic link there counts as something even when it
  points nowhere: its target may be on a drive that is not mounted, and pruning would lose the ID the
  day it comes back. Such a sidecar is kept and said so; delete the link first if the document is
  really gone;
- it parses, so its ULID can be checked (an unreadable sidecar is kept: its ID cannot be checked);
- the index does not hold its ULID as an active document, at this path (a deletion no sync has seen
  yet, or a file moved without its sidecar that the next sync may still pair by content) or at
  another (a rename in flight). Its ULID is either soft-deleted in the index (`deleted_since`: when
  the index recorded that) or was never indexed.

Without an index nothing is listed: only the index can say a document is not active somewhere else.

The index is left alone: a pruned ULID keeps its soft-deleted row. Sync only ever revives or renames
a soft-deleted ID from a sidecar that carries it, so once the sidecar is gone the row is an inert
tombstone, and keeping it keeps the rule that an ID is never reused.

Deleting takes the sync lock (a prune never races a sync) and re-checks every listed file right
before unlinking it: still a regular file inside the KB, document still absent, the same ULID, still
not active in the index. A file that no longer qualifies is skipped and reported, not deleted.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from pinakes.errors import IndexMissingError, LockHeldError, PinakesError
from pinakes.kb import SIDECAR_SUFFIX, KBPaths


@dataclass(frozen=True)
class Orphan:
    """A sidecar that may be pruned. Paths are KB-root-relative, POSIX."""

    sidecar: str
    document: str  # the path it described, which no longer exists
    doc_id: str
    index_state: str  # "deleted" (soft-deleted in the index) | "not indexed" (the index never held it)
    deleted_since: str | None  # when the index recorded the deletion; None when not indexed


@dataclass(frozen=True)
class Kept:
    """A sidecar with no document beside it that is not pruned, and why."""

    sidecar: str
    reason: str


@dataclass
class PrunePlan:
    root: Path
    orphans: list[Orphan] = field(default_factory=list[Orphan])
    kept: list[Kept] = field(default_factory=list[Kept])


@dataclass
class PruneOutcome:
    deleted: list[str] = field(default_factory=list[str])
    skipped: list[Kept] = field(default_factory=list[Kept])  # listed, but no longer orphaned when re-checked
    failed: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])  # (sidecar, error): not deleted
    warnings: list[str] = field(default_factory=list[str])  # e.g. a stale sync lock reclaimed

    @property
    def ok(self) -> bool:
        return not self.failed


class IndexedId(NamedTuple):
    state: str
    path: str
    indexed_at: str


def find_orphans(root: Path) -> PrunePlan:
    """Every sidecar under `root`'s sources that `pnk doctor --prune` may delete (see the module doc)."""
    from pinakes.manifest import load_manifest
    from pinakes.sources.walk import walk

    root = root.resolve()
    paths = KBPaths(root)
    manifest = load_manifest(paths.manifest)
    indexed = _indexed_ids(paths)
    found = walk(root, manifest.sources, {}, hash_contents=False)
    plan = PrunePlan(root)
    for sidecar in found.orphan_sidecars:
        verdict = _judge(root, sidecar, manifest.kb.id, indexed)
        if isinstance(verdict, Orphan):
            plan.orphans.append(verdict)
        else:
            plan.kept.append(Kept(sidecar, verdict))
    return plan


def delete_orphans(root: Path, orphans: list[Orphan]) -> PruneOutcome:
    """Delete exactly the sidecars in `orphans` (a list `find_orphans` made and a person confirmed),
    each only if it is still orphaned, under the sync lock. One failure does not stop the others."""
    from pinakes.manifest import load_manifest
    from pinakes.sync.lock import LockBusy, SyncLock

    root = root.resolve()  # `_inside` compares against the resolved directory
    paths = KBPaths(root)
    kb_id = load_manifest(paths.manifest).kb.id
    outcome = PruneOutcome()
    try:
        with SyncLock(paths.lock) as lock:
            outcome.warnings.extend(lock.warnings)
            indexed = _indexed_ids(paths)  # re-read under the lock: no sync can move it now
            for orphan in orphans:
                _delete_one(root, orphan, kb_id, indexed, outcome)
    except LockBusy as busy:
        raise LockHeldError(
            f"a sync is running ({busy.holder.describe()}); nothing was deleted",
            remedy="run `pnk doctor --prune` again when the sync has finished", path=paths.lock,
        ) from None
    return outcome


def _delete_one(root: Path, orphan: Orphan, kb_id: str, indexed: dict[str, IndexedId],
                outcome: PruneOutcome) -> None:
    target = root / orphan.sidecar
    if not _inside(root, target):
        outcome.skipped.append(Kept(orphan.sidecar, "a directory on its path is now a symbolic link: "
                                                    "nothing outside the KB is deleted"))
        return
    verdict = _judge(root, orphan.sidecar, kb_id, indexed)
    if not isinstance(verdict, Orphan):
        outcome.skipped.append(Kept(orphan.sidecar, f"no longer orphaned: {verdict}"))
        return
    if verdict.doc_id != orphan.doc_id:
        outcome.skipped.append(Kept(orphan.sidecar, f"it now carries {verdict.doc_id}, not the "
                                                    f"{orphan.doc_id} that was listed"))
        return
    try:
        os.unlink(target)
    except FileNotFoundError:
        outcome.skipped.append(Kept(orphan.sidecar, "already gone"))
    except OSError as exc:
        from pinakes.errors import filesystem_error

        error = filesystem_error(target, exc, "delete the sidecar")
        outcome.failed.append((orphan.sidecar, f"{error.message}; {error.remedy}"))
    else:
        outcome.deleted.append(orphan.sidecar)


def _judge(root: Path, sidecar: str, kb_id: str, indexed: dict[str, IndexedId]) -> Orphan | str:
    """The sidecar as an `Orphan`, or the reason it is kept."""
    from pinakes.sidecar import read_sidecar

    document = sidecar[: -len(SIDECAR_SUFFIX)]
    try:
        sidecar_mode = os.lstat(root / sidecar).st_mode
    except FileNotFoundError:
        return "the sidecar is gone"
    except OSError as exc:
        return f"the sidecar cannot be checked ({exc.strerror})"
    if not stat.S_ISREG(sidecar_mode):
        return "the sidecar is not a regular file (a symbolic link is never followed or deleted)"
    present = _why_document_present(root / document)
    if present is not None:
        return present
    try:
        doc_id = read_sidecar(root / sidecar, kb_id=kb_id).id
    except PinakesError as exc:
        return f"it does not parse, so its ID cannot be checked against the index: {exc.message}"
    row = indexed.get(doc_id)
    if row is None:
        return Orphan(sidecar, document, doc_id, "not indexed", None)
    if row.state == "active":
        if row.path == document:
            return (f"the index still holds {doc_id} as active at this path: run `pnk sync` first "
                    "(it records the deletion, or pairs a file moved without its sidecar by content)")
        return (f"the index holds {doc_id} as active at {row.path}: a rename in flight; move the sidecar "
                "beside that document, or run `pnk sync`")
    return Orphan(sidecar, document, doc_id, "deleted", row.indexed_at)


def _why_document_present(document: Path) -> str | None:
    """None when nothing is at the document's path; otherwise why the sidecar is kept."""
    try:
        mode = os.lstat(document).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"its document's path cannot be checked ({exc.strerror})"
    if stat.S_ISLNK(mode):
        if not os.path.exists(document):
            return ("its document is a symbolic link to nothing (perhaps a drive that is not mounted); "
                    "delete the link first if the document is really gone")
        return "its document is a symbolic link (sync does not follow links, so it is not indexed)"
    return "its document exists but is not indexed (excluded by [sources], or no extractor for its type)"


def _inside(root: Path, target: Path) -> bool:
    """True when the sidecar's directory, links resolved, is still the directory inside the KB that
    the walk found (no directory on the way was swapped for a link since)."""
    return os.path.realpath(target.parent) == os.path.normpath(target.parent)


def _indexed_ids(paths: KBPaths) -> dict[str, IndexedId]:
    """Every ULID the index holds, with its state. Without an index nothing can be pruned."""
    from pinakes.index import schema

    if not paths.index_db.exists():
        raise IndexMissingError(
            "this KB has no index yet, and only the index can say a sidecar's document is not "
            "active somewhere else; nothing was listed or deleted",
            remedy="run `pnk sync`, then `pnk doctor --prune`", path=paths.index_db,
        )
    conn = schema.open_reader(paths.index_db)
    try:
        rows = conn.execute("SELECT id, state, path, indexed_at FROM documents").fetchall()
    except sqlite3.Error as exc:
        raise schema.index_error(paths.index_db, exc) from exc
    finally:
        conn.close()
    return {doc_id: IndexedId(state, path, indexed_at) for doc_id, state, path, indexed_at in rows}
