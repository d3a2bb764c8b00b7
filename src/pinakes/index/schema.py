"""The index schema (version 11) and the only ways to open the index.

There are no migrations: an index written under another schema_version refuses to open and names
`pnk sync --rebuild`. `.pinakes/` is derived state, so rebuilding is always free and always correct.

Writers use `isolation_level=None` with explicit `BEGIN IMMEDIATE` (`transaction()`): a deferred
transaction that upgrades from read to write fails with SQLITE_BUSY_SNAPSHOT regardless of
busy_timeout. Readers open `file:...?mode=ro` so they can never create or modify the file.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Generator, Mapping
from contextlib import contextmanager
from pathlib import Path

from pinakes.errors import (
    FilesystemError,
    IndexMissingError,
    IndexSchemaError,
    PinakesError,
    filesystem_error,
)
from pinakes.extract.source_types import SOURCE_TYPES

# 4: walk_cache.ctime_ns (an in-place write that restores the mtime is still seen).
# 5: documents.pages_without_text (PDF pages with no usable text layer, for status and doctor);
#    chunks.fts_text, the shadow text FTS5 indexes for Han, kana and Hangul (no whole-run tokens).
# 6: chunk_terms, each chunk's term frequencies, which the keyword side's BM25 reads (index/terms.py).
# 7: document context beside each chunk, searched as its own FTS5 column (#28); each vector's
#    content key, so a vector is computed once per (model, embedded text) (#29).
# 8: chunks.fts_context, the context's shadow text: FTS5 reads a CJK title or file name as the
#    bigrams a query is searched by, as it reads the chunk's text (#28).
# 9: embeddings.checksum, so a flipped bit in a stored vector is seen before it is reused or
#    searched (index/vector_rows.py, #40). A rebuild from an 8 still reuses its vectors, judged
#    row by row without one.
# 10: links from text (#44): `text_links`, each link a document's text makes, with its span and
#    what it resolved to; `links.origin` 'text' for the edges they derive (links/text_edges.py).
# 11: documents.source_type admits every type extract/source_types.py declares, its list taken from
#    there (#43: the document formats html, epub, docx and odt, and images read by OCR): a new type
#    is one edit there and a bump here.
SCHEMA_VERSION = 11
BUSY_TIMEOUT_MS = 10_000

# The FTS5 tokenizer is part of the schema: changing it changes every BM25 score. So is the shadow
# text it reads for Han, kana and Hangul (`chunks.fts_text`, `chunks.fts_context`, search/scripts.py).
FTS_TOKENIZE = "porter unicode61 remove_diacritics 2"

_SOURCE_TYPES = ", ".join(f"'{kind}'" for kind in SOURCE_TYPES)

DDL = f"""
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE documents (
    id                     TEXT PRIMARY KEY,          -- ULID, permanent, from the sidecar
    path                   TEXT NOT NULL,             -- KB-root-relative, POSIX separators
    content_hash           TEXT NOT NULL,             -- xxh3-128 hex of the file's bytes
    sidecar_hash           TEXT,                      -- xxh3-128 hex of the sidecar's bytes
    mtime                  REAL NOT NULL,             -- seconds since the epoch (the date filter)
    source_type            TEXT NOT NULL CHECK (source_type IN ({_SOURCE_TYPES})),
    title                  TEXT,
    metadata               TEXT NOT NULL DEFAULT '{{}}',  -- JSON: tags and the sidecar's other keys
    state                  TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'deleted')),
    extraction_backend     TEXT,                      -- NULL for a non-extracted source
    extraction_fingerprint TEXT,
    build_key              TEXT,                      -- key the chunks and vectors were built from
    pages_without_text     TEXT,                      -- JSON 1-based PDF pages with no usable text layer; NULL: none
    indexed_at             TEXT NOT NULL
);
CREATE UNIQUE INDEX documents_active_path ON documents (path) WHERE state = 'active';
CREATE INDEX documents_content_hash ON documents (content_hash);
CREATE INDEX documents_state ON documents (state);
-- Every query re-derives the fingerprint of each recorded extraction backend (spec §4.4).
CREATE INDEX documents_extraction ON documents (extraction_backend, extraction_fingerprint)
    WHERE extraction_backend IS NOT NULL;

