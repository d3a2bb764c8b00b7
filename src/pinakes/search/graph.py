"""The graph expansion channel (`[retrieval] graph_channel = "expand"`, spec §4).

One hop out of the fused top passages over the derived structural graph (rules/graph.py) and the
authored links of this KB, scored into fusion as a third ranked list:

    fused top SEEDS passages
     └─ chunk edges: sibling, parent-child, in-section (through the heading hub)
     └─ document edges: authored links and links from text (`links-to`, links/text_edges.py;
        either direction, this KB only), shared-tag, co-located (through the tag / directory hub);
        a neighbour document is represented by its chunk closest to the query, and one reached by a
        link from text carries the span where the link is written (`Neighbour.span`)
     └─ per seed, neighbours ranked by cosine with the query, then cut to `adjacent_k`
        (the cap applies after ranking, so it never selects by storage order)
     └─ the union, best cosine first: one more reciprocal-rank list, weighed by GRAPH_WEIGHT

The neighbours are ranked by the query's cosine because that is the evidence a neighbour has of its
own; a neighbour with no positive cosine is dropped, as the vector retriever drops it. The channel
needs the query vector, so it runs only when the vector side ran (hybrid and vector modes).
Cross-KB links never enter: a foreign document has no chunk here.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from pinakes.search.vectors import VectorMatrix

CHANNELS = ("off", "expand")
SEEDS = 5  # fused passages expanded
GRAPH_WEIGHT = 1.0  # the graph list's weight in fusion, beside the keyword and vector lists' 1.0
CHUNK_EDGES = ("sibling", "parent-child", "in-section")
DOCUMENT_EDGES = ("authored", "links-to", "shared-tag", "co-located")
# The `links` rows each link kind reads: authored ones from this KB's sidecars, links-to from its texts.
_LINK_ORIGINS = {"authored": "sidecar", "links-to": "text"}
EDGES = CHUNK_EDGES + DOCUMENT_EDGES  # what the channel follows


@dataclass(frozen=True)
class LinkSpan:
    """Where the link from text that reached a neighbour is written: the linking document (the
    seed's or the neighbour's), its character span (end exclusive) and 1-based line."""

    doc_id: str
    char_start: int
    char_end: int
    line: int


@dataclass(frozen=True)
class Neighbour:
    chunk_id: int
    cosine: float
    seed: int  # the chunk id it was reached from
    edge: str
    span: LinkSpan | None = None  # edge links-to: where the link is written


class GraphView:
    """Row lookups over one generation's vector matrix, built once per generation."""

    def __init__(self, matrix: VectorMatrix):
        self.matrix = matrix
        self.doc_position = {doc: position for position, doc in enumerate(matrix.documents)}
        self.order = np.argsort(matrix.doc_rows, kind="stable")
        self.bounds = np.searchsorted(matrix.doc_rows[self.order], np.arange(len(matrix.documents) + 1))

    def row(self, chunk_id: int) -> int | None:
        ids = self.matrix.chunk_ids
        position = int(np.searchsorted(ids, chunk_id))
        return position if position < len(ids) and int(ids[position]) == chunk_id else None

    def closest_row(self, doc_id: str, scores: NDArray[np.float32]) -> int | None:
        """The row of `doc_id`'s chunk closest to the query (None when it has no allowed row)."""
        position = self.doc_position.get(doc_id)
        if position is None:
            return None
        rows = self.order[self.bounds[position]:self.bounds[position + 1]]
        if rows.size == 0:
            return None
        best = int(rows[int(np.argmax(scores[rows]))])
        return best if np.isfinite(scores[best]) else None


def expand(conn: sqlite3.Connection, view: GraphView, query_vector: NDArray[np.float32],
           seeds: list[int], adjacent_k: int,
           edges: tuple[str, ...] = EDGES,
           allowed: NDArray[np.bool_] | None = None) -> list[Neighbour]:
    """The expansion list for `seeds` (chunk ids, best first): neighbours not among the seeds, best
    cosine first, each once (reached from its best seed). `allowed` is the filter's row mask."""
    matrix = view.matrix
    if not seeds or len(matrix) == 0 or adjacent_k < 1:
        return []
    query = np.asarray(query_vector, dtype=np.float32).reshape(-1)
    scores = matrix.vectors @ query
    if allowed is not None:
        scores = np.where(allowed, scores, np.float32(-np.inf))
    located = {row[0]: (row[1], row[2]) for row in conn.execute(
        f"SELECT id, doc_id, ordinal FROM chunks WHERE id IN ({','.join('?' * len(seeds))})", seeds)}
    best: dict[int, Neighbour] = {}
    for seed in seeds:
        if seed not in located:
            continue
        doc_id, ordinal = located[seed]
        found: dict[int, tuple[str, str | None]] = {}  # row -> (edge kind, the document it leads to)
        for chunk_id, edge in _chunk_neighbours(conn, doc_id, ordinal, edges):
            row = view.row(chunk_id)
            if row is not None:
                found.setdefault(row, (edge, None))  # the first, most specific, edge that found it
        for other_doc, edge in _document_neighbours(conn, doc_id, edges):
            row = view.closest_row(other_doc, scores)
            if row is not None:
                found.setdefault(row, (edge, other_doc))
        ranked = [Neighbour(int(matrix.chunk_ids[row]), float(scores[row]), seed, edge,
                            _link_span(conn, doc_id, other) if edge == "links-to" and other else None)
                  for row, (edge, other) in found.items() if scores[row] > 0.0]
        ranked = [n for n in ranked if n.chunk_id not in seeds]
        ranked.sort(key=lambda n: (-n.cosine, n.chunk_id))
        for neighbour in ranked[:adjacent_k]:  # the fan-out cap, after ranking
            best.setdefault(neighbour.chunk_id, neighbour)
    return sorted(best.values(), key=lambda n: (-n.cosine, n.chunk_id))


