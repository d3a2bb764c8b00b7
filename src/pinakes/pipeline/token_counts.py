"""Token counts remembered across syncs, per (tokenizer, exact text), for large documents.

The build key is per document, so editing one paragraph of a large document re-chunks all of it,
and the chunker counts every block, every split part and every chunk with the model's tokenizer:
about 2.3 passes of the tokenizer over the document (a 0.65 MB Markdown file: ~1.2 s of CPU, where
the packing itself takes 0.16 s). Nearly all of those texts are the ones the previous sync counted.
A count is a pure function of the tokenizer and the text, so it is remembered under
xxh3-128(tokenizer fingerprint, text) in `.pinakes/cache/token-counts.db` and looked up before the
tokenizer runs; the chunker sees the same numbers either way, so its output does not change.

- Only documents of at least `REMEMBERED_DOCUMENT_CHARS` use it (a small document chunks in
  milliseconds, less than opening the store). Every text they count is remembered, the overlap's
  candidate words included: looked up they cost 0.10 s instead of 0.16 s on that document (the
  store then holds 0.78 MB for it instead of 0.25 MB; words recur across documents).
- The fingerprint is the tokenizer's whole serialized configuration and vocabulary plus the
  `tokenizers` version (`TokenCounter.fingerprint`): a model whose tokenizer is not known that
  exactly (a remote provider's count) gets no store.
- Bounded: at most `MAX_ROWS` counts, the oldest written dropped first. Disposable: a store that
  cannot be opened or read is deleted and the sync counts as before (a cache, never a source).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

from pinakes.index.vector_rows import LOOKUP_BATCH, text_key

REMEMBERED_DOCUMENT_CHARS = 100_000
# About 53 bytes a row on disk: at most ~53 MB, the counts of ~85k chunks' texts, blocks, parts and words.
MAX_ROWS = 1_000_000
STORE_NAME = "token-counts.db"
# A write costs about what counting this many texts again does (a transaction and the checkpoint
# when the store closes: ~25 ms against ~0.1 ms a text): an edit's few new texts are not worth it,
# and they stay new, so the edits that follow add up to a write.
WORTH_WRITING = 256

CountBatch = Callable[[Sequence[str]], list[int]]


class TokenCountStore:
    """Counts through `count_batch`, answering from the store where it holds the text's count;
    `save()` writes the counts made since (call it once the document is chunked)."""

    def __init__(self, conn: sqlite3.Connection, fingerprint: str, count_batch: CountBatch) -> None:
        self._conn = conn
        self._prefix = fingerprint.encode() + b"\0"
        self._count_batch = count_batch
        self._new: dict[bytes, int] = {}

    @classmethod
    def open(cls, cache_dir: Path, fingerprint: str, count_batch: CountBatch) -> TokenCountStore | None:
        """The store under `cache_dir`; None (counting as before) when it cannot be had."""
        path = cache_dir / STORE_NAME
        for _attempt in range(2):
            try:
                cache_dir.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(path, isolation_level=None)
                try:
                    conn.execute("PRAGMA journal_mode = WAL")
                    conn.execute("PRAGMA synchronous = NORMAL")  # a lost count is counted again
                    conn.execute("CREATE TABLE IF NOT EXISTS counts (id INTEGER PRIMARY KEY, "
                                 "key BLOB NOT NULL UNIQUE, tokens INTEGER NOT NULL)")
                except sqlite3.Error:
                    conn.close()
                    raise
                return cls(conn, fingerprint, count_batch)
            except sqlite3.DatabaseError:
                _discard(path)  # damaged: a cache is rebuilt, never repaired
            except (sqlite3.Error, OSError):
                return None
        return None

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        keys = [text_key(self._prefix, text) for text in texts]
        known = self._lookup(set(keys))
        missing = [index for index, key in enumerate(keys) if key not in known]
        counted = self._count_batch([texts[index] for index in missing]) if missing else []
        if len(counted) != len(missing):
            raise ValueError(f"count_tokens_batch returned {len(counted)} counts for {len(missing)} texts")
        for index, count in zip(missing, counted, strict=True):
            known[keys[index]] = self._new[keys[index]] = count
        return [known[key] for key in keys]

    def _lookup(self, keys: set[bytes]) -> dict[bytes, int]:
        known = {key: self._new[key] for key in keys if key in self._new}
        wanted = [key for key in keys if key not in known]
        try:
            for start in range(0, len(wanted), LOOKUP_BATCH):
                batch = wanted[start:start + LOOKUP_BATCH]
                marks = ", ".join("?" * len(batch))
                known.update(self._conn.execute(f"SELECT key, tokens FROM counts WHERE key IN ({marks})", batch))
        except sqlite3.Error:
            pass  # unreadable: what was not found is counted
        return known

    def save(self) -> None:
        """Write the new counts and drop the oldest beyond MAX_ROWS; a failure only loses them.
        Fewer than WORTH_WRITING new counts are not written: they are counted again next time."""
        try:
            if len(self._new) >= WORTH_WRITING:
                with self._conn:
                    self._conn.execute("BEGIN")
                    self._conn.executemany("INSERT OR IGNORE INTO counts (key, tokens) VALUES (?, ?)",
                                           self._new.items())
                    self._conn.execute("DELETE FROM counts WHERE id <= (SELECT max(id) FROM counts) - ?",
                                       (MAX_ROWS,))
            self._new.clear()
        except sqlite3.Error:
            pass
        finally:
            self._conn.close()


def _discard(path: Path) -> None:
    for name in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        with contextlib.suppress(OSError):
            name.unlink()
