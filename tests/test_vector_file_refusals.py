"""What a searching process does with a vector file it cannot use, beyond the footer's checks
(review11): a piece damaged behind an intact footer is refused with the remedy that works (a sync
with nothing to do reads only the footer, so "pnk sync" alone would keep it), a mapping that fails
and a footer whose build parameters usearch cannot take are refusals the search falls back from,
never errors, and none leaves a descriptor or a mapping open."""

from __future__ import annotations

import errno
import json
import mmap
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import xxhash

from pinakes.embed.base import identity_meta
from pinakes.index import schema
from pinakes.kb import KBPaths
from pinakes.vectors import fileformat, vector_file_path
from pinakes.vectors.approximate import OpenVectorFile
from pinakes.vectors.fileformat import FOOTER_BYTES, REBUILD_BY_HAND, VectorFileUnusable, read_header
from pinakes.vectors.freshness import open_for_index
from tests.kb_helpers import sync
from tests.test_status_vector_file import kb_in_pieces
from tests.test_vectors_file import ClusteredEmbedder, flip_byte


@pytest.fixture
def kb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, ClusteredEmbedder]:
    return kb_in_pieces(tmp_path, monkeypatch)


def open_as_search_does(root: Path, embedder: ClusteredEmbedder) -> OpenVectorFile | None:
    """search/vector_tier.decide's open: the footer and the key, not every byte."""
    conn = schema.open_reader(KBPaths(root).index_db)
    try:
        return open_for_index(conn, KBPaths(root).state_dir, identity_meta(embedder.identity), embedder.identity.dim,
                              min_rows=0)
    finally:
        conn.close()


def descriptors() -> set[str]:
    return set(os.listdir("/proc/self/fd")) if Path("/proc/self/fd").is_dir() else set()


def rewrite_footer(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """The footer rewritten with `change` applied to its fields and its own checksum made to match, as
    a writer with a bug would leave it (the content key untouched)."""
    data = bytearray(path.read_bytes())
    block = bytes(data[-FOOTER_BYTES:])
    magic, _digest, length = fileformat._PREFIX.unpack_from(block)  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose
    fields = json.loads(block[fileformat._PREFIX.size:fileformat._PREFIX.size + length])  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose
    change(fields)
    text = json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()
    new = fileformat._PREFIX.pack(magic, xxhash.xxh3_64_digest(text), len(text)) + text  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose
    data[-FOOTER_BYTES:] = new + b"\0" * (FOOTER_BYTES - len(new))
    path.write_bytes(bytes(data))


def test_a_piece_damaged_behind_its_footer_is_refused_with_the_remedy_that_works(
        kb: tuple[Path, ClusteredEmbedder]) -> None:
    root, embedder = kb
    path = vector_file_path(KBPaths(root).state_dir)
    piece = read_header(path).pieces[1]
    for offset in range(piece.offset, piece.offset + 64):  # the piece's own header: bit rot, a bad copy
        flip_byte(path, offset)
    with pytest.raises(VectorFileUnusable) as refused:
        open_as_search_does(root, embedder)
    assert refused.value.reason == "damaged" and refused.value.remedy == REBUILD_BY_HAND
    sync(root, embedder)  # a sync with nothing to do keeps the file: "pnk sync rebuilds it" would not work
    with pytest.raises(VectorFileUnusable):
        open_as_search_does(root, embedder)
    path.unlink()  # the remedy given
    sync(root, embedder)
    opened = open_as_search_does(root, embedder)
    assert opened is not None and opened.header.rows > 0
    opened.close()


def test_a_mapping_that_fails_is_a_refusal_search_falls_back_from(
        kb: tuple[Path, ClusteredEmbedder], monkeypatch: pytest.MonkeyPatch) -> None:
    """mmap fails under a memory limit (ENOMEM with `ulimit -v`) or on a filesystem that cannot map (ENODEV)."""
    root, embedder = kb

    def no_mapping(*_args: object, **_kwargs: object) -> mmap.mmap:
        raise OSError(errno.ENOMEM, "Cannot allocate memory")

    monkeypatch.setattr(mmap, "mmap", no_mapping)
    before = descriptors()
    with pytest.raises(VectorFileUnusable) as refused:
        open_as_search_does(root, embedder)
    assert refused.value.reason == "unavailable" and "Cannot allocate memory" in refused.value.detail
    assert "memory limit" in refused.value.remedy
    assert descriptors() == before


@pytest.mark.parametrize("params", [
    {"metric": "cos", "dtype": "i8", "connectivity": "16", "expansion_add": 128},  # a string for a count
    {"dtype": "i8", "connectivity": 16, "expansion_add": 128},  # no metric
])
def test_a_footer_whose_parameters_build_no_index_is_refused_and_closed(
        kb: tuple[Path, ClusteredEmbedder], params: dict[str, object]) -> None:
    root, embedder = kb
    rewrite_footer(vector_file_path(KBPaths(root).state_dir), lambda fields: fields.__setitem__("params", params))
    before = descriptors()
    with pytest.raises(VectorFileUnusable) as refused:
        open_as_search_does(root, embedder)
    assert refused.value.reason == "damaged" and "piece 0 does not load" in refused.value.detail
    assert descriptors() == before  # the mapping closed on the way out, not left to the garbage collector
