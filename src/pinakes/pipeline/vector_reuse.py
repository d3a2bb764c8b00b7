"""Vectors addressed by content: a chunk whose (model identity, embedded text) the index already
holds a vector for is not embedded again.

The build keys are per document, so any change to a document re-chunks it; but chunking is local,
and most of the new chunks' texts are texts the index already has vectors for (the paragraphs around
an edit, a PDF whose new extractor reads the same text, a copied folder, an unchanged `--rebuild`).
Each vector row carries `text_key` = xxh3-128 of the model identity and the exact text embedded
(`embedding_text_of`), written in the same INSERT as the vector, so the key is committed with the
vector or not at all. Before a group is embedded each chunk's key is looked up, in order, in:

1. the index being written (any document, including those this run already wrote);
2. the previous version of the document being written: its rows are copied into a temporary table
   just before its transaction deletes them (a streamed document asks for its vectors slice by
   slice inside that transaction, after the delete);
3. during `--rebuild`, the index being replaced, if it passes `PRAGMA integrity_check` and every
   vector row in it has the model's dimension, no NaN and unit length: a rebuild exists to recover
   from a damaged index, so a damaged one is never read from.

Only the misses go to the model (each distinct text once), so the weights load only when there is
at least one (`embed/deferred.py`). A reused row is checked again when read (width, finite, unit
length); one that fails is a miss. The key covers the full identity, weights digest (or a remote
provider's fingerprint) included: a vector is never reused across models.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Container, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import xxhash

from pinakes.embed.base import ModelIdentity, identity_meta

if TYPE_CHECKING:
    from pinakes.pipeline.run import SyncContext

# Keys per lookup statement (well under SQLite's bound-parameter limit).
LOOKUP_BATCH = 500
# How far a stored vector's norm may stray from 1 and still count as the unit vector it was written as
# (float32 rounding over 384-1024 components stays below 1e-6).
UNIT_TOLERANCE = 1e-3
# Old-index rows read per step of the rebuild's whole-table check (bounded memory).
CHECK_BATCH = 4096

_PREVIOUS = "temp.pnk_previous_vectors"


def identity_prefix(identity: ModelIdentity) -> bytes:
    """What every key of this model starts from: its identity, which JSON writes without a NUL, so
    the NUL after it keeps (identity, text) pairs from ever running into each other."""
    return json.dumps(identity_meta(identity), sort_keys=True).encode() + b"\0"


def text_key(prefix: bytes, text: str) -> bytes:
    return xxhash.xxh3_128_digest(prefix + text.encode("utf-8", "surrogatepass"))


def usable_vector(blob: bytes, dim: int) -> np.ndarray | None:
    """The stored vector, or None when it is not one this model could have written."""
    if len(blob) != dim * 4:
        return None
    vector = np.frombuffer(blob, dtype=np.float32)
    if not np.isfinite(vector).all() or abs(float(np.linalg.norm(vector)) - 1.0) > UNIT_TOLERANCE:
        return None
    return vector


def usable_vectors(blobs: Sequence[bytes], dim: int) -> list[bool]:
    """`usable_vector`'s verdict for many stored vectors at once (one array operation, not one per row)."""
    verdicts = [len(blob) == dim * 4 for blob in blobs]
    whole = [blob for blob, right_size in zip(blobs, verdicts, strict=True) if right_size]
    if not whole:
        return verdicts
    matrix = np.frombuffer(b"".join(whole), dtype=np.float32).reshape(len(whole), dim)
    with np.errstate(invalid="ignore", over="ignore"):
        good = np.isfinite(matrix).all(axis=1) & (np.abs(np.linalg.norm(matrix, axis=1) - 1.0) <= UNIT_TOLERANCE)
    checked = iter(good.tolist())
    return [right_size and next(checked) for right_size in verdicts]


@dataclass
class ReusePlan:
    """`VectorReuse.plan`'s answer for some texts: their keys, the stored vectors found, the distinct
    texts the model must embed, and the keys an earlier call of the group will have written."""

    keys: list[bytes]
    found: dict[bytes, np.ndarray]
    misses: dict[bytes, str] = field(default_factory=dict[bytes, str])
    waiting: dict[bytes, str] = field(default_factory=dict[bytes, str])


