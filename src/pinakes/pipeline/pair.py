"""pair: decide, set-wise, what each document on disk is with respect to the index (spec §6.4).

Phase 1 (the walk) built the whole after-picture; phase 2 (`plan_changes`) resolves identities
against the whole before-picture at once, because a rename cannot be told from a delete until every
other file has been seen. The decision is a pure function of (index rows, walk, sidecars), new
documents' IDs included; applying it (`apply_identity`) writes the restored and moved sidecars first,
and each new document's sidecar is written just before its group is extracted
(`pipeline.sidecar_writes`), so a document's permanent ID is on disk before the index refers to it.

IDs are never reused, never renumbered and never minted over a sidecar that exists.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Callable, MutableSet, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes.errors import SidecarError
from pinakes.faults import faultpoint
from pinakes.ids import new_ulid
from pinakes.index.schema import transaction
from pinakes.kb import SIDECAR_SUFFIX
from pinakes.links.store import delete_authored_links, write_links
from pinakes.pipeline import sidecar_writes
from pinakes.pipeline.context import context_naming
from pinakes.pipeline.keys import BuildKeys
from pinakes.pipeline.likely_moves import LikelyMove, MoveEvidence, likely_move_note, likely_moves
from pinakes.pipeline.plan_table import WorkTable
from pinakes.pipeline.sidecar_writes import SidecarWrite, SidecarWriter, carrying, pending_mints
from pinakes.pipeline.types import DocWork, IndexedDoc
from pinakes.pipeline.unextractable import carry_forward
from pinakes.sources.walk import WalkResult
from pinakes.sources.walk_table import DocTable

if TYPE_CHECKING:
    from pinakes.pipeline.run import SyncContext
    from pinakes.sidecar.model import Sidecar  # the sidecar package imports ruamel: types only


@dataclass
class Plan:
    # a first sync of a tree without sidecars: one `WorkTable` (pipeline/plan_table.py), not a list
    work: list[DocWork] | WorkTable = field(default_factory=list[DocWork])
    moves: list[tuple[str, str, str]] = field(default_factory=list[tuple[str, str, str]])  # (doc_id, old path, new path)
    refresh: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])  # (doc_id, path): metadata only
    deletes: list[IndexedDoc] = field(default_factory=list[IndexedDoc])
    sidecar_writes: list[SidecarWrite] = field(default_factory=list[SidecarWrite])
    failures: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])  # (path, error)
    collisions: list[tuple[str, list[str]]] = field(default_factory=list[tuple[str, list[str]]])  # (id, paths)
    notes: list[str] = field(default_factory=list[str])
    sidecars: dict[str, Sidecar] = field(default_factory=dict[str, "Sidecar"])  # doc path -> parsed sidecar
    # doc_id -> the ID that replaced it at its path: a sidecar put back by hand (`pnk adopt`)
    superseded: dict[str, str] = field(default_factory=dict[str, str])
    # documents the index holds no identity for: to be minted, or carrying a sidecar ID it never had
    arrivals: Sequence[str] = field(default_factory=list[str])
    likely_moves: list[LikelyMove] = field(default_factory=list[LikelyMove])
    renamed: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])
    # applied: the mints not written yet, by doc_id (each is written just before its group's extraction)
    pending_mints: MutableSet[str] = field(default_factory=set[str])

    @property
    def work_list(self) -> list[DocWork]:
        """The work as the list pairing and `--force` extend: never a first sync's `WorkTable`."""
        assert isinstance(self.work, list)
        return self.work

    @property
    def is_empty(self) -> bool:
        return not (self.work or self.moves or self.refresh or self.deletes or self.sidecar_writes
                    or self.failures or self.collisions)


def load_indexed(conn: sqlite3.Connection | None) -> list[IndexedDoc]:
    if conn is None:
        return []
    rows = conn.execute(
        "SELECT id, path, content_hash, sidecar_hash, build_key, state, metadata, "
        "CASE WHEN json_valid(metadata) THEN json_extract(metadata, '$.title') END FROM documents"
    )
    return [IndexedDoc(*row) for row in rows]


SidecarReader = Callable[[str], "Sidecar"]  # doc path -> its sidecar (raises SidecarError)


