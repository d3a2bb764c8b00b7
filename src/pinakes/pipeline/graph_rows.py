"""The rows of the structural graph (spec §3.2), as the full derivation (`pipeline.graph`) and the
update (`pipeline.graph_update`) both write them: node ids handed out in order of first use and
written in batches with their edges (`GraphWriter`), one document's own part (its chunks, heading
hubs and their edges), the hubs' membership from the documents table (`hub_members`), and the
structural census kept beside the tables for the next update (`record_structure`).
"""

from __future__ import annotations

import itertools
import json
import sqlite3
from array import array
from collections import defaultdict
from collections.abc import Iterable

from pinakes.index.schema import EDGE_KINDS, write_meta
from pinakes.lexical.filters import document_tags

# What joins a hub's members: a directory's documents are co-located, a tag's share it.
HUB_EDGE = {"dir": "co-located", "tag": "shared-tag"}


def hub_members(conn: sqlite3.Connection) -> dict[tuple[str, str], array[int]]:
    """Every hub of two or more members, (kind, key) -> its members as ranks: a document's rank is
    its place (from 0) among the active documents in path order (`documents_in_path_order`). What
    makes a hub is the whole corpus (a directory or tag with fewer than two active documents is
    none). Directories first, then tags, each in order of first member."""
    dirs: dict[str, array[int]] = {}
    tags: dict[str, array[int]] = {}
    # Row by row, and ranks in arrays (8 B a member), not the members' ids in lists: every active
    # document is a member of its directory (at 700k: +67 MB held as ids).
    for rank, (path, metadata) in enumerate(conn.execute(
            "SELECT path, metadata FROM documents WHERE state = 'active' ORDER BY path")):
        for tag in document_tags(json.loads(metadata or "{}")):  # the sidecar's and the front matter's
            _member(tags, tag, rank)
        _member(dirs, path.rsplit("/", 1)[0] if "/" in path else ".", rank)
    hubs = {("dir", key): found for key, found in dirs.items() if len(found) >= 2}
    hubs.update({("tag", key): found for key, found in tags.items() if len(found) >= 2})
    return hubs


def _member(hubs: dict[str, array[int]], key: str, rank: int) -> None:
    found = hubs.get(key)
    if found is None:
        found = hubs[key] = array("q")
    found.append(rank)


def documents_in_path_order(conn: sqlite3.Connection) -> list[str]:
    """The active documents' ids in path order: rank -> id for `hub_members`."""
    return [doc_id for (doc_id,) in conn.execute("SELECT id FROM documents WHERE state = 'active' ORDER BY path")]


def write_document_nodes(conn: sqlite3.Connection, first_id: int) -> int:
    """Write a node for every active document, in path order, from `first_id` (a document's node is
    `first_id` plus its rank); returns how many. In SQL: no id is held in Python (at 700k a dict of
    ids to nodes and the list of ids were ~0.1 GB)."""
    return conn.execute("INSERT INTO nodes (id, kind, key) SELECT ? - 1 + ROW_NUMBER() OVER (ORDER BY path), 'doc', id "
                        "FROM documents WHERE state = 'active' ORDER BY path", (first_id,)).rowcount


# Nodes or edges held before they are written (50,000 held ~4 MB more of tuples and keys: the
# derivation's Python peak at 200k documents was 7 MB, 3 MB with 10,000).
_FLUSH_ROWS = 10_000


class GraphWriter:
    """Assigns node ids in order of first use (as a dict of every node did), from `first_id`, and
    writes nodes and edges in batches; remembers only the documents' nodes, which the hubs point at."""

    def __init__(self, conn: sqlite3.Connection, census: dict[str, int], first_id: int = 1) -> None:
        self.conn = conn
        self.census = census
        self.count = first_id - 1
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
        self._flush_when_full()

    def edges_of(self, kind: str, pairs: list[tuple[int, int]]) -> None:
        """`edges` of one kind: counted once for the lot, not per edge."""
        self.pending_edges.extend([(src, dst, kind) for src, dst in pairs])
        self.census[kind] += len(pairs)
        self._flush_when_full()

    def _flush_when_full(self) -> None:
        if len(self.pending_edges) + len(self.pending_nodes) >= _FLUSH_ROWS:
            self.flush()

    def chunks(self, doc_id: str, doc_node: int, chunks: list[tuple[int, tuple[str, ...]]]) -> None:
        """One document's chunk nodes, heading hubs and their edges (`doc_node`: its node)."""
        first = self.count + 1
        self.count += len(chunks)
        chunk_nodes = list(range(first, self.count + 1))
        self.pending_nodes.extend([(node, "chunk", f"{doc_id}:{ordinal}")
                                   for node, (ordinal, _) in zip(chunk_nodes, chunks, strict=True)])
        self.edges_of("membership", [(doc_node, chunk_node) for chunk_node in chunk_nodes])
        self.edges_of("sibling", list(itertools.pairwise(chunk_nodes)))
        sections: dict[tuple[str, ...], list[int]] = defaultdict(list)
        for (_, heading), chunk_node in zip(chunks, chunk_nodes, strict=True):
            if heading:
                sections[heading].append(chunk_node)
        # parent-child: a chunk under heading path P is the parent of every chunk whose heading path
        # extends P. Hierarchy is the one relation not hubbed, so it materialises pairwise. Each
        # path's children are found through its prefixes (not by comparing every pair of paths),
        # listed in the order of `sections`, so the edges come in the order of a pairwise scan.
        children_of: dict[tuple[str, ...], list[tuple[str, ...]]] = defaultdict(list)
        for path in sections:
            for depth in range(1, len(path)):
                if path[:depth] in sections:
                    children_of[path[:depth]].append(path)
        for parent_path, parents in sections.items():
            for child_path in children_of.get(parent_path, ()):
                children = sections[child_path]
                self.edges_of("parent-child", [(p, c) for p in parents for c in children])
        for heading, members in sections.items():
            if len(members) >= 2:
                hub = self.node("heading", f"{doc_id}:{' > '.join(heading)}")
                self.edges_of("in-section", [(hub, member) for member in members])

    def flush(self) -> None:
        self.conn.executemany("INSERT INTO nodes (id, kind, key) VALUES (?, ?, ?)", self.pending_nodes)
        self.conn.executemany("INSERT INTO edges (src, dst, kind) VALUES (?, ?, ?)", self.pending_edges)
        self.pending_nodes.clear()
        self.pending_edges.clear()


# The meta row holding the structural census, with the largest node id and edge rowid it was
# counted at: an update trusts the counts only while the tables end where they did then.
CENSUS_KEY = "graph_structure"


def record_structure(conn: sqlite3.Connection, census: dict[str, int]) -> None:
    """Remember the structural census beside where the tables end (call inside the transaction)."""
    write_meta(conn, {CENSUS_KEY: {"census": {kind: census[kind] for kind in EDGE_KINDS},
                                   **table_ends(conn)}})


def table_ends(conn: sqlite3.Connection) -> dict[str, int]:
    return {"nodes": conn.execute("SELECT COALESCE(MAX(id), 0) FROM nodes").fetchone()[0],
            "edges": conn.execute("SELECT COALESCE(MAX(rowid), 0) FROM edges").fetchone()[0]}
