"""The vector file wired into sync and search (docs/perf/vector-tiers.md "Wiring"): the `vectors`
step builds it and records its key, `pnk search` answers from it, and whenever it cannot answer for
the index (deleted, a damaged footer, cut short, stale, its library missing) `pnk search` answers
exactly, with the same passages, and a note naming `pnk sync`, which repairs it.

KBs are built by the real sync. The threshold (`pinakes.vectors.build.ANN_MIN_ROWS`, 100k) is
lowered on the module so a KB of a few hundred chunks has a file.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
from numpy.typing import NDArray

import pinakes.embed
from pinakes.cli import main
from pinakes.embed.base import identity_meta
from pinakes.index import schema
from pinakes.kb import KBPaths
from pinakes.lexical.filters import SearchFilters
from pinakes.search import vector_tier
from pinakes.search import vectors as search_vectors
from pinakes.search.core import Searcher, SearchSettings
from pinakes.search.generation import Generation
from pinakes.search.results import SearchResult
from pinakes.vectors import build as vector_build
from pinakes.vectors import expected_key, vectors_of
from pinakes.vectors.approximate import MIN_CANDIDATES, OVERSAMPLE
from pinakes.vectors.fileformat import FOOTER_BYTES, read_header, vector_file_path
from pinakes.vectors.freshness import BELOW_THRESHOLD, META_KEY, NOT_BUILT, NOT_WANTED
from tests.kb_helpers import init_test_kb, sync, write_documents
from tests.test_vectors_file import ClusteredEmbedder, corpus

if importlib.util.find_spec("usearch") is None:  # not imported here: only through vectors/engine.py,
    pytest.skip("usearch is not installed", allow_module_level=True)  # which imports onnxruntime first

QUERIES = ("topic3 word100", "Paragraph 2 of document 7", "topic11", "word651 topic5", "document 33")
EXACT_NOTE = "vector search was exact"


def auto_tier(root: Path) -> None:
    """These KBs ask for auto whatever the test KB's manifest says (the templates write it since v6)."""
    manifest = root / "pinakes.toml"
    text, count = re.subn(r'^vector_tier = "(numpy|auto)".*$', 'vector_tier = "auto"', manifest.read_text(),
                          flags=re.M)
    assert count == 1
    manifest.write_text(text)


def build_auto_kb(root: Path, documents: int, embedder: ClusteredEmbedder) -> None:
    init_test_kb(root, embedder.identity, max_tokens=10, overlap=0)
    auto_tier(root)
    write_documents(root, corpus(documents))
    sync(root, embedder)


def meta(root: Path) -> dict[str, str]:
    conn = sqlite3.connect(KBPaths(root).index_db)
    try:
        return dict(conn.execute("SELECT key, value FROM meta"))
    finally:
        conn.close()


def test_the_numpy_tier_keeps_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vector_build, "ANN_MIN_ROWS", 0)
    embedder = ClusteredEmbedder()
    root = tmp_path / "kb"
    build_auto_kb(root, 5, embedder)
    path = vector_file_path(KBPaths(root).state_dir)
    assert path.exists()
    manifest = root / "pinakes.toml"
    manifest.write_text(manifest.read_text().replace('vector_tier = "auto"', 'vector_tier = "numpy"'))
    sync(root, embedder)  # no document changed: the step still follows the manifest
    assert not path.exists() and meta(root)[META_KEY] == NOT_WANTED


@pytest.fixture
def kb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, ClusteredEmbedder]]:
    """A KB of 40 documents (~240 chunks) with its vector file, `pnk search` using its embedder. The
    file is built on one thread: a graph built on two differs from build to build (same_passages), and
    a test comparing it with the exact answer must not depend on the threads' order."""
    monkeypatch.setattr(vector_build, "ANN_MIN_ROWS", 0)
    monkeypatch.setattr(vector_build, "refresh_vector_file", functools.partial(vector_build.refresh_vector_file,
                                                                               threads=1))
    embedder = ClusteredEmbedder()

    def load_for_kb(*_args: object, **_kwargs: object) -> ClusteredEmbedder:
        return embedder

    monkeypatch.setattr(pinakes.embed, "load_for_kb", load_for_kb)
    root = tmp_path / "kb"
    build_auto_kb(root, 40, embedder)
    yield root, embedder


