"""Each piece's graph checksummed (vector file format 3, review9 F2): a searching process, which does
not read every byte of the file, still checks every byte of each piece but its vector codes before
the library reads it, so a byte damaged at rest in a graph is refused, never followed as a pointer
into a SIGSEGV; a damaged code costs a candidate, never the process or a wrong cosine.

KBs are built by the real sync (its `vectors` step writes the file); pieces are made small (50 rows)
and the threshold lowered (tests/test_vector_pieces.py `kb_in_pieces`).
"""

from __future__ import annotations

import importlib.util
import os
import signal
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import xxhash

from pinakes.kb import KBPaths
from pinakes.vectors import approximate_search, engine, fileformat, vector_file_path
from pinakes.vectors.approximate import open_vector_file
from pinakes.vectors.fileformat import Header, VectorFileUnusable, read_header
from tests.kb_helpers import sync
from tests.test_vector_pieces import kb_in_pieces
from tests.test_vector_tier_search import (
    EXACT_NOTE,
    QUERIES,
    exact_answers,
    pnk_search,
    same_passages,
)
from tests.test_vectors_file import DIM, ClusteredEmbedder, exact_rows_from, flip_byte

if importlib.util.find_spec("usearch") is None:  # not imported here: only through vectors/engine.py,
    pytest.skip("usearch is not installed", allow_module_level=True)  # which imports onnxruntime first


@pytest.fixture
def kb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, ClusteredEmbedder]]:
    """20 documents (~120 chunks): three pieces of 50 rows."""
    yield kb_in_pieces(tmp_path, monkeypatch, 20)


def searcher_open(path: Path) -> None:
    """Open the file as `pnk search` does (no check of every byte), and close it."""
    header = read_header(path)
    open_vector_file(path, header.content_key, dict(header.identity), header.dim, check_body=False).close()


def search_in_a_child(path: Path, root: Path) -> int | str:
    """Open the file as a searcher and ask it 5 questions in a forked child, checking that every
    cosine it answers is the exact one of its row: the child's exit status, or the signal that
    ended it (a crash there cannot take the test process with it)."""
    header = read_header(path)
    child = os.fork()
    if child == 0:  # pragma: no cover - the child leaves by os._exit only
        status = 1
        try:
            signal.alarm(30)
            opened = open_vector_file(path, header.content_key, dict(header.identity), header.dim, check_body=False)
            exact_rows = exact_rows_from(root)
            rng = np.random.default_rng(3)
            for _ in range(5):
                query = rng.standard_normal(DIM).astype(np.float32)
                query /= np.linalg.norm(query)
                found = approximate_search(opened, query, 10, exact_rows)
                ids, rows = exact_rows(np.array([chunk for chunk, _ in found], dtype=np.int64))
                exact = dict(zip(ids.tolist(), (rows @ query).tolist(), strict=True))
                assert found and all(abs(exact[chunk] - score) < 1e-5 for chunk, score in found)
            status = 0
        except VectorFileUnusable:
            status = 10
        except BaseException:  # any other failure: the child's exit status 1
            status = 1
        os._exit(status)
    _, status = os.waitpid(child, 0)
    return f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def test_a_searching_process_refuses_a_byte_damaged_anywhere_in_a_piece_but_its_codes(
        kb: tuple[Path, ClusteredEmbedder]) -> None:
    """Every byte outside the codes of a piece (its row counts, the library's header, the graph, at
    every 3rd offset) flipped: refused at open, naming the piece and the remedy, before the library
    reads it. Inside the codes (every 7th): the search runs, and its cosines stay exact."""
    root, _ = kb
    path = vector_file_path(KBPaths(root).state_dir)
    header = read_header(path)
    piece = header.pieces[1]
    assert piece.codes_offset == 8 and piece.codes_bytes >= piece.rows * DIM  # usearch's i8 codes, placed
    codes_end = piece.codes_offset + piece.codes_bytes
    outside = [*range(piece.codes_offset), *range(codes_end, piece.size, 3)]
    for offset in outside:
        flip_byte(path, piece.offset + offset)
        with pytest.raises(VectorFileUnusable) as refused:
            searcher_open(path)
        assert refused.value.reason == "damaged" and "piece 1 does not" in refused.value.detail, refused.value.detail
        assert "delete .pinakes/vectors.ann" in refused.value.remedy
        flip_byte(path, piece.offset + offset)  # flipped back: the next offset is the only damage
    searcher_open(path)
    if not hasattr(os, "fork"):
        pytest.skip("no os.fork on this platform: a damaged code's search is not run in a child")
    outcomes: dict[int, int | str] = {}
    for offset in range(piece.codes_offset, codes_end, 7):
        flip_byte(path, piece.offset + offset)
        outcomes[offset] = search_in_a_child(path, root)
        flip_byte(path, piece.offset + offset)
    assert set(outcomes.values()) == {0}, {offset: seen for offset, seen in outcomes.items() if seen != 0}


