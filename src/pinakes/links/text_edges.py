"""Links from text as the index stores them: derived edges, never authored ones (spec §3: a sidecar
holds what a person wrote down as a link; these are read from the document itself).

Two steps, split the way the pipeline splits content from structure:

- `write_text_links`, when sync writes a document (in that document's transaction): its parsed
  links (`links.text_links`), with their spans. Content-addressed through the document's build key,
  so an unchanged document is neither parsed nor written again.
- `derive_text_edges`, in the graph stage, in full over the active documents: each stored link
  resolved against the KB's current document paths (`links.resolve`), its resolution written beside
  it, and the `links` rows of origin 'text' (relation `links-to`, one per linking and linked
  document) rewritten. Full, never incremental, like the structural graph (spec §3.2): whether a
  link resolves depends on every other document's path, so a rename or a deletion elsewhere makes
  a link unresolved, and a later file of that name resolves it, at the next sync.

A `pnk://<kb>/<doc>` address resolves by id: `self` or a KB ULID (an alias is machine-local and
never part of an address, spec §2.2). Into this KB it must name an active document; into another
KB it is an edge to that KB, which `pnk links` shows as terminal, as it shows an authored one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from pinakes.errors import PinakesError
from pinakes.ids import parse_pnk_uri
from pinakes.links.resolve import NamesLookedUp, PathIndex, Resolution, name_key, resolve_link
from pinakes.links.text_links import TextLink

TEXT_ORIGIN = "text"
TEXT_REL = "links-to"
PROBLEM_STATUSES: tuple[str, ...] = ("unresolved", "ambiguous")


def write_text_links(conn: sqlite3.Connection, doc_id: str, links: Sequence[TextLink]) -> None:
    """Replace the stored links of `doc_id`'s text (call inside the document's transaction). They
    wait, `pending`, for the graph stage to resolve them."""
    conn.execute("DELETE FROM text_links WHERE doc_id = ?", (doc_id,))
    conn.executemany(
        "INSERT INTO text_links (doc_id, syntax, target, subpath, char_start, char_end, line) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(doc_id, link.syntax, link.target, link.subpath, link.char_start, link.char_end, link.line)
         for link in links])


def derive_text_edges(conn: sqlite3.Connection, kb_id: str) -> dict[str, int]:
    """Resolve every active document's text links and rewrite the `links` rows they derive (in one
    transaction). Returns the census: `links-to` (edges between two documents of this KB),
    `links-to-cross-kb` (into another KB), and the links `links-to-unresolved` and
    `links-to-ambiguous`."""
    from pinakes.index.schema import transaction

    rows = conn.execute(
        "SELECT t.id, t.doc_id, d.path, t.syntax, t.target, t.status, t.dst_kb_id, t.dst_doc_id, t.candidates "
        "FROM text_links t JOIN documents d ON d.id = t.doc_id AND d.state = 'active'").fetchall()
    by_path = _paths_named(conn, [(target, syntax, path) for _, _, path, syntax, target, *_ in rows if syntax != "uri"])
    index = PathIndex(by_path)
    changed: list[tuple[str, str | None, str | None, int, int]] = []
    edges: set[tuple[str, str, str]] = set()
    census = {TEXT_REL: 0, f"{TEXT_REL}-cross-kb": 0, f"{TEXT_REL}-unresolved": 0, f"{TEXT_REL}-ambiguous": 0}
    for row_id, doc_id, path, syntax, target, *before in rows:
        if syntax == "uri":
            status, dst_kb, dst_doc, candidates = _resolve_address(conn, target, kb_id)
        else:
            found: Resolution = resolve_link(target, syntax, path, index)
            dst_doc = by_path[found.path] if found.path is not None else None
            status, dst_kb, candidates = found.status, kb_id if dst_doc else None, found.candidates
        if status in PROBLEM_STATUSES:
            census[f"{TEXT_REL}-{status}"] += 1
        if dst_kb is not None and dst_doc is not None and (dst_kb, dst_doc) != (kb_id, doc_id):
            edges.add((doc_id, dst_kb, dst_doc))
        if (status, dst_kb, dst_doc, candidates) != tuple(before):
            changed.append((status, dst_kb, dst_doc, candidates, row_id))
    wanted = sorted((kb_id, src, dst_kb, dst_doc, TEXT_REL, TEXT_ORIGIN) for src, dst_kb, dst_doc in edges)
    with transaction(conn):
        conn.executemany("UPDATE text_links SET status = ?, dst_kb_id = ?, dst_doc_id = ?, candidates = ? "
                         "WHERE id = ?", changed)
        stored = sorted(conn.execute("SELECT src_kb_id, src_doc_id, dst_kb_id, dst_doc_id, rel, origin FROM links "
                                     "WHERE origin = ?", (TEXT_ORIGIN,)).fetchall())
        if stored != wanted:
            conn.execute("DELETE FROM links WHERE origin = ?", (TEXT_ORIGIN,))
            conn.executemany("INSERT INTO links (src_kb_id, src_doc_id, dst_kb_id, dst_doc_id, rel, origin) "
                             "VALUES (?, ?, ?, ?, ?, ?)", wanted)
    for _, _, dst_kb, _, _, _ in wanted:
        census[TEXT_REL if dst_kb == kb_id else f"{TEXT_REL}-cross-kb"] += 1
    return census


def _paths_named(conn: sqlite3.Connection, links: Sequence[tuple[str, str, str]]) -> dict[str, str]:
    """Path -> id of the active documents some link of `links` (target, syntax, source path) could
    resolve to: those whose name key is one the resolver would look up for them
    (`resolve.NamesLookedUp`). The documents are read once, row by row, and only these kept: a KB
    of 700k documents has a few thousand links (a dict and a `PathIndex` of every path held ~0.56
    GB for 1,749 of them; docs/perf/sync.md)."""
    lookups = NamesLookedUp()
    for target, syntax, source_path in links:
        resolve_link(target, syntax, source_path, lookups)
    if not lookups.names:
        return {}
    return {path: doc_id for doc_id, path in conn.execute("SELECT id, path FROM documents WHERE state = 'active'")
            if name_key(path) in lookups.names}


def _resolve_address(conn: sqlite3.Connection, uri: str, kb_id: str) -> tuple[str, str | None, str | None, int]:
    try:
        dst_kb, dst_doc = parse_pnk_uri(uri, self_kb_id=kb_id)
    except PinakesError:
        return "unresolved", None, None, 0
    if dst_kb == kb_id and conn.execute("SELECT 1 FROM documents WHERE id = ? AND state = 'active'",
                                        (dst_doc,)).fetchone() is None:
        return "unresolved", None, None, 0
    return "resolved", dst_kb, dst_doc, 1


@dataclass(frozen=True)
class TextLinkProblem:
    """A link in text that names no document (`unresolved`) or several (`ambiguous`)."""

    path: str
    line: int
    status: str
    target: str
    syntax: str
    candidates: int
    resolved_to: str | None  # ambiguous: the document chosen

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    def describe(self) -> str:
        written = self.target if self.syntax == "uri" else f"[[{self.target}]]" \
            if self.syntax in ("wikilink", "embed") else f"({self.target})"
        if self.status == "ambiguous":
            return f"{self.where} {written}: {self.candidates} documents match; took {self.resolved_to}"
        return f"{self.where} {written}: no document by that name"


def text_link_problems(conn: sqlite3.Connection, limit: int) -> tuple[list[TextLinkProblem], dict[str, int]]:
    """The first `limit` unresolved and ambiguous links (by path, then line), and how many of each
    there are in all, as the last graph stage resolved them."""
    counts = dict.fromkeys(PROBLEM_STATUSES, 0)
    marks = ", ".join("?" * len(PROBLEM_STATUSES))
    for status, count in conn.execute(
            f"SELECT t.status, COUNT(*) FROM text_links t JOIN documents d ON d.id = t.doc_id AND d.state = 'active' "
            f"WHERE t.status IN ({marks}) GROUP BY t.status", PROBLEM_STATUSES):
        counts[status] = count
    rows = conn.execute(
        f"SELECT d.path, t.line, t.status, t.target, t.syntax, t.candidates, dst.path FROM text_links t "
        f"JOIN documents d ON d.id = t.doc_id AND d.state = 'active' "
        f"LEFT JOIN documents dst ON dst.id = t.dst_doc_id WHERE t.status IN ({marks}) "
        f"ORDER BY d.path, t.line, t.char_start LIMIT ?", (*PROBLEM_STATUSES, limit)).fetchall()
    return [TextLinkProblem(*row) for row in rows], counts


@dataclass(frozen=True)
class Span:
    """Where a link from text is written: its source document's span and line, as cited."""

    char_start: int
    char_end: int
    line: int
    syntax: str
    target: str


