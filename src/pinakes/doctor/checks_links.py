"""Doctor: cross-KB links (spec §6.2) — per connected KB, whether it is on this machine, when it was
last scanned, and link coverage (this KB's documents linked with it / all of them); and dangling
links, in either direction.

Link coverage is the ceiling on cross-KB answers: a question can only cross into another KB by a
link, so the ratio is reported rather than left to be discovered. Everything here is read from this
KB's index and the partners' manifests; a partner's index is opened read-only, and only to check
whether this KB's outbound targets exist there (never its sidecars: that is the reverse scan's job).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

from pinakes.display import printable
from pinakes.doctor import Check, DoctorContext
from pinakes.doctor.index_reading import readable_index
from pinakes.kb import KBPaths
from pinakes.manifest import LinkedKB, Manifest
from pinakes.wording import counted, noun_for

SHOWN = 5


def checks(ctx: DoctorContext) -> Iterator[Check]:
    from pinakes.manifest import load_manifest

    assert ctx.kb_root is not None
    paths = KBPaths(ctx.kb_root)
    manifest = load_manifest(paths.manifest)
    if not paths.index_db.exists():
        if manifest.links:
            yield Check("links", "WARN", f"{counted(len(manifest.links), 'connected KB')}, but no index yet", "pnk sync")
        return
    with readable_index(paths.index_db) as conn:
        if conn is None:
            return
        yield from _partners(conn, ctx.kb_root, manifest)
        yield from _dangling(conn, ctx.kb_root, manifest)
        yield _text_links(conn, manifest.kb.id)


def _partners(conn: sqlite3.Connection, kb_root: Path, manifest: Manifest) -> Iterator[Check]:
    from pinakes.links.reverse import (
        FRESHNESS_WINDOW,
        PartnerError,
        known_refs,
        now,
        open_partner,
        parse_stamp,
    )

    own = manifest.kb.id
    total = conn.execute("SELECT COUNT(*) FROM documents WHERE state = 'active'").fetchone()[0]
    refs = known_refs(conn)
    if not manifest.links:
        yield Check("links", "OK", "no connected KBs ([[links.kb]] is empty); "
                    f"{_linked_documents(conn, own, None)} of {counted(total, 'document')} "
                    f"{'carries' if total == 1 else 'carry'} a link")
        return
    at = now()
    for linked in manifest.links:
        name = f"links: {linked.alias}"
        coverage = f"link coverage {_linked_documents(conn, own, linked.id)}/{total} {noun_for(total, 'document')}"
        try:
            open_partner(kb_root, linked)
        except PartnerError as exc:
            # Not there or unreadable: sync carries on without it (a warning). Another KB at its
            # path is a manifest to correct (a failure: it is never scanned).
            yield Check(name, "FAIL" if exc.kind == "unknown-id" else "WARN",
                        f"{printable(exc.message)}; {coverage} from links already known",
                        f"{printable(exc.remedy or '')}; sync carries on without it")
            continue
        ref = refs.get(linked.id)
        stamp = ref[2] if ref else None
        parsed = parse_stamp(stamp)
        if parsed is None:
            yield Check(name, "WARN", f"found, never scanned (or its stamp is unreadable); {coverage}",
                        "pnk sync --scan-links")
        elif parsed > at:
            yield Check(name, "WARN", f"last scan stamped {stamp}, in the future of this machine's clock; the "
                        f"next sync re-reads it; {coverage}", "check the clock; pnk sync --scan-links")
        elif at - parsed >= FRESHNESS_WINDOW:
            yield Check(name, "WARN", f"last scanned {stamp}, older than the freshness window "
                        f"({_window()}); {coverage}", "pnk sync (or pnk sync --scan-links)")
        else:
            yield Check(name, "OK", f"found; last scanned {stamp}; {coverage}")


def _text_links(conn: sqlite3.Connection, own: str) -> Check:
    """Links written in documents' text, as the last sync resolved them: how many became edges, and
    the first SHOWN that name no document or several (file:line)."""
    from pinakes.links.text_edges import TEXT_ORIGIN, text_link_problems

    written = conn.execute("SELECT COUNT(*) FROM text_links t JOIN documents d ON d.id = t.doc_id "
                           "AND d.state = 'active'").fetchone()[0]
    if not written:
        return Check("links from text", "OK", "no document's text links to another (wikilinks, Markdown links, "
                     "pnk:// addresses)")
    edges = conn.execute("SELECT COUNT(*) FROM links WHERE src_kb_id = ? AND origin = ?", (own, TEXT_ORIGIN)).fetchone()[0]
    problems, counts = text_link_problems(conn, SHOWN)
    found = f"{counted(written, 'link')} in documents' text, {counted(edges, 'edge')} between documents"
    total = sum(counts.values())
    if not total:
        return Check("links from text", "OK", found + "; each names one document or a file that is not one")
    shown = "; ".join(printable(problem.describe()) for problem in problems)
    more = f" (+{total - len(problems)} more: `pnk status --json` lists them)" if total > len(problems) else ""
    return Check("links from text", "WARN",
                 f"{found}; {counts['unresolved']} name no document, {counts['ambiguous']} name several: {shown}{more}",
                 "fix the link or add the document it names; for a name several documents share, write its "
                 "folder too ([[folder/Note]]); the next `pnk sync` resolves them again")


def _window() -> str:
    from pinakes.links.reverse import FRESHNESS_WINDOW

    return f"{FRESHNESS_WINDOW.total_seconds() / 3600:g} h"


def _linked_documents(conn: sqlite3.Connection, own: str, partner: str | None) -> int:
    """This KB's active documents with at least one link (to or from `partner`; any, when None)."""
    if partner is None:
        sql = ("SELECT COUNT(DISTINCT d.id) FROM documents d JOIN links l ON "
               "(l.src_kb_id = ? AND l.src_doc_id = d.id) OR (l.dst_kb_id = ? AND l.dst_doc_id = d.id) "
               "WHERE d.state = 'active'")
        return conn.execute(sql, (own, own)).fetchone()[0]
    sql = ("SELECT COUNT(DISTINCT d.id) FROM documents d JOIN links l ON "
           "(l.src_kb_id = ? AND l.src_doc_id = d.id AND l.dst_kb_id = ?) OR "
           "(l.dst_kb_id = ? AND l.dst_doc_id = d.id AND l.src_kb_id = ?) WHERE d.state = 'active'")
    return conn.execute(sql, (own, partner, own, partner)).fetchone()[0]


