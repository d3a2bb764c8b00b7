"""The vector file in pieces (issue #45's memory bar): a file of several usearch indexes, each of at
most `PIECE_ROWS` rows, built and updated one piece at a time, searched piece by piece.

`PIECE_ROWS` is made small (50) so a KB of a few hundred chunks has several pieces; the threshold is
lowered as in the other vector-file tests. KBs are built by the real sync, whose `vectors` step
builds and updates the file.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xxhash

import pinakes.embed
from pinakes.index import schema
from pinakes.kb import KBPaths
from pinakes.search.vectors import load_matrix, vector_search
from pinakes.vectors import approximate_search, engine, vector_file_path
from pinakes.vectors import build as vector_build
from pinakes.vectors.fileformat import FOOTER_BYTES, MAGIC, Header, VectorFileUnusable, read_header
from tests.kb_helpers import delete_documents, sync, write_documents
from tests.test_vector_tier_search import (
    EXACT_NOTE,
    QUERIES,
    build_auto_kb,
    exact_answers,
    pnk_search,
    same_passages,
)
from tests.test_vectors_file import (
    CLUSTERS,
    DIM,
    ClusteredEmbedder,
    chunk_ids_of,
    corpus,
    exact_rows_from,
    flip_byte,
    open_file,
)

if importlib.util.find_spec("usearch") is None:  # not imported here: only through vectors/engine.py,
    pytest.skip("usearch is not installed", allow_module_level=True)  # which imports onnxruntime first

PIECE_ROWS = 50


def kb_in_pieces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, documents: int) -> tuple[Path, ClusteredEmbedder]:
    """A KB of `documents` documents (~6 chunks each) whose vector file the sync built in pieces of
    PIECE_ROWS rows, on one thread: a graph built on two differs from build to build, and the tests
    compare an update's answers with a fresh build's (an overlap of 0.94 failed CI once in ~10 runs
    on two threads). The model stays this embedder for every later sync and search of the test."""
    monkeypatch.setattr(vector_build, "ANN_MIN_ROWS", 0)
    monkeypatch.setattr(vector_build, "PIECE_ROWS", PIECE_ROWS)
    monkeypatch.setattr(vector_build, "refresh_vector_file", functools.partial(vector_build.refresh_vector_file,
                                                                               threads=1))
    embedder = ClusteredEmbedder()

    def load_for_kb(*_args: object, **_kwargs: object) -> ClusteredEmbedder:
        return embedder

    monkeypatch.setattr(pinakes.embed, "load_for_kb", load_for_kb)
    root = tmp_path / "kb"
    build_auto_kb(root, documents, embedder)
    return root, embedder


@pytest.fixture
def kb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, ClusteredEmbedder]]:
    """40 documents (~240 chunks): several pieces of 50 rows."""
    yield kb_in_pieces(tmp_path, monkeypatch, 40)


def pieces_of(root: Path) -> Header:
    return read_header(vector_file_path(KBPaths(root).state_dir))


def queries(count: int, seed: int = 7) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = ClusteredEmbedder().centres
    made: list[np.ndarray] = []
    for _ in range(count):
        query = centres[rng.integers(CLUSTERS)] + 0.6 * rng.standard_normal(DIM).astype(np.float32)
        made.append((query / np.linalg.norm(query)).astype(np.float32))
    return made


def answers(root: Path, embedder: ClusteredEmbedder, asked: list[np.ndarray]) -> list[list[tuple[int, float]]]:
    opened = open_file(root, embedder)
    exact_rows = exact_rows_from(root)
    try:
        return [approximate_search(opened, query, 10, exact_rows) for query in asked]
    finally:
        opened.close()


def recall_against_exact(root: Path, found: list[list[tuple[int, float]]], asked: list[np.ndarray]) -> float:
    conn = schema.open_reader(KBPaths(root).index_db)
    matrix = load_matrix(conn, DIM)
    conn.close()
    recalls: list[float] = []
    for query, approximate in zip(asked, found, strict=True):
        exact = vector_search(matrix, query, 10)
        recalls.append(len({c for c, _ in exact} & {c for c, _ in approximate}) / len(exact))
    return float(np.mean(recalls))


def test_a_file_in_pieces_answers_as_the_exact_search(kb: tuple[Path, ClusteredEmbedder],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    root, embedder = kb
    header = pieces_of(root)
    assert len(header.pieces) == -(-header.rows // PIECE_ROWS) >= 4, header.pieces
    assert all(piece.rows == PIECE_ROWS for piece in header.pieces[:-1])
    assert [piece.from_id for piece in header.pieces[1:]] == [piece.to_id for piece in header.pieces[:-1]]
    asked = queries(40)
    assert recall_against_exact(root, answers(root, embedder, asked), asked) >= 0.98
    exact = exact_answers(root, capsys)
    for query in QUERIES:  # through `pnk search`: the file answers, and as the exact tier does
        result = pnk_search(root, capsys, query)
        assert not any(EXACT_NOTE in note for note in result["notes"]), result["notes"]
        assert same_passages(result, exact[query]), query


def test_a_kb_below_a_piece_has_one_piece(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vector_build, "ANN_MIN_ROWS", 0)
    root = tmp_path / "kb"
    build_auto_kb(root, 10, ClusteredEmbedder())
    header = pieces_of(root)
    assert len(header.pieces) == 1 and header.pieces[0].rows == header.rows > 0


def updated_note(notes: list[str]) -> tuple[int, int]:
    """(pieces, pieces written) from the sync's note on an update in place."""
    (match,) = [found for note in notes if (found := re.search(r"vector file updated: \d+ rows in (\d+) pieces "
                                                                 r"\((\d+) written", note))]
    return int(match[1]), int(match[2])