def plan_changes(before: list[IndexedDoc], walk: WalkResult, read_sidecar: SidecarReader,
                 keys: BuildKeys, *, may_write_sidecars: bool, rebuild: bool = False) -> Plan:
    """Resolve every document's identity against `before` (the index rows) and the walk.

    With `rebuild`, `before` is the index being replaced: identities are decided exactly as a plain
    sync would decide them (a rename keeps its ID, a lost sidecar is restored with the indexed ID),
    and every document that lives on is work, because the new index starts empty.
    """
    plan = Plan()
    if not before and isinstance(walk.docs, DocTable) and may_write_sidecars and not rebuild:
        # A first sync whose walk found no sidecar (it keeps columns then): every document is new
        # and minted, in path order, as below; each work item is made from its row when read.
        plan.work = WorkTable.minting(walk.docs, keys)
        plan.arrivals = walk.docs.paths
        return plan
    arrivals: list[str] = []
    plan.arrivals = arrivals
    active_by_path = {d.path: d for d in before if d.state == "active"}
    by_id = {d.id: d for d in before}
    active_ids = {d.id for d in active_by_path.values()}

    # Phase 2a: every sidecar on disk claims an ID. An unchanged sidecar (same bytes as when it was
    # indexed at this path) claims the indexed ID without being parsed again.
    claim_of: dict[str, str] = {}
    broken: dict[str, str] = {}
    without_sidecar: list[str] = []
    for path in walk.docs:
        sidecar_state = walk.sidecars.get(path)
        if sidecar_state is None:
            without_sidecar.append(path)
            continue
        previous = active_by_path.get(path)
        if previous is not None and previous.sidecar_hash == sidecar_state.content_hash:
            claim_of[path] = previous.id
            continue
        try:
            sidecar = read_sidecar(path)
        except SidecarError as exc:
            broken[path] = exc.render()
            continue
        plan.sidecars[path] = sidecar
        claim_of[path] = sidecar.id

    paths_by_id: dict[str, list[str]] = defaultdict(list)
    for path, doc_id in claim_of.items():
        paths_by_id[doc_id].append(path)
    for doc_id, paths in paths_by_id.items():
        if len(paths) > 1:
            plan.collisions.append((doc_id, sorted(paths)))
    if plan.collisions:
        return plan
    path_claiming = {doc_id: paths[0] for doc_id, paths in paths_by_id.items()}

    for path, error in broken.items():
        plan.failures.append((path, f"sidecar does not parse, so it was not used and nothing was "
                                    f"written over it: {error}"))

    # Phase 2b: every indexed document either continues (its ID is claimed somewhere), is held
    # (its sidecar broke), has lost only its sidecar, or is gone.
    consumed: set[str] = set()
    gone: list[IndexedDoc] = []
    for doc in sorted(active_by_path.values(), key=lambda d: d.path):
        if claim_of.get(doc.path) == doc.id and doc.path not in plan.sidecars:
            # The common case on every sync: same path, same sidecar bytes. Unchanged content and
            # an unchanged key leave nothing to do.
            state = walk.docs[doc.path]
            if not rebuild and state.content_hash == doc.content_hash and \
                    _key(keys, walk, doc.path, doc.title) == doc.build_key:
                consumed.add(doc.path)
                continue
        if doc.id in path_claiming:
            _continue(plan, doc, path_claiming[doc.id], walk, keys, consumed, rebuild=rebuild)
        elif doc.path in broken or doc.path in walk.unreadable:
            consumed.add(doc.path)  # held as it is: never re-minted, never deleted
        elif claim_of.get(doc.path) not in (None, doc.id) and claim_of[doc.path] not in active_ids:
            # Its sidecar now carries another ID that is not live: an older identity put back by
            # hand (a move repaired with `pnk adopt`). That ID takes over this path; this one retires.
            plan.superseded[doc.id] = claim_of[doc.path]
            plan.deletes.append(doc)
        elif doc.path in walk.docs and walk.sidecars.get(doc.path) is None:
            consumed.add(doc.path)
            if not may_write_sidecars:
                plan.notes.append(f"{doc.path}: its sidecar is missing; left as indexed (a plain "
                                  f"`pnk sync` rewrites it with the indexed ID {doc.id})")
                continue
            plan.sidecar_writes.append(SidecarWrite(doc.path, doc.id, "restore", metadata=doc.metadata))
            plan.notes.append(f"{doc.path}: its sidecar was missing; rewrote it with the indexed "
                              f"ID {doc.id}")
            _continue(plan, doc, doc.path, walk, keys, consumed, sidecar_changed=True, rebuild=rebuild)
        else:
            gone.append(doc)

    # Phase 2c: a gone document whose exact content appears at exactly one sidecar-less new path was
    # renamed; several such paths are ambiguous (never guess: every inbound link would be redirected).
    candidates: dict[str, list[str]] = defaultdict(list)
    for path in without_sidecar:
        if path not in consumed and path not in active_by_path:
            candidates[walk.docs[path].content_hash].append(path)
    for doc in gone:
        matches = [p for p in candidates.get(doc.content_hash, []) if p not in consumed]
        if len(matches) == 1 and may_write_sidecars:
            new_path = matches[0]
            consumed.add(new_path)
            old_sidecar = doc.path + SIDECAR_SUFFIX
            travels = old_sidecar in walk.orphan_sidecars
            plan.sidecar_writes.append(SidecarWrite(new_path, doc.id, "move" if travels else "restore",
                                                    from_path=old_sidecar if travels else None,
                                                    metadata=doc.metadata))
            _continue(plan, doc, new_path, walk, keys, consumed, sidecar_changed=True, rebuild=rebuild)
            continue
        if len(matches) > 1:
            plan.notes.append(
                f"{doc.path} is gone and its content now appears at {len(matches)} paths "
                f"({', '.join(sorted(matches))}); not guessing which one it became: each gets a new ID "
                f"and {doc.id} is soft-deleted. To keep the ID, move the sidecar with the right copy.")
        plan.deletes.append(doc)

    # Phase 2d: sidecars claiming IDs the index has no active document for: adopt (after the
    # uniqueness check above) or revive a soft-deleted one.
    for path, doc_id in claim_of.items():
        if doc_id in active_ids:
            continue
        source_type = walk.source_types[path]
        state = walk.docs[path]
        if doc_id in by_id:
            previous_path = by_id[doc_id].path
            if previous_path != path:
                plan.renamed.append((previous_path, path))  # a move whose sidecar followed late
                plan.notes.append(f"{path}: continues {doc_id} (formerly {previous_path}) from its "
                                  "sidecar")
            else:
                plan.notes.append(f"{path}: revived soft-deleted document {doc_id} from its sidecar")
        else:
            arrivals.append(path)  # e.g. minted by the pre-commit hook since the last sync
        sidecar = plan.sidecars.get(path)
        plan.work_list.append(DocWork(doc_id, path, source_type, state, sidecar, walk.sidecars[path].content_hash,
                                      _key(keys, walk, path, sidecar.title if sidecar else None), "added"))

    # Phase 2e: what is left is new and has no sidecar: mint.
    new_paths = [p for p in without_sidecar if p not in consumed]
    arrivals.extend(new_paths)
    for path in sorted(new_paths):
        if not may_write_sidecars:
            plan.notes.append(f"{path}: not indexed yet, it has no sidecar (a plain `pnk sync` or the "
                              "pre-commit hook mints one)")
            continue
        doc_id = new_ulid()
        state = walk.docs[path]
        source_type = walk.source_types[path]
        plan.sidecar_writes.append(SidecarWrite(path, doc_id, "mint"))
        plan.work_list.append(DocWork(doc_id, path, source_type, state, None, None,
                                      _key(keys, walk, path, None), "added"))

    # Work in path order, so a fresh build assigns chunk ids in the same order on every machine
    # (the walk's directory order is the filesystem's; ranking ties fall back to chunk ids).
    plan.work_list.sort(key=lambda item: item.path)

    # The likely-move rule's content and file-name parts need no reading; `find_likely_moves` adds
    # the line-share part.
    gone = retiring(plan)  # none (a first sync): no arrival to compare, however many
    plan.likely_moves = likely_moves(gone, _hashed(plan.arrivals, walk), walk.orphan_sidecars) if gone else []
    return plan


