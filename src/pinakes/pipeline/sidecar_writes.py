"""Writing the sidecars pairing decided (spec §6.4): a document's permanent ID is on disk before the
index refers to it.

Pairing decides every identity against the whole tree at once (a rename cannot be told from a delete
and a new file before every file was seen), and it picks each new document's ID then. Only the
writing is per document, so it is split by what waits on it:

- a restored or moved sidecar (an indexed identity that continues) is written by pairing itself,
  before the moves and deletes it goes with (`pipeline.pair.apply_identity`);
- a new document's sidecar (a mint) is written just before its group is extracted
  (`mint_group`), so the first sync of a large tree starts writing chunks within seconds instead of
  after one sidecar (two fsyncs) per document of the tree. A run killed on the way leaves the
  sidecars it minted; the next sync pairs each as an arrival (an ID the index does not hold yet)
  and indexes it under that ID; the documents it had not reached get theirs then.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, MutableSet, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from pinakes.errors import PinakesError
from pinakes.faults import faultpoint
from pinakes.index.schema import transaction
from pinakes.pipeline.context import context_naming
from pinakes.sources.walk import FileState, remember_files, resolves_inside

if TYPE_CHECKING:
    from pinakes.pipeline.run import SyncContext
    from pinakes.pipeline.types import DocWork
    from pinakes.sidecar.model import JSONValue, Sidecar  # the sidecar package imports ruamel: types only


@dataclass(frozen=True, slots=True)
class SidecarWrite:
    doc_path: str
    doc_id: str
    kind: str  # "mint" (a new ID) | "restore" (the indexed ID, sidecar was deleted) | "move"
    from_path: str | None = None  # for "move": the sidecar that travels with a renamed document
    metadata: str | None = None  # for "restore": the indexed metadata to write back


class IndexedSidecarFields(TypedDict, total=False):
    """The keys of a documents row's metadata JSON that a restored sidecar is written from."""

    title: str
    tags: list[str]
    provenance: dict[str, JSONValue]


# Writing this many sidecars at pairing takes long enough (about 1-10 ms each) to be said before it
# starts. Mints are streamed with their groups and never wait in one block.
MANY_SIDECARS = 200


