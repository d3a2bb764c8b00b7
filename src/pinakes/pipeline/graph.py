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

from pinakes.index.schema import EDGE_KINDS, transaction
from pinakes.lexical.filters import document_tags
from pinakes.links.text_edges import derive_text_edges


def derive_graph(conn: sqlite3.Connection, kb_id: str) -> dict[str, int]:
    docs = conn.execute(
        "SELECT id, path, metadata FROM documents WHERE state = 'active' ORDER BY path").fetchall()
    chunk_rows = conn.execute(
        "SELECT c.doc_id, c.ordinal, c.heading_path FROM chunks c "
        "JOIN documents d ON d.id = c.doc_id WHERE d.state = 'active' ORDER BY c.doc_id, c.ordinal"
    ).fetchall()
    nodes: dict[tuple[str, str], int] = {}

    def node(kind: str, key: str) -> int:
        found = nodes.get((kind, key))
        if found is None:
            found = len(nodes) + 1
            nodes[(kind, key)] = found
        return found

    edges: list[tuple[int, int, str]] = []
    tag_members: dict[str, list[str]] = defaultdict(list)
    dir_members: dict[str, list[str]] = defaultdict(list)
    for doc_id, path, metadata in docs:
        node("doc", doc_id)
        for tag in document_tags(json.loads(metadata or "{}")):  # the sidecar's and the front matter's
            tag_members[tag].append(doc_id)
        dir_members[path.rsplit("/", 1)[0] if "/" in path else "."].append(doc_id)

    by_doc: dict[str, list[tuple[int, tuple[str, ...]]]] = defaultdict(list)
    for doc_id, ordinal, heading in chunk_rows:
        by_doc[doc_id].append((ordinal, tuple(json.loads(heading)) if heading else ()))

    for doc_id, chunks in by_doc.items():
        doc_node = node("doc", doc_id)
        chunk_nodes = [node("chunk", f"{doc_id}:{ordinal}") for ordinal, _ in chunks]
        edges.extend((doc_node, chunk_node, "membership") for chunk_node in chunk_nodes)
        edges.extend((a, b, "sibling") for a, b in itertools.pairwise(chunk_nodes))
        sections: dict[tuple[str, ...], list[int]] = defaultdict(list)
        for (_, heading), chunk_node in zip(chunks, chunk_nodes, strict=True):
            if heading:
                sections[heading].append(chunk_node)
        # parent-child: a chunk under heading path P is the parent of every chunk whose heading path
        # extends P. Hierarchy is the one relation not hubbed, so it materialises pairwise.
        for parent_path, parents in sections.items():
            for child_path, children in sections.items():
                if len(child_path) > len(parent_path) and child_path[: len(parent_path)] == parent_path:
                    edges.extend((p, c, "parent-child") for p in parents for c in children)
        for heading, members in sections.items():
            if len(members) >= 2:
                hub = node("heading", f"{doc_id}:{' > '.join(heading)}")
                edges.extend((hub, member, "in-section") for member in members)
    for directory, members in dir_members.items():
        if len(members) >= 2:
            hub = node("dir", directory)
            edges.extend((hub, node("doc", m), "co-located") for m in members)
    for tag, members in tag_members.items():
        if len(members) >= 2:
            hub = node("tag", tag)
            edges.extend((hub, node("doc", m), "shared-tag") for m in members)

    with transaction(conn):
        conn.execute("DELETE FROM edges")
        conn.execute("DELETE FROM nodes")
        conn.executemany("INSERT INTO nodes (id, kind, key) VALUES (?, ?, ?)",
                         [(node_id, kind, key) for (kind, key), node_id in nodes.items()])
        conn.executemany("INSERT INTO edges (src, dst, kind) VALUES (?, ?, ?)", edges)
    census = {kind: 0 for kind in EDGE_KINDS}
    for _, _, kind in edges:
        census[kind] += 1
    census.update(derive_text_edges(conn, kb_id))
    census["authored"] = conn.execute(
        "SELECT COUNT(*) FROM links l JOIN documents d ON d.id = l.src_doc_id "
        "WHERE l.src_kb_id = ? AND l.dst_kb_id = ? AND l.origin = 'sidecar' AND d.state = 'active'",
        (kb_id, kb_id)).fetchone()[0]
    census.update(cross_kb_counts(conn, kb_id))
    return census


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