class VectorReuse:
    """One run's lookups: the sources above, and what they saved."""

    def __init__(self, conn: sqlite3.Connection, identity: ModelIdentity, *, enabled: bool,
                 old_index: sqlite3.Connection | None = None) -> None:
        self.conn = conn
        self.dim = identity.dim
        self.prefix = identity_prefix(identity)
        self.enabled = enabled
        self.old_index = old_index
        self._previous_ready = False

    def keys(self, texts: Sequence[str]) -> list[bytes]:
        return [text_key(self.prefix, text) for text in texts]

    def vectors(self, texts: Sequence[str], compute: Callable[[Sequence[str]], np.ndarray]) -> tuple[np.ndarray, int]:
        """One row per text, in order, and how many texts the model embedded: the distinct misses."""
        plan = self.plan(texts)
        computed = compute(list(plan.misses.values())) if plan.misses else np.empty((0, self.dim), np.float32)
        return self.assemble(plan, computed, compute)

    def plan(self, texts: Sequence[str], sent: Container[bytes] = ()) -> ReusePlan:
        """What the model must embed for `texts`: the distinct misses, less those in `sent` (keys an
        earlier call of the same group was sent, not written yet: `assemble` finds them once it is)."""
        keys = self.keys(texts)
        plan = ReusePlan(keys, self._lookup(keys) if self.enabled else {})
        for key, text in zip(keys, texts, strict=True):
            if key in plan.found:
                continue
            if self.enabled and key in sent:
                plan.waiting.setdefault(key, text)
            else:
                plan.misses.setdefault(key, text)
        return plan

    def assemble(self, plan: ReusePlan, computed: np.ndarray,
                 compute: Callable[[Sequence[str]], np.ndarray]) -> tuple[np.ndarray, int]:
        """The rows of `plan`'s texts, given the model's rows for its misses; a text an earlier call
        was sent for is read from the index, where that call's document now is (or, if that
        document failed, embedded now). With how many texts the model embedded."""
        found = dict(plan.found)
        found.update(zip(plan.misses, computed, strict=True))
        embedded = len(plan.misses)
        if plan.waiting:
            found.update(self._lookup(sorted(plan.waiting)))
            late = {key: text for key, text in plan.waiting.items() if key not in found}
            if late:
                found.update(zip(late, compute(list(late.values())), strict=True))
                embedded += len(late)
        rows = np.empty((len(plan.keys), self.dim), dtype=np.float32)
        for position, key in enumerate(plan.keys):
            rows[position] = found[key]
        return rows, embedded

    def keep_previous_version(self, doc_id: str, except_in: str) -> None:
        """Before a document's old chunks are deleted (inside its transaction): keep their vectors
        where its new chunks' lookups can still find them, until the next document replaces them.
        Rows whose id is in the table `except_in` stay in the index (kept), so they are left out."""
        if not self.enabled:
            return
        if not self._previous_ready:
            self.conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {_PREVIOUS.split('.')[1]} "
                              "(text_key BLOB PRIMARY KEY, vector BLOB NOT NULL) WITHOUT ROWID")
            self._previous_ready = True
        self.conn.execute(f"DELETE FROM {_PREVIOUS}")
        self.conn.execute(f"INSERT OR IGNORE INTO {_PREVIOUS} (text_key, vector) SELECT e.text_key, e.vector "
                          "FROM embeddings e JOIN chunks c ON c.id = e.chunk_id "
                          f"WHERE c.doc_id = ? AND e.text_key IS NOT NULL AND c.id NOT IN (SELECT id FROM {except_in})",
                          (doc_id,))

    def close(self) -> None:
        if self.old_index is not None:
            self.old_index.close()
            self.old_index = None

    def _lookup(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        found: dict[bytes, np.ndarray] = {}
        sources = [(self.conn, "main.embeddings")]
        if self._previous_ready:
            sources.append((self.conn, _PREVIOUS))
        if self.old_index is not None:
            sources.append((self.old_index, "embeddings"))
        for conn, table in sources:
            wanted = sorted({key for key in keys if key not in found})
            for start in range(0, len(wanted), LOOKUP_BATCH):
                batch = wanted[start:start + LOOKUP_BATCH]
                marks = ", ".join("?" * len(batch))
                for key, blob in conn.execute(
                        f"SELECT text_key, vector FROM {table} WHERE text_key IN ({marks})", batch):
                    vector = usable_vector(blob, self.dim)
                    if vector is not None:
                        found.setdefault(key, vector)
        return found


def reuse_for(ctx: SyncContext) -> VectorReuse:
    """The run's VectorReuse, made on first use: the model's identity (which the packaged model
    gives without loading its weights) and, for a rebuild, the old index if it can be trusted."""
    if ctx.vector_reuse is None:
        identity = ctx.get_embedder().identity
        enabled = not ctx.options.no_reuse
        old_index = None
        if not enabled:
            ctx.report.vector_reuse = "off (--no-reuse): every chunk was embedded by the model"
        elif ctx.rebuilding:
            old_index, verdict = trusted_old_index(ctx.paths.index_db, identity)
            ctx.report.vector_reuse = verdict
        ctx.vector_reuse = VectorReuse(ctx.writer(), identity, enabled=enabled, old_index=old_index)
    return ctx.vector_reuse


def trusted_old_index(index_db: Path, identity: ModelIdentity) -> tuple[sqlite3.Connection | None, str]:
    """The index a rebuild replaces, read-only, when its vectors may be reused; with the reason."""
    if not index_db.exists():
        return None, "no old index to reuse vectors from"
    try:
        conn = sqlite3.connect(f"{index_db.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)
    except sqlite3.Error as exc:
        return None, f"old index not reused: it cannot be opened ({exc})"
    try:
        refusal = _old_index_refusal(conn, identity)
    except sqlite3.Error as exc:
        refusal = f"it cannot be read ({exc})"
    if refusal is not None:
        conn.close()
        return None, f"old index not reused: {refusal}; every chunk was embedded by the model"
    return conn, "reused vectors from the old index (integrity check and every vector row passed)"


def _old_index_refusal(conn: sqlite3.Connection, identity: ModelIdentity) -> str | None:
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    recorded = {key: meta.get(key) for key in identity_meta(identity)}
    if recorded != identity_meta(identity):
        return "it was built with another model (or records none)"
    if "text_key" not in {row[1] for row in conn.execute("PRAGMA table_info(embeddings)")}:
        return "it predates content keys (schema older than 7)"
    problems = [row[0] for row in conn.execute("PRAGMA integrity_check")]
    if problems != ["ok"]:
        return f"PRAGMA integrity_check failed ({problems[0]})"
    bad = _first_bad_vector(conn, identity.dim)
    if bad is not None:
        return f"vector row {bad} is not a unit {identity.dim}-dimensional vector without NaN"
    return None


def _first_bad_vector(conn: sqlite3.Connection, dim: int) -> int | None:
    for rows in _batches(conn.execute("SELECT chunk_id, vector FROM embeddings")):
        for chunk_id, blob in rows:
            if usable_vector(blob, dim) is None:
                return int(chunk_id)
    return None


def _batches(cursor: sqlite3.Cursor) -> Iterator[list[tuple[int, bytes]]]:
    while rows := cursor.fetchmany(CHECK_BATCH):
        yield rows