def retiring(plan: Plan) -> list[IndexedDoc]:
    """The documents this plan soft-deletes for good (not those a hand-put-back sidecar takes over)."""
    return [doc for doc in plan.deletes if doc.id not in plan.superseded]


def find_likely_moves(ctx: SyncContext, plan: Plan, walk: WalkResult, indexed: sqlite3.Connection | None) -> None:
    """The whole likely-move rule for this plan, the line-share part included (it reads files and
    `indexed`, the index the plan was made against, so the pure planner leaves it out)."""
    gone = retiring(plan)
    if indexed is None or not gone:
        return
    plan.likely_moves = likely_moves(gone, _hashed(plan.arrivals, walk), walk.orphan_sidecars,
                                     MoveEvidence(indexed, ctx.paths.root, walk.source_types))


def _hashed(paths: Sequence[str], walk: WalkResult) -> dict[str, str]:
    return {path: walk.docs[path].content_hash for path in paths}


def _continue(plan: Plan, doc: IndexedDoc, path: str, walk: WalkResult, keys: BuildKeys,
              consumed: set[str], *, sidecar_changed: bool = False, rebuild: bool = False) -> None:
    """The indexed document `doc` lives on at `path` (in a rebuild: is built again there)."""
    consumed.add(path)
    state = walk.docs[path]
    source_type = walk.source_types[path]
    sidecar = plan.sidecars.get(path)  # parsed when it changed; else it says what the index holds
    key = _key(keys, walk, path, sidecar.title if sidecar else doc.title)
    sidecar_state = walk.sidecars.get(path)
    sidecar_hash = sidecar_state.content_hash if sidecar_state else None
    if path != doc.path:
        plan.moves.append((doc.id, doc.path, path))
        plan.renamed.append((doc.path, path))
    if rebuild or state.content_hash != doc.content_hash or key != doc.build_key:
        reason = "changed" if state.content_hash != doc.content_hash else "rekeyed"
        plan.work_list.append(DocWork(doc.id, path, source_type, state, sidecar, sidecar_hash, key, reason,
                                      context_renamed=_key(keys, walk, path, doc.title, doc.path) != key))
    elif sidecar_changed or path in plan.sidecars or path != doc.path \
            or sidecar_hash != doc.sidecar_hash:
        plan.refresh.append((doc.id, path))


