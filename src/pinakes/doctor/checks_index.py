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
    finally:
        conn.close()
    yield Check("index schema", "OK", f"schema_version {meta.get('schema_version')} "
                f"(build {meta.get('build_id', 'unknown')}, last sync {meta.get('last_sync_at', 'never')})")
    yield Check("index size", "OK", f"{active or 0} active documents ({deleted or 0} soft-deleted), "
                f"{chunks} chunks")
    if chunks > VECTOR_TIER_WARN_CHUNKS:
        yield Check("vector tier", "WARN",
                    f"{chunks} chunks: the NumPy tier holds every vector in memory "
                    f"(~{chunks * 384 * 4 / 1e6:.0f} MB at 384 dims)",
                    "the sqlite-vec tier that bounds memory is not built; consider splitting the KB")
