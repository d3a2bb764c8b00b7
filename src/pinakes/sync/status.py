"""`kb_status()`: what a plain `pnk sync` would do now, computed without writing anything.

It runs the sync's own walk and pair against a read-only view of the index (files whose stat changed
are hashed, and nothing is saved), so what it reports is what the next sync decides, row for row:
new, changed, re-keyed, moved, deleted, metadata-only refreshes, sidecars to mint, documents that
would fail, skipped paths with their reasons, and what failed last time. A deletion beside an arrival
that the sync's own likely-move rule pairs (pipeline/likely_moves.py `likely_moves`) is named with the `pnk
adopt` command that keeps the ID, while running it still saves the links. It takes no lock: a status
during a sync reads the last committed state. With a remote embedding model it asks the endpoint for
the probe, as a sync's start does (one small request, priced like any), since only the server can
say whether the model behind the same name was swapped (then the next sync rebuilds everything).
It also says the vector tier and the approximate vector file's state (none, current, or missing,
stale, damaged, unavailable with the remedy: vectors/freshness.py `file_state`), from the file's
footer and the key the last sync recorded, never a checksum of every byte (`pnk doctor` reads them).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pinakes.display import printable
from pinakes.index import schema
from pinakes.kb import KBPaths, find_kb_root
from pinakes.links.text_edges import TextLinkProblem, text_link_problems
from pinakes.manifest import Manifest
from pinakes.pipeline import pair
from pinakes.pipeline.likely_moves import LikelyMove
from pinakes.pipeline.report import Failure, exclusion_for, exclusion_lines, has_changes
from pinakes.sources import walk
from pinakes.sources.left_out import left_out_types, notice
from pinakes.vectors.freshness import VectorFileState, file_state
from pinakes.wording import counted, noun_for

# Paths the text view names per list before it says "and N more" (--json lists them all).
SHOWN_PER_LIST = 10
# Links from text that named no document or several, listed at most (`link_problem_counts` has all).
MAX_LINK_PROBLEMS = 200

# The `pnk status --json` key of each change kind whose field name (the vocabulary shared with the
# sync report, pipeline/report.py ChangeKind) differs from it: the keys are a contract scripts read.
STATUS_JSON_KEYS: dict[str, str] = {  # ChangeKind -> key
    "added": "new", "renamed": "moved", "metadata_refreshed": "metadata_refresh",
    "sidecars_written": "sidecars_to_write",
}


@dataclass(frozen=True)
class LikelyMoveHint:
    """A likely move as status shows it (pipeline/pair.py `LikelyMove`, before the sync acts on it)."""

    was: str
    now: str
    doc_id: str
    why: str
    adopt: str  # the command that keeps doc_id

    @classmethod
    def of(cls, move: LikelyMove) -> LikelyMoveHint:
        return cls(move.doc.path, move.new_path, move.doc.id, move.why, move.adopt)


@dataclass
class KBStatus:
    """What a plain `pnk sync` would do now; each change-kind field holds what that sync's report
    would list under the same name."""

    kb_root: str
    index_exists: bool
    last_sync_at: str | None = None
    built_at: str | None = None
    model_changed: bool = False  # the next sync rebuilds the whole index
    model_change: str | None = None  # why, when the remote model behind the same name was swapped
    model_unchecked: str | None = None  # why the remote model could not be asked (then it is unknown)
    added: list[str] = field(default_factory=list[str])
    changed: list[str] = field(default_factory=list[str])
    reembedded: list[str] = field(default_factory=list[str])  # same content, new extractor/chunker/model key
    renamed: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])
    deleted: list[str] = field(default_factory=list[str])
    metadata_refreshed: list[str] = field(default_factory=list[str])
    sidecars_written: list[str] = field(default_factory=list[str])  # the sidecars it would write
    would_fail: list[Failure] = field(default_factory=list[Failure])
    failed_last_time: list[Failure] = field(default_factory=list[Failure])
    skipped: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])
    unchanged: int = 0
    documents_on_disk: int = 0
    # indexed PDF path -> 1-based pages with no usable text layer (searchable for its other pages)
    pages_without_text: dict[str, list[int]] = field(default_factory=dict[str, list[int]])
    # connected KBs the next sync scans for inbound links (window passed, never scanned, moved), and
    # KB ids no longer in [[links.kb]] whose rows it removes
    link_scans_due: list[str] = field(default_factory=list[str])
    partners_to_forget: list[str] = field(default_factory=list[str])
    # deleted documents most likely moved without their sidecar: the next sync soft-deletes their IDs
    likely_moves: list[LikelyMoveHint] = field(default_factory=list[LikelyMoveHint])
    # the `[sources] exclude` line that leaves out the files whose extraction failed last time
    exclusion: str | None = None
    # files of a type this Pinakes indexes that `[sources] types` leaves out (sources/left_out.py):
    # type -> count, and what to do about them
    types_left_out: dict[str, int] = field(default_factory=dict[str, int])
    types_notice: str | None = None
    # links in documents' text that named no document, or several, at the last sync (the first
    # MAX_LINK_PROBLEMS; `link_problem_counts` counts them all): not work for the next sync
    link_problems: list[TextLinkProblem] = field(default_factory=list[TextLinkProblem])
    link_problem_counts: dict[str, int] = field(default_factory=dict[str, int])
    # the vector tier and the approximate vector file's state (vectors/freshness.py `file_state`)
    vector_file: VectorFileState | None = None

    @property
    def up_to_date(self) -> bool:
        return not (self.model_changed or has_changes(self) or self.would_fail
                    or self.link_scans_due or self.partners_to_forget
                    or (self.vector_file is not None and self.vector_file.needs_sync))

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["renamed"] = [{"from": old, "to": new} for old, new in self.renamed]
        data["skipped"] = [{"path": path, "reason": reason} for path, reason in self.skipped]
        data["likely_moves"] = [{"from": move.was, "to": move.now, "id": move.doc_id, "why": move.why,
                                 "adopt": move.adopt} for move in self.likely_moves]
        data["up_to_date"] = self.up_to_date
        return {STATUS_JSON_KEYS.get(name, name): value for name, value in data.items()}

    def render_text(self) -> str:
        built = (f"last sync {self.last_sync_at}" if self.last_sync_at else "never synced") \
            if self.index_exists else "no index yet"
        lines = [f"{counted(self.documents_on_disk, 'document')} on disk, {self.unchanged} indexed and unchanged; "
                 f"{built}"]
        if self.vector_file is not None:
            lines.append(self.vector_file.describe())
        if self.model_changed:
            lines.append(f"{self.model_change or 'the embedding model changed since the index was built'}: "
                         "the next sync rebuilds the whole index")
        if self.model_unchecked:
            lines.append(f"whether the embedding model behind the endpoint changed is unknown: {self.model_unchecked}")
        moved_to = {new for _old, new in self.renamed}  # indexed again for its file name's words: a move
        sections: list[tuple[str, list[str]]] = [
            ("new", self.added), ("changed", self.changed),
            ("re-indexed (settings changed)", [path for path in self.reembedded if path not in moved_to]),
            ("moved", [f"{old} -> {new}" for old, new in self.renamed]), ("deleted", self.deleted),
            ("likely moved without their sidecar (a sync now soft-deletes the old ID, breaking links to it)",
             [f"{move.was} -> {move.now} ({move.why}): {move.adopt}" for move in self.likely_moves]),
            ("metadata only", self.metadata_refreshed), ("sidecars to write", self.sidecars_written),
            ("would fail", [f"{f.path}: {f.error.splitlines()[0]}" for f in self.would_fail]),
            ("failed last sync", [f"{f.path} [{f.stage}]: {f.error.splitlines()[0]}"
                                  for f in self.failed_last_time]),
            ("skipped", [f"{path} ({reason})" for path, reason in self.skipped]),
            ("connected KBs to scan for inbound links", self.link_scans_due),
            ("connected KBs no longer listed (their inbound links are removed)", self.partners_to_forget),
            ("indexed without text read on some pages (scanned or image-only; see `pnk doctor`)",
             [f"{path}: pages {', '.join(map(str, pages))}" for path, pages in self.pages_without_text.items()]),
        ]

        for title, entries in sections:
            if not entries:
                continue
            lines.append(f"{title}: {len(entries)}")
            lines.extend(f"  {printable(entry)}" for entry in entries[:SHOWN_PER_LIST])
            if len(entries) > SHOWN_PER_LIST:
                lines.append(f"  … and {len(entries) - SHOWN_PER_LIST} more (--json lists all)")
        lines.extend(self._link_problem_lines())
        lines.extend(exclusion_lines(self.exclusion))
        if self.types_notice:
            lines.append(self.types_notice)
        if self.up_to_date:
            lines.append("up to date: nothing for `pnk sync` to do")
        elif self.likely_moves:
            lines.append(f"run the `pnk adopt` {noun_for(len(self.likely_moves), 'command')} above to keep "
                         f"{'that ID' if len(self.likely_moves) == 1 else 'those IDs'}, then `pnk sync`")
        else:
            lines.append("run `pnk sync` to apply this")
        return "\n".join(lines)


    def _link_problem_lines(self) -> list[str]:
        counts = self.link_problem_counts
        total = sum(counts.values())
        if not total:
            return []
        lines = [f"links from text at the last sync: {counts.get('unresolved', 0)} name no document, "
                 f"{counts.get('ambiguous', 0)} name several (the first taken)"]
        lines.extend(f"  {printable(problem.describe())}" for problem in self.link_problems[:SHOWN_PER_LIST])
        if total > SHOWN_PER_LIST:
            lines.append(f"  … and {total - SHOWN_PER_LIST} more (--json lists {MAX_LINK_PROBLEMS})")
        return lines


def kb_status(start: Path | str | None = None) -> KBStatus:
    from pinakes.sync.engine import index_model_changed
    from pinakes.sync.loader import inspection_context

    root = find_kb_root(start)
    ctx = inspection_context(root, mode="status")
    paths = KBPaths(root)
    status = KBStatus(str(root), index_exists=ctx.conn is not None)
    try:
        if ctx.conn is not None:
            meta = schema.read_meta(ctx.conn)
            status.last_sync_at = meta.get("last_sync_at")
            status.built_at = meta.get("built_at")
            status.model_changed = index_model_changed(ctx.conn, ctx.manifest)
            if not status.model_changed and ctx.manifest.embedding.remote is not None:
                _check_remote_model(ctx.conn, paths.root, ctx.manifest, meta, status)
            status.failed_last_time = [Failure(path, stage, error) for path, stage, error in ctx.conn.execute(
                "SELECT path, stage, error FROM failures ORDER BY path")]
            status.pages_without_text = {path: json.loads(pages) for path, pages in ctx.conn.execute(
                "SELECT path, pages_without_text FROM documents WHERE state = 'active' "
                "AND pages_without_text IS NOT NULL ORDER BY path")}
            _link_scans(ctx.conn, paths.root, ctx.manifest, status)
            status.link_problems, status.link_problem_counts = text_link_problems(ctx.conn, MAX_LINK_PROBLEMS)
            status.vector_file = file_state(ctx.conn, paths.state_dir, tier=ctx.manifest.retrieval.vector_tier)
            if status.model_changed:
                ctx.conn.close()
                ctx.conn = None  # a rebuild pairs against an empty index: everything is rebuilt
        found = walk.walk(paths.root, ctx.manifest.sources, walk.load_walk_cache(ctx.conn),
                          racy_after=walk.racy_after_ns(ctx.conn))
        plan = pair.compute_plan(ctx, found, ctx.conn)
        if not plan.collisions:
            pair.find_likely_moves(ctx, plan, found, ctx.conn)  # reads the gone documents' indexed text: before closing
    finally:
        if ctx.conn is not None:
            ctx.conn.close()
    if plan.collisions:
        raise pair.collision_error(plan)
    minted = {write.doc_path for write in plan.sidecar_writes}
    by_reason = {"added": status.added, "changed": status.changed, "rekeyed": status.reembedded}
    for item in plan.work:
        by_reason[item.reason].append(item.path)
    status.renamed = list(plan.renamed)
    status.deleted = [doc.path for doc in pair.retiring(plan)]
    status.likely_moves = [LikelyMoveHint.of(move) for move in plan.likely_moves]
    moved_to = {new for _old, new in plan.renamed}
    status.metadata_refreshed = [path for _doc_id, path in plan.refresh if path not in moved_to]
    status.sidecars_written = sorted(path + ".pnk.yaml" for path in minted)
    status.would_fail = [Failure(path, "pair", error) for path, error in plan.failures]
    status.would_fail += [Failure(path, "read", f"cannot read the file ({reason})")
                          for path, reason in sorted(found.unreadable.items())]
    status.skipped = list(found.skipped)
    status.types_left_out = left_out_types(found.skipped)
    told = notice(status.types_left_out, ctx.manifest.sources.types)
    status.types_notice = f"{told[0]}: {told[1]}" if told else None
    status.exclusion = exclusion_for([f for f in status.failed_last_time if f.path in found.docs],
                                     ctx.manifest.sources.exclude)
    status.documents_on_disk = len(found.docs) + len(found.unreadable)
    status.unchanged = len(found.docs) - len(plan.work)
    return status


def _check_remote_model(conn: sqlite3.Connection, kb_root: Path, manifest: Manifest, meta: dict[str, str],
                        status: KBStatus) -> None:
    """Whether the remote model behind the same name was swapped since the index was built: asked
    of the endpoint as a sync's start asks (within `search_timeout_s`: a status is interactive)."""
    from pinakes.budget.errors import BudgetError
    from pinakes.embed import load_for_kb
    from pinakes.embed.coherence import fingerprint_change
    from pinakes.errors import EmbeddingEndpointError

    if conn.execute("SELECT 1 FROM documents LIMIT 1").fetchone() is None:
        return  # nothing embedded: nothing to disagree with
    try:
        embedder = load_for_kb(kb_root, manifest, for_search=True)
    except (EmbeddingEndpointError, BudgetError) as exc:
        status.model_unchecked = exc.message.splitlines()[0]
        return
    try:
        status.model_change = fingerprint_change(meta, embedder)
    finally:
        close = getattr(embedder, "close", None)
        if close is not None:
            close()
    status.model_changed = status.model_change is not None


def _link_scans(conn: sqlite3.Connection, kb_root: Path, manifest: Manifest, status: KBStatus) -> None:
    """What the next sync's reverse-scan step does, decided as it decides it (kb_refs, and each
    partner's signal: two stat() calls)."""
    if not manifest.links and conn.execute("SELECT 1 FROM kb_refs LIMIT 1").fetchone() is None:
        return
    from pinakes.links.reverse import delisted, is_due, now

    at = now()
    status.link_scans_due = [linked.alias for linked in manifest.links if is_due(conn, kb_root, linked, force=False, at=at)]
    status.partners_to_forget = delisted(conn, manifest)