def test_an_update_across_pieces_answers_as_a_fresh_build(kb: tuple[Path, ClusteredEmbedder],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A document removed from a middle piece, one changed in another, and enough new ones to fill
    the last piece and start a new one: the pieces left alone are copied, and the file answers as
    one built whole from the same rows."""
    root, embedder = kb
    monkeypatch.setattr(vector_build, "INCREMENTAL_MAX_SHARE", 0.5)  # a small KB: every change is a large share
    before = pieces_of(root)
    middle = before.pieces[len(before.pieces) // 2]
    removed = next(f"docs/d{n:04d}.md" for n in range(40)
                   if middle.from_id <= min(chunk_ids_of(root, f"docs/d{n:04d}.md")) < middle.to_id)
    changed = "docs/d0001.md"
    (root / changed).write_text("Paragraph 0 rewritten: word9999 topic4.\n\nParagraph 1 rewritten: topic8.")
    delete_documents(root, [removed], embedder)
    write_documents(root, corpus(12, start=500))
    report = sync(root, embedder)
    pieces, written = updated_note(report.notes)
    after = pieces_of(root)
    assert pieces == len(after.pieces) > len(before.pieces)  # the new rows overflowed into new pieces
    assert written < pieces  # untouched pieces were copied, not rebuilt
    assert after.pieces[-1].from_id > before.pieces[-1].from_id
    assert all(piece.rows <= PIECE_ROWS for piece in after.pieces[len(before.pieces) - 1:])
    assert not set(chunk_ids_of(root, removed))  # gone from the index ...
    asked = queries(40, seed=11)
    updated = answers(root, embedder, asked)

    vector_file_path(KBPaths(root).state_dir).unlink()
    report = sync(root, embedder)
    assert any("vector file built whole" in note for note in report.notes), report.notes
    fresh = answers(root, embedder, asked)
    # HNSW is approximate and its build threaded (two builds of the same rows differ): a far row of a
    # tight cluster may be missed by one and not the other, so the two answer lists are compared by overlap.
    overlap = np.mean([len({chunk for chunk, _ in left} & {chunk for chunk, _ in right}) / max(1, len(right))
                       for left, right in zip(updated, fresh, strict=True)])
    assert overlap >= 0.97, overlap
    assert recall_against_exact(root, updated, asked) >= 0.98
    assert recall_against_exact(root, fresh, asked) >= 0.98


def test_a_damaged_piece_is_refused_and_search_falls_back(kb: tuple[Path, ClusteredEmbedder],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    root, embedder = kb
    path = vector_file_path(KBPaths(root).state_dir)
    piece = pieces_of(root).pieces[2]
    flip_byte(path, piece.offset + piece.size // 2)  # inside its graph or codes: the body's checksum
    with pytest.raises(VectorFileUnusable) as damaged:
        open_file(root, embedder)
    assert damaged.value.reason == "damaged"
    flip_byte(path, piece.offset)  # its own header: a searching process (no body check) refuses it too
    exact = exact_answers(root, capsys)
    for query in QUERIES[:2]:
        result = pnk_search(root, capsys, query)
        (note,) = [note for note in result["notes"] if EXACT_NOTE in note]
        assert "the vector file is damaged" in note and "piece" in note and "pnk sync" in note
        assert same_passages(result, exact[query])
    # A sync that changes nothing reads the footer only (doctor's check reads every byte and says to
    # delete the file); the next one that changes a document checks the old file whole before updating it.
    write_documents(root, corpus(1, start=600))
    report = sync(root, embedder)
    assert any("vector file built whole" in note and "checksum" in note for note in report.notes), report.notes
    open_file(root, embedder).close()


def as_format_1(path: Path) -> None:
    """Rewrite the file's footer as the format-1 build wrote it: one index at offset 0, a 4 KiB footer."""
    header = read_header(path)
    fields = {key: value for key, value in asdict(header).items() if key != "pieces"}
    fields.update(format_version=1, payload_bytes=header.payload_bytes)
    write_footer_json(path, header.footer_offset, fields, 4096)


def as_format_2(path: Path) -> None:
    """Rewrite the footer as format 2 wrote it: pieces of five numbers, no graph checksums."""
    header = read_header(path)
    fields = {**asdict(header), "format_version": 2,
              "pieces": [[piece.offset, piece.size, piece.rows, piece.from_id, piece.to_id] for piece in header.pieces]}
    write_footer_json(path, header.footer_offset, fields, FOOTER_BYTES)


def write_footer_json(path: Path, footer_offset: int, fields: dict[str, Any], block_bytes: int) -> None:
    """The body as it is, then a footer block of `fields` checksummed as a writer of that format did."""
    text = json.dumps(fields, sort_keys=True).encode()
    block = MAGIC + xxhash.xxh3_64_digest(text) + len(text).to_bytes(4, "little") + text
    path.write_bytes(path.read_bytes()[:footer_offset] + block + b"\0" * (block_bytes - len(block)))


@pytest.mark.parametrize(("older", "rewrite"), [(1, as_format_1), (2, as_format_2)])
def test_a_file_of_an_older_format_is_stale_and_the_next_sync_rebuilds_it(
        kb: tuple[Path, ClusteredEmbedder], capsys: pytest.CaptureFixture[str], older: int,
        rewrite: Callable[[Path], None]) -> None:
    root, embedder = kb
    path = vector_file_path(KBPaths(root).state_dir)
    rewrite(path)
    with pytest.raises(VectorFileUnusable) as stale:
        read_header(path)
    assert stale.value.reason == "stale" and f"format {older}" in stale.value.detail
    result = pnk_search(root, capsys, QUERIES[0])
    (note,) = [note for note in result["notes"] if EXACT_NOTE in note]
    assert "the vector file is stale" in note
    report = sync(root, embedder)  # no document changed: the step still rebuilds it
    assert any("vector file built whole" in note and f"format {older}" in note for note in report.notes), report.notes
    rebuilt = pieces_of(root)
    assert len(rebuilt.pieces) > 1 and all(piece.codes_offset == 8 for piece in rebuilt.pieces)
    assert not any(EXACT_NOTE in note for note in pnk_search(root, capsys, QUERIES[0])["notes"])


class LiveIndexes:
    """Counts the indexes the engine made that still hold rows (not reset, not freed), and the most
    at once: the build's memory is one piece only if this never passes 1."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.live = 0
        self.most = 0
        made = engine.new_index

        def new_index(dim: int, params: Mapping[str, object]) -> engine.AnnIndex:
            index = made(dim, params)
            self.live += 1
            self.most = max(self.most, self.live)
            state = {"held": True}

            def release() -> None:
                if state["held"]:
                    state["held"] = False
                    self.live -= 1

            reset = index.reset
            index.reset = lambda: (release(), reset())[1]
            weakref.finalize(index, release)
            return index

        monkeypatch.setattr(engine, "new_index", new_index)


def test_a_build_and_an_update_hold_one_piece_at_a_time(kb: tuple[Path, ClusteredEmbedder],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    root, embedder = kb
    monkeypatch.setattr(vector_build, "INCREMENTAL_MAX_SHARE", 0.5)
    counted = LiveIndexes(monkeypatch)
    vector_file_path(KBPaths(root).state_dir).unlink()
    report = sync(root, embedder)
    assert any("vector file built whole" in note for note in report.notes), report.notes
    assert counted.most == 1 and counted.live == 0
    delete_documents(root, ["docs/d0002.md", "docs/d0020.md", "docs/d0035.md"], embedder)  # three pieces
    write_documents(root, corpus(12, start=700))
    report = sync(root, embedder)
    _, written = updated_note(report.notes)
    assert written >= 3 and counted.most == 1 and counted.live == 0


def test_pieces_left_small_by_removals_are_built_whole_again(kb: tuple[Path, ClusteredEmbedder],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """An update never merges pieces; once removals leave more than twice the pieces the rows need,
    the file is built whole (searches ask every piece, so their count is latency)."""
    root, embedder = kb
    monkeypatch.setattr(vector_build, "INCREMENTAL_MAX_SHARE", 1.0)  # every change small enough to update
    pieces = len(pieces_of(root).pieces)
    kept = {f"docs/d{n:04d}.md" for n in (0, 12, 25, 39)}  # a document in each of several pieces
    report = delete_documents(root, [f"docs/d{n:04d}.md" for n in range(40) if f"docs/d{n:04d}.md" not in kept],
                              embedder)
    assert any("built whole" in note and "removals left them small" in note for note in report.notes), report.notes
    after = pieces_of(root)
    assert len(after.pieces) == 1 < pieces and after.rows == sum(len(chunk_ids_of(root, path)) for path in kept)


def resident_kb_of(path: Path) -> int:
    """The resident kB of this process's mappings of `path` (/proc/self/smaps)."""
    resident, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            inside = line.rstrip().endswith(" " + str(path))
        elif inside and line.startswith("Rss:"):
            resident += int(line.split()[1])
    return resident


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="reads the mapping's resident pages from Linux's "
                                                                  "/proc/self/smaps, which this system lacks")
