"""Doctor: the index itself (present, readable, the schema version this build reads, whole, its
vectors intact, its size).

"Whole" is `PRAGMA quick_check` over every page (index/integrity.py: about 0.3 s at 12,000 chunks,
docs/perf/index-integrity.md); "vectors intact" reads every vector row once and applies the rule
a rebuild reuses them by (index/vector_rows.py: checksum, width, finite, unit length), about 0.06 s
at 12,000 rows. A fault either finds is one `pnk sync --rebuild` repairs.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

from pinakes.doctor import Check, DoctorContext
from pinakes.errors import PinakesError
from pinakes.kb import KBPaths
from pinakes.wording import counted

# Vector rows read per step of the vector check (bounded memory).
VECTOR_CHECK_BATCH = 4096


def checks(ctx: DoctorContext) -> Iterator[Check]:
    from pinakes.index import schema
    from pinakes.index.integrity import damage

    assert ctx.kb_root is not None
    paths = KBPaths(ctx.kb_root)
    if not paths.index_db.exists():
        yield Check("index", "WARN", "no index yet", "run `pnk sync`")
        return
    try:
        conn = schema.open_reader(paths.index_db)
    except PinakesError as exc:
        yield Check("index schema", "FAIL", exc.message, exc.remedy)
        return
    try:
        with schema.index_faults(paths.index_db):
            meta = schema.read_meta(conn)
            found = damage(conn)
            if found is not None:
                yield Check("index schema", "FAIL", f"schema_version {meta.get('schema_version')}, but PRAGMA "
                            f"quick_check finds the file damaged: {found}", "pnk sync --rebuild")
                return
            active, deleted = conn.execute(
                "SELECT SUM(state = 'active'), SUM(state = 'deleted') FROM documents").fetchone()
            chunks = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
            active_hashes = {row[0] for row in conn.execute(
                "SELECT content_hash FROM documents WHERE state = 'active'")}
            extraction = list(_extraction_coherence(conn))
            vectors = _vectors(conn, meta)
            vector_file = _vector_file(conn, paths, meta)
    finally:
        conn.close()
    yield Check("index schema", "OK", f"schema_version {meta.get('schema_version')}, PRAGMA quick_check ok "
                f"(build {meta.get('build_id', 'unknown')})")
    yield vectors
    yield _last_sync(meta)
    yield from _leftovers(paths)
    yield Check("index size", "OK", f"{counted(active or 0, 'active document')} ({deleted or 0} soft-deleted), "
                f"{counted(chunks, 'chunk')}")
    yield from extraction
    yield from _extract_cache(paths, active_hashes)
    if vector_file is not None:
        yield vector_file


def _vectors(conn: sqlite3.Connection, meta: dict[str, str]) -> Check:
    """Every vector row by the rule a rebuild reuses it by: a failing one is searched as it is now
    (a flipped bit moves its scores, an all-zero row matches nothing) until a rebuild embeds it again."""
    from pinakes.index.vector_rows import row_faults

    dim_text = meta.get("embedding_dim", "")
    if not dim_text.isdigit():
        return Check("index vectors", "OK", "no embedding model recorded yet: no vector to check")
    dim = int(dim_text)
    rows = unchecked = 0
    bad: list[tuple[int, str]] = []
    cursor = conn.execute("SELECT chunk_id, vector, text_key, checksum FROM embeddings")
    while batch := cursor.fetchmany(VECTOR_CHECK_BATCH):
        rows += len(batch)
        unchecked += sum(row[3] is None for row in batch)
        faults = row_faults([(vector, key, checksum) for _id, vector, key, checksum in batch], dim)
        bad += [(int(row[0]), fault) for row, fault in zip(batch, faults, strict=True) if fault is not None]
    if bad:
        chunk_id, fault = bad[0]
        return Check("index vectors", "FAIL", f"{len(bad)} of {counted(rows, 'vector row')} cannot be trusted "
                     f"(the first, chunk {chunk_id}: {fault}); search reads them as they are",
                     "pnk sync --rebuild (it embeds those chunks again and reuses every other vector)")
    legacy = (f"; {unchecked} carry no checksum (copied from an index older than schema 9), checked for "
              "width, finite values and unit length only" if unchecked else "")
    return Check("index vectors", "OK", f"{counted(rows, 'vector row')}: every checksum matches, every vector "
                 f"is finite and of unit length{legacy}")


def _vector_file(conn: sqlite3.Connection, paths: KBPaths, meta: dict[str, str]) -> Check | None:
    """Above the threshold, the approximate vector file (docs/perf/vector-tiers.md): intact (every
    byte against its checksum, which a searching process leaves to the step and to this check) and
    of the index's rows now. None below the threshold, where exact search is the tier."""
    from pinakes.embed.base import META_KEYS
    from pinakes.vectors import build as vector_build
    from pinakes.vectors.fileformat import REBUILD_BY_HAND, VectorFileUnusable
    from pinakes.vectors.freshness import open_for_index

    identity = {key: meta.get(key, "") for key in META_KEYS}
    if not identity[META_KEYS[-1]].isdigit():
        return None
    try:
        opened = open_for_index(conn, paths.state_dir, identity, int(identity[META_KEYS[-1]]),
                                min_rows=vector_build.ANN_MIN_ROWS, check_body=True)
    except VectorFileUnusable as unusable:
        # a sync with nothing to do reads the footer only, which may be intact where this check read every byte
        remedy = REBUILD_BY_HAND if unusable.reason == "damaged" else unusable.remedy
        return Check("vector file", "WARN", f"the vector file is {unusable.reason} ({unusable.detail}): searches "
                     "answer exactly until it is fixed (slower, more memory)", remedy)
    if opened is None:
        return None
    opened.close()
    return Check("vector file", "OK", f"{opened.path.name}: {counted(opened.header.rows, 'row')} of the index's "
                 f"vectors, every byte matches its checksum ({opened.header.library})")