def _dangling(conn: sqlite3.Connection, kb_root: Path, manifest: Manifest) -> Iterator[Check]:
    """Links whose far end is not an active document: within this KB, into a connected KB (checked
    against its index when it has one), and inbound ones the reverse scan recorded."""
    own = manifest.kb.id
    problems: list[str] = []
    unchecked: list[str] = []
    checked = unchecked_count = 0
    local = conn.execute(
        "SELECT s.path, l.dst_doc_id, l.rel FROM links l JOIN documents s ON s.id = l.src_doc_id "
        "AND s.state = 'active' LEFT JOIN documents d ON d.id = l.dst_doc_id AND d.state = 'active' "
        "WHERE l.src_kb_id = ? AND l.dst_kb_id = ? AND l.origin = 'sidecar' AND d.id IS NULL ORDER BY s.path",
        (own, own)).fetchall()
    problems += [f"{printable(path)} -> {dst} ({printable(rel)}): not a document of this KB" for path, dst, rel in local]
    checked += conn.execute("SELECT COUNT(*) FROM links WHERE src_kb_id = ? AND dst_kb_id = ? AND origin = 'sidecar'",
                            (own, own)).fetchone()[0]
    outbound: dict[str, list[tuple[str, str, str]]] = {}
    for path, kb_id, dst, rel in conn.execute(
            "SELECT s.path, l.dst_kb_id, l.dst_doc_id, l.rel FROM links l JOIN documents s ON s.id = l.src_doc_id "
            "AND s.state = 'active' WHERE l.src_kb_id = ? AND l.dst_kb_id != ? AND l.origin = 'sidecar' "
            "ORDER BY s.path", (own, own)):
        outbound.setdefault(kb_id, []).append((path, dst, rel))
    for kb_id, rows in sorted(outbound.items()):
        linked = manifest.link(kb_id)
        present = _partner_documents(kb_root, linked, [dst for _, dst, _ in rows]) if linked else None
        if present is None:
            unchecked.append(f"{len(rows)} to {linked.alias if linked else kb_id}")
            unchecked_count += len(rows)
            continue
        checked += len(rows)
        problems += [f"{printable(path)} -> {linked.alias if linked else kb_id}/{dst} ({printable(rel)}): not a "
                     "document there" for path, dst, rel in rows if dst not in present]
    inbound = conn.execute(
        "SELECT l.src_kb_id, l.src_doc_id, l.dst_doc_id, l.rel FROM links l LEFT JOIN documents d "
        "ON d.id = l.dst_doc_id AND d.state = 'active' WHERE l.dst_kb_id = ? AND l.origin = 'reverse-scan' "
        "AND d.id IS NULL ORDER BY l.src_kb_id, l.src_doc_id", (own,)).fetchall()
    for src_kb, src_doc, dst, rel in inbound:
        linked = manifest.link(src_kb)
        problems.append(f"{linked.alias if linked else src_kb}/{src_doc} -> {dst} ({printable(rel)}): inbound, "
                        "to no document of this KB")
    checked += conn.execute("SELECT COUNT(*) FROM links WHERE dst_kb_id = ? AND origin = 'reverse-scan'",
                            (own,)).fetchone()[0]
    # Links into a KB that is not here (or has no index) cannot be checked: said apart, never as resolving.
    note = (f"; {counted(unchecked_count, 'link')} not checked ({', '.join(unchecked)}): that KB or its index is "
            "not on this machine" if unchecked else "")
    if not problems:
        verdict = "it resolves" if checked == 1 else "all resolve"
        found = (f"{counted(checked, 'link')} checked: {verdict}" if checked else "no link to check") + note
        yield Check("dangling links", "OK", found)
        return
    shown = "; ".join(problems[:SHOWN]) + (f" (+{len(problems) - SHOWN} more)" if len(problems) > SHOWN else "")
    yield Check("dangling links", "WARN", f"{counted(len(problems), 'link')} "
                f"{'points' if len(problems) == 1 else 'point'} at no document: {shown}{note}",
                "fix the id in the linking sidecar (`pnk unlink` it), or restore the document it names "
                "(with its sidecar, which holds the id)")


def _partner_documents(kb_root: Path, linked: LinkedKB, ids: list[str]) -> set[str] | None:
    """Which of `ids` are active documents in the partner's index; None when it cannot be read here."""
    from pinakes.links.reverse import PartnerError, open_partner

    try:
        root, _ = open_partner(kb_root, linked)
    except PartnerError:
        return None
    with readable_index(KBPaths(root).index_db) as conn:
        if conn is None:
            return None
        marks = ",".join("?" * len(ids))
        try:
            return {row[0] for row in conn.execute(
                f"SELECT id FROM documents WHERE state = 'active' AND id IN ({marks})", ids)}
        except sqlite3.Error:
            return None