def test_a_searcher_that_releases_pages_keeps_at_most_a_piece_of_the_file_resident(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Self-calibration's searcher (`release_vector_pages`) hands each piece's pages back after searching
    it, so the file's pages do not add up in a sync's memory; a plain searcher keeps them, and both
    answer the same. Wide vectors make a piece (~0.4 MB) much larger than what the kernel maps around
    one fault (64 KiB), which can map a released piece's edge back while the next one is searched."""
    from dataclasses import replace

    from pinakes.search.core import Searcher
    from pinakes.vectors.approximate import OpenVectorFile

    monkeypatch.setattr(vector_build, "ANN_MIN_ROWS", 0)
    monkeypatch.setattr(vector_build, "PIECE_ROWS", PIECE_ROWS)
    at_entry: list[int] = []  # resident when a search starts: the first one's is what opening left
    search = OpenVectorFile.search

    def entered(opened: OpenVectorFile, *args: Any) -> object:
        at_entry.append(resident_kb_of(opened.path.resolve()))
        return search(opened, *args)

    monkeypatch.setattr(OpenVectorFile, "search", entered)
    embedder = ClusteredEmbedder(dim=8192)

    def load_for_kb(*_args: object, **_kwargs: object) -> ClusteredEmbedder:
        return embedder

    monkeypatch.setattr(pinakes.embed, "load_for_kb", load_for_kb)
    root = tmp_path / "kb"
    build_auto_kb(root, 40, embedder)
    assert len(pieces_of(root).pieces) >= 4
    path = vector_file_path(KBPaths(root).state_dir).resolve()
    found: dict[bool, list[list[str]]] = {}
    resident: dict[bool, int] = {}
    for release in (False, True):
        at_entry.clear()
        with Searcher.for_kb(root) as searcher:
            searcher.settings = replace(searcher.settings, release_vector_pages=release)
            found[release] = [[passage.citation for passage in searcher.search(query, mode="vector").passages]
                              for query in QUERIES]
            with searcher.snapshot() as generation:
                assert generation.vector_file is not None and generation.vector_file.release_pages is release
            resident[release] = resident_kb_of(path)
    file_kb, header = path.stat().st_size // 1024, pieces_of(root)
    around_faults = 64 * (len(header.pieces) + 1)
    assert resident[False] > 0.8 * file_kb, (resident, file_kb)
    one_piece = max(piece.size for piece in header.pieces) // 1024 + around_faults
    assert resident[True] <= one_piece, (resident, file_kb)
    # Opening reads every piece's graph; the releasing searcher hands it all back before its first search
    # (at most two windows the kernel maps around a fault stay), then holds one piece at most.
    assert at_entry and at_entry[0] <= 128 and max(at_entry) <= one_piece, (at_entry, file_kb)
    assert found[True] == found[False] and all(found[True])


def test_self_calibration_hands_back_each_piece_it_searched_and_asks_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pinakes.calibration.self_calibration import self_calibrate
    from pinakes.vectors.approximate import OpenVectorFile
    from tests.kb_helpers import init_test_kb
    from tests.test_self_calibration import corpus as sentence_corpus
    from tests.test_vector_tier_search import auto_tier

    monkeypatch.setattr(vector_build, "ANN_MIN_ROWS", 0)
    monkeypatch.setattr(vector_build, "PIECE_ROWS", 20)
    embedder = ClusteredEmbedder()

    def load_for_kb(*_args: object, **_kwargs: object) -> ClusteredEmbedder:
        return embedder

    monkeypatch.setattr(pinakes.embed, "load_for_kb", load_for_kb)
    root = tmp_path / "kb"
    init_test_kb(root, embedder.identity, max_tokens=10, overlap=0)
    auto_tier(root)
    write_documents(root, sentence_corpus())
    sync(root, embedder)
    released: list[int] = []
    release = OpenVectorFile.release_piece

    def counted(opened: OpenVectorFile, number: int) -> None:
        released.append(number)
        release(opened, number)

    monkeypatch.setattr(OpenVectorFile, "release_piece", counted)
    handed_back = self_calibrate(root)
    pieces = len(pieces_of(root).pieces)
    assert handed_back.questions >= 20 and pieces > 1
    assert len(released) >= 2 * handed_back.questions * pieces  # every piece, after both searches of a question

    def release_nothing(_opened: OpenVectorFile, _number: int) -> None:
        return None

    monkeypatch.setattr(OpenVectorFile, "release_piece", release_nothing)
    kept = self_calibrate(root)
    assert [asdict(row) for row in handed_back.rows] == [asdict(row) for row in kept.rows]


def test_a_footer_whose_piece_ranges_disagree_with_the_ids_is_damaged_and_built_whole(
        kb: tuple[Path, ClusteredEmbedder]) -> None:
    """A footer whose checksums hold but whose pieces' id ranges do not match the rows they hold (a
    writer's bug, not damage at rest) would leave a row in two pieces after an update: the sync and
    doctor's full check refuse it, and the next sync builds the file whole."""
    from dataclasses import replace

    from pinakes.vectors import fileformat
    from pinakes.vectors.approximate import open_vector_file

    root, embedder = kb
    path = vector_file_path(KBPaths(root).state_dir)
    header = read_header(path)
    first, second, *rest = header.pieces
    boundary = second.from_id - 1  # piece 0's last id, now inside piece 1's range
    shifted = replace(header, pieces=(replace(first, to_id=boundary), replace(second, from_id=boundary), *rest))
    footer = fileformat._footer(shifted)  # pyright: ignore[reportPrivateUsage]  # checksummed as a writer would
    path.write_bytes(path.read_bytes()[:header.footer_offset] + footer)
    with pytest.raises(VectorFileUnusable, match="piece 0 says"):
        open_vector_file(path, header.content_key, dict(header.identity), header.dim, check_body=True)
    report = delete_documents(root, ["docs/d0000.md"], embedder)  # a change: the file is updated, or rebuilt
    assert any(re.search(r"vector file built whole: .*piece 0 says", note) for note in report.notes), report.notes
    rebuilt = read_header(path)
    conn = schema.open_reader(KBPaths(root).index_db)
    try:
        active = sorted(row[0] for row in conn.execute(
            "SELECT e.chunk_id FROM embeddings e JOIN chunks c ON c.id = e.chunk_id JOIN documents d ON d.id = c.doc_id "
            "WHERE d.state = 'active'"))
    finally:
        conn.close()
    held = [sum(1 for chunk in active if piece.from_id <= chunk < piece.to_id) for piece in rebuilt.pieces]
    assert held == [piece.rows for piece in rebuilt.pieces] and sum(held) == len(active) == rebuilt.rows


def test_without_madvise_a_releasing_searcher_answers_the_same(kb: tuple[Path, ClusteredEmbedder],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows' mmap has no madvise: the release is then skipped (its pages stay, as a plain searcher's do),
    never an error at the end of a sync's self-calibration."""
    import mmap
    from dataclasses import replace

    from pinakes.search.core import Searcher

    root, _embedder = kb
    answers: list[list[list[str]]] = []
    for missing in (False, True):
        if missing:
            monkeypatch.delattr(mmap, "MADV_DONTNEED")
        with Searcher.for_kb(root) as searcher:
            searcher.settings = replace(searcher.settings, release_vector_pages=True)
            answers.append([[passage.citation for passage in searcher.search(query, mode="vector").passages]
                            for query in QUERIES])
    assert answers[0] == answers[1] and all(answers[1])


@pytest.mark.parametrize("change", ["grow the last piece", "rewrite a middle piece"])
def test_a_sync_renaming_a_new_file_while_a_searcher_opens_it_leaves_the_searcher_one_whole_file(
        kb: tuple[Path, ClusteredEmbedder], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, change: str) -> None:
    """The footer and the mapping come from one open: a sync's rename landing right after the
    searcher read the footer (simulated there) leaves it answering from the old file whole, never
    "damaged" and never the old footer over the new bytes (review9 F4)."""
    import shutil

    from pinakes.vectors import approximate
    from pinakes.vectors.approximate import open_vector_file

    root, embedder = kb
    monkeypatch.setattr(vector_build, "INCREMENTAL_MAX_SHARE", 1.0)
    path = vector_file_path(KBPaths(root).state_dir)
    old_copy, new_copy = tmp_path / "old.ann", tmp_path / "new.ann"
    shutil.copyfile(path, old_copy)
    old = read_header(path)
    if change == "grow the last piece":
        write_documents(root, corpus(3, start=800))
    else:
        middle = old.pieces[len(old.pieces) // 2]
        inside = next(f"docs/d{n:04d}.md" for n in range(40)
                      if middle.from_id <= min(chunk_ids_of(root, f"docs/d{n:04d}.md")) < middle.to_id)
        (root / inside).write_text((root / inside).read_text().replace("topic", "theme"))
    _, written = updated_note(sync(root, embedder).notes)
    assert written >= 1 and read_header(path).content_key != old.content_key
    shutil.copyfile(path, new_copy)
    asked = queries(10, seed=5)
    expected = open_vector_file(old_copy, old.content_key, dict(old.identity), old.dim)
    try:
        from_old = [expected.search(query, 10).tolist() for query in asked]
    finally:
        expected.close()

    real_read_header = approximate.read_header

    def footer_then_rename(*args: Any, **kwargs: Any) -> Header:
        footer = real_read_header(*args, **kwargs)
        shutil.copyfile(new_copy, path.with_name("renamed-in"))
        path.with_name("renamed-in").replace(path)  # the sync's rename, between the footer and the mapping
        return footer

    monkeypatch.setattr(approximate, "read_header", footer_then_rename)
    for check_body in (False, True):
        shutil.copyfile(old_copy, path)
        opened = open_vector_file(path, old.content_key, dict(old.identity), old.dim, check_body=check_body)
        try:
            assert opened.header == old
            assert [opened.search(query, 10).tolist() for query in asked] == from_old
        finally:
            opened.close()
        assert read_header(path).content_key != old.content_key  # the rename did land


def test_pieces_larger_than_a_piece_is_now_are_built_whole_on_the_next_change(
        kb: tuple[Path, ClusteredEmbedder], monkeypatch: pytest.MonkeyPatch) -> None:
    """A file cut by a release with larger pieces (the size is not recorded in it): the next change
    builds it whole in pieces of the size now, rather than loading one of the larger pieces whole to
    update it, so an update's memory stays one piece of at most PIECE_ROWS (review9 F6)."""
    root, embedder = kb
    monkeypatch.setattr(vector_build, "INCREMENTAL_MAX_SHARE", 1.0)  # every change small enough to update
    before = pieces_of(root)
    assert max(piece.rows for piece in before.pieces) == PIECE_ROWS
    monkeypatch.setattr(vector_build, "PIECE_ROWS", PIECE_ROWS // 2)  # a later release lowers it
    report = delete_documents(root, ["docs/d0003.md"], embedder)
    assert any(re.search(rf"vector file built whole: .*a piece holds {PIECE_ROWS} rows, more than the "
                         rf"{PIECE_ROWS // 2}", note) for note in report.notes), report.notes
    after = pieces_of(root)
    assert max(piece.rows for piece in after.pieces) == PIECE_ROWS // 2 and len(after.pieces) > len(before.pieces)
    write_documents(root, corpus(1, start=900))  # and the file in pieces of the size now is updated again
    assert updated_note(sync(root, embedder).notes)[1] >= 1


def test_without_pread_the_file_is_read_and_searched_the_same(kb: tuple[Path, ClusteredEmbedder],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows' os has no pread: the footer, the body's check and the ids are then read by seek and read
    through the same descriptor, with the same answers."""
    import os

    root, embedder = kb
    asked = queries(5, seed=3)
    found: list[list[list[int]]] = []
    for missing in (False, True):
        if missing:
            monkeypatch.delattr(os, "pread")
        opened = open_file(root, embedder)  # check_body: every byte and the ids read too
        try:
            found.append([opened.search(query, 10).tolist() for query in asked])
        finally:
            opened.close()
    assert found[0] == found[1] and all(found[1])


def test_without_pread_or_copy_file_range_the_file_is_updated_and_built_the_same(
        kb: tuple[Path, ClusteredEmbedder], monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows has neither: the pieces an update keeps are then copied, and a whole build assembled,
    through the buffered fallback's seek-and-read (review11 F2: it called os.pread and every write of
    the file stopped the sync), with the answers of the file Linux's calls write."""
    import os

    root, embedder = kb
    asked = queries(8, seed=5)
    monkeypatch.delattr(os, "pread")
    monkeypatch.delattr(os, "copy_file_range", raising=False)
    delete_documents(root, ["docs/d0003.md"], embedder)
    write_documents(root, corpus(6, start=950))
    report = sync(root, embedder)  # an update: the unchanged pieces copied
    assert report.ok and updated_note(report.notes)[1] < updated_note(report.notes)[0], report.notes
    # Every byte against the footer's checksum, read without pread: the copies are the pieces' bytes.
    assert all(answers(root, embedder, asked))
    vector_file_path(KBPaths(root).state_dir).unlink()
    report = sync(root, embedder)  # a whole build, each piece copied into the file
    assert report.ok and any("vector file built whole" in note for note in report.notes), report.notes
    assert all(answers(root, embedder, asked))


def test_a_releasing_opener_hands_each_piece_back_as_soon_as_it_is_viewed(
        kb: tuple[Path, ClusteredEmbedder], monkeypatch: pytest.MonkeyPatch) -> None:
    """Viewing a piece walks every node of its graph: a releasing opener (the self-calibration's)
    hands each piece back before viewing the next, so opening never holds the pieces' graphs all at
    once (review10 F2: at 384 dimensions they are ~28% of the file, more than one piece's search
    holds past three or four pieces); a plain opener releases nothing."""
    from pinakes.vectors import approximate

    root, _ = kb
    path = vector_file_path(KBPaths(root).state_dir)
    header = read_header(path)
    assert len(header.pieces) >= 3
    events: list[tuple[str, int]] = []
    new_index = approximate.engine.new_index

    def spied_index(*args: Any, **kwargs: Any) -> engine.AnnIndex:
        index = new_index(*args, **kwargs)
        number, view = sum(kind == "view" for kind, _ in events), index.view

        def viewed(path_or_buffer: object) -> None:  # AnnIndex.view's own parameter name
            view(path_or_buffer)
            events.append(("view", number))

        index.view = viewed
        return index

    release = approximate.OpenVectorFile.release_piece

    def released(opened: approximate.OpenVectorFile, number: int) -> None:
        events.append(("release", number))
        release(opened, number)

    monkeypatch.setattr(approximate.engine, "new_index", spied_index)
    monkeypatch.setattr(approximate.OpenVectorFile, "release_piece", released)
    for releasing in (False, True):
        events.clear()
        opened = approximate.open_vector_file(path, header.content_key, dict(header.identity), header.dim,
                                              release_pages=releasing)
        opened.close()
        views = [("view", number) for number in range(len(header.pieces))]
        # Then every piece once more: the views after a piece's release fault its edge back in.
        expected = [event for view in views for event in (view, ("release", view[1]))] + \
            [("release", number) for number in range(len(header.pieces))] if releasing else views
        assert events == expected


def test_a_filtered_search_asks_each_piece_only_for_the_rows_left_out_of_it(
        kb: tuple[Path, ClusteredEmbedder], monkeypatch: pytest.MonkeyPatch) -> None:
    """A filter's exclusions lie in the pieces holding those documents: every other piece is asked
    for as many candidates as an unfiltered search asks, not that many plus every row left out
    anywhere (review9's F5); the answer still never holds a row left out and misses nothing the
    file's own order over the allowed rows would give."""
    root, embedder = kb
    opened = open_file(root, embedder)
    header = opened.header
    conn = schema.open_reader(KBPaths(root).index_db)
    try:
        ids = [row[0] for row in conn.execute("SELECT chunk_id FROM embeddings ORDER BY chunk_id")]
    finally:
        conn.close()
    first = header.pieces[0]
    left_out = np.array([chunk for chunk in ids if first.from_id <= chunk < first.to_id][:20], dtype=np.int64)
    asked: list[tuple[int, int]] = []
    for number, index in enumerate(opened.pieces):
        def recorded(query: np.ndarray, count: int = 10, *, threads: int = 0, _search: Any = index.search,
                     _number: int = number) -> Any:
            asked.append((_number, count))
            return _search(query, count, threads=threads)
        monkeypatch.setattr(index, "search", recorded)
    try:
        for query in queries(10):
            asked.clear()
            found = opened.search(query, 30, left_out)
            assert asked == [(0, 30 + len(left_out))] + [(number, 30) for number in range(1, len(opened.pieces))]
            assert len(found) == 30 and not set(found.tolist()) & set(left_out.tolist())
            asked.clear()
            everything = opened.search(query, 30 + len(left_out))
            expected = [chunk for chunk in everything.tolist() if chunk not in set(left_out.tolist())][:30]
            assert found.tolist() == expected
    finally:
        opened.close()