def _key(keys: BuildKeys, walk: WalkResult, path: str, sidecar_title: str | None, named_at: str | None = None) -> str:
    """The build key of the document at `path` whose sidecar gives `sidecar_title` (as if it were
    named `named_at`, when given); "" for a document whose hashing the walk deferred (it is keyed
    when hashed, `pipeline.walk.hash_deferred`)."""
    if not walk.docs[path].content_hash:
        return ""
    return keys.key(walk.docs[path].content_hash, walk.source_types[path],
                    context_naming(sidecar_title, named_at or path))


# --- applying the identity decisions -------------------------------------------------------------


def apply_identity(ctx: SyncContext, plan: Plan, walk: WalkResult) -> set[str]:
    """Write the restored and moved sidecars, then moves, deletes and metadata refreshes, each its
    own transaction. A document whose sidecar was written carries it in `plan.work` from here on.
    New documents' sidecars are left in `plan.pending_mints`: each is written just before its group
    is extracted (`pipeline.sidecar_writes.mint_group`). Returns the doc_ids whose sidecar could not
    be written (recorded as failed: nothing more is done on them)."""
    from pinakes.sidecar import read_sidecar, sidecar_path_for

    root = ctx.paths.root
    report = ctx.report
    failed: set[str] = set()
    if isinstance(plan.work, WorkTable):  # a first sync's: every row is a mint, none is written now
        plan.pending_mints = plan.work.pending_mints()
    else:
        plan.pending_mints = pending_mints(plan.sidecar_writes)
    now_writes = [write for write in plan.sidecar_writes if write.doc_id not in plan.pending_mints]
    position = {item.path: number for number, item in enumerate(plan.work)} if now_writes else {}
    plan.sidecar_writes = now_writes  # a mint is its work item's path and ID: not kept twice for the run
    if len(now_writes) >= sidecar_writes.MANY_SIDECARS:  # two fsyncs each: seconds before any embedding
        ctx.progress.announce(f"writing {len(now_writes):,} sidecars (each moved or restored document's "
                              "permanent ID) before indexing")
    writer = SidecarWriter(ctx)
    for write in now_writes:
        sidecar = writer.write(write)
        if sidecar is None:
            failed.add(write.doc_id)
            continue
        plan.sidecars[write.doc_path] = sidecar
        number = position.get(write.doc_path)
        if number is not None:
            plan.work_list[number] = carrying(ctx, plan.work_list[number], sidecar)
    writer.remember()  # we know these files' hashes: the next walk need not read them again

    conn = ctx.writer()
    now = _now()
    if plan.moves:
        with transaction(conn):
            # Two phases so that swapping two documents' paths never trips the unique active path.
            for doc_id, _old, _new in plan.moves:
                conn.execute("UPDATE documents SET path = ? WHERE id = ?", (f"\0moving:{doc_id}", doc_id))
            for doc_id, _old, new in plan.moves:
                conn.execute("UPDATE documents SET path = ? WHERE id = ?", (new, doc_id))
    report.renamed.extend(plan.renamed)
    for doc in plan.deletes:
        with transaction(conn):
            conn.execute("DELETE FROM chunks WHERE doc_id = ?", (doc.id,))
            delete_authored_links(conn, ctx.kb_id, doc.id)
            conn.execute("UPDATE documents SET state = 'deleted', indexed_at = ? WHERE id = ?",
                         (now, doc.id))
        if doc.id in plan.superseded:
            report.notes.append(f"{doc.path}: its sidecar now carries {plan.superseded[doc.id]}, which "
                                f"takes over from {doc.id} (retired)")
        else:
            report.deleted.append(doc.path)
        faultpoint("sync.after-delete")
    for doc_id, path in plan.refresh:
        sidecar = plan.sidecars.get(path)
        if sidecar is None:
            try:
                sidecar = read_sidecar(sidecar_path_for(root / path), kb_id=ctx.kb_id)
            except SidecarError as exc:
                report.fail(path, "sidecar", exc.render())
                continue
        state = walk.docs[path]
        title = sidecar.title or _text_title(root / path, walk.source_types[path])
        metadata = sidecar.metadata_json(front_matter_tags=_front_matter_tags(root / path, walk.source_types[path]))
        with transaction(conn):
            conn.execute(
                "UPDATE documents SET path = ?, sidecar_hash = ?, title = ?, metadata = ?, mtime = ?, "
                "indexed_at = ? WHERE id = ?",
                (path, sidecar.raw_hash, title, metadata, state.mtime, now, doc_id))
            write_links(conn, ctx.kb_id, doc_id, sidecar.links)
        report.metadata_refreshed.append(path)
    return failed


