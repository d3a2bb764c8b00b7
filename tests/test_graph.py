"""The structural graph (spec §3.2): hubs, orientation, the <2-member rule, full re-derivation."""

from __future__ import annotations

import json
import sqlite3
import tempfile
from pathlib import Path

from pinakes.index import schema
from pinakes.pipeline.graph import derive_graph

KB = "01M8P05RX7E8691VQVZ35N5HS3"


def make_index(docs: list[tuple[str, str, list[str], list[list[str] | None]]]) -> sqlite3.Connection:
    """docs: (id, path, tags, heading path per chunk)."""
    conn = schema.create_index(Path(tempfile.mkdtemp()) / "index.db")
    with schema.transaction(conn):
        for doc_id, path, tags, headings in docs:
            conn.execute(
                "INSERT INTO documents (id, path, content_hash, mtime, source_type, metadata, indexed_at) "
                "VALUES (?, ?, 'h', 0, 'markdown', ?, 'now')", (doc_id, path, json.dumps({"tags": tags})))
            for ordinal, heading in enumerate(headings):
                conn.execute(
                    "INSERT INTO chunks (doc_id, ordinal, text, char_start, char_end, token_count, heading_path) "
                    "VALUES (?, ?, 't', 0, 1, 1, ?)", (doc_id, ordinal, json.dumps(heading) if heading else None))
    return conn


def edges(conn: sqlite3.Connection, kind: str) -> set[tuple[str, str]]:
    return set(conn.execute(
        "SELECT s.kind || ':' || s.key, d.kind || ':' || d.key FROM edges e "
        "JOIN nodes s ON s.id = e.src JOIN nodes d ON d.id = e.dst WHERE e.kind = ?", (kind,)))


def test_every_kind_is_derived_with_hubs_as_sources() -> None:
    conn = make_index([
        ("A", "docs/x/a.md", ["t1", "solo"], [["H"], ["H"], ["H", "Sub"]]),
        ("B", "docs/x/b.md", ["t1"], [None]),
        ("C", "docs/c.md", [], [None]),
    ])
    census = derive_graph(conn, KB)
    assert edges(conn, "membership") == {("doc:A", "chunk:A:0"), ("doc:A", "chunk:A:1"),
                                         ("doc:A", "chunk:A:2"), ("doc:B", "chunk:B:0"), ("doc:C", "chunk:C:0")}
    assert edges(conn, "sibling") == {("chunk:A:0", "chunk:A:1"), ("chunk:A:1", "chunk:A:2")}
    # parent-child materialises pairwise: both chunks under H are parents of the chunk under H > Sub
    assert edges(conn, "parent-child") == {("chunk:A:0", "chunk:A:2"), ("chunk:A:1", "chunk:A:2")}
    assert edges(conn, "in-section") == {("heading:A:H", "chunk:A:0"), ("heading:A:H", "chunk:A:1")}
    assert edges(conn, "co-located") == {("dir:docs/x", "doc:A"), ("dir:docs/x", "doc:B")}
    assert edges(conn, "shared-tag") == {("tag:t1", "doc:A"), ("tag:t1", "doc:B")}
    # hubs with fewer than two members are never minted
    kinds_keys = set(conn.execute("SELECT kind || ':' || key FROM nodes WHERE kind IN ('tag', 'dir', 'heading')"))
    assert kinds_keys == {("tag:t1",), ("dir:docs/x",), ("heading:A:H",)}
    assert census == {"membership": 5, "sibling": 2, "parent-child": 2, "in-section": 2, "co-located": 2,
                      "shared-tag": 2, "authored": 0, "cross-kb-out": 0, "cross-kb-in": 0, "links-to": 0,
                      "links-to-cross-kb": 0, "links-to-unresolved": 0, "links-to-ambiguous": 0}


def test_derivation_is_full_so_a_deleted_document_leaves_no_edges() -> None:
    conn = make_index([("A", "docs/a.md", ["t"], [None]), ("B", "docs/b.md", ["t"], [None])])
    derive_graph(conn, KB)
    assert edges(conn, "shared-tag")
    with schema.transaction(conn):
        conn.execute("UPDATE documents SET state = 'deleted' WHERE id = 'B'")
    census = derive_graph(conn, KB)
    assert census["shared-tag"] == 0 and census["co-located"] == 0
    assert conn.execute("SELECT COUNT(*) FROM nodes WHERE key LIKE 'B%'").fetchone() == (0,)


def test_authored_links_are_counted_from_links_not_stored_as_edges() -> None:
    conn = make_index([("A", "docs/a.md", [], [None]), ("B", "docs/b.md", [], [None])])
    with schema.transaction(conn):
        conn.execute("INSERT INTO links VALUES (?, 'A', ?, 'B', 'see-also', 'sidecar')", (KB, KB))
        conn.execute("INSERT INTO links VALUES (?, 'A', 'OTHERKB', 'X', 'cites', 'sidecar')", (KB,))
    census = derive_graph(conn, KB)
    assert census["authored"] == 1  # the cross-KB link resolves to no local node
    assert census["cross-kb-out"] == 1  # ...and is counted as crossing
    assert conn.execute("SELECT COUNT(*) FROM edges WHERE kind = 'authored'").fetchone() == (0,)
