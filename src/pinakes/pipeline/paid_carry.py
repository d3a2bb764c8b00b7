"""What a `--rebuild` must not lose (spec §6.4): the old index's paid extractions, carried into the
new one at their old content, never re-extracted and never paid for again.

Read before the new database exists (`paid_rows_to_carry`), copied in once pairing has run
(`carry_paid_rows`), whichever extraction backend runs the rebuild.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes.extract.registry import EXTRACTORS
from pinakes.pipeline.paid_state import names
from pinakes.wording import counted

if TYPE_CHECKING:
    from pinakes.manifest import Manifest
    from pinakes.pipeline.pair import Plan
    from pinakes.pipeline.run import SyncContext


@dataclass(frozen=True)
class CarryPlan:
    """What the old index holds that a rebuild must not lose: every active, paid-extracted document,
    keyed on doc_id (spec §6.4). `skipped` says why nothing can be carried, when nothing can."""

    doc_ids: tuple[str, ...] = ()
    skipped: str | None = None


def paid_rows_to_carry(previous: sqlite3.Connection | None, manifest: Manifest) -> CarryPlan:
    """Read, before the new database is created, which documents the old index holds from a paid
    extraction. Keyed on doc_id alone: the one identifier a renamed sidecar still carries, and unique
    (a content_hash key would let a later document with the same bytes inherit another's chunks).

    Vectors from two embedding models cannot be mixed, so after a model change nothing is carried:
    those documents come back from the extraction cache, or fail as PaidExtractionUnavailableError."""
    if previous is None:
        return CarryPlan()
    from pinakes.embed.coherence import check_manifest_coherence
    from pinakes.errors import ModelMismatchError

    paid_backends = [name for name, spec in EXTRACTORS.items() if spec.paid]
    try:
        rows = previous.execute(
            f"SELECT id FROM documents WHERE state = 'active' AND extraction_backend IN "
            f"({', '.join('?' * len(paid_backends))}) ORDER BY id", paid_backends).fetchall()
        if not rows:
            return CarryPlan()
        meta = dict(previous.execute("SELECT key, value FROM meta").fetchall())
    except sqlite3.Error:
        return CarryPlan()  # an old index too damaged to read: identities come from the sidecars
    try:
        check_manifest_coherence(meta, manifest.embedding)
    except ModelMismatchError:
        return CarryPlan(skipped=f"{counted(len(rows), 'paid extraction')} {'was' if len(rows) == 1 else 'were'} "
                                 "not carried across the rebuild: the "
                                 "embedding model changed, and their old vectors cannot be mixed with the "
                                 "new ones (they are re-embedded from the extraction cache where it has them)")
    return CarryPlan(tuple(row[0] for row in rows))


def carry_paid_rows(ctx: SyncContext, plan: Plan, carry: CarryPlan, old_index: Path) -> None:
    """Copy each carried document's row, chunks, vectors and authored links from `old_index` into
    the rebuild's new database with ATTACH DATABASE — at the old content_hash, never re-extracted —
    for every one the walk still finds as a PDF (at its current path: a rename keeps its doc_id).

    The row's build key is cleared, so the extract step still meets it: on a free run `protect`
    keeps it when the sidecar says the file is unchanged since its paid extraction, and records the
    failure pointing at the paid run when it changed (the old text stays searchable); on a paid run
    an unchanged document is kept rather than paid for again. Independent of the extraction cache,
    so `--clear-cache` and `--rebuild` compose in either order."""
    if carry.skipped:
        ctx.report.notes.append(carry.skipped)
    if not carry.doc_ids:
        return
    from pinakes.index.schema import transaction
    from pinakes.links.text_edges import carry_text_links

    current = {item.doc_id: item.path for item in plan.work if item.source_type == "pdf"}
    moves = [(doc_id, current[doc_id]) for doc_id in carry.doc_ids if doc_id in current]
    if not moves:
        return
    conn = ctx.writer()
    conn.execute("ATTACH DATABASE ? AS carried", (str(old_index),))
    try:
        with transaction(conn):
            conn.execute("CREATE TEMP TABLE carry_moves (id TEXT PRIMARY KEY, path TEXT NOT NULL)")
            conn.executemany("INSERT INTO carry_moves (id, path) VALUES (?, ?)", moves)
            columns = _shared_columns(conn, "documents", exclude={"id", "path", "build_key", "state"})
            conn.execute(f"INSERT INTO main.documents (id, path, build_key, state, {columns}) "
                         f"SELECT d.id, m.path, NULL, 'active', {_qualified('d', columns)} "
                         "FROM carried.documents d JOIN carry_moves m ON m.id = d.id")
            columns = _shared_columns(conn, "chunks", exclude=set())
            conn.execute(f"INSERT INTO main.chunks ({columns}) SELECT {_qualified('c', columns)} "
                         "FROM carried.chunks c JOIN carry_moves m ON m.id = c.doc_id")
            columns = _shared_columns(conn, "embeddings", exclude=set())  # text_key too, where it has one
            conn.execute(f"INSERT INTO main.embeddings ({columns}) SELECT {_qualified('e', columns)} "
                         "FROM carried.embeddings e JOIN carried.chunks c ON c.id = e.chunk_id "
                         "JOIN carry_moves m ON m.id = c.doc_id")
            conn.execute("INSERT OR IGNORE INTO main.links (src_kb_id, src_doc_id, dst_kb_id, dst_doc_id, rel, "
                         "origin) SELECT l.src_kb_id, l.src_doc_id, l.dst_kb_id, l.dst_doc_id, l.rel, l.origin "
                         "FROM carried.links l JOIN carry_moves m ON m.id = l.src_doc_id "
                         "WHERE l.origin = 'sidecar'")
            carry_text_links(conn)
            conn.execute("DROP TABLE temp.carry_moves")
    finally:
        conn.execute("DETACH DATABASE carried")
    ctx.report.notes.append(f"carried {counted(len(moves), 'paid extraction')} across the rebuild from the index it "
                            "replaces (never re-extracted): " + names([path for _doc_id, path in moves]))


def _shared_columns(conn: sqlite3.Connection, table: str, *, exclude: set[str]) -> str:
    """The columns `table` has in both the new index and the carried one (an older schema version
    lacks the newer columns, which then take their defaults), in the new table's order."""
    new = [row[1] for row in conn.execute(f"PRAGMA main.table_info({table})")]
    old = {row[1] for row in conn.execute(f"PRAGMA carried.table_info({table})")}
    return ", ".join(name for name in new if name in old and name not in exclude)


def _qualified(alias: str, columns: str) -> str:
    return ", ".join(f"{alias}.{name}" for name in columns.split(", "))
