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
3. during `--rebuild`, the index being replaced, when it records the same model.

Every row found is checked as it is read (index/vector_rows.py): its checksum must match its bytes
(any flipped bit), its width must be the model's, its values finite, its length 1. A row that fails
is a miss, embedded again and counted in the report (`vectors_rejected`). Because each row vouches
for itself, a rebuild reads vectors even from an old index that is damaged (cut short, pages
overwritten): whatever still reads back with a matching checksum is exactly what was written, and a
read that fails is a miss too. An old index written before checksums (schema 8) is read only when
it passes `PRAGMA quick_check`, each row judged by width, finite values and unit length alone, which
cannot see a flipped sign: the report says so.

Only the misses go to the model (each distinct text once), so the weights load only when there is
at least one (`embed/deferred.py`). What the model returns is checked before anything is stored: a
row that is not finite and of unit length fails its batch (`InvalidVectorError`), naming the model.
The key covers the full identity, weights digest (or a remote provider's fingerprint) included: a
vector is never reused across models.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pinakes.embed.base import ModelIdentity, identity_meta
from pinakes.index.integrity import damage
from pinakes.index.vector_rows import LOOKUP_BATCH, invalid_vectors, row_faults, text_key

if TYPE_CHECKING:
    from pinakes.pipeline.run import SyncContext


_PREVIOUS = "temp.pnk_previous_vectors"


class InvalidVectorError(ValueError):
    """The model returned a vector that must never be stored (not finite, or not of unit length).
    A ValueError, not a PinakesError: its batch is retried document by document, and each document
    whose own chunks bring one fails alone, recorded with this message."""


def identity_prefix(identity: ModelIdentity) -> bytes:
    """What every key of this model starts from: its identity, which JSON writes without a NUL, so
    the NUL after it keeps (identity, text) pairs from ever running into each other."""
    return json.dumps(identity_meta(identity), sort_keys=True).encode() + b"\0"


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
        self.identity = identity
        self.dim = identity.dim
        self.prefix = identity_prefix(identity)
        self.enabled = enabled
        self.old_index = old_index
        self._old_checksum = "checksum" if old_index is not None and _has_checksums(old_index) else "NULL"
        self._previous_ready = False
        # Keys whose stored rows all failed their check: the texts embedded again for that reason.
        self.rejected: set[bytes] = set()
        self.old_unreadable = 0  # keys whose lookup in the old index failed to read (a damaged file)
        self.old_read_error: str | None = None

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
        found.update(zip(plan.misses, self._checked(computed, list(plan.misses.values())), strict=True))
        embedded = len(plan.misses)
        if plan.waiting:
            found.update(self._lookup(sorted(plan.waiting)))
            late = {key: text for key, text in plan.waiting.items() if key not in found}
            if late:
                texts = list(late.values())
                found.update(zip(late, self._checked(compute(texts), texts), strict=True))
                embedded += len(late)
        rows = np.empty((len(plan.keys), self.dim), dtype=np.float32)
        for position, key in enumerate(plan.keys):
            rows[position] = found[key]
        return rows, embedded

    def _checked(self, computed: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        """The model's rows for `texts`, or InvalidVectorError naming the model and the first text
        whose vector could not be a unit vector (index/vector_rows.py)."""
        invalid = invalid_vectors(computed, self.dim) if len(texts) else []
        if len(computed) != len(texts):
            invalid = [(0, f"it returned {len(computed)} vectors for {len(texts)} texts")]
        if not invalid:
            return computed
        row, why = invalid[0]
        excerpt = " ".join(texts[row].split())[:60] if row < len(texts) else ""
        raise InvalidVectorError(
            f"the embedding model {self.identity.model} ({self.identity.provider}) returned a vector that "
            f"cannot be stored: {why} (for the text beginning {excerpt!r}"
            + (f", and {len(invalid) - 1} more in the same call" if len(invalid) > 1 else "")
            + "); nothing of this document was stored, and no vector that matches nothing was written. "
              "Check the model or the embedding server, then sync again")

    def keep_previous_version(self, doc_id: str, except_in: str) -> None:
        """Before a document's old chunks are deleted (inside its transaction): keep their vectors
        where its new chunks' lookups can still find them, until the next document replaces them.
        Rows whose id is in the table `except_in` stay in the index (kept), so they are left out."""
        if not self.enabled:
            return
        self._empty_previous()
        self.conn.execute(f"INSERT OR IGNORE INTO {_PREVIOUS} (text_key, vector, checksum) "
                          "SELECT e.text_key, e.vector, e.checksum "
                          "FROM embeddings e JOIN chunks c ON c.id = e.chunk_id "
                          f"WHERE c.doc_id = ? AND e.text_key IS NOT NULL AND c.id NOT IN (SELECT id FROM {except_in})",
                          (doc_id,))

    def forget_previous_version(self) -> None:
        """What `keep_previous_version` keeps, for a document with no previous rows: the vectors the
        last document handed over go, as they would were this one's (none) handed over."""
        if self.enabled and self._previous_ready:
            self._empty_previous()

    def _empty_previous(self) -> None:
        # Every time: made inside a document's transaction, the table goes if that document fails.
        self.conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {_PREVIOUS.split('.')[1]} "
                          "(text_key BLOB PRIMARY KEY, vector BLOB NOT NULL, checksum BLOB) WITHOUT ROWID")
        self._previous_ready = True
        self.conn.execute(f"DELETE FROM {_PREVIOUS}")

    def close(self) -> None:
        if self.old_index is not None:
            self.old_index.close()
            self.old_index = None

    def _lookup(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        found: dict[bytes, np.ndarray] = {}
        failed: set[bytes] = set()
        sources = [(self.conn, "main.embeddings", "checksum")]
        if self._previous_ready and self.conn.execute(
                "SELECT 1 FROM temp.sqlite_master WHERE name = ?", (_PREVIOUS.split(".")[1],)).fetchone():
            sources.append((self.conn, _PREVIOUS, "checksum"))
        if self.old_index is not None:
            sources.append((self.old_index, "embeddings", self._old_checksum))
        for conn, table, checksum in sources:
            wanted = sorted({key for key in keys if key not in found})
            for start in range(0, len(wanted), LOOKUP_BATCH):
                batch = wanted[start:start + LOOKUP_BATCH]
                rows = self._read(conn, f"SELECT text_key, vector, {checksum} FROM {table} "
                                        f"WHERE text_key IN ({', '.join('?' * len(batch))})", batch)
                for (key, blob, _sum), fault in zip(rows, row_faults([(b, k, c) for k, b, c in rows], self.dim),
                                                    strict=True):
                    if fault is None:
                        found.setdefault(key, np.frombuffer(blob, dtype=np.float32))
                    else:
                        failed.add(key)
        self.rejected |= failed - found.keys()
        return found

    def _read(self, conn: sqlite3.Connection, sql: str, batch: list[bytes]) -> list[tuple[bytes, bytes, bytes | None]]:
        """The rows of one lookup. In the old index a read that fails (a damaged page) is a miss for
        the whole batch, counted; in the index being written it is the run's fault and stops it."""
        if conn is not self.old_index:
            return conn.execute(sql, batch).fetchall()
        try:
            return conn.execute(sql, batch).fetchall()
        except sqlite3.DatabaseError as exc:
            self.old_unreadable += len(batch)
            self.old_read_error = self.old_read_error or str(exc)
            return []

    def unreadable_note(self) -> str | None:
        """What the report says when lookups in the old index could not be read."""
        if not self.old_unreadable:
            return None
        return (f"{self.old_unreadable} vector lookups in the old index could not be read ({self.old_read_error}): "
                "those texts were embedded by the model")


def open_reuse(ctx: SyncContext) -> VectorReuse:
    """A run's VectorReuse (the embed stage makes it on first use): the model's identity (which the
    packaged model gives without loading its weights) and, for a rebuild, the old index if it can be
    trusted."""
    identity = ctx.get_embedder().identity
    enabled = not ctx.options.no_reuse
    old_index = None
    if not enabled:
        ctx.report.vector_reuse = "off (--no-reuse): every chunk was embedded by the model"
    elif ctx.rebuilding:
        old_index, verdict = trusted_old_index(ctx.paths.index_db, identity)
        ctx.report.vector_reuse = verdict
    return VectorReuse(ctx.writer(), identity, enabled=enabled, old_index=old_index)


def trusted_old_index(index_db: Path, identity: ModelIdentity) -> tuple[sqlite3.Connection | None, str]:
    """The index a rebuild replaces, read-only, when its vectors may be reused; with the reason.
    Its rows are judged one by one as they are read (`VectorReuse._lookup`); the file as a whole
    only when its rows carry no checksum to vouch for them (schema 8 and earlier)."""
    if not index_db.exists():
        return None, "no old index to reuse vectors from"
    try:
        conn = sqlite3.connect(f"{index_db.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)
    except sqlite3.Error as exc:
        return None, f"old index not reused: it cannot be opened ({exc}); every chunk was embedded by the model"
    try:
        refusal, verdict = _old_index_verdict(conn, identity)
    except sqlite3.Error as exc:
        refusal, verdict = f"it cannot be read ({exc})", ""
    if refusal is not None:
        conn.close()
        return None, f"old index not reused: {refusal}; every chunk was embedded by the model"
    return conn, verdict


def _old_index_verdict(conn: sqlite3.Connection, identity: ModelIdentity) -> tuple[str | None, str]:
    """(why the old index's vectors cannot be reused, or None; what the report says when they are)."""
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    recorded = {key: meta.get(key) for key in identity_meta(identity)}
    if recorded != identity_meta(identity):
        return "it was built with another model (or records none)", ""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(embeddings)")}
    if "text_key" not in columns:
        return "it predates content keys (schema older than 7)", ""
    if _has_checksums(conn):
        return None, ("reused vectors from the old index, each row only where its checksum matched its bytes "
                      "and it is a finite unit vector of the model's width")
    found = damage(conn)
    if found is not None:
        return f"its rows carry no checksum (schema {meta.get('schema_version', 'unknown')}) and PRAGMA quick_check " \
               f"found it damaged ({found})", ""
    return None, (f"reused vectors from the old index (schema {meta.get('schema_version', 'unknown')}: its rows "
                  "carry no checksum, so each was checked for width, finite values and unit length only, which "
                  "cannot see a flipped sign bit; `pnk sync --rebuild --no-reuse` embeds everything)")


def _has_checksums(conn: sqlite3.Connection) -> bool:
    return "checksum" in {row[1] for row in conn.execute("PRAGMA table_info(embeddings)")}
