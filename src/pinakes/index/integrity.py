"""Whether an index file is whole: `PRAGMA quick_check`, the one check that doctor, a rebuild
reading the index it replaces, and the install of a rebuilt index run.

quick_check reads every page and verifies each b-tree's structure, the free list and every
record's format; it leaves out integrity_check's cross-check of each index against its table,
whose damage the rows' own checksums (index/vector_rows.py) and a rebuild cover. On a 12,000-chunk
index (89 MB) it took 0.26-0.32 s warm, integrity_check 0.47-0.51 s (docs/perf/index-integrity.md):
small next to a rebuild, and affordable on every `pnk doctor`, so no sampling scheme is needed.
"""

from __future__ import annotations

import sqlite3

# Findings quick_check reports before it stops: the first says the file is damaged, a few say where.
FINDINGS_SHOWN = 3


def damage(conn: sqlite3.Connection) -> str | None:
    """What `PRAGMA quick_check` finds wrong with the file `conn` reads (or the error that stopped
    it reading), or None when the file is whole."""
    try:
        findings = [str(row[0]) for row in conn.execute(f"PRAGMA quick_check({FINDINGS_SHOWN})")]
    except sqlite3.DatabaseError as exc:
        return str(exc)
    if findings == ["ok"]:
        return None
    # One line each, without the "*** in database main ***" banner the first one starts with.
    lines = [line for finding in findings for line in finding.splitlines() if not line.startswith("***")]
    return "; ".join(lines[:FINDINGS_SHOWN]) or "PRAGMA quick_check failed"