CREATE TABLE chunks (
    id           INTEGER PRIMARY KEY,
    doc_id       TEXT NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    ordinal      INTEGER NOT NULL,
    text         TEXT NOT NULL,
    char_start   INTEGER NOT NULL,
    char_end     INTEGER NOT NULL,
    token_count  INTEGER NOT NULL,
    heading_path TEXT,                                -- JSON array of heading texts, or NULL
    page_start   INTEGER,                             -- 1-indexed; NULL for a non-paged source
    page_end     INTEGER,
    fts_text     TEXT,                                -- what FTS5 indexes when not `text` (search/scripts.py)
    context      TEXT,                                -- the document context + heading trail (pipeline/context.py)
    fts_context  TEXT,                                -- what FTS5 indexes when not `context` (its shadow, as fts_text)
    UNIQUE (doc_id, ordinal)
);

-- FTS5 indexes each chunk's shadow text (Han, kana and Hangul runs as character bigrams) where it
-- has one, its text otherwise, and its context (shadowed the same way) as a second column with its
-- own weight (search/bm25.py); the view is the external content, so 'rebuild' and
-- 'integrity-check' read exactly what the triggers wrote.
CREATE VIEW chunks_fts_source AS
    SELECT id, coalesce(fts_text, text) AS text, coalesce(fts_context, context) AS context FROM chunks;
CREATE VIRTUAL TABLE chunks_fts USING fts5 (
    text,
    context,
    content = 'chunks_fts_source',
    content_rowid = 'id',
    tokenize = '{FTS_TOKENIZE}'
);
CREATE TRIGGER chunks_fts_insert AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts (rowid, text, context)
        VALUES (new.id, coalesce(new.fts_text, new.text), coalesce(new.fts_context, new.context));
END;
CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, text, context)
        VALUES ('delete', old.id, coalesce(old.fts_text, old.text), coalesce(old.fts_context, old.context));
END;
-- The sync never rewrites a chunk's text (it replaces the chunk); should anything else, its term
-- counts go, and the keyword side ranks the queries that meet it by FTS5's bm25() alone.
CREATE TRIGGER chunks_fts_update AFTER UPDATE OF text, fts_text, context, fts_context ON chunks BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, text, context)
        VALUES ('delete', old.id, coalesce(old.fts_text, old.text), coalesce(old.fts_context, old.context));
    INSERT INTO chunks_fts (rowid, text, context)
        VALUES (new.id, coalesce(new.fts_text, new.text), coalesce(new.fts_context, new.context));
    DELETE FROM chunk_terms WHERE chunk_id = old.id;
END;

-- Each chunk's terms as chunks_fts's tokenizer produced them, and how often in its text and in its
-- context (index/terms.py): the keyword side scores BM25 with its own k1 and b and the context's
-- own weight from these, which FTS5's bm25() fixes.
CREATE TABLE chunk_terms (
    chunk_id          INTEGER NOT NULL REFERENCES chunks (id) ON DELETE CASCADE,
    term              TEXT NOT NULL,
    frequency         INTEGER NOT NULL,
    context_frequency INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (chunk_id, term)
) WITHOUT ROWID;

CREATE TABLE embeddings (
    chunk_id INTEGER PRIMARY KEY REFERENCES chunks (id) ON DELETE CASCADE,
    vector   BLOB NOT NULL,                           -- float32, unit length, meta.embedding_dim wide
    -- xxh3-128 of (model identity, the exact text embedded): a later sync reuses this vector for
    -- any chunk with the same key instead of running the model (pipeline/vector_reuse.py). NULL for
    -- a row carried from an index that predates the keys (never matched).
    text_key BLOB,
    -- xxh3-64 of the vector's bytes then text_key (index/vector_rows.py): a row is reused only when
    -- it matches. NULL for a row a rebuild copied from an index that predates checksums.
    checksum BLOB
);
CREATE INDEX embeddings_text_key ON embeddings (text_key);