def _chunk_neighbours(conn: sqlite3.Connection, doc_id: str, ordinal: int,
                      edges: tuple[str, ...]) -> list[tuple[int, str]]:
    """Chunks one structural edge away from chunk (doc_id, ordinal), as chunk ids."""
    wanted = [kind for kind in CHUNK_EDGES if kind in edges]
    if not wanted:
        return []
    node = conn.execute("SELECT id FROM nodes WHERE kind = 'chunk' AND key = ?",
                        (f"{doc_id}:{ordinal}",)).fetchone()
    if node is None:
        return []
    direct = [kind for kind in wanted if kind != "in-section"]
    keys: list[tuple[str, str]] = []
    if direct:
        marks = ",".join("?" * len(direct))
        keys.extend(conn.execute(
            f"SELECT n.key, e.kind FROM edges e JOIN nodes n ON n.id = e.dst "
            f"WHERE e.src = ? AND e.kind IN ({marks}) AND n.kind = 'chunk' "
            f"UNION SELECT n.key, e.kind FROM edges e JOIN nodes n ON n.id = e.src "
            f"WHERE e.dst = ? AND e.kind IN ({marks}) AND n.kind = 'chunk'",
            (node[0], *direct, node[0], *direct)).fetchall())
    if "in-section" in wanted:
        keys.extend(conn.execute(
            "SELECT n.key, 'in-section' FROM edges hub JOIN edges e ON e.src = hub.src AND e.kind = 'in-section' "
            "JOIN nodes n ON n.id = e.dst WHERE hub.dst = ? AND hub.kind = 'in-section' AND e.dst != ?",
            (node[0], node[0])).fetchall())
    return _chunk_ids(conn, keys)


def _chunk_ids(conn: sqlite3.Connection, keys: list[tuple[str, str]]) -> list[tuple[int, str]]:
    by_doc: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for key, kind in keys:
        doc, _, ordinal = key.rpartition(":")
        by_doc[doc].append((int(ordinal), kind))
    out: list[tuple[int, str]] = []
    for doc, ordinals in by_doc.items():
        ids = dict(conn.execute("SELECT ordinal, id FROM chunks WHERE doc_id = ?", (doc,)).fetchall())
        out.extend((ids[ordinal], kind) for ordinal, kind in ordinals if ordinal in ids)
    return out


def _document_neighbours(conn: sqlite3.Connection, doc_id: str, edges: tuple[str, ...]) -> list[tuple[str, str]]:
    """Documents one link (authored, or from text) or one shared hub (tag, directory) away from
    `doc_id`. A row of origin 'sidecar' or 'text' was written from this KB's own sidecars or texts,
    so it stays inside the KB exactly when both ends carry the same KB id."""
    out: list[tuple[str, str]] = []
    for kind, origin in _LINK_ORIGINS.items():
        if kind in edges:
            out.extend((row[0], kind) for row in conn.execute(
                "SELECT dst_doc_id FROM links WHERE src_doc_id = ?1 AND dst_kb_id = src_kb_id "
                "AND origin = ?2 UNION SELECT src_doc_id FROM links WHERE dst_doc_id = ?1 "
                "AND dst_kb_id = src_kb_id AND origin = ?2", (doc_id, origin)))
    hubs = [kind for kind in ("shared-tag", "co-located") if kind in edges]
    if hubs:
        marks = ",".join("?" * len(hubs))
        out.extend(conn.execute(
            f"SELECT n.key, e.kind FROM nodes d JOIN edges hub ON hub.dst = d.id AND hub.kind IN ({marks}) "
            f"JOIN edges e ON e.src = hub.src AND e.kind = hub.kind JOIN nodes n ON n.id = e.dst "
            f"WHERE d.kind = 'doc' AND d.key = ? AND n.key != ?", (*hubs, doc_id, doc_id)).fetchall())
    return [(other, kind) for other, kind in out if other != doc_id]


def _link_span(conn: sqlite3.Connection, doc_id: str, other: str) -> LinkSpan | None:
    """The first place (in text order) where `doc_id`'s text links to `other`, else `other`'s to it."""
    for src, dst in ((doc_id, other), (other, doc_id)):
        row = conn.execute("SELECT char_start, char_end, line FROM text_links WHERE doc_id = ? AND dst_doc_id = ? "
                           "AND status IN ('resolved', 'ambiguous') ORDER BY char_start LIMIT 1", (src, dst)).fetchone()
        if row is not None:
            return LinkSpan(src, *row)
    return None