def test_a_search_through_pnk_search_falls_back_exactly_from_a_damaged_graph(
        kb: tuple[Path, ClusteredEmbedder], capsys: pytest.CaptureFixture[str]) -> None:
    root, _ = kb
    path = vector_file_path(KBPaths(root).state_dir)
    piece = read_header(path).pieces[-1]
    exact = exact_answers(root, capsys)
    flip_byte(path, piece.offset + piece.size - 5)  # the graph's last node
    for query in QUERIES[:2]:
        result = pnk_search(root, capsys, query)
        (note,) = [note for note in result["notes"] if EXACT_NOTE in note]
        assert "the vector file is damaged" in note and "does not match its checksum" in note
        assert same_passages(result, exact[query])


def test_codes_span_places_a_saved_index_s_codes_and_only_where_the_library_s_header_follows(tmp_path: Path) -> None:
    index = engine.new_index(DIM, engine.DEFAULT_PARAMS)
    vectors = np.random.default_rng(1).standard_normal((30, DIM)).astype(np.float32)
    index.add(np.arange(30, dtype=np.int64) * 2, vectors, threads=1)
    index.remove(np.arange(0, 20, 4, dtype=np.int64))  # removed slots stay in the saved codes
    saved = tmp_path / "piece"
    index.save(str(saved))
    data = saved.read_bytes()

    def span(blob: bytes) -> tuple[int, int]:
        return engine.codes_span(lambda at, length: blob[at:at + length], len(blob))

    offset, size = span(data)
    assert (offset, size) == (8, 30 * DIM) and data[offset + size:offset + size + 7] == b"usearch"
    width_changed = data[:4] + (DIM + 1).to_bytes(4, "little") + data[8:]
    assert span(width_changed) == (0, 0)  # the header is not where the counts say: every byte checked
    assert span(data[:offset + size + 3]) == (0, 0) and span(data[:5]) == (0, 0)