class _ContainedFolders:
    """Whether a sidecar's folder still resolves inside the KB at the moment of writing: the walk
    entered only real folders, but one may have been swapped for a symbolic link since. Each
    folder is resolved once per writer."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._inside: dict[Path, bool] = {}

    def first_outside(self, *files: Path) -> Path | None:
        for file in files:
            folder = file.parent
            inside = self._inside.get(folder)
            if inside is None:
                inside = self._inside[folder] = resolves_inside(self._root, folder)
            if not inside:
                return file
        return None


class SidecarWriter:
    """Writes sidecars one by one, each failure recorded against its document, and remembers what
    it wrote so the walk cache learns their hashes in one transaction (`remember`)."""

    def __init__(self, ctx: SyncContext) -> None:
        self._ctx = ctx
        self._contained = _ContainedFolders(ctx.paths.root)
        self._written: list[tuple[Path, str]] = []
        self._learned: list[FileState] = []

    def learn(self, states: Sequence[FileState]) -> None:
        """Documents just hashed: the walk cache learns them with the sidecars (`remember`)."""
        self._learned.extend(states)

    def write(self, write: SidecarWrite) -> Sidecar | None:
        """Write one sidecar and read it back; None when it could not be written (recorded)."""
        from pinakes.atomic import atomic_move
        from pinakes.sidecar import read_sidecar, sidecar_path_for, write_new_sidecar

        ctx, root, report = self._ctx, self._ctx.paths.root, self._ctx.report
        doc_path = root / write.doc_path
        outside = self._contained.first_outside(doc_path, *([root / write.from_path] if write.from_path else []))
        if outside is not None:
            report.fail(write.doc_path, "sidecar", f"the sidecar was not written: {outside.parent} resolves "
                                                   "outside the KB (a symbolic link on the way)")
            return None
        try:
            if write.kind == "move" and write.from_path:
                atomic_move(root / write.from_path, sidecar_path_for(doc_path))
            else:
                meta: IndexedSidecarFields = json.loads(write.metadata) if write.metadata else {}
                write_new_sidecar(doc_path, doc_id=write.doc_id, title=meta.get("title"),
                                  tags=tuple(meta.get("tags") or ()),
                                  links=(), provenance=meta.get("provenance") or None)
        except (OSError, PinakesError) as exc:
            message = exc.render() if isinstance(exc, PinakesError) else str(exc)
            report.fail(write.doc_path, "sidecar", f"could not write the sidecar: {message}")
            return None
        report.sidecars_written.add(write.doc_path)
        faultpoint("sync.after-sidecar-write")
        sidecar_file = sidecar_path_for(doc_path)
        sidecar = read_sidecar(sidecar_file, kb_id=ctx.kb_id)
        self._written.append((sidecar_file, sidecar.raw_hash))
        return sidecar

    def remember(self) -> None:
        """The walk cache learns the written sidecars' hashes (and the documents `learn`ed) in one
        transaction: the next walk need not read them."""
        if not (self._written or self._learned):
            return
        root = self._ctx.paths.root
        states = [*self._learned, *(_file_state(root, file, digest) for file, digest in self._written)]
        with transaction(self._ctx.writer()):
            remember_files(self._ctx.writer(), states)
        self._written.clear()
        self._learned.clear()


def carrying(ctx: SyncContext, item: DocWork, sidecar: Sidecar) -> DocWork:
    """`item` carrying the sidecar just written for it, keyed on the title its chunks are built with:
    that sidecar's (a moved one may have been edited on the way)."""
    return replace(item.with_sidecar(sidecar), key=ctx.keys.key(
        item.file.content_hash, item.source_type, context_naming(sidecar.title, item.path)))


def pending_mints(writes: Iterable[SidecarWrite]) -> set[str]:
    """The doc_ids of the mints among `writes`: written later, each just before its group
    (`mint_group`), from the document's work item (a mint is its path and its new ID)."""
    return {write.doc_id for write in writes if write.kind == "mint"}


def mint_group(ctx: SyncContext, pending: MutableSet[str], group: Sequence[DocWork],
               failed: set[str]) -> list[DocWork]:
    """Write the sidecar of each new document of `group` whose mint is still `pending` (taken out of
    it), just before the group is extracted; returns the group with each minted document carrying
    its sidecar. A document whose sidecar could not be written is added to `failed` (recorded):
    nothing more is done on it, and the next sync mints it again. A document whose hashing the walk
    deferred (`pipeline.walk`) is hashed first; one that cannot be read is failed, and not minted."""
    if ctx.read_only:
        return list(group)
    from pinakes.pipeline.walk import hash_deferred

    group, hashed, unreadable = hash_deferred(ctx, group)
    failed |= unreadable
    due = [item for item in group if item.doc_id in pending]
    for item in due:
        pending.discard(item.doc_id)
    writer = SidecarWriter(ctx)
    writer.learn(hashed)
    minted: dict[str, Sidecar] = {}
    for item in due:
        if item.doc_id in unreadable:
            continue
        write = SidecarWrite(item.path, item.doc_id, "mint")
        sidecar = writer.write(write)
        if sidecar is None:
            failed.add(write.doc_id)
        else:
            minted[write.doc_id] = sidecar
    writer.remember()
    return [carrying(ctx, item, minted[item.doc_id]) if item.doc_id in minted else item for item in group]


def _file_state(root: Path, path: Path, digest: str) -> FileState:
    st = path.stat()
    return FileState(path.relative_to(root).as_posix(), st.st_size, st.st_mtime_ns, st.st_ino, digest,
                     st.st_ctime_ns)