CREATE TABLE links (
    src_kb_id  TEXT NOT NULL,
    src_doc_id TEXT NOT NULL,
    dst_kb_id  TEXT NOT NULL,
    dst_doc_id TEXT NOT NULL,
    rel        TEXT NOT NULL,
    origin     TEXT NOT NULL CHECK (origin IN ('sidecar', 'reverse-scan', 'text')),
    UNIQUE (src_kb_id, src_doc_id, dst_kb_id, dst_doc_id, rel, origin)
);
CREATE INDEX links_dst ON links (dst_kb_id, dst_doc_id);

-- Each link a document's text makes (links/text_links.py), written with the document's chunks;
-- the resolution columns are rewritten in full by every graph stage (links/text_edges.py), which
-- derives the `links` rows of origin 'text' from them.
CREATE TABLE text_links (
    id         INTEGER PRIMARY KEY,
    doc_id     TEXT NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    syntax     TEXT NOT NULL,                     -- wikilink, embed, markdown, image, reference, uri
    target     TEXT NOT NULL,                     -- the path as written (decoded), or the pnk:// URI
    subpath    TEXT,                              -- heading or ^block after '#'
    char_start INTEGER NOT NULL,                  -- the link's span in the stored text, end exclusive
    char_end   INTEGER NOT NULL,
    line       INTEGER NOT NULL,                  -- 1-based
    status     TEXT NOT NULL DEFAULT 'pending'
               CHECK (status IN ('pending', 'resolved', 'ambiguous', 'unresolved', 'attachment')),
    dst_kb_id  TEXT,
    dst_doc_id TEXT,
    candidates INTEGER NOT NULL DEFAULT 0         -- documents that matched by name
);
CREATE INDEX text_links_doc ON text_links (doc_id);
CREATE INDEX text_links_dst ON text_links (dst_kb_id, dst_doc_id);

CREATE TABLE kb_refs (
    kb_id     TEXT PRIMARY KEY,
    alias     TEXT NOT NULL,
    path      TEXT,
    last_scan TEXT
);

CREATE TABLE failures (
    id    INTEGER PRIMARY KEY,
    path  TEXT NOT NULL,
    stage TEXT NOT NULL,
    error TEXT NOT NULL,
    at    TEXT NOT NULL
);

CREATE TABLE nodes (
    id   INTEGER PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('doc', 'chunk', 'tag', 'heading', 'dir')),
    key  TEXT NOT NULL,
    UNIQUE (kind, key)
);

CREATE TABLE edges (
    src  INTEGER NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    dst  INTEGER NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN ('membership', 'sibling', 'parent-child', 'in-section',
                                       'co-located', 'shared-tag'))
);
CREATE INDEX edges_src ON edges (src, kind);
CREATE INDEX edges_dst ON edges (dst, kind);

