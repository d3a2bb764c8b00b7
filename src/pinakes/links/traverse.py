"""Bounded traversal of the link graph (spec §4, §8): what `pnk links` and `pinakes_links` answer.

From one document of this KB, breadth first over the `links` table in both directions: authored
links (this KB's sidecars, and what the reverse scan learnt from connected KBs) and the links this
KB's documents make in their text (origin `text`, relation `links-to`, links/text_edges.py), each
such edge citing where it is written (`spans`: line and character span in the linking document).
It never reads the structural graph (spec §3.2). Four bounds, each clamped and reported with what
was asked:

- `depth` counts logical hops (one authored link is one hop);
- `adjacent_k` caps the fan-out of the walk: of each document's neighbours, ranked (below), the first
  `adjacent_k` are expanded (their own links followed at the next hop), so a cap never selects by
  whatever order SQLite returned rows in. It never hides a neighbour: every neighbour found is listed,
  up to the response's caps, and one not expanded because of it is on the frontier as `fanout`. So at
  depth 1 (the default) every direct link of the document is listed (issue #40: a sixth link went
  missing behind `adjacent_k` 5 with `truncated` null);
- `max_rows` and `max_tokens` are the response's own caps, reported independently under
  `truncated`, because "too many neighbours" and "too much text" have different remedies. A
  neighbour that is not listed was cut by one of them, and `truncated` says so: `truncated` null
  means every neighbour found is listed.

A neighbour that was found and not expanded is on the `frontier` with one reason, the first that
applies in this order: `terminal` (in another KB, which this KB cannot vouch beyond, or unresolved),
`depth`, `fanout`, `rows`, `tokens`. Depth and fanout invite a retry with other bounds, rows and
tokens a narrower request, terminal none (to go on in another KB, start a traversal there). A listed
neighbour with no links beyond those already walked is on no frontier: there is nothing to expand.

Ranking: a neighbour's score is the number of authored links joining it to the document it was
found from (each weighs AUTHORED_WEIGHT, the `authored` weight of spec §3.2), divided by its hop.
Within one KB, neighbours go by score, then document id. Across KBs they take turns, this KB first,
then the others by their best score (then id): the best of each KB, then the second of each, and
so on. So no KB's documents can fill the fan-out and row caps while another's wait behind them: with
neighbours in k KBs, each KB holds at least min(its own count, adjacent_k // k) of the slots, however
many links one partner makes. A neighbour lists at most MAX_EDGES_LISTED of its links (the rest are
counted in `edges_omitted`), so one neighbour joined by thousands of relations stays one short row. A neighbour in a KB that the caller cannot
read (not served, or not on this machine) is returned all the same, identified by its ids and marked
unreachable: omitting it would hide a link that exists. Confidence is always `unknown`: the
calibrated signal of §4.2 is a property of a retrieved passage in one KB, and a neighbour is not one.

Two narrowings (issue #26): `rels` follows only links with one of those relations (the walk itself
is narrowed, so depth and the frontier are those of the narrower graph); `ranking` orders the
neighbours found in this KB by a query, with the search pipeline itself (`links.relevance`: the
hybrid scorer restricted to those documents, one search per call, bounded by max_rows). Ranking
never changes which neighbours are found, expanded or cut: the frontier is the one the walk
without a query has. It only orders each hop's neighbours, those with a `relevance` (rank, score)
first by rank, then the rest (neighbours in other KBs, and this KB's that no passage matched) as
the walk found them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NotRequired, TypedDict

from pinakes.display import clipped
from pinakes.errors import PinakesError
from pinakes.ids import format_pnk_uri
from pinakes.links.text_edges import TEXT_ORIGIN

if TYPE_CHECKING:  # `pnk --help` builds the `pnk links` parser from this module's constants
    import sqlite3
    from contextlib import ExitStack
    from pathlib import Path

    from pinakes.manifest import Manifest

AUTHORED_WEIGHT = 2.0
MAX_EDGES_LISTED = 8  # a neighbour's links listed in full (`edges`); the rest are counted
MAX_SPANS_LISTED = 3  # a link from text cites this many places it is written; the rest are counted
DIRECTIONS = ("both", "out", "in")
REASONS = ("terminal", "depth", "fanout", "rows", "tokens")  # frontier reasons, in precedence order
CHARS_PER_TOKEN = 4
_ENVELOPE_CHARS = 1_600  # the response's fixed part (start, bounds, truncation report), estimated

CONFIDENCE: dict[str, str] = {"level": "unknown",
              "reason": "traversal neighbours are not retrieved passages: no calibrated score applies "
                        "(and a list spanning KBs has no single manifest whose thresholds would)"}


@dataclass(frozen=True)
class Limit:
    """A bound as requested, as used, and the server's range for it."""

    name: str
    requested: int | None
    used: int
    minimum: int
    maximum: int

    @property
    def clamped(self) -> bool:
        return self.requested is not None and self.requested != self.used

    def to_dict(self) -> Bound:
        return {"requested": self.requested, "used": self.used, "min": self.minimum, "max": self.maximum,
                "clamped": self.clamped}


