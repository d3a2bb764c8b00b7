"""The graph stage's core: derive the structural graph (spec §3.2) over the active documents.

`derive_graph` derives it in full. A sync that knows exactly which documents' chunks it changed since
a complete graph (`changed`) updates it instead (`pipeline.graph_update`): those documents' own
nodes and edges are derived again and every hub's membership, a property of the whole corpus, is
recounted from the documents table and corrected where it differs; the tables then hold what a full
derivation would (node ids aside). A hub (tag, directory,
heading) with fewer than two members is never minted. The `authored` kind is not stored; it is read
from `links` at query time, and is counted here only for the census, as are the links that cross into
or out of another KB (`cross-kb-out`, `cross-kb-in`), which the graph never holds. The links a
document's text makes are resolved here too, in full (`links.text_edges`): `links-to` rows in `links`,
read at query time as `authored` is, and the links that resolve to nothing or to several documents.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
from collections.abc import Collection

from pinakes.index.schema import EDGE_KINDS, transaction
from pinakes.links.text_edges import derive_text_edges
from pinakes.pipeline.graph_rows import (
    HUB_EDGE,
    GraphWriter,
    hub_members,
    record_structure,
    write_document_nodes,
)

# A full derivation's first node id: the documents' nodes are 1 to N, in path order.
FIRST_NODE = 1


def derive_graph(conn: sqlite3.Connection, kb_id: str, changed: Collection[str] | None = None) -> dict[str, int]:
    """The graph of the active documents, in one transaction; returns the census. With `changed`
    (the ids of every document whose chunks, or whose being active, changed since the graph was last
    derived or updated), updated when it can be (`graph_update.update_structure`), else derived in
    full (`derive_structure`). The links from text and the counts of authored links are always
    derived in full (cheap: they read the links, not the chunks)."""
    census: dict[str, int] | None = None
    if changed is not None:
        from pinakes.pipeline.graph_update import update_structure

        census = update_structure(conn, changed)
        changed = None  # a first sync's is every document (~32 MB at 700k): not held through a full derivation
    if census is None:
        census = derive_structure(conn)
    census.update(derive_text_edges(conn, kb_id))
    census["authored"] = conn.execute(
        "SELECT COUNT(*) FROM links l JOIN documents d ON d.id = l.src_doc_id "
        "WHERE l.src_kb_id = ? AND l.dst_kb_id = ? AND l.origin = 'sidecar' AND d.state = 'active'",
        (kb_id, kb_id)).fetchone()[0]
    census.update(cross_kb_counts(conn, kb_id))
    return census


def derive_structure(conn: sqlite3.Connection) -> dict[str, int]:
    """Replace the graph (nodes and edges) with one derived from the active documents, in one
    transaction; returns the census. Streams: the documents' nodes are written in SQL, the chunk
    rows are read document by document, each joined to its document's node, and each document's
    nodes and edges are written before the next is read, so memory follows the largest document
    and the hubs' members (8 B each), not the corpus (at 696k chunks the whole graph held in lists
    took 914 MB, docs/perf/writer.md; the documents' ids and nodes held in Python, ~0.2 GB at 700k
    documents, docs/perf/sync.md). Node ids and row order are those of the whole-graph
    build: documents in path order, then each document's chunks and heading hubs, then directory
    and tag hubs. Records the structural census (`record_structure`) for the next update."""
    census = {kind: 0 for kind in EDGE_KINDS}
    with transaction(conn):
        _delete_all(conn, "edges")
        _delete_all(conn, "nodes")
        documents = write_document_nodes(conn, FIRST_NODE)
        graph = GraphWriter(conn, census, first_id=FIRST_NODE + documents)
        # CROSS JOIN keeps chunks the outer loop: the chunk rows stream in their index's order while
        # nodes are written; each looks up its document's node, written before this began.
        rows = conn.execute(
            "SELECT n.id, c.doc_id, c.ordinal, c.heading_path FROM chunks c CROSS JOIN nodes n "
            "ON n.kind = 'doc' AND n.key = c.doc_id ORDER BY c.doc_id, c.ordinal")
        for (doc_node, doc_id), chunks in itertools.groupby(rows, key=lambda row: (int(row[0]), str(row[1]))):
            graph.chunks(doc_id, doc_node, [(int(ordinal), tuple(json.loads(heading)) if heading else ())
                                            for _, _, ordinal, heading in chunks])
        for (kind, key), ranks in hub_members(conn).items():
            hub = graph.node(kind, key)
            graph.edges_of(HUB_EDGE[kind], [(hub, FIRST_NODE + rank) for rank in ranks])
        graph.flush()
        record_structure(conn, census)
    return census


# Rows deleted a statement when the graph is cleared.
_DELETE_ROWS = 50_000


def _delete_all(conn: sqlite3.Connection, table: str) -> None:
    """Delete every row of `table` ("edges" or "nodes"), a batch of rows a statement. With foreign
    keys on, SQLite never truncates these tables: one `DELETE FROM` visits every row and gathers
    every rowid first (at 100k documents +12 MB for the edges, +9 MB for the nodes; ~8x at 700k)."""
    while conn.execute(f"DELETE FROM {table} WHERE rowid IN (SELECT rowid FROM {table} ORDER BY rowid LIMIT ?)",
                       (_DELETE_ROWS,)).rowcount:
        pass


def cross_kb_counts(conn: sqlite3.Connection, kb_id: str) -> dict[str, int]:
    """Authored links that cross a KB boundary: never graph edges (a foreign end has no doc node),
    counted so the census says how connected the KB is. `cross-kb-out`: this KB's active documents'
    links into another KB; `cross-kb-in`: links from connected KBs into this one, as the last reverse
    scan found them (the reverse-scan step runs after this one and refreshes the count)."""
    outbound = conn.execute(
        "SELECT COUNT(*) FROM links l JOIN documents d ON d.id = l.src_doc_id "
        "WHERE l.src_kb_id = ? AND l.dst_kb_id != ? AND l.origin = 'sidecar' AND d.state = 'active'",
        (kb_id, kb_id)).fetchone()[0]
    inbound = conn.execute(
        "SELECT COUNT(*) FROM links WHERE src_kb_id != ? AND dst_kb_id = ? AND origin = 'reverse-scan'",
        (kb_id, kb_id)).fetchone()[0]
    return {"cross-kb-out": outbound, "cross-kb-in": inbound}