-- Walk pre-filter: a file whose (size, mtime_ns, ctime_ns, inode) is unchanged is not re-hashed
-- (unless it is stamped within the racy window of meta.walk_started_ns: sources/walk.py).
CREATE TABLE walk_cache (
    path         TEXT PRIMARY KEY,
    size         INTEGER NOT NULL,
    mtime_ns     INTEGER NOT NULL,
    ctime_ns     INTEGER NOT NULL,
    inode        INTEGER NOT NULL,
    content_hash TEXT NOT NULL
);
"""

# Every derived-graph edge kind, in report order (the authored kind is read from `links`).
EDGE_KINDS = ("membership", "sibling", "parent-child", "in-section", "co-located", "shared-tag")


# The writer's settings (docs/perf/writer.md measures each; docs/INVARIANTS.md argues durability).
# WAL with synchronous=NORMAL: a commit is appended to the WAL without an fsync and the checkpoint
# fsyncs, so a killed process loses nothing it committed, and a power cut at most the commits since
# the last checkpoint, never the file's consistency. SQLite's own page cache (2 MB) and checkpoint
# cadence (every 1,000 pages) stay: a 64 MB cache and a checkpoint every 10,000 pages wrote 60k
# chunks in the same CPU time, and the cache cost the sync 66 MB of RSS; synchronous=FULL cost
# about a tenth more.
def _writer_settings(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")


def _configure(conn: sqlite3.Connection) -> None:
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys = ON")


def index_error(path: Path, exc: sqlite3.Error | OSError) -> PinakesError:
    """The PinakesError for a fault met reading or writing the index at `path`: the same words and
    remedies wherever it happens (sync, search, doctor, serve)."""
    if isinstance(exc, OSError):
        return filesystem_error(path, exc, "use the index")
    text = str(exc).lower()
    if "disk is full" in text or "disk i/o error" in text:
        return FilesystemError(
            f"the index could not be written: {exc}; what was committed before is kept",
            remedy="free some disk space and run `pnk sync` again", path=path)
    if "readonly" in text or "read-only" in text:
        return FilesystemError(
            f"the index cannot be written ({exc})",
            remedy=f"make {path.parent} and the files in it writable (or remount the disk read-write)",
            path=path)
    if "unable to open" in text:
        return FilesystemError(
            f"the index cannot be opened ({exc})",
            remedy=f"check that {path.parent} and {path.name} are readable (and writable, to sync)",
            path=path)
    if "no such table" in text:
        return IndexSchemaError(f"the file is not a Pinakes index ({exc})", remedy="pnk sync --rebuild",
                                path=path)
    if is_damage(exc):
        return IndexSchemaError(f"the index is damaged ({exc})", remedy="pnk sync --rebuild", path=path)
    if "locked" in text or "busy" in text:
        return FilesystemError(f"the index stayed locked by another process ({exc})",
                               remedy="retry when the other writer has finished", path=path)
    return IndexSchemaError(f"the index could not be used ({exc})", remedy="pnk sync --rebuild", path=path)


def is_damage(exc: sqlite3.Error) -> bool:
    """Whether SQLite refused because the file's bytes are not what it wrote: SQLITE_CORRUPT (a
    b-tree, a record, FTS5's own structures) or SQLITE_NOTADB (a header overwritten or cut)."""
    text = str(exc).lower()
    return "not a database" in text or "malformed" in text or "corrupt" in text


def damage_error(exc: BaseException, path: Path | None = None) -> PinakesError | None:
    """The error to show for `exc` when it says an index file is damaged, met where no caller named
    the index (the CLI's and doctor's last resort, so a damaged file is never a traceback or "a
    Pinakes bug"); None for any other exception."""
    if isinstance(exc, sqlite3.DatabaseError) and is_damage(exc):
        return IndexSchemaError(f"the index is damaged ({exc})", remedy="pnk sync --rebuild", path=path)
    return None


@contextmanager
def index_faults(path: Path) -> Generator[None]:
    """Within the block, any fault SQLite meets reading or writing the index at `path` is the
    PinakesError `index_error` makes of it (a damaged file names `pnk sync --rebuild`), never a
    raw sqlite3 traceback. A misuse of the sqlite3 API is a Pinakes bug and stays one."""
    try:
        yield
    except (sqlite3.ProgrammingError, sqlite3.InterfaceError):
        raise
    except sqlite3.Error as exc:
        raise index_error(path, exc) from exc


def create_index(path: Path) -> sqlite3.Connection:
    """Create a new, empty index at `path` (which must not exist) and return a writer connection."""
    if path.exists():
        raise FileExistsError(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, isolation_level=None)
        _configure(conn)
        _writer_settings(conn)
        with transaction(conn):
            for statement in _split_ddl(DDL):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
            )
    except (sqlite3.Error, OSError) as exc:
        raise index_error(path, exc) from exc
    return conn


