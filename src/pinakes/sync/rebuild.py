"""What `--rebuild` does around the pipeline: read the index it replaces, when that index can be
trusted, and put the new one in its place, whatever state the old one is in (#40).

A rebuild is the remedy every index fault names, so it must work on the index that fault was
about: one cut short, with overwritten pages, with flipped bits. The old index is read for two
things, and each is guarded on its own. Pairing reads its documents only when it passes `PRAGMA
quick_check` (otherwise identities come from the sidecars alone, as in a fresh clone); vectors are
reused from it row by row, each only when its checksum matches (pipeline/vector_reuse.py). The new
index is copied into a sound live one and replaces a damaged one (index/install.py). Whatever stops
a rebuild before that, the new index is discarded and the live one is as it was, and the error
says so.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from pinakes.index.install import install_rebuilt
from pinakes.index.integrity import damage
from pinakes.index.schema import BUSY_TIMEOUT_MS
from pinakes.pipeline.report import SyncReport
from pinakes.wording import counted

# What the identities of a rebuild come from when the index it replaces cannot be read.
FROM_SIDECARS = ("identities come from the sidecars alone, as in a fresh clone (a document renamed "
                 "without its sidecar since the last sync gets a new ID)")


def open_previous(index_db: Path, report: SyncReport) -> sqlite3.Connection | None:
    """The index a rebuild replaces, read-only, for pairing: None when there is none, or it cannot
    be read or fails `PRAGMA quick_check` (the report then says why, and where identities come from).
    Any schema version is read: pairing needs only the documents columns every version has."""
    if not index_db.exists():
        return None
    conn: sqlite3.Connection | None = None
    try:
        conn = sqlite3.connect(f"{index_db.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("SELECT id, path, content_hash, sidecar_hash, build_key, state, metadata "
                     "FROM documents LIMIT 1").fetchall()
        found = damage(conn)
    except sqlite3.Error as exc:
        found = str(exc)
    if found is None:
        return conn
    if conn is not None:
        conn.close()
    report.notes.append(f"the index being replaced is damaged or unreadable ({found}): {FROM_SIDECARS}")
    return None


def install_rebuild(new_db: Path, index_db: Path, report: SyncReport) -> None:
    """Put the rebuilt index in the live one's place; on any failure the new one is discarded (the
    live index is then as it was) before the error goes on."""
    try:
        installed = install_rebuilt(new_db, index_db)
    except BaseException:
        discard(new_db)
        raise
    report.installed = installed.how
    if installed.damage is not None:
        report.notes.append(f"the live index was damaged ({installed.damage}); the rebuilt index replaced it whole")


def stopped_details(report: SyncReport) -> list[str]:
    """What a rebuild that stopped before its install leaves: none of its work (the new index is
    discarded) and the live index as it was."""
    if report.indexed:
        return [f"the rebuild stopped after building {counted(report.indexed, 'document')} into a new index, "
                "which was discarded: the live index is as it was before the rebuild"]
    return ["the rebuild stopped before its new index was installed; the new index was discarded: the live "
            "index is as it was before the rebuild"]


def discard(db_path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(str(db_path) + suffix).unlink(missing_ok=True)