def clamp(name: str, requested: int | None, default: int, minimum: int, maximum: int) -> Limit:
    """`requested` (or the default) brought into [minimum, maximum]; the caller is told via `clamped`."""
    value = default if requested is None else requested
    return Limit(name, requested, max(minimum, min(maximum, value)), minimum, maximum)


@dataclass(frozen=True)
class TraversalLimits:
    """The server-side ranges every call is clamped into."""

    max_depth: int = 3
    max_adjacent_k: int = 50
    max_rows: int = 200
    default_rows: int = 50
    min_tokens: int = 1_000
    max_tokens: int | None = 12_000  # None: no token cap (the CLI's default, like `pnk get`)


@dataclass(frozen=True)
class KBView:
    """How a traversal sees a KB other than its own: a name and, when readable, its documents."""

    kb_id: str
    alias: str | None
    reachable: bool
    # doc ids -> {doc_id: (title, path)} of those that are active documents (only when reachable)
    documents: Callable[[list[str]], dict[str, tuple[str | None, str]]] | None = None
    unreachable_reason: str | None = None


Lookup = Callable[[str], KBView]


@dataclass(frozen=True)
class QueryRanking:
    """A query, and how to rank this KB's documents by it: doc ids -> {doc_id: (rank, score)} for
    those the query matched (`links.relevance.by_query` builds it over a Searcher)."""

    query: str
    rank: Callable[[list[str]], dict[str, tuple[int, float]]]


# What a neighbour's `relevance` adds at most, reserved while the walk sizes it against the token cap.
_RELEVANCE_CHARS = len(json.dumps({"relevance": {"rank": 200, "score": -0.123456}})) + 2


# --- the traversal as `traverse` returns it (JSON-ready: `pnk links --json`, MCP `pinakes_links`) ----


class Bound(TypedDict):
    requested: int | None
    used: int
    min: int
    max: int
    clamped: bool


class KBRef(TypedDict):
    id: str
    alias: str | None


class NeighbourKB(KBRef):
    this_kb: bool


class Relevance(TypedDict):
    rank: int
    score: float


class EdgeSpan(TypedDict):
    """Where a link from text is written: in the linking document (the start's text for an `out`
    edge, the neighbour's for an `in` one), end exclusive, and the 1-based line."""

    line: int
    char_start: int
    char_end: int
    syntax: str  # wikilink, embed, markdown, image, reference, uri
    target: str  # as written (decoded)


class Edge(TypedDict):
    rel: str
    direction: str  # out or in
    origin: str  # sidecar (authored here), reverse-scan (authored in a connected KB), text (from text)
    spans: NotRequired[list[EdgeSpan]]  # origin text only: the first MAX_SPANS_LISTED
    spans_omitted: NotRequired[int]


class Start(TypedDict):
    doc_id: str
    doc_uri: str
    kb: KBRef
    title: str | None
    path: str | None
    resolved: bool
    reason: str | None


class Neighbour(TypedDict):
    doc_id: str
    doc_uri: str
    kb: NeighbourKB
    title: str | None
    path: str | None
    rel: str
    direction: str  # out, in, or both
    edges: list[Edge]
    edges_omitted: int
    hop: int
    via: str | None
    score: float
    resolved: bool | None  # None: its KB cannot be read here
    reachable: bool
    reason: str | None
    terminal: bool
    relevance: NotRequired[Relevance | None]  # only when ranked by a query


class FrontierEntry(TypedDict):
    doc_id: str
    kb_id: str
    hop: int
    via: str | None
    rel: str
    reason: str  # one of REASONS