def _last_sync(meta: dict[str, str]) -> Check:
    """When the index was last brought up to date, and whether a sync started since did not finish."""
    completed = meta.get("last_sync_at")
    started = meta.get("sync_started_at")
    if started and (completed is None or started > completed):
        return Check("last sync", "WARN", f"a sync started at {started} did not finish (last completed: "
                     f"{completed or 'none'}); what it committed is kept, the rest is not indexed yet",
                     "pnk sync")
    if completed is None:
        return Check("last sync", "WARN", "no sync has completed on this index", "pnk sync")
    return Check("last sync", "OK", f"last completed {completed}")


def _leftovers(paths: KBPaths) -> Iterator[Check]:
    """Files an interrupted rebuild left beside the index (the next rebuild or sync removes them)."""
    leftovers = [p.name for p in (paths.rebuild_db, *(paths.rebuild_db.with_name(paths.rebuild_db.name + s)
                                                    for s in ("-wal", "-shm"))) if p.exists()]
    if leftovers:
        yield Check("rebuild leftovers", "WARN", f"an interrupted rebuild left {', '.join(leftovers)} in "
                    f"{paths.state_dir.name}/ (the live index is intact)",
                    "pnk sync removes them (or run `pnk sync --rebuild` again)")


def _extraction_coherence(conn: sqlite3.Connection) -> Iterator[Check]:
    """Per-document extraction coherence (spec §4.4), read from declared fingerprints only."""
    from pinakes.embed.coherence import check_extraction_coherence

    try:
        stale = check_extraction_coherence(conn)
    except PinakesError as exc:
        yield Check("extraction coherence", "FAIL", exc.message, exc.remedy)
        return
    if stale:
        backends = ", ".join(sorted(set(stale.values())))
        yield Check("extraction coherence", "WARN",
                    f"{counted(len(stale), 'document')} {'was' if len(stale) == 1 else 'were'} extracted by an "
                    "older version of a paid backend "
                    f"({backends}); their passages are marked stale_extraction",
                    "re-extract deliberately with `pnk sync --extract=<backend>` when it is worth paying for")
    else:
        yield Check("extraction coherence", "OK", "every extraction matches its extractor's fingerprint")


def _extract_cache(paths: KBPaths, active_hashes: set[str]) -> Iterator[Check]:
    from pinakes.extract.cache import ExtractCache

    directory = paths.extract_cache
    stats = ExtractCache(directory).stats(active_hashes)
    detail = (f"{counted(stats.entries, 'entry', 'entries')}, {counted(stats.bytes, 'byte')}, "
              f"{stats.orphans} orphaned of {stats.entries}")
    if stats.paid_orphans:  # the budget checks name and price them ("paid orphans")
        detail += f", {stats.paid_orphans} of them paid (kept, never swept automatically)"
    yield Check("extraction cache", "OK", detail)