def pnk_search(root: Path, capsys: pytest.CaptureFixture[str], query: str, *extra: str) -> dict[str, Any]:
    code = main(["-C", str(root), "search", query, "--json", "--no-rerank", *extra])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


def passages(result: dict[str, Any]) -> list[tuple[str, int]]:
    found = result["passages"]
    assert isinstance(found, list)
    return [(str(p["path"]), int(p["chunk_ordinal"]) if "chunk_ordinal" in p else 0)
            for p in cast("list[dict[str, Any]]", found)]


def exact_answers(root: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, Any]]:
    """Every query through `pnk search` with the exact tier (the manifest's numpy, no sync between)."""
    manifest = root / "pinakes.toml"
    text = manifest.read_text()
    manifest.write_text(text.replace('vector_tier = "auto"', 'vector_tier = "numpy"'))
    try:
        return {query: pnk_search(root, capsys, query) for query in QUERIES}
    finally:
        manifest.write_text(text)


def same_passages(left: dict[str, Any], right: dict[str, Any]) -> bool:
    """The vector file's answer against the exact one: the same best passage, at least 3 of every 4
    passages shared, and every shared passage with the same exact cosine and keyword score. Not
    identical lists: HNSW is approximate, and on these 12 tight clusters of ~240 rows a graph built
    on two threads can leave a far row unreachable (a deep vector candidate then moves RRF a little;
    measured: 0-6 of the exact top 50 missed per query, varying with the build's thread order)."""
    def kept(result: dict[str, Any]) -> list[tuple[object, ...]]:
        return [(p["path"], p["text"], p["scores"]["cosine"], p["scores"]["bm25_score"])
                for p in result["passages"]]
    approximate, exact = kept(left), kept(right)
    if not approximate or not exact or approximate[0][:2] != exact[0][:2]:
        return False
    by_text = {row[:2]: row for row in exact}
    shared = [row for row in approximate if row[:2] in by_text]
    return len(shared) * 4 >= len(exact) * 3 and all(by_text[row[:2]] == row for row in shared
                                                     if row[2] is not None and by_text[row[:2]][2] is not None)