def spans_between(conn: sqlite3.Connection, src_doc: str, dst_kb: str, dst_doc: str, limit: int) -> tuple[list[Span], int]:
    """The spans in `src_doc`'s text of its links to (dst_kb, dst_doc), first `limit` in text order,
    and how many there are in all."""
    rows = conn.execute(
        "SELECT char_start, char_end, line, syntax, target FROM text_links WHERE doc_id = ? AND dst_kb_id = ? "
        "AND dst_doc_id = ? AND status IN ('resolved', 'ambiguous') ORDER BY char_start",
        (src_doc, dst_kb, dst_doc)).fetchall()
    return [Span(*row) for row in rows[:limit]], len(rows)


def carry_text_links(conn: sqlite3.Connection) -> None:
    """Copy the text links of the documents in `temp.carry_moves` from the index attached as
    `carried` (a rebuild carrying paid extractions, pipeline/paid_extraction.py): their text is
    carried, never re-extracted, so it is never parsed again either. An index older than the table
    has none to carry."""
    if conn.execute("SELECT 1 FROM carried.sqlite_master WHERE type = 'table' AND name = 'text_links'").fetchone() is None:
        return
    conn.execute("INSERT INTO main.text_links (doc_id, syntax, target, subpath, char_start, char_end, line) "
                 "SELECT t.doc_id, t.syntax, t.target, t.subpath, t.char_start, t.char_end, t.line "
                 "FROM carried.text_links t JOIN temp.carry_moves m ON m.id = t.doc_id")
