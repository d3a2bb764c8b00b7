"""The index schema (v9) and the only ways to open it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pinakes.errors import IndexMissingError, IndexSchemaError
from pinakes.index import schema

SPEC_TABLES = {"documents", "chunks", "chunks_fts", "embeddings", "links", "kb_refs", "failures", "meta",
               "nodes", "edges", "chunk_terms", "text_links"}


def test_a_new_index_has_every_table_of_the_spec_in_wal_mode(tmp_path: Path) -> None:
    conn = schema.create_index(tmp_path / "index.db")
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables >= SPEC_TABLES
    assert schema.read_meta(conn)["schema_version"] == str(schema.SCHEMA_VERSION) == "11"
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    conn.close()


@pytest.mark.parametrize("version", ["4", "5", "6", "7", "8", "9", "10", "12", None])
def test_another_schema_version_refuses_to_open_naming_the_rebuild(tmp_path: Path, version: str | None) -> None:
    path = tmp_path / "index.db"
    conn = schema.create_index(path)
    with schema.transaction(conn):
        if version is None:
            conn.execute("DELETE FROM meta WHERE key = 'schema_version'")
        else:
            conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (version,))
    conn.close()
    for opener in (schema.open_reader, schema.open_writer):
        with pytest.raises(IndexSchemaError) as raised:
            opener(path)
        assert raised.value.remedy == "pnk sync --rebuild" and "never migrates" in raised.value.message


def test_every_vector_row_has_a_checksum_column_beside_its_key(tmp_path: Path) -> None:
    conn = schema.create_index(tmp_path / "index.db")
    columns = [row[1] for row in conn.execute("PRAGMA table_info(embeddings)")]
    conn.close()
    assert columns == ["chunk_id", "vector", "text_key", "checksum"]


def test_a_file_that_is_not_an_index_is_refused_the_same_way(tmp_path: Path) -> None:
    path = tmp_path / "index.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(IndexSchemaError) as raised:
        schema.open_reader(path)
    assert raised.value.remedy == "pnk sync --rebuild"


def test_a_missing_index_names_pnk_sync(tmp_path: Path) -> None:
    with pytest.raises(IndexMissingError) as raised:
        schema.open_reader(tmp_path / "index.db")
    assert "pnk sync" in (raised.value.remedy or "")
    assert not (tmp_path / "index.db").exists()  # mode=ro never creates the file


def test_a_reader_cannot_write(tmp_path: Path) -> None:
    schema.create_index(tmp_path / "index.db").close()
    reader = schema.open_reader(tmp_path / "index.db")
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        reader.execute("INSERT INTO meta (key, value) VALUES ('x', 'y')")


def test_fts_follows_chunks_through_triggers(tmp_path: Path) -> None:
    conn = schema.create_index(tmp_path / "index.db")
    with schema.transaction(conn):
        conn.execute("INSERT INTO documents (id, path, content_hash, mtime, source_type, indexed_at) "
                     "VALUES ('D', 'a.md', 'h', 0, 'markdown', 'now')")
        conn.execute("INSERT INTO chunks (doc_id, ordinal, text, char_start, char_end, token_count) "
                     "VALUES ('D', 0, 'gliders and sailplanes', 0, 22, 3)")

    def hits(word: str) -> int:
        return conn.execute("SELECT COUNT(*) FROM chunks_fts WHERE chunks_fts MATCH ?", (word,)).fetchone()[0]

    assert hits("sailplanes") == 1
    with schema.transaction(conn):
        conn.execute("UPDATE chunks SET text = 'hot air balloons'")
    assert hits("sailplanes") == 0 and hits("balloons") == 1
    with schema.transaction(conn):
        conn.execute("DELETE FROM documents WHERE id = 'D'")  # chunks cascade, FTS follows
    assert hits("balloons") == 0


def test_a_failed_transaction_leaves_nothing(tmp_path: Path) -> None:
    conn = schema.create_index(tmp_path / "index.db")
    with pytest.raises(RuntimeError), schema.transaction(conn):
        conn.execute("INSERT INTO meta (key, value) VALUES ('half', 'done')")
        raise RuntimeError("boom")
    assert "half" not in schema.read_meta(conn)


def test_the_index_signature_moves_on_every_commit(tmp_path: Path) -> None:
    path = tmp_path / "index.db"
    conn = schema.create_index(path)
    before = schema.index_signature(path)
    with schema.transaction(conn):
        schema.write_meta(conn, {"touched": 1})
    assert schema.index_signature(path) != before