def _split_ddl(ddl: str) -> list[str]:
    """Split DDL into statements, keeping trigger bodies (which contain ';') whole."""
    statements: list[str] = []
    current: list[str] = []
    in_trigger = False
    for line in ddl.splitlines():
        stripped = line.split("--", 1)[0].strip()
        if not stripped and not current:
            continue
        current.append(line)
        if stripped.upper().startswith("CREATE TRIGGER"):
            in_trigger = True
        if in_trigger:
            if stripped.upper() == "END;":
                statements.append("\n".join(current))
                current, in_trigger = [], False
        elif stripped.endswith(";"):
            statements.append("\n".join(current))
            current = []
    if any(part.strip() for part in current):
        statements.append("\n".join(current))
    return statements


def check_version(conn: sqlite3.Connection, path: Path) -> None:
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.OperationalError as exc:
        raise index_error(path, exc) from exc
    except sqlite3.DatabaseError as exc:
        raise IndexSchemaError(
            f"the index is unreadable or not a Pinakes index ({exc})",
            remedy="pnk sync --rebuild",
            path=path,
        ) from exc
    found = row[0] if row else None
    if found != str(SCHEMA_VERSION):
        raise IndexSchemaError(
            f"the index has schema_version {found or 'none'}; this Pinakes reads version "
            f"{SCHEMA_VERSION} and never migrates",
            remedy="pnk sync --rebuild",
            path=path,
        )


def open_writer(path: Path) -> sqlite3.Connection:
    """Open (or create) the index for writing. Refuses another schema_version."""
    if not path.exists():
        return create_index(path)
    try:
        conn = _opened(sqlite3.connect(path, isolation_level=None), path)
        _writer_settings(conn)
    except sqlite3.Error as exc:
        raise index_error(path, exc) from exc
    return conn


def open_reader(path: Path) -> sqlite3.Connection:
    """Open the index read-only (`mode=ro`): it can never be created or written through this handle."""
    if not path.exists():
        raise IndexMissingError(
            "this KB has no index yet", remedy="run `pnk sync` in the KB", path=path
        )
    try:
        return _opened(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None,
                                       check_same_thread=False), path)
    except sqlite3.Error as exc:
        raise index_error(path, exc) from exc


def _opened(conn: sqlite3.Connection, path: Path) -> sqlite3.Connection:
    """Configure a fresh connection and refuse another schema version (closing it first)."""
    _configure(conn)
    try:
        check_version(conn, path)
    except PinakesError:
        conn.close()
        raise
    return conn


@contextmanager
def transaction(conn: sqlite3.Connection) -> Generator[sqlite3.Connection]:
    """One write transaction: BEGIN IMMEDIATE, COMMIT on success, ROLLBACK on any exception."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def read_meta(conn: sqlite3.Connection) -> dict[str, str]:
    return dict(conn.execute("SELECT key, value FROM meta").fetchall())


def write_meta(conn: sqlite3.Connection, values: Mapping[str, object]) -> None:
    """Upsert meta keys (call inside a transaction). Non-string values are stored as JSON."""
    for key, value in values.items():
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
        conn.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, text),
        )


# The settled mark's meta key (pinakes.pipeline.settled): every write that could make it false removes it.
SETTLED_META_KEY = "settled"


def unsettle(conn: sqlite3.Connection) -> None:
    """Forget the settled mark (call inside the transaction that changes what it vouched for)."""
    conn.execute("DELETE FROM meta WHERE key = ?", (SETTLED_META_KEY,))


def index_signature(path: Path) -> tuple[tuple[int, int, int], ...]:
    """(inode, mtime_ns, size) of index.db and its -wal: changes whenever a writer commits or a
    rebuild is installed. Readers compare it per request instead of trusting their own handle,
    which keeps seeing the generation it opened."""
    parts: list[tuple[int, int, int]] = []
    for candidate in (path, path.with_name(path.name + "-wal")):
        try:
            st = os.stat(candidate)
        except FileNotFoundError:
            parts.append((0, 0, 0))
        else:
            parts.append((st.st_ino, st.st_mtime_ns, st.st_size))
    return tuple(parts)
