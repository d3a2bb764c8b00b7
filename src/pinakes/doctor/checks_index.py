"""Doctor: the index itself (present, readable, the schema version this build reads, its size)."""

from __future__ import annotations

from collections.abc import Iterator

from pinakes.doctor import Check, DoctorContext
from pinakes.errors import PinakesError

VECTOR_TIER_WARN_CHUNKS = 50_000


def checks(ctx: DoctorContext) -> Iterator[Check]:
    from pinakes.index import schema
    from pinakes.kb import KBPaths

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
        meta = schema.read_meta(conn)
        active, deleted = conn.execute(
            "SELECT SUM(state = 'active'), SUM(state = 'deleted') FROM documents").fetchone()
        chunks = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        active_hashes = {row[0] for row in conn.execute(
            "SELECT content_hash FROM documents WHERE state = 'active'")}
        extraction = list(_extraction_coherence(conn))
    finally:
        conn.close()
    yield Check("index schema", "OK", f"schema_version {meta.get('schema_version')} "
                f"(build {meta.get('build_id', 'unknown')}, last sync {meta.get('last_sync_at', 'never')})")
    yield Check("index size", "OK", f"{active or 0} active documents ({deleted or 0} soft-deleted), "
                f"{chunks} chunks")
    yield from extraction
    yield from _extract_cache(paths, active_hashes)
    if chunks > VECTOR_TIER_WARN_CHUNKS:
        yield Check("vector tier", "WARN",
                    f"{chunks} chunks: the NumPy tier holds every vector in memory "
                    f"(~{chunks * 384 * 4 / 1e6:.0f} MB at 384 dims)",
                    "the sqlite-vec tier that bounds memory is not built; consider splitting the KB")


def _extraction_coherence(conn: object) -> Iterator[Check]:
    """Per-document extraction coherence (spec §4.4), read from declared fingerprints only."""
    from pinakes.embed.coherence import check_extraction_coherence

    try:
        stale = check_extraction_coherence(conn)  # type: ignore[arg-type]
    except PinakesError as exc:
        yield Check("extraction coherence", "FAIL", exc.message, exc.remedy)
        return
    if stale:
        backends = ", ".join(sorted(set(stale.values())))
        yield Check("extraction coherence", "WARN",
                    f"{len(stale)} document(s) were extracted by an older version of a paid backend "
                    f"({backends}); their passages are marked stale_extraction",
                    "re-extract deliberately with `pnk sync --extract=<backend>` when it is worth paying for")
    else:
        yield Check("extraction coherence", "OK", "every extraction matches its extractor's fingerprint")


def _extract_cache(paths: object, active_hashes: set[str]) -> Iterator[Check]:
    from pinakes.extract.cache import ExtractCache

    directory = paths.extract_cache  # type: ignore[attr-defined]
    stats = ExtractCache(directory).stats(active_hashes)
    detail = (f"{stats.entries} entries, {stats.bytes:,} bytes, {stats.orphans} orphaned of "
              f"{stats.entries}")
    yield Check("extraction cache", "OK", detail)
    if stats.paid_orphans:
        yield Check("extraction cache (paid orphans)", "WARN",
                    f"{stats.paid_orphans} paid extraction(s) belong to no active document; kept, never "
                    "swept automatically", "remove them deliberately with `pnk sync --clear-cache=paid`")