def _text_title(path: Path, source_type: str) -> str | None:
    """The title a document's own content declares (what `chunk` records when it reads the text)."""
    from pinakes.extract.titles import document_title

    return document_title(None, source_type, path)


def _front_matter_tags(path: Path, source_type: str) -> tuple[str, ...]:
    """The tags a document's front matter declares (what `embed` stores beside the sidecar's)."""
    from pinakes.extract.front_matter import document_front_matter

    return document_front_matter(None, source_type, path).tags


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def compute_plan(ctx: SyncContext, walk: WalkResult, indexed: sqlite3.Connection | None) -> Plan:
    """The pure decision for this run against `indexed`, the index the documents are paired with
    (the one a rebuild replaces; also what `pnk doit list` and `pnk status` show)."""

    def reader(doc_path: str) -> Sidecar:
        # Imported on first use: a sync whose sidecars are all unchanged never parses YAML.
        from pinakes.sidecar import read_sidecar, sidecar_path_for

        return read_sidecar(sidecar_path_for(ctx.paths.root / doc_path), kb_id=ctx.kb_id)

    plan = plan_changes(load_indexed(indexed), walk, reader, ctx.keys,
                        may_write_sidecars=not ctx.options.index_only, rebuild=ctx.rebuilding)
    # A file the last sync found unextractable, untried here: still failing.
    carried = carry_forward(ctx, walk, plan.arrivals)
    plan.notes[:] = [note for note in plan.notes if note.split(": not indexed yet", 1)[0] not in carried]
    return plan


def collision_error(plan: Plan) -> SidecarError:
    lines = [f"ID {doc_id} is claimed by {len(paths)} sidecars: " + ", ".join(
        p + SIDECAR_SUFFIX for p in paths) for doc_id, paths in plan.collisions]
    return SidecarError(
        "the same document ID appears in more than one sidecar; Pinakes never renumbers an ID, "
        "because every inbound link would silently point elsewhere:\n  " + "\n  ".join(lines),
        remedy="give each copy its own identity: delete the copied sidecar (a new ID is minted on "
               "the next sync) or restore the original file",
    )


def apply(ctx: SyncContext, plan: Plan, walk: WalkResult, indexed: sqlite3.Connection | None) -> set[str]:
    """Act on a plan with work and without collisions: record its failures and notes, then (unless
    read-only) write the sidecars and the identities it decided. Returns the doc_ids that failed."""
    for path, error in plan.failures:
        ctx.report.fail(path, "pair", error)
    if not ctx.read_only:
        find_likely_moves(ctx, plan, walk, indexed)
    ctx.report.notes.extend(plan.notes)
    ctx.report.notes.extend(likely_move_note(move) for move in plan.likely_moves)
    moved_from = {w.from_path for w in plan.sidecar_writes if w.from_path}
    ctx.report.orphaned_sidecars.extend(p for p in walk.orphan_sidecars if p not in moved_from)
    return set() if ctx.read_only else apply_identity(ctx, plan, walk)
