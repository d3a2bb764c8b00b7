"""A cold search's overlapped start (search/preload.py, search/generation.py; docs/perf/search.md,
"cold `pnk search`"): the model loads on a thread while the keyword side runs, the vector file is
read ahead, and a generation opens without scanning every chunk. None of it changes an answer or a
failure: a model that cannot load fails the search as before, an endpoint that cannot answer still
leaves keyword results, and a vector file that is missing or damaged (read-ahead failing or not)
still gives the exact answer with its note.
"""

from __future__ import annotations

import importlib.util
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest

from pinakes.errors import EmbeddingEndpointError, ModelUnavailableError
from pinakes.index import schema
from pinakes.search import bm25, preload
from pinakes.search.core import Searcher, SearchSettings
from pinakes.search.generation import INACTIVE_CHUNKS_SQL, count_chunks, fts5_varint, open_generation
from tests.fakes import HashEmbedder
from tests.kb_helpers import build_search_kb

QUERIES = ("kafka consumer lag", "vacuum dead tuples", "tomatoes full sun", "retry backoff")


@pytest.fixture
def index(tmp_path: Path) -> Path:
    """The search corpus, synced (one document synced, then deleted)."""
    return build_search_kb(tmp_path / "kb", HashEmbedder())


def answers(searcher: Searcher, mode: str = "hybrid") -> list[list[tuple[str, object]]]:
    return [[(p.citation, p.scores) for p in searcher.search(query, mode=mode, rerank=False).passages]
            for query in QUERIES]