def test_a_piece_whose_codes_were_not_placed_is_checked_whole(kb: tuple[Path, ClusteredEmbedder],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    root, embedder = kb
    path = vector_file_path(KBPaths(root).state_dir)
    path.unlink()
    monkeypatch.setattr(engine, "codes_span", fileformat.no_codes)  # a library laid out otherwise
    sync(root, embedder)
    piece = read_header(path).pieces[0]
    assert (piece.codes_offset, piece.codes_bytes) == (0, 0)
    flip_byte(path, piece.offset + 8 + DIM)  # a code of the second row
    with pytest.raises(VectorFileUnusable, match="piece 0 does not match its checksum"):
        searcher_open(path)


def test_a_footer_whose_graph_checksum_is_wrong_is_refused_by_every_reader(kb: tuple[Path, ClusteredEmbedder]) -> None:
    """A writer's mistake (the body's checksum holds, a piece's graph checksum does not): the full
    check of the sync and doctor refuses it as the searcher's does."""
    root, _ = kb
    path = vector_file_path(KBPaths(root).state_dir)
    header = read_header(path)
    first, *rest = header.pieces
    wrong = replace(header, pieces=(replace(first, graph_xxh3_64=first.graph_xxh3_64 ^ 1), *rest))
    footer = fileformat._footer(wrong)  # pyright: ignore[reportPrivateUsage]  # checksummed as a writer would
    path.write_bytes(path.read_bytes()[:header.footer_offset] + footer)
    for check_body in (True, False):
        with pytest.raises(VectorFileUnusable, match="piece 0 does not match its checksum"):
            open_vector_file(path, header.content_key, dict(header.identity), header.dim, check_body=check_body)


def rewrite_footer(path: Path, header: Header) -> None:
    footer = fileformat._footer(header)  # pyright: ignore[reportPrivateUsage]  # checksummed as a writer would
    path.write_bytes(path.read_bytes()[:header.footer_offset] + footer)


def test_a_footer_whose_codes_span_covers_the_graph_is_refused(kb: tuple[Path, ClusteredEmbedder]) -> None:
    """The span of the codes is what a searcher leaves unchecked: a footer (checksummed as a writer
    would) that widens it over the graph, with the graph checksum of the narrower rest, is refused
    by every reader, since the span is found again in the piece's own checked bytes."""
    root, _ = kb
    path = vector_file_path(KBPaths(root).state_dir)
    header = read_header(path)
    first, *rest = header.pieces
    wide = replace(first, codes_bytes=first.size - first.codes_offset)
    with open(path, "rb") as handle:
        head = handle.read(first.offset + first.codes_offset)[first.offset:]
    rewrite_footer(path, replace(header, pieces=(replace(wide, graph_xxh3_64=xxhash.xxh3_64_intdigest(head)), *rest)))
    for check_body in (True, False):
        with pytest.raises(VectorFileUnusable, match="piece 0 does not hold its codes where its footer says"):
            open_vector_file(path, header.content_key, dict(header.identity), header.dim, check_body=check_body)


def test_a_piece_copied_wrong_by_an_update_is_not_laid_and_the_file_is_built_whole(
        kb: tuple[Path, ClusteredEmbedder], monkeypatch: pytest.MonkeyPatch) -> None:
    """An update copies unchanged pieces byte for byte: a copy that came out different (a faulty
    copy_file_range, a disk returning other bytes) would have its new bytes checksummed and blessed.
    The copy must reproduce the old footer's graph checksum; when it does not, the file is built whole."""
    from tests.kb_helpers import write_documents
    from tests.test_vectors_file import corpus

    root, embedder = kb
    path = vector_file_path(KBPaths(root).state_dir)
    old = read_header(path)
    real_copy = fileformat.copy_range

    def copying_one_byte_wrong(source_fd: int, offset: int, size: int, fd: int) -> None:
        real_copy(source_fd, offset, size - 1, fd)
        last = os.pread(source_fd, 1, offset + size - 1)
        os.write(fd, bytes([last[0] ^ 0xFF]))

    monkeypatch.setattr(fileformat, "copy_range", copying_one_byte_wrong)
    write_documents(root, corpus(1, start=900))  # new rows past the last piece: the others are copied
    report = sync(root, embedder)
    assert any("vector file built whole" in note and "copied from the old file does not match" in note
               for note in report.notes), report.notes
    new = read_header(path)
    assert new.rows > old.rows
    searcher_open(path)
    open_vector_file(path, new.content_key, dict(new.identity), new.dim, check_body=True).close()


def test_a_footer_format_of_true_is_damaged_not_stale(kb: tuple[Path, ClusteredEmbedder]) -> None:
    root, _ = kb
    path = vector_file_path(KBPaths(root).state_dir)
    rewrite_footer(path, replace(read_header(path), format_version=True))
    with pytest.raises(VectorFileUnusable) as refused:
        read_header(path)
    assert refused.value.reason == "damaged"
