"""`pinakes_status`: how fresh one served KB is, read-only (the server never syncs).

What it reads: the index (documents, chunks, the last sync, the model, the last sync's failures,
links), the manifest the server loaded, and the source tree's file stats against the walk cache the
last sync saved (`pinakes.sources.walk` without hashing: a file whose size, times or inode moved is
reported as changed, as the next sync would then look at it). It takes no lock and writes nothing.
Every list is cut at SHOWN entries; the counts beside them are whole.

Unresolved links: authored links (sidecars) whose target is no active document of this KB, and,
in an index that has the `text_links` table (links written in documents' text, #44), the ones its
resolver left unresolved or ambiguous, with the line they are on. An index without that table has
none to report: the query is skipped, not failed.
"""

from __future__ import annotations

import sqlite3

from pinakes.serve.config import ServedKB

SHOWN = 20  # entries per list; the count beside it is whole
NEXT_STEP = ("the KB's owner runs `pnk sync` in it, or leaves `pnk watch` running to sync on every edit "
             "(this server never syncs: it serves the KB read-only)")

Payload = dict[str, object]


def kb_status(kb: ServedKB, conn: sqlite3.Connection) -> Payload:
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    documents = conn.execute("SELECT count(*) FROM documents WHERE state = 'active'").fetchone()[0]
    chunks = conn.execute("SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.doc_id "
                          "WHERE d.state = 'active'").fetchone()[0]
    stale = _stale_files(kb, conn, meta.get("last_sync_at"))
    failures = conn.execute("SELECT path, stage, error FROM failures ORDER BY path").fetchall()
    unresolved = _unresolved_links(conn, kb.kb_id)
    stale_extractions = _stale_extractions(conn)
    started, finished = meta.get("sync_started_at"), meta.get("last_sync_at")
    fresh = not (stale["count"] or failures or (started and (finished is None or started > finished)))
    section = kb.manifest.embedding
    return {
        "name": kb.name, "indexed": True, "documents": int(documents), "chunks": int(chunks),
        "last_sync": finished,
        "sync_unfinished": bool(started and (finished is None or started > finished)),
        "sync_lock_present": kb.paths.lock.exists(),
        "model": {"index": meta.get("embedding_model"), "manifest": section.model,
                  "matches": meta.get("embedding_model") in (None, section.model)},
        "fresh": fresh,
        "stale": stale,
        "failed": {"count": len(failures),
                   "shown": [{"path": path, "stage": stage, "error": str(error).splitlines()[0] if error else ""}
                             for path, stage, error in failures[:SHOWN]]},
        "stale_extractions": stale_extractions,
        "unresolved_links": unresolved,
        "next_step": None if fresh else NEXT_STEP,
    }


def _stale_files(kb: ServedKB, conn: sqlite3.Connection, last_sync: str | None) -> Payload:
    """Documents and sidecars changed, added or deleted on disk since the last sync saved its walk.
    A sidecar the walk cache lacks is one that sync minted after its walk unless written since."""
    from pinakes.errors import PinakesError
    from pinakes.sources import walk

    cache = walk.load_walk_cache(conn)
    try:
        found = walk.walk(kb.root, kb.manifest.sources, cache, hash_contents=False)
    except PinakesError as exc:  # a source root the walk refuses: the next sync says so too
        return {"count": 0, "changed": [], "added": [], "deleted": [], "problem": exc.message}
    on_disk = {**found.docs, **{state.path: state for state in found.sidecars.values()}}
    changed = sorted(path for path, state in on_disk.items() if path in cache and state is not cache[path])
    synced_ns = _iso_ns(last_sync)
    sidecars = {state.path for state in found.sidecars.values()}
    added = sorted(path for path, state in on_disk.items() if path not in cache
                   and (path not in sidecars or synced_ns is None or state.mtime_ns > synced_ns))
    present = on_disk.keys() | set(found.orphan_sidecars) | found.unreadable.keys()
    deleted = sorted(path for path in cache if path not in present)
    return {"count": len(changed) + len(added) + len(deleted),
            "changed": changed[:SHOWN], "changed_count": len(changed),
            "added": added[:SHOWN], "added_count": len(added),
            "deleted": deleted[:SHOWN], "deleted_count": len(deleted)}


def _stale_extractions(conn: sqlite3.Connection) -> Payload:
    """Documents whose extraction an older version of its extractor made (re-extracted by a sync)."""
    from pinakes.extract import registry

    stale: list[str] = []
    pairs = conn.execute("SELECT DISTINCT extraction_backend, extraction_fingerprint FROM documents "
                         "WHERE state = 'active' AND extraction_backend IS NOT NULL").fetchall()
    for backend, fingerprint in pairs:
        spec = registry.EXTRACTORS.get(backend)
        if spec is not None and not spec.is_current(fingerprint):
            stale += [path for (path,) in conn.execute(
                "SELECT path FROM documents WHERE state = 'active' AND extraction_backend = ? "
                "AND extraction_fingerprint IS ? ORDER BY path", (backend, fingerprint))]
    return {"count": len(stale), "shown": sorted(stale)[:SHOWN]}


def _unresolved_links(conn: sqlite3.Connection, kb_id: str) -> Payload:
    authored = conn.execute(
        "SELECT s.path, l.dst_doc_id, l.rel FROM links l JOIN documents s ON s.id = l.src_doc_id "
        "AND s.state = 'active' LEFT JOIN documents d ON d.id = l.dst_doc_id AND d.state = 'active' "
        "WHERE l.src_kb_id = ? AND l.dst_kb_id = ? AND l.origin = 'sidecar' AND d.id IS NULL "
        "ORDER BY s.path", (kb_id, kb_id)).fetchall()
    shown: list[object] = [{"from": path, "origin": "sidecar", "target": target, "rel": rel}
                              for path, target, rel in authored[:SHOWN]]
    count = len(authored)
    text = _unresolved_text_links(conn)
    if text is not None:
        count += text[0]
        shown += text[1][: max(0, SHOWN - len(shown))]
    return {"count": count, "shown": shown, "text_links_indexed": text is not None}


def _unresolved_text_links(conn: sqlite3.Connection) -> tuple[int, list[object]] | None:
    """Links written in documents' text that resolved to no document, or to several; None when the
    index has no `text_links` table (an index from before links were read from text)."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'text_links'").fetchone() is None:
        return None
    where = "FROM text_links t JOIN documents d ON d.id = t.doc_id AND d.state = 'active' " \
            "WHERE t.status IN ('unresolved', 'ambiguous')"
    count = conn.execute(f"SELECT count(*) {where}").fetchone()[0]
    rows = conn.execute(f"SELECT d.path, t.line, t.target, t.status {where} ORDER BY d.path, t.line "
                        f"LIMIT {SHOWN}").fetchall()
    return int(count), [{"from": f"{path}:{line}", "origin": "text", "target": target, "status": status}
                        for path, line, target, status in rows]


def _iso_ns(value: str | None) -> int | None:
    from datetime import datetime

    try:
        return int(datetime.fromisoformat(value).timestamp() * 1e9) if value else None
    except ValueError:
        return None
