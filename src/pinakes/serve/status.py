"""`pinakes_status`: how fresh one served KB is, read-only (the server never syncs).

What it reads: the index (documents, chunks, the last sync, the model, the last sync's failures,
links), the manifest the server loaded, and the source tree's file stats against the walk cache the
last sync saved (`pinakes.sources.walk` without hashing: a file whose size, times or inode moved is
reported as changed, as the next sync would then look at it). It takes no lock and writes nothing.
Every list is cut at SHOWN entries; the counts beside them are whole.

The vector file (`vector_file`): the vector tier and the approximate file's state, judged from its
footer and the key the last sync recorded, as `pnk status` says it (vectors/freshness.py `file_state`).

Unresolved links: authored links (sidecars) whose target is no active document of this KB, and
links written in documents' text (wikilinks, Markdown links, `pnk://`) that the last graph stage
resolved to no document or to several, with the line they are on, as `pnk doctor` reads them.
"""

from __future__ import annotations

import sqlite3
from dataclasses import asdict

from pinakes.serve.config import ServedKB
from pinakes.vectors.freshness import file_state

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
    vector_file = file_state(conn, kb.paths.state_dir, tier=kb.manifest.retrieval.vector_tier)
    started, finished = meta.get("sync_started_at"), meta.get("last_sync_at")
    fresh = not (stale["count"] or failures or (started and (finished is None or started > finished))
                 or vector_file.needs_sync)
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
        "vector_file": asdict(vector_file),
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
    """Authored links to no active document of this KB, then links written in documents' text that
    resolved to none or to several (links/text_edges.py), each list cut at SHOWN."""
    from pinakes.links.text_edges import text_link_problems

    authored = conn.execute(
        "SELECT s.path, l.dst_doc_id, l.rel FROM links l JOIN documents s ON s.id = l.src_doc_id "
        "AND s.state = 'active' LEFT JOIN documents d ON d.id = l.dst_doc_id AND d.state = 'active' "
        "WHERE l.src_kb_id = ? AND l.dst_kb_id = ? AND l.origin = 'sidecar' AND d.id IS NULL "
        "ORDER BY s.path", (kb_id, kb_id)).fetchall()
    shown: list[object] = [{"from": path, "origin": "sidecar", "target": target, "rel": rel}
                           for path, target, rel in authored[:SHOWN]]
    problems, counts = text_link_problems(conn, SHOWN)
    shown += [{"from": problem.where, "origin": "text", "target": problem.target, "status": problem.status}
              for problem in problems[: max(0, SHOWN - len(shown))]]
    return {"count": len(authored) + sum(counts.values()), "shown": shown}


def _iso_ns(value: str | None) -> int | None:
    from datetime import datetime

    try:
        return int(datetime.fromisoformat(value).timestamp() * 1e9) if value else None
    except ValueError:
        return None