def test_the_step_builds_the_file_and_search_answers_from_it(kb: tuple[Path, ClusteredEmbedder],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    root, _embedder = kb
    path = vector_file_path(KBPaths(root).state_dir)
    assert meta(root)[META_KEY] == read_header(path).content_key  # recorded after the file was written
    code = main(["-C", str(root), "doit", "list"])
    assert code == 0 and re.search(r"^vectors\s+keep the approximate vector file", capsys.readouterr().out, re.M)
    exact = exact_answers(root, capsys)
    for query in QUERIES:
        result = pnk_search(root, capsys, query)
        assert not any(EXACT_NOTE in note for note in result["notes"]), result["notes"]
        assert same_passages(result, exact[query]), query  # ~240 rows: the graph's answer is the exact one
    with Searcher.for_kb(root) as searcher:
        searcher.search(QUERIES[0], rerank=False)
        generation = searcher._generation  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose
        assert generation is not None and generation.vector_file is not None
        assert generation.matrix is None  # no float32 matrix was loaded: the point of the file


UP_TO_DATE_PROBE = """
import sys
from pathlib import Path
from pinakes.index import schema
from pinakes.kb import KBPaths
from pinakes.pipeline.vector_file import is_current
paths = KBPaths(Path(sys.argv[1]))
conn = schema.open_reader(paths.index_db)
print(is_current(conn, paths.state_dir, "auto"), "numpy" in sys.modules)
"""


def test_a_sync_that_changes_nothing_checks_the_file_without_numpy(kb: tuple[Path, ClusteredEmbedder]) -> None:
    """The question a no-op sync asks of the vectors step (the recorded key against the file's
    footer) imports no numpy: 0.10 s of CPU a no-op at 151k files (docs/perf/writer.md)."""
    root, _embedder = kb
    checked = subprocess.run([sys.executable, "-c", UP_TO_DATE_PROBE, str(root)], capture_output=True, text=True,
                             check=True)
    assert checked.stdout.split() == ["True", "False"], checked.stdout + checked.stderr
    with open(vector_file_path(KBPaths(root).state_dir), "r+b") as handle:  # the footer's checksum now fails
        handle.seek(-FOOTER_BYTES + 20, 2)
        handle.write(b"\xff")
    checked = subprocess.run([sys.executable, "-c", UP_TO_DATE_PROBE, str(root)], capture_output=True, text=True,
                             check=True)
    assert checked.stdout.split() == ["False", "False"], checked.stdout + checked.stderr


def test_a_filtered_search_is_exact_over_the_rows_it_allows(kb: tuple[Path, ClusteredEmbedder]) -> None:
    root, _embedder = kb
    filters = SearchFilters(path_prefix="docs/d001")
    results: dict[str, list[SearchResult]] = {}
    for tier in ("auto", "numpy"):
        with Searcher.for_kb(root) as searcher:
            searcher.settings = SearchSettings(rerank=False, vector_tier=tier)
            results[tier] = [searcher.search(query, filters=filters, mode="vector", rerank=False) for query in QUERIES]
            generation = searcher._generation  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose
            assert generation is not None and (generation.vector_file is not None) == (tier == "auto")
    for auto, numpy in zip(results["auto"], results["numpy"], strict=True):
        assert auto.passages and all(p.path.startswith("docs/d001") for p in auto.passages)
        assert [(p.path, p.text, p.scores.cosine) for p in auto.passages] == [
            (p.path, p.text, p.scores.cosine) for p in numpy.passages]


def _delete(path: Path) -> None:
    path.unlink()


def _flip_footer(path: Path) -> None:
    with open(path, "r+b") as handle:
        handle.seek(path.stat().st_size - FOOTER_BYTES + 40)
        byte = handle.read(1)
        handle.seek(-1, 1)
        handle.write(bytes([byte[0] ^ 0x5A]))


def _cut_short(path: Path) -> None:
    with open(path, "r+b") as handle:
        handle.truncate(path.stat().st_size - 100)


@pytest.mark.parametrize(("fault", "reason"), [(_delete, "missing"), (_flip_footer, "damaged"),
                                               (_cut_short, "damaged")], ids=["deleted", "footer", "cut-short"])
def test_search_answers_exactly_with_a_note_until_a_sync_repairs_the_file(
        kb: tuple[Path, ClusteredEmbedder], capsys: pytest.CaptureFixture[str], fault: Callable[[Path], None],
        reason: str) -> None:
    root, embedder = kb
    exact = exact_answers(root, capsys)
    path = vector_file_path(KBPaths(root).state_dir)
    fault(path)
    for query in QUERIES:
        result = pnk_search(root, capsys, query)
        (note,) = [note for note in result["notes"] if EXACT_NOTE in note]
        assert f"the vector file is {reason}" in note and "pnk sync" in note
        assert same_passages(result, exact[query])
    report = sync(root, embedder)  # nothing changed in the documents: the step still repairs the file
    assert any("vector file built whole" in note for note in report.notes), report.notes
    assert not any(EXACT_NOTE in note for note in pnk_search(root, capsys, QUERIES[0])["notes"])


def test_a_file_of_older_rows_is_stale_and_never_answers(kb: tuple[Path, ClusteredEmbedder],
                                                        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The file a sync replaced, put back (a restore from a backup, a copy from another clone): its
    footer is intact, but it was built from other rows than the index holds."""
    root, embedder = kb
    path = vector_file_path(KBPaths(root).state_dir)
    shutil.copyfile(path, tmp_path / "old.ann")
    write_documents(root, corpus(3, start=500))
    report = sync(root, embedder)
    assert any("vector file updated" in note for note in report.notes), report.notes
    shutil.copyfile(tmp_path / "old.ann", path)
    exact = exact_answers(root, capsys)
    result = pnk_search(root, capsys, "word15501 topic2")  # a new document's words
    (note,) = [note for note in result["notes"] if EXACT_NOTE in note]
    assert "the vector file is stale" in note and "pnk sync brings it up to date" in note
    assert any(p["path"] == "docs/d0500.md" for p in result["passages"])
    assert same_passages(pnk_search(root, capsys, QUERIES[1]), exact[QUERIES[1]])


def test_without_its_library_the_sync_notes_it_and_search_is_exact(
        kb: tuple[Path, ClusteredEmbedder], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    root, embedder = kb
    vector_file_path(KBPaths(root).state_dir).unlink()
    installed = sys.modules["usearch"]
    monkeypatch.setitem(sys.modules, "usearch", None)  # an import of it now fails, as when not installed
    write_documents(root, corpus(1, start=600))
    report = sync(root, embedder)
    assert report.ok and any("no approximate vector file: usearch is not installed" in n for n in report.notes)
    assert meta(root)[META_KEY] == NOT_BUILT
    result = pnk_search(root, capsys, QUERIES[0])
    (note,) = [note for note in result["notes"] if EXACT_NOTE in note]
    assert "unavailable" in note and "pip install 'pinakes-kb[ann]'" in note and result["passages"]
    monkeypatch.setitem(sys.modules, "usearch", installed)
    report = sync(root, embedder)  # installed again: a sync that changes nothing builds it
    assert any("vector file built whole" in note for note in report.notes), report.notes


def test_below_the_threshold_search_is_exact_and_says_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    embedder = ClusteredEmbedder()

    def load_for_kb(*_args: object, **_kwargs: object) -> ClusteredEmbedder:
        return embedder

    monkeypatch.setattr(pinakes.embed, "load_for_kb", load_for_kb)
    root = tmp_path / "kb"
    build_auto_kb(root, 5, embedder)
    assert not vector_file_path(KBPaths(root).state_dir).exists()
    assert meta(root)[META_KEY] == BELOW_THRESHOLD
    result = pnk_search(root, capsys, QUERIES[0])
    assert result["passages"] and not any(EXACT_NOTE in note for note in result["notes"])


def doctor_vector_file(root: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    main(["-C", str(root), "doctor", "--json"])
    checks = json.loads(capsys.readouterr().out)["checks"]
    (check,) = [check for check in checks if check["name"] == "vector file"]
    return check


def test_doctor_checks_every_byte_a_search_does_not(kb: tuple[Path, ClusteredEmbedder],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A searching process checks the footer, the sizes and the key (docs/INVARIANTS.md); the body's
    checksum over every byte is the step's and doctor's. A byte flipped inside the payload, where
    the footer stays intact, is doctor's to find, and its remedy rebuilds the file."""
    root, embedder = kb
    assert doctor_vector_file(root, capsys)["status"] == "OK"
    path = vector_file_path(KBPaths(root).state_dir)
    with open(path, "r+b") as handle:
        handle.seek(100)
        byte = handle.read(1)
        handle.seek(100)
        handle.write(bytes([byte[0] ^ 0xFF]))
    check = doctor_vector_file(root, capsys)
    assert check["status"] == "WARN" and "damaged" in check["detail"] and "pnk sync" in check["remedy"]
    path.unlink()  # the remedy
    report = sync(root, embedder)
    assert any("vector file built whole" in note for note in report.notes), report.notes
    assert doctor_vector_file(root, capsys)["status"] == "OK"


def test_a_rebuild_leaves_a_file_that_answers_for_the_new_index(kb: tuple[Path, ClusteredEmbedder],
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """`pnk sync --rebuild` runs the step on the new index before it is installed: the file then
    carries the key of the new index's rows, computed from them (kept as it was when they are the
    same rows, updated or built whole when not)."""
    root, embedder = kb
    exact = exact_answers(root, capsys)
    sync(root, embedder, rebuild=True)
    conn = schema.open_reader(KBPaths(root).index_db)
    try:
        rows_key = expected_key(conn, identity_meta(embedder.identity))
    finally:
        conn.close()
    assert meta(root)[META_KEY] == read_header(vector_file_path(KBPaths(root).state_dir)).content_key == rows_key
    for query in QUERIES:
        result = pnk_search(root, capsys, query)
        assert not any(EXACT_NOTE in note for note in result["notes"])
        assert same_passages(result, exact[query]), query


def _doc_ids(root: Path, paths: list[str]) -> tuple[str, ...]:
    conn = sqlite3.connect(KBPaths(root).index_db)
    try:
        return tuple(row[0] for row in conn.execute(
            f"SELECT id FROM documents WHERE path IN ({','.join('?' * len(paths))})", paths))
    finally:
        conn.close()


def _no_matrix(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any whole or filtered float32 matrix loaded from here on fails the test."""
    def refused(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a float32 matrix was loaded")
    monkeypatch.setattr(search_vectors, "load_matrix", refused)


def _file_best_among_allowed(generation: Generation, query: np.ndarray, limit: int, left_out: set[int]
                             ) -> list[tuple[int, float]]:
    """What the vector file's own unfiltered order gives once the rows left out are dropped: its
    candidates in its order (every row it reaches), the first `wanted` allowed ones rescored exactly."""
    opened = generation.vector_file
    assert opened is not None
    rows = opened.header.rows
    order = [int(key) for key in opened.search(query, rows)]
    wanted = max(limit * OVERSAMPLE, MIN_CANDIDATES)
    kept = [key for key in order if key not in left_out][:wanted]
    ids, vectors = vectors_of(generation.conn, kept, opened.header.dim)
    scores = vectors @ query
    best = np.lexsort((ids, -scores))[:limit]
    return [(int(ids[row]), float(scores[row])) for row in best if scores[row] > 0.0]


def test_a_filter_that_leaves_out_a_few_documents_is_answered_by_the_file_without_a_matrix(
        kb: tuple[Path, ClusteredEmbedder], monkeypatch: pytest.MonkeyPatch) -> None:
    """Self-calibration's searches (a question's source documents left out): the file's best among
    the allowed rows, no row left out, and no float32 matrix of the allowed rows (1.5 GB at 1M)."""
    root, embedder = kb
    _no_matrix(monkeypatch)
    scans: list[object] = []

    def exact_scan(*args: object) -> None:
        scans.append(args)

    monkeypatch.setattr(vector_tier, "exact_scan", exact_scan)
    limit = 20
    with Searcher.for_kb(root) as searcher:
        searcher.settings = SearchSettings(rerank=False, vector_tier="auto")
        for query in QUERIES:
            unfiltered = searcher.search(query, mode="vector", rerank=False)
            generation = searcher._generation  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose
            assert generation is not None and generation.vector_file is not None
            left_out_paths = sorted({p.path for p in unfiltered.passages[:2]})  # the documents it found first
            excluded = _doc_ids(root, left_out_paths)
            assert len(excluded) == len(left_out_paths)
            left_out = {row[0] for row in generation.conn.execute(
                f"SELECT id FROM chunks WHERE doc_id IN ({','.join('?' * len(excluded))})", excluded)}
            vector = embedder.embed_query(query)
            reference = _file_best_among_allowed(generation, vector, limit, left_out)
            # The same filter, as self-calibration asks it, and with a condition that passes every
            # document (the left-out rows then counted by testing each document against the filter).
            for filters in (SearchFilters(exclude_doc_ids=excluded),
                            SearchFilters(exclude_doc_ids=excluded, since=0.0)):
                hits, rows = vector_tier.approximate(generation, vector, limit, filters)
                assert hits == reference, query
                assert hits and not {chunk for chunk, _ in hits} & left_out
                assert len(rows) <= limit
                result = searcher.search(query, filters=filters, mode="vector", rerank=False)
                assert result.passages and not {p.path for p in result.passages} & set(left_out_paths)
            assert [chunk for chunk, _ in reference] != [chunk for chunk, _ in _file_best_among_allowed(
                generation, vector, limit, set())], "the filter changed nothing: the test proves nothing"
            assert generation.matrix is None
    assert scans == []


def test_a_filter_that_leaves_out_many_rows_is_an_exact_scan_in_batches(
        kb: tuple[Path, ClusteredEmbedder], monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the over-fetch (more rows left out than allowed, or than `OVERFETCH_MAX_EXCLUDED`), the
    exact tier's answer, read a few rows at a time, still without a matrix of the allowed rows."""
    root, _embedder = kb
    narrow = SearchFilters(path_prefix="docs/d001")  # 10 of 40 documents: more rows left out than allowed
    wide = SearchFilters(exclude_doc_ids=_doc_ids(root, ["docs/d0003.md", "docs/d0020.md", "docs/d0031.md"]))
    exact: dict[SearchFilters, list[SearchResult]] = {}
    with Searcher.for_kb(root) as searcher:
        searcher.settings = SearchSettings(rerank=False, vector_tier="numpy")
        for filters in (narrow, wide):
            exact[filters] = [searcher.search(query, filters=filters, mode="vector", rerank=False)
                              for query in QUERIES]
    _no_matrix(monkeypatch)
    monkeypatch.setattr(vector_tier, "SCAN_BATCH_ROWS", 7)
    monkeypatch.setattr(vector_tier, "OVERFETCH_MAX_EXCLUDED", 5)  # the wide filter leaves out 18 rows
    batches: list[int] = []
    read = vector_tier.as_arrays

    def as_arrays(rows: Sequence[tuple[int, bytes]], dim: int) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
        return batches.append(len(rows)) or read(rows, dim)

    monkeypatch.setattr(vector_tier, "as_arrays", as_arrays)
    with Searcher.for_kb(root) as searcher:
        searcher.settings = SearchSettings(rerank=False, vector_tier="auto")
        for filters in (narrow, wide):
            for query, expected in zip(QUERIES, exact[filters], strict=True):
                result = searcher.search(query, filters=filters, mode="vector", rerank=False)
                assert result.passages
                assert [(p.path, p.text, p.scores.cosine) for p in result.passages] == [
                    (p.path, p.text, p.scores.cosine) for p in expected.passages], query
        generation = searcher._generation  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose
        assert generation is not None and generation.vector_file is not None and generation.matrix is None
    assert batches and max(batches) == 7 and len(batches) > 10


def test_the_first_syncs_self_calibration_asks_the_file_and_loads_no_matrix(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The end of a first sync with a vector file: self-calibration's unanswerable twins (each
    question's sources left out) are answered by the file, and nothing loads a float32 matrix."""
    from pinakes.search.calibrated import self_calibration_path
    from tests.fakes import HashEmbedder
    from tests.test_self_calibration import corpus as calibration_corpus

    monkeypatch.setattr(vector_build, "ANN_MIN_ROWS", 0)
    _no_matrix(monkeypatch)
    asked: list[SearchFilters | None] = []
    answer = vector_tier.approximate

    def approximate(generation: Generation, query: np.ndarray, limit: int,
                    filters: SearchFilters | None = None) -> tuple[list[tuple[int, float]], object]:
        asked.append(filters)
        return answer(generation, query, limit, filters)

    monkeypatch.setattr(vector_tier, "approximate", approximate)
    embedder = HashEmbedder()
    root = tmp_path / "kb"
    init_test_kb(root, embedder.identity)
    auto_tier(root)
    write_documents(root, calibration_corpus())
    report = sync(root, embedder)
    assert vector_file_path(KBPaths(root).state_dir).exists()
    assert self_calibration_path(KBPaths(root)).exists(), report.notes
    twins = [filters for filters in asked if filters is not None and filters.exclude_doc_ids]
    assert twins and len(twins) * 2 >= len(asked) - len(twins)  # a twin for every question asked as it is
