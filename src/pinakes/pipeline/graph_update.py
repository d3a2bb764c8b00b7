"""Updating the structural graph after a sync that changed a few documents, instead of deriving it
in full (docs/perf/sync.md: one edit at 918k chunks spent ~30 s re-deriving every chunk's nodes).

What the graph holds splits in two:

- each document's own part: its chunk nodes, its heading hubs and the edges among them and from its
  document node (membership, sibling, parent-child, in-section). It depends on that document's chunk
  rows alone, so only the documents whose chunks changed (`changed`) are derived again: their old
  chunk and heading nodes go, with every edge into them (each of these edges ends at one of the
  document's chunks), and their current chunks are derived as in a full build.
- the hubs (directories, tags) and their edges to documents: a hub exists only with two or more
  active members, a property of the whole corpus. Every hub's membership is recounted from the
  documents table (one pass over its rows, no chunk read) and compared with the stored hub edges;
  only the differences are written.

The census (edges of each kind) is the stored one plus what was added and taken away. It is trusted
only while the tables end where they ended when it was recorded (the largest node id and edge
rowid): anything else that rewrote the graph since makes this return None, and the caller derives
it in full. So does a change set larger than a quarter of the documents, where a full derivation
costs less. The result, node ids aside, is the full derivation's (tests/test_graph_update.py
compares them after edits, deletions, moves, tag changes and revivals).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection

from pinakes.index.schema import EDGE_KINDS, read_meta, transaction
from pinakes.pipeline.graph_rows import (
    CENSUS_KEY,
    HUB_EDGE,
    GraphWriter,
    documents_in_path_order,
    hub_members,
    record_structure,
    table_ends,
)

# Above this share of the active documents changed, a full derivation is the cheaper way.
UPDATE_SHARE = 0.25


def update_structure(conn: sqlite3.Connection, changed: Collection[str]) -> dict[str, int] | None:
    """Update the nodes and edges for the documents `changed` since the graph was last derived (the
    ids of every document whose chunk rows, or whose being active, changed); returns the structural
    census, or None when the graph must be derived in full instead (see the module docstring)."""
    stored = _stored_census(conn)
    if stored is None:
        return None
    (active,) = conn.execute("SELECT COUNT(*) FROM documents WHERE state = 'active'").fetchone()
    if len(changed) > UPDATE_SHARE * max(active, 1):
        return None
    census = dict(stored)
    with transaction(conn):
        graph = GraphWriter(conn, census, first_id=table_ends(conn)["nodes"] + 1)
        retired = [node for doc_id in sorted(changed) if (node := _rederive_document(conn, graph, census, doc_id))]
        _correct_hubs(conn, graph, census)
        graph.flush()
        # Last: the hubs' correction took away their edges to these (a cascade would not count them).
        conn.executemany("DELETE FROM nodes WHERE id = ?", [(node,) for node in retired])
        record_structure(conn, census)
    return census


def _stored_census(conn: sqlite3.Connection) -> dict[str, int] | None:
    recorded = read_meta(conn).get(CENSUS_KEY)
    if recorded is None:
        return None
    try:
        found = json.loads(recorded)
        census = {kind: int(found["census"][kind]) for kind in EDGE_KINDS}
        ends = {"nodes": int(found["nodes"]), "edges": int(found["edges"])}
    except (ValueError, TypeError, KeyError):
        return None
    return census if ends == table_ends(conn) else None


def _rederive_document(conn: sqlite3.Connection, graph: GraphWriter, census: dict[str, int],
                       doc_id: str) -> int | None:
    """Replace `doc_id`'s own part of the graph with one derived from its chunk rows now. When it is
    no longer active: none, and its document node's id is returned, to go once no hub points at it."""
    # A ULID holds no ':' and ';' follows it: the keys `<doc_id>:<...>` of its chunks and headings.
    own = [row[0] for row in conn.execute(
        "SELECT id FROM nodes WHERE kind IN ('chunk', 'heading') AND key > ? AND key < ?", (f"{doc_id}:", f"{doc_id};"))]
    if own:
        marks = ",".join("?" * len(own))
        for kind, count in conn.execute(f"SELECT kind, COUNT(*) FROM edges WHERE dst IN ({marks}) GROUP BY kind", own):
            census[kind] -= count
        conn.execute(f"DELETE FROM edges WHERE dst IN ({marks})", own)
        conn.execute(f"DELETE FROM nodes WHERE id IN ({marks})", own)
    row = conn.execute("SELECT 1 FROM documents WHERE id = ? AND state = 'active'", (doc_id,)).fetchone()
    node = conn.execute("SELECT id FROM nodes WHERE kind = 'doc' AND key = ?", (doc_id,)).fetchone()
    if row is None:
        return node[0] if node is not None else None
    if node is not None:
        graph.docs[doc_id] = node[0]
    chunks = conn.execute("SELECT ordinal, heading_path FROM chunks WHERE doc_id = ? ORDER BY ordinal", (doc_id,))
    graph.chunks(doc_id, graph.doc(doc_id),
                 [(int(ordinal), tuple(json.loads(heading)) if heading else ()) for ordinal, heading in chunks])
    return None


def _correct_hubs(conn: sqlite3.Connection, graph: GraphWriter, census: dict[str, int]) -> None:
    """Make every hub's edges those of the corpus's current membership."""
    graph.flush()  # new document nodes are looked up below
    documents = documents_in_path_order(conn)
    wanted = {hub: [documents[rank] for rank in ranks] for hub, ranks in hub_members(conn).items()}
    stored: dict[tuple[str, str], tuple[int, dict[str, int]]] = {}
    for hub_id, kind, key in conn.execute("SELECT id, kind, key FROM nodes WHERE kind IN ('dir', 'tag')").fetchall():
        members = dict(conn.execute(
            "SELECT n.key, e.rowid FROM edges e JOIN nodes n ON n.id = e.dst WHERE e.src = ? AND e.kind = ?",
            (hub_id, HUB_EDGE[kind])).fetchall())
        stored[kind, key] = (hub_id, members)
    gone_edges: list[int] = []
    gone_hubs: list[int] = []
    for (kind, key), (hub_id, members) in stored.items():
        keep = set(wanted.get((kind, key), ()))
        dropped = [rowid for member, rowid in members.items() if member not in keep]
        census[HUB_EDGE[kind]] -= len(dropped)
        gone_edges.extend(dropped)
        if not keep:
            gone_hubs.append(hub_id)
    conn.executemany("DELETE FROM edges WHERE rowid = ?", [(rowid,) for rowid in gone_edges])
    conn.executemany("DELETE FROM nodes WHERE id = ?", [(hub_id,) for hub_id in gone_hubs])
    for (kind, key), members in wanted.items():
        found = stored.get((kind, key))
        added = [member for member in members if found is None or member not in found[1]]
        if not added:
            continue
        hub = graph.node(kind, key) if found is None else found[0]
        graph.edges((hub, _doc_node(conn, graph, member), HUB_EDGE[kind]) for member in added)


def _doc_node(conn: sqlite3.Connection, graph: GraphWriter, doc_id: str) -> int:
    found = graph.docs.get(doc_id)
    if found is None:
        row = conn.execute("SELECT id FROM nodes WHERE kind = 'doc' AND key = ?", (doc_id,)).fetchone()
        found = graph.docs[doc_id] = row[0] if row is not None else graph.node("doc", doc_id)
    return found
