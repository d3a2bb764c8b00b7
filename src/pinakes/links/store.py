"""The index's `links` table as sync fills it from sidecars."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pinakes.sidecar.model import Link


def write_links(conn: sqlite3.Connection, kb_id: str, doc_id: str, links: Iterable[Link]) -> None:
    """Replace the document's authored links with `links` (call inside a transaction)."""
    conn.execute("DELETE FROM links WHERE src_kb_id = ? AND src_doc_id = ? AND origin = 'sidecar'",
                 (kb_id, doc_id))
    conn.executemany(
        "INSERT INTO links (src_kb_id, src_doc_id, dst_kb_id, dst_doc_id, rel, origin) "
        "VALUES (?, ?, ?, ?, ?, 'sidecar') ON CONFLICT DO NOTHING",
        [(kb_id, doc_id, link.kb_id, link.doc_id, link.rel) for link in links])


def delete_authored_links(conn: sqlite3.Connection, kb_id: str, doc_id: str) -> None:
    """Drop the document's authored links (a soft delete; call inside a transaction)."""
    write_links(conn, kb_id, doc_id, ())
