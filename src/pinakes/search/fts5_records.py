"""FTS5's own records, read without a statement per row: the averages record (the index's row count
and each column's token total) and a row's docsize record (its token count per column), both
SQLite varints, as the keyword side's BM25F (search/bm25.py `scored_from_term_counts`) needs them."""

from __future__ import annotations

import sqlite3


def averages(conn: sqlite3.Connection) -> tuple[int, int, int]:
    """(rows, text tokens, context tokens) from FTS5's averages record (chunks_fts_data id 1: varint
    row count, then a varint token total per column)."""
    row = conn.execute("SELECT block FROM chunks_fts_data WHERE id = 1").fetchone()
    if row is None or not row[0]:
        return 0, 0, 0
    values = varints(bytes(row[0]))
    if len(values) < 2:
        return 0, 0, 0
    return values[0], values[1], values[2] if len(values) > 2 else 0


def field_scales(blob: bytes, b: float, average_text: float, context_b: float, average_context: float,
                 context_weight: float) -> tuple[float, float]:
    """What one occurrence weighs in a row's text and in its context: each field's BM25F length
    normalisation inverted (the context's times its weight), from the row's docsize record (a
    varint token count per column; a record of one column has no context)."""
    first = blob[0]
    if first < 0x80 and len(blob) > 1 and blob[1] < 0x80:
        text_length, context_length = first, blob[1]
    else:
        values = varints(bytes(blob))
        text_length, context_length = values[0], values[1] if len(values) > 1 else 0
    text_scale = 1.0 / (1.0 - b + b * text_length / average_text) if average_text > 0.0 else 1.0
    if average_context <= 0.0:
        return text_scale, 0.0
    return text_scale, context_weight / (1.0 - context_b + context_b * context_length / average_context)


def varints(blob: bytes) -> list[int]:
    """SQLite's big-endian 7-bit varints (the ninth byte, if reached, carries 8 bits)."""
    values: list[int] = []
    position = 0
    while position < len(blob):
        value = 0
        for index in range(9):
            byte = blob[position]
            position += 1
            if index == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        values.append(value)
    return values