class Cut(TypedDict):
    """What one cap cut: rows (`limit`, `returned`) or tokens (`budget`)."""

    neighbours_cut: int
    limit: NotRequired[int]
    returned: NotRequired[int]
    budget: NotRequired[int | None]


class Traversal(TypedDict):
    start: Start
    direction: str
    rel: list[str] | None
    query: str | None
    bounds: dict[str, Bound]
    neighbours: list[Neighbour]
    frontier: list[FrontierEntry]
    frontier_omitted: dict[str, int]  # by reason
    confidence: dict[str, str]
    truncated: dict[str, Cut] | None  # by cap
    usage: NotRequired[dict[str, int]]  # with a token cap


@dataclass
class _Node:
    kb_id: str
    doc_id: str
    hop: int
    via: str | None
    edges: list[Edge] = field(default_factory=list[Edge])
    score: float = 0.0


def traverse(conn: sqlite3.Connection, kb_id: str, kb_alias: str, doc_id: str, *, lookup: Lookup,
             depth: int | None = None, adjacent_k: int | None = None, max_rows: int | None = None,
             max_tokens: int | None = None, direction: str = "both", default_adjacent_k: int = 5,
             limits: TraversalLimits | None = None, rels: Sequence[str] = (),
             ranking: QueryRanking | None = None) -> Traversal:
    """The traversal from `doc_id` of KB `kb_id` over `conn` (its index), as a JSON-ready dict;
    over links with one of `rels` only, when given, and ordered by `ranking`'s query, when given."""
    from pinakes.index.documents import UnknownDocumentError

    limits = limits or TraversalLimits()
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}")
    bounds = {
        "depth": clamp("depth", depth, 1, 1, limits.max_depth),
        "adjacent_k": clamp("adjacent_k", adjacent_k, min(default_adjacent_k, limits.max_adjacent_k), 1,
                            limits.max_adjacent_k),
        "max_rows": clamp("max_rows", max_rows, min(limits.default_rows, limits.max_rows), 1, limits.max_rows),
    }
    if limits.max_tokens is not None:
        bounds["max_tokens"] = clamp("max_tokens", max_tokens, limits.max_tokens, limits.min_tokens,
                                     limits.max_tokens)
    here = _documents(conn)
    start_row = here([doc_id]).get(doc_id)
    if start_row is None and not _has_links(conn, kb_id, doc_id):
        raise UnknownDocumentError(
            f"no document {doc_id} in this KB's index, and no link names it",
            remedy="pass the id of an indexed document (`pnk list`, or a pinakes_search passage's doc_id)")
    views: dict[str, KBView] = {kb_id: KBView(kb_id, kb_alias, True, here)}

    def view(of: str) -> KBView:
        if of not in views:
            views[of] = lookup(of)
        return views[of]

    walker = _Walk(conn, kb_id, direction, view, bounds, frontier_cap=limits.max_rows, rels=tuple(dict.fromkeys(rels)),
                   ranked=ranking is not None)
    walker.run(doc_id)
    if ranking is not None:
        walker.rank_by(ranking)
    from pinakes.extract.titles import display_title

    start: Start = {"doc_id": doc_id, "doc_uri": format_pnk_uri(kb_id, doc_id), "kb": {"id": kb_id, "alias": kb_alias},
             "title": display_title(*start_row) if start_row else None, "path": start_row[1] if start_row else None,
             "resolved": start_row is not None,
             "reason": None if start_row else f"{doc_id} is not an active document of this KB; links name it"}
    response: Traversal = {
        "start": start, "direction": direction, "rel": list(walker.rels) or None,
        "query": ranking.query if ranking is not None else None,
        "bounds": {name: limit.to_dict() for name, limit in bounds.items()},
        "neighbours": walker.rendered, "frontier": [], "frontier_omitted": {},
        "confidence": dict(CONFIDENCE), "truncated": None,
    }
    walker.fit(response, limits.max_tokens is not None)
    return response


