"""The index's `links` table as sync fills it from sidecars."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pinakes.sidecar.model import Link


def write_links(conn: sqlite3.Connection, kb_id: str, doc_id: str, links: Iterable[Link]) -> None:
    """Replace the document's authored links with `links` (call inside a transaction). When its
    links into other KBs change, connected KBs are told (`reverse.mark_links_changed`), so they scan
    this KB at their next sync rather than when their freshness window ends."""
    wanted = {(link.kb_id, link.doc_id, link.rel) for link in links}
    before = set(conn.execute("SELECT dst_kb_id, dst_doc_id, rel FROM links WHERE src_kb_id = ? AND src_doc_id = ? "
                              "AND origin = 'sidecar'", (kb_id, doc_id)))
    if before == wanted:
        return
    conn.execute("DELETE FROM links WHERE src_kb_id = ? AND src_doc_id = ? AND origin = 'sidecar'",
                 (kb_id, doc_id))
    conn.executemany(
        "INSERT INTO links (src_kb_id, src_doc_id, dst_kb_id, dst_doc_id, rel, origin) "
        "VALUES (?, ?, ?, ?, ?, 'sidecar') ON CONFLICT DO NOTHING",
        [(kb_id, doc_id, *link) for link in sorted(wanted)])
    if any(target_kb != kb_id for target_kb, _, _ in before ^ wanted):
        _announce(conn)


def delete_authored_links(conn: sqlite3.Connection, kb_id: str, doc_id: str) -> None:
    """Drop the document's authored links (a soft delete; call inside a transaction)."""
    write_links(conn, kb_id, doc_id, ())


def _announce(conn: sqlite3.Connection) -> None:
    """Mark the links change in the state folder of the index `conn` writes (the live index or a
    rebuild beside it: both live in .pinakes/)."""
    from pinakes.links.reverse import mark_links_changed

    for _, name, filename in conn.execute("PRAGMA database_list"):
        if name == "main" and filename:
            mark_links_changed(Path(filename).parent)
