"""The up-to-date check every per-document task shares.

A document's key (`rules.pair.BuildKeys.key`) folds its content hash with the extractor
fingerprint, the chunking settings and the embedding model identity. The index stores the key the
document's chunks and vectors were built from, committed in the same transaction as them, so
"up to date" means exactly "what is stored was built from these inputs".
"""

from __future__ import annotations

from typing import Any


def key_is_current(ctx: Any, item: Any) -> bool:
    if ctx.conn is None:
        return False
    row = ctx.conn.execute(
        "SELECT build_key FROM documents WHERE id = ? AND state = 'active' AND path = ?",
        (item.doc_id, item.path),
    ).fetchone()
    return row is not None and row[0] == item.key