class _Walk:
    def __init__(self, conn: sqlite3.Connection, kb_id: str, direction: str, view: Callable[[str], KBView],
                 bounds: Mapping[str, Limit], *, frontier_cap: int, rels: tuple[str, ...] = (), ranked: bool = False):
        self.conn, self.kb_id, self.direction, self.view = conn, kb_id, direction, view
        self.frontier_cap = frontier_cap  # entries listed; the rest are counted in frontier_omitted
        self.rels = rels
        self.reserved_chars = _RELEVANCE_CHARS if ranked else 0
        self.depth = bounds["depth"].used
        self.adjacent_k = bounds["adjacent_k"].used
        self.max_rows = bounds["max_rows"].used
        token_limit = bounds.get("max_tokens")
        self.budget_chars = None if token_limit is None else token_limit.used * CHARS_PER_TOKEN
        self.used_chars = _ENVELOPE_CHARS
        self.rendered: list[Neighbour] = []
        self.frontier: list[FrontierEntry] = []
        self.cut = {"rows": 0, "tokens": 0}

    def run(self, start: str) -> None:
        visited = {(self.kb_id, start)}
        level = [start]  # an unresolved start too: the links naming it are what the caller asked for
        for hop in range(1, self.depth + 1):
            next_level: list[str] = []
            for parent in level:
                ranked = self._ranked(parent, hop, visited)
                for rank, node in enumerate(ranked):
                    visited.add((node.kb_id, node.doc_id))
                    if len(self.rendered) >= self.max_rows:
                        self.cut["rows"] += 1
                        self._on_frontier(node, "rows")
                        continue
                    rendered = self._render(node)
                    size = _chars(rendered) + 2 + self.reserved_chars
                    if self.budget_chars is not None and self.used_chars + size > self.budget_chars:
                        self.cut["tokens"] += 1
                        self._on_frontier(node, "tokens", rendered)
                        continue
                    self.used_chars += size
                    self.rendered.append(rendered)
                    if rendered["terminal"]:
                        self._on_frontier(node, "terminal", rendered)
                    elif hop == self.depth or rank >= self.adjacent_k:
                        if self._ranked(node.doc_id, hop + 1, visited, peek=True):
                            self._on_frontier(node, "fanout", rendered)  # "depth" at the last hop
                    else:
                        next_level.append(node.doc_id)
            level = next_level

    def _ranked(self, parent: str, hop: int, visited: set[tuple[str, str]], *, peek: bool = False) -> list[_Node]:
        from pinakes.links.authoring import MAX_REL_CHARS

        nodes: dict[tuple[str, str], _Node] = {}
        for other_kb, other_doc, rel, direction, origin in self._edges(parent):
            key = (other_kb, other_doc)
            if key in visited:
                continue
            node = nodes.setdefault(key, _Node(other_kb, other_doc, hop, parent))
            if peek:
                return [node]
            # a sidecar's relation is the KB's text, unbounded there: shown as `pnk link` writes one at most
            edge: Edge = {"rel": clipped(rel, MAX_REL_CHARS), "direction": direction, "origin": origin}
            if origin == TEXT_ORIGIN:
                self._cite(edge, parent, other_kb, other_doc)
            node.edges.append(edge)
        for node in nodes.values():
            node.score = round(AUTHORED_WEIGHT * len(node.edges) / hop, 4)
            node.edges.sort(key=lambda edge: (edge["direction"], edge["rel"], edge["origin"]))
        return self._taking_turns(nodes.values())

    def _cite(self, edge: Edge, parent: str, other_kb: str, other_doc: str) -> None:
        """The spans of a link from text: in `parent`'s text (out) or in the neighbour's (in)."""
        from pinakes.links.text_edges import spans_between

        src, dst_kb, dst = (parent, other_kb, other_doc) if edge["direction"] == "out" else (other_doc, self.kb_id, parent)
        spans, total = spans_between(self.conn, src, dst_kb, dst, MAX_SPANS_LISTED)
        edge["spans"] = [{"line": span.line, "char_start": span.char_start, "char_end": span.char_end,
                          "syntax": span.syntax, "target": clipped(span.target, 200)} for span in spans]
        edge["spans_omitted"] = total - len(spans)

    def _taking_turns(self, nodes: Iterable[_Node]) -> list[_Node]:
        """Each KB's neighbours by score, interleaved KB by KB (see the module docstring)."""
        by_kb: dict[str, list[_Node]] = {}
        for node in sorted(nodes, key=lambda n: (-n.score, n.doc_id)):
            by_kb.setdefault(node.kb_id, []).append(node)
        turns = sorted(by_kb.values(), key=lambda ranked: (ranked[0].kb_id != self.kb_id, -ranked[0].score,
                                                           ranked[0].kb_id))
        return [ranked[turn] for turn in range(max(map(len, turns), default=0))
                for ranked in turns if turn < len(ranked)]

    def _edges(self, doc_id: str) -> list[tuple[str, str, str, str, str]]:
        edges: list[tuple[str, str, str, str, str]] = []
        only = f" AND rel IN ({', '.join('?' * len(self.rels))})" if self.rels else ""
        if self.direction in ("both", "out"):
            edges += [(kb, doc, rel, "out", origin) for kb, doc, rel, origin in self.conn.execute(
                f"SELECT dst_kb_id, dst_doc_id, rel, origin FROM links WHERE src_kb_id = ? AND src_doc_id = ?{only} "
                "ORDER BY dst_kb_id, dst_doc_id, rel", (self.kb_id, doc_id, *self.rels))]
        if self.direction in ("both", "in"):
            edges += [(kb, doc, rel, "in", origin) for kb, doc, rel, origin in self.conn.execute(
                f"SELECT src_kb_id, src_doc_id, rel, origin FROM links WHERE dst_kb_id = ? AND dst_doc_id = ?{only} "
                "ORDER BY src_kb_id, src_doc_id, rel", (self.kb_id, doc_id, *self.rels))]
        return edges

    def rank_by(self, ranking: QueryRanking) -> None:
        """Give this KB's resolved neighbours their `relevance` to the query (one ranking call) and
        order each hop by it; who is listed, expanded or on the frontier does not change."""
        here = [item["doc_id"] for item in self.rendered if item["kb"]["this_kb"] and item["resolved"]]
        ranks = ranking.rank(here) if here else {}
        for item in self.rendered:
            found = ranks.get(item["doc_id"]) if item["kb"]["this_kb"] else None
            item["relevance"] = {"rank": found[0], "score": round(found[1], 6)} if found else None
        unranked = len(self.rendered) + 1

        def order(item: Neighbour) -> tuple[int, int]:
            relevance = item.get("relevance")
            return item["hop"], relevance["rank"] if relevance else unranked

        self.rendered.sort(key=order)

    def _render(self, node: _Node) -> Neighbour:
        from pinakes.extract.titles import display_title

        view = self.view(node.kb_id)
        found = view.documents([node.doc_id]).get(node.doc_id) if view.reachable and view.documents else None
        if not view.reachable:
            resolved, reason = None, view.unreachable_reason or f"KB {node.kb_id} cannot be read here"
        elif found is None:
            where = "this KB" if node.kb_id == self.kb_id else f"KB {view.alias or node.kb_id}"
            resolved = False
            reason = f"{node.doc_id} is not an active document of {where} (deleted, not indexed there yet, or a wrong id)"
        else:
            resolved, reason = True, None
        directions = {edge["direction"] for edge in node.edges}
        cross_kb = node.kb_id != self.kb_id
        return {
            "doc_id": node.doc_id, "doc_uri": format_pnk_uri(node.kb_id, node.doc_id),
            "kb": {"id": node.kb_id, "alias": view.alias, "this_kb": not cross_kb},
            "title": display_title(found[0], found[1]) if found else None, "path": found[1] if found else None,
            "rel": node.edges[0]["rel"], "direction": "both" if len(directions) > 1 else next(iter(directions)),
            "edges": node.edges[:MAX_EDGES_LISTED], "edges_omitted": max(0, len(node.edges) - MAX_EDGES_LISTED),
            "hop": node.hop, "via": node.via, "score": node.score,
            "resolved": resolved, "reachable": view.reachable, "reason": reason,
            "terminal": cross_kb or resolved is not True,
        }

    def _on_frontier(self, node: _Node, cut_by: str, rendered: Neighbour | None = None) -> None:
        """One frontier entry, with the first reason that applies in REASONS order: terminal (another
        KB, or unresolved), then depth (it sits at the last hop), then what cut it."""
        if rendered is not None:
            terminal = bool(rendered["terminal"])
        else:  # cut before it was rendered: decide from its KB, and for this KB's own, whether it is here
            here = self.view(self.kb_id).documents
            terminal = node.kb_id != self.kb_id or here is None or not here([node.doc_id])
        reason = "terminal" if terminal else "depth" if node.hop >= self.depth else cut_by
        self.frontier.append({"doc_id": node.doc_id, "kb_id": node.kb_id, "hop": node.hop, "via": node.via,
                              "rel": node.edges[0]["rel"], "reason": reason})

    def fit(self, response: Traversal, token_capped: bool) -> None:
        """List the frontier (at most `frontier_cap` entries, within the token budget; the rest are
        counted by reason), and say what each of the response's caps cut."""
        listed: list[FrontierEntry] = []
        omitted: dict[str, int] = {}
        for entry in sorted(self.frontier, key=lambda e: (REASONS.index(e["reason"]), e["hop"])):
            size = _chars(entry) + 2
            fits = self.budget_chars is None or self.used_chars + size <= self.budget_chars
            if len(listed) < self.frontier_cap and fits:
                listed.append(entry)
                self.used_chars += size
            else:
                omitted[entry["reason"]] = omitted.get(entry["reason"], 0) + 1
        response["frontier"] = listed
        response["frontier_omitted"] = omitted
        truncated: dict[str, Cut] = {}
        if self.cut["rows"]:
            truncated["rows"] = {"limit": self.max_rows, "returned": len(self.rendered),
                                 "neighbours_cut": self.cut["rows"]}
        if self.cut["tokens"]:
            truncated["tokens"] = {"budget": self.budget_chars // CHARS_PER_TOKEN if self.budget_chars else None,
                                   "neighbours_cut": self.cut["tokens"]}
        response["truncated"] = truncated or None
        if token_capped:
            response["usage"] = {"tokens_estimated": math.ceil(_chars(response) / CHARS_PER_TOKEN),
                                 "token_budget": (self.budget_chars or 0) // CHARS_PER_TOKEN}


def _documents(conn: sqlite3.Connection) -> Callable[[list[str]], dict[str, tuple[str | None, str]]]:
    def documents(ids: list[str]) -> dict[str, tuple[str | None, str]]:
        marks = ",".join("?" * len(ids))
        return {doc_id: (title, path) for doc_id, title, path in conn.execute(
            f"SELECT id, title, path FROM documents WHERE state = 'active' AND id IN ({marks})", ids)}
    return documents


def documents_of(conn: sqlite3.Connection) -> Callable[[list[str]], dict[str, tuple[str | None, str]]]:
    """A `KBView.documents` over another KB's index connection."""
    return _documents(conn)


def _has_links(conn: sqlite3.Connection, kb_id: str, doc_id: str) -> bool:
    return conn.execute("SELECT 1 FROM links WHERE (src_kb_id = ? AND src_doc_id = ?) OR "
                        "(dst_kb_id = ? AND dst_doc_id = ?) LIMIT 1", (kb_id, doc_id, kb_id, doc_id)).fetchone() is not None


def _chars(payload: object) -> int:
    return len(json.dumps(payload, ensure_ascii=False))


def machine_lookup(kb_root: Path, manifest: Manifest, stack: ExitStack) -> Lookup:
    """How `pnk links` sees other KBs: a `[[links.kb]]` partner is reachable when its path holds a KB
    with the declared id and an index (opened read-only, closed with `stack`); any other is
    identified and marked unreachable, with the reason."""
    from pinakes.index import schema
    from pinakes.kb import KBPaths
    from pinakes.links.reverse import PartnerError, open_partner

    def lookup(kb_id: str) -> KBView:
        linked = next((item for item in manifest.links if item.id == kb_id), None)
        if linked is None:
            return KBView(kb_id, None, False, unreachable_reason=f"KB {kb_id} is not in this KB's [[links.kb]]")
        try:
            root, _ = open_partner(kb_root, linked)
        except PartnerError as exc:
            return KBView(kb_id, linked.alias, False, unreachable_reason=exc.message)
        index_db = KBPaths(root).index_db
        try:
            conn = schema.open_reader(index_db)
        except PinakesError as exc:
            return KBView(kb_id, linked.alias, False,
                          unreachable_reason=f"KB {linked.alias!r} has no readable index ({exc.message}); "
                                             f"run `pnk -C {root} sync`")
        stack.callback(conn.close)
        return KBView(kb_id, linked.alias, True, _documents(conn))

    return lookup
