"""The graph stage's core: derive the structural graph (spec §3.2) in full over the active documents.

Derivation is never incremental: every hub's degree is a property of the whole corpus, so a
per-document deriver would have to replay removals as well as additions. A hub (tag, directory,
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
from collections import defaultdict
from collections.abc import Iterable

from pinakes.index.schema import EDGE_KINDS, transaction
from pinakes.lexical.filters import document_tags
from pinakes.links.text_edges import derive_text_edges


def derive_graph(conn: sqlite3.Connection, kb_id: str) -> dict[str, int]:
    """Replace the graph (nodes and edges) with one derived from the active documents, in one
    transaction; returns the census. Streams: the chunk rows are read document by document and each
    document's nodes and edges are written before the next is read, so memory follows the largest
    document and the documents' own nodes, not the corpus (at 696k chunks the whole graph held in
    lists took 914 MB; docs/perf/writer.md). Node ids and row order are those of the whole-graph
    build: documents in path order, then each document's chunks and heading hubs, then directory
    and tag hubs."""
    census = {kind: 0 for kind in EDGE_KINDS}
    with transaction(conn):
        conn.execute("DELETE FROM edges")
        conn.execute("DELETE FROM nodes")
        graph = _GraphWriter(conn, census)
        tag_members: dict[str, list[str]] = defaultdict(list)
        dir_members: dict[str, list[str]] = defaultdict(list)
        for doc_id, path, metadata in conn.execute(
                "SELECT id, path, metadata FROM documents WHERE state = 'active' ORDER BY path").fetchall():
            graph.doc(doc_id)
            for tag in document_tags(json.loads(metadata or "{}")):  # the sidecar's and the front matter's
                tag_members[tag].append(doc_id)
            dir_members[path.rsplit("/", 1)[0] if "/" in path else "."].append(doc_id)
        graph.flush()
        rows = conn.execute(
            "SELECT c.doc_id, c.ordinal, c.heading_path FROM chunks c "
            "JOIN documents d ON d.id = c.doc_id WHERE d.state = 'active' ORDER BY c.doc_id, c.ordinal")
        for doc_id, chunks in itertools.groupby(rows, key=lambda row: str(row[0])):
            graph.chunks(doc_id, [(int(ordinal), tuple(json.loads(heading)) if heading else ())
                                  for _, ordinal, heading in chunks])
        for directory, members in dir_members.items():
            if len(members) >= 2:
                hub = graph.node("dir", directory)
                graph.edges((hub, graph.doc(m), "co-located") for m in members)
        for tag, members in tag_members.items():
            if len(members) >= 2:
                hub = graph.node("tag", tag)
                graph.edges((hub, graph.doc(m), "shared-tag") for m in members)
        graph.flush()
    census.update(derive_text_edges(conn, kb_id))
    census["authored"] = conn.execute(
        "SELECT COUNT(*) FROM links l JOIN documents d ON d.id = l.src_doc_id "
        "WHERE l.src_kb_id = ? AND l.dst_kb_id = ? AND l.origin = 'sidecar' AND d.state = 'active'",
        (kb_id, kb_id)).fetchone()[0]
    census.update(cross_kb_counts(conn, kb_id))
    return census


_FLUSH_ROWS = 50_000  # nodes or edges held before they are written


class _GraphWriter:
    """Assigns node ids in order of first use (as a dict of every node did) and writes nodes and
    edges in batches; remembers only the documents' nodes, which the hubs point at."""

    def __init__(self, conn: sqlite3.Connection, census: dict[str, int]) -> None:
        self.conn = conn
        self.census = census
        self.count = 0
        self.docs: dict[str, int] = {}
        self.pending_nodes: list[tuple[int, str, str]] = []
        self.pending_edges: list[tuple[int, int, str]] = []

    def node(self, kind: str, key: str) -> int:
        """A new node's id (every key but a document's is met once)."""
        self.count += 1
        self.pending_nodes.append((self.count, kind, key))
        return self.count

    def doc(self, doc_id: str) -> int:
        found = self.docs.get(doc_id)
        if found is None:
            found = self.docs[doc_id] = self.node("doc", doc_id)
        return found

    def edges(self, edges: Iterable[tuple[int, int, str]]) -> None:
        for edge in edges:
            self.pending_edges.append(edge)
            self.census[edge[2]] += 1
        if len(self.pending_edges) + len(self.pending_nodes) >= _FLUSH_ROWS:
            self.flush()

    def chunks(self, doc_id: str, chunks: list[tuple[int, tuple[str, ...]]]) -> None:
        """One document's chunk nodes, heading hubs and their edges."""
        doc_node = self.doc(doc_id)
        chunk_nodes = [self.node("chunk", f"{doc_id}:{ordinal}") for ordinal, _ in chunks]
        self.edges((doc_node, chunk_node, "membership") for chunk_node in chunk_nodes)
        self.edges((a, b, "sibling") for a, b in itertools.pairwise(chunk_nodes))
        sections: dict[tuple[str, ...], list[int]] = defaultdict(list)
        for (_, heading), chunk_node in zip(chunks, chunk_nodes, strict=True):
            if heading:
                sections[heading].append(chunk_node)
        # parent-child: a chunk under heading path P is the parent of every chunk whose heading path
        # extends P. Hierarchy is the one relation not hubbed, so it materialises pairwise.
        for parent_path, parents in sections.items():
            for child_path, children in sections.items():
                if len(child_path) > len(parent_path) and child_path[: len(parent_path)] == parent_path:
                    self.edges((p, c, "parent-child") for p in parents for c in children)
        for heading, members in sections.items():
            if len(members) >= 2:
                hub = self.node("heading", f"{doc_id}:{' > '.join(heading)}")
                self.edges((hub, member, "in-section") for member in members)

    def flush(self) -> None:
        self.conn.executemany("INSERT INTO nodes (id, kind, key) VALUES (?, ?, ?)", self.pending_nodes)
        self.conn.executemany("INSERT INTO edges (src, dst, kind) VALUES (?, ?, ?)", self.pending_edges)
        self.pending_nodes.clear()
        self.pending_edges.clear()


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