def test_the_model_loads_on_a_thread_while_the_keyword_side_runs(index: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The loader waits for the keyword side to begin: were they still one after the other, it
    would wait in vain and the test fail."""
    keyword_began = threading.Event()
    plan_keywords = cast(Callable[..., object], bm25.plan_keywords)

    def planning(*args: object, **kwargs: object) -> object:
        keyword_began.set()
        return plan_keywords(*args, **kwargs)

    monkeypatch.setattr(bm25, "plan_keywords", planning)
    loaded_on: list[threading.Thread] = []

    def load() -> HashEmbedder:
        loaded_on.append(threading.current_thread())
        assert keyword_began.wait(10), "the keyword side did not run while the model loaded"
        return HashEmbedder()

    with Searcher(index, SearchSettings(rerank=False), embedder=HashEmbedder()) as reference:
        expected = answers(reference)
    with Searcher(index, SearchSettings(rerank=False), embedder_loader=load) as searcher:
        assert answers(searcher) == expected
    assert len(loaded_on) == 1 and loaded_on[0] is not threading.main_thread()


def test_a_model_that_cannot_load_fails_the_search_and_the_next_one_tries_again(index: Path) -> None:
    calls: list[int] = []

    def load() -> HashEmbedder:
        calls.append(1)
        if len(calls) == 1:
            raise ModelUnavailableError("the weights are not here", remedy="pnk sync")
        return HashEmbedder()

    with Searcher(index, SearchSettings(rerank=False), embedder_loader=load) as searcher:
        with pytest.raises(ModelUnavailableError, match="the weights are not here"):
            searcher.search(QUERIES[0], rerank=False)
        assert searcher.search(QUERIES[0], rerank=False).passages  # the connection was left usable
    assert len(calls) == 2


def test_an_endpoint_that_cannot_answer_leaves_the_keyword_results(index: Path) -> None:
    def load() -> HashEmbedder:
        raise EmbeddingEndpointError("the embedding endpoint refused", remedy="pnk doctor")

    with Searcher(index, SearchSettings(rerank=False), embedder=HashEmbedder()) as reference:
        expected = answers(reference, mode="bm25")
    with Searcher(index, SearchSettings(rerank=False), embedder_loader=load) as searcher:
        results = [searcher.search(query, rerank=False) for query in QUERIES]
    assert [[(p.citation, p.scores) for p in result.passages] for result in results] == expected
    assert all(result.mode == "bm25" and any("the embedding endpoint refused" in note for note in result.notes)
               for result in results)


def test_a_generation_counts_its_chunks_and_finds_inactive_ones_without_scanning(index: Path) -> None:
    old_scan = ("SELECT EXISTS (SELECT 1 FROM chunks c JOIN documents d ON d.id = c.doc_id "
                "WHERE d.state != 'active')")
    conn = sqlite3.connect(index)
    try:
        plans = " ".join(str(row) for row in conn.execute(f"EXPLAIN QUERY PLAN {INACTIVE_CHUNKS_SQL}"))
        assert "SCAN c" not in plans and "documents_state" in plans
        assert conn.execute(INACTIVE_CHUNKS_SQL).fetchone()[0] == conn.execute(old_scan).fetchone()[0] == 0
        assert count_chunks(conn) == conn.execute("SELECT count(*) FROM chunks").fetchone()[0] > 0
        with conn:  # a document leaves the active state with its rows still there
            conn.execute("UPDATE documents SET state = 'deleted' WHERE path = 'docs/kafka.md'")
        assert conn.execute(INACTIVE_CHUNKS_SQL).fetchone()[0] == conn.execute(old_scan).fetchone()[0] == 1
        with conn:
            conn.execute("DELETE FROM chunks WHERE doc_id IN (SELECT id FROM documents WHERE state = 'deleted')")
        assert conn.execute(INACTIVE_CHUNKS_SQL).fetchone()[0] == conn.execute(old_scan).fetchone()[0] == 0
        assert count_chunks(conn) == conn.execute("SELECT count(*) FROM chunks").fetchone()[0] > 0
        with conn:
            conn.execute("DELETE FROM chunks")
        assert count_chunks(conn) == 0
    finally:
        conn.close()
    generation = open_generation(index, schema.index_signature(index))
    try:
        assert generation.chunk_count == 0 and not generation.has_inactive_chunks
    finally:
        generation.close()


def test_an_fts5_varint_is_read_as_sqlite_writes_it() -> None:
    assert fts5_varint(b"\x00") == 0 and fts5_varint(b"\x7f\x05") == 127
    assert fts5_varint(b"\x81\x00") == 128
    assert fts5_varint(b"\xc4\xa3\x7f\x9a") == 1_118_719  # the 1.1M-chunk KB's averages record
    assert fts5_varint(b"\xff" * 8 + b"\x01") == (2**56 - 1) << 8 | 1  # the ninth byte is whole
    assert fts5_varint(b"\x81") is None and fts5_varint(b"") is None  # cut short


def test_a_count_the_averages_record_cannot_give_is_counted_from_the_rows(index: Path) -> None:
    conn = sqlite3.connect(index)
    try:
        expected = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        conn.execute("CREATE TEMP TABLE chunks_fts_data (id INTEGER PRIMARY KEY, block BLOB)")  # shadows main's
        conn.execute("INSERT INTO temp.chunks_fts_data VALUES (1, x'81')")  # ends inside its varint
        assert count_chunks(conn) == expected
    finally:
        conn.close()


def test_read_ahead_asks_for_a_file_and_passes_over_a_missing_one(tmp_path: Path) -> None:
    present = tmp_path / "vectors.ann"
    present.write_bytes(os.urandom(3 * preload.READ_AHEAD_STEP // 2))
    assert preload.read_ahead(present) is hasattr(os, "posix_fadvise")
    assert preload.read_ahead(tmp_path / "missing.ann") is False
    preload.read_ahead_in_background(tmp_path / "missing.ann").join(5)


def test_read_ahead_that_fails_leaves_the_answer_to_the_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    present = tmp_path / "vectors.ann"
    present.write_bytes(b"x" * 100)

    def refuse(*_args: object) -> None:
        raise OSError(22, "Invalid argument")

    monkeypatch.setattr(os, "posix_fadvise", refuse, raising=False)
    assert preload.read_ahead(present) is False


@pytest.mark.parametrize("fault", ["deleted", "damaged"])
@pytest.mark.parametrize("advice", ["works", "fails"])
def test_a_vector_file_that_cannot_answer_still_gives_the_exact_answer_and_its_note(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], fault: str,
        advice: str) -> None:
    """Read-ahead runs on the first search of a generation, before the file is checked; whatever it
    met, the reader that opens the file decides, and says why it answered exactly."""
    if importlib.util.find_spec("usearch") is None:
        pytest.skip("usearch is not installed")
    import pinakes.embed
    from pinakes.kb import KBPaths
    from pinakes.vectors import build as vector_build
    from pinakes.vectors.fileformat import FOOTER_BYTES, vector_file_path
    from tests.test_vector_tier_search import EXACT_NOTE, build_auto_kb, pnk_search
    from tests.test_vectors_file import ClusteredEmbedder

    monkeypatch.setattr(vector_build, "ANN_MIN_ROWS", 0)
    embedder = ClusteredEmbedder()

    def load_for_kb(*_args: object, **_kwargs: object) -> ClusteredEmbedder:
        return embedder

    monkeypatch.setattr(pinakes.embed, "load_for_kb", load_for_kb)
    root = tmp_path / "kb"
    build_auto_kb(root, 12, embedder)
    asked: list[Path] = []
    read_ahead = preload.read_ahead

    def recorded(path: Path) -> bool:
        asked.append(path)
        return read_ahead(path)

    monkeypatch.setattr(preload, "read_ahead", recorded)
    if advice == "fails":
        def refuse(*_args: object) -> None:
            raise OSError(5, "Input/output error")

        monkeypatch.setattr(os, "posix_fadvise", refuse, raising=False)
    path = vector_file_path(KBPaths(root).state_dir)
    if fault == "deleted":
        path.unlink()
    else:
        with open(path, "r+b") as handle:
            handle.seek(-FOOTER_BYTES + 40, 2)
            byte = handle.read(1)
            handle.seek(-1, 1)
            handle.write(bytes([byte[0] ^ 0x5A]))
    result = pnk_search(root, capsys, "topic3 word100")
    (note,) = [note for note in result["notes"] if EXACT_NOTE in note]
    reason = "missing" if fault == "deleted" else "damaged"
    assert f"the vector file is {reason}" in note and "pnk sync" in note
    assert result["passages"]
    assert asked == [path]
