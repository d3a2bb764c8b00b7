"""Self-calibration's near-duplicate rule in one batched pass over the stored vectors
(calibration/near_duplicates.py) finds what the whole float32 matrix found, question by question,
and the calibration stored from it is the one the matrix path stored. KBs built through the real
sync with the hashed-words embedder; the matrix path is the rule as it was written before
(`matrix @ matrix[row] >= NEAR_DUPLICATE_COSINE`), kept here as the reference."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pytest

from pinakes.calibration import self_calibration
from pinakes.calibration.near_duplicates import stored_near_chunks
from pinakes.calibration.questions import QuestionRules, make_questions
from pinakes.calibration.self_calibration import self_calibrate, store
from pinakes.index import schema
from pinakes.kb import KBPaths
from pinakes.search.shared_ranks import NEAR_DUPLICATE_COSINE
from pinakes.search.vectors import load_matrix
from pinakes.vectors import source
from tests.fakes import HashEmbedder
from tests.kb_helpers import Doc, build_kb
from tests.test_self_calibration import corpus, searcher_for


def documents() -> list[Doc]:
    docs = corpus()
    # A near copy (one word of many changed): its vector is near the harbour's, not identical.
    harbour = next(doc for doc in docs if doc.path == "docs/harbour.md")
    docs.append(Doc("docs/copies/harbour-edited.md", str(harbour.content).replace("season", "autumn")))
    return docs


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, HashEmbedder]:
    embedder = HashEmbedder()
    root = tmp_path_factory.mktemp("neardup") / "kb"
    build_kb(root, documents(), embedder)
    return root, embedder


def matrix_near_chunks(conn: sqlite3.Connection, sources: Sequence[int], dim: int | None, index_path: object = None
                       ) -> Mapping[int, set[int]]:
    """The rule as the whole matrix answered it: one product over every active vector per source."""
    matrix = load_matrix(conn, dim, index_path)
    ids, vectors = matrix.chunk_ids, matrix.vectors
    found: dict[int, set[int]] = {}
    for chunk_id in sources:
        row = int(np.searchsorted(ids, chunk_id))
        if row < len(ids) and int(ids[row]) == chunk_id:
            found[chunk_id] = {int(ids[i]) for i in np.nonzero(vectors @ vectors[row] >= NEAR_DUPLICATE_COSINE)[0]}
    return found


def test_one_batched_pass_finds_what_the_whole_matrix_found(
        built: tuple[Path, HashEmbedder], monkeypatch: pytest.MonkeyPatch):
    root, _ = built
    monkeypatch.setattr(source, "BATCH_ROWS", 7)  # many batches, a source's neighbours split across them
    conn = schema.open_reader(KBPaths(root).index_db)
    try:
        every = [int(chunk_id) for (chunk_id,) in conn.execute("SELECT chunk_id FROM embeddings ORDER BY chunk_id")]
        old = matrix_near_chunks(conn, every, 64)
        new = stored_near_chunks(conn, every, 64)
        matrix = load_matrix(conn, 64)
    finally:
        conn.close()
    assert len(every) > 3 * 7 and old == new
    # The rule has something to find: identical copies, a near one that is not identical, and a pair
    # just below the line that stays out.
    cosines = matrix.vectors @ matrix.vectors.T
    assert any(len(near) > 1 for near in new.values())
    assert ((cosines >= NEAR_DUPLICATE_COSINE) & (cosines < 0.9999)).any()
    below = np.argwhere((cosines > 0.5) & (cosines < NEAR_DUPLICATE_COSINE))
    assert len(below) and all(int(matrix.chunk_ids[j]) not in new[int(matrix.chunk_ids[i])] for i, j in below)


@pytest.mark.heavy
def test_the_questions_and_the_stored_calibration_are_those_of_the_matrix_path(
        built: tuple[Path, HashEmbedder], tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    root, embedder = built
    conn = schema.open_reader(KBPaths(root).index_db)
    try:
        rules = QuestionRules(words=4)
        by_matrix = make_questions(conn, rules, None, lambda ids: matrix_near_chunks(conn, ids, 64))
        by_pass = make_questions(conn, rules, None, lambda ids: stored_near_chunks(conn, ids, 64))
        words_only = make_questions(conn, rules)
    finally:
        conn.close()
    assert by_pass == by_matrix
    assert by_pass != words_only  # the vector rule left out a document the words rule did not

    def stored(near: object) -> dict[str, object]:
        monkeypatch.setattr(self_calibration, "stored_near_chunks", near)
        with searcher_for(root, embedder) as searcher:
            calibration = self_calibrate(root, searcher=searcher)
        assert calibration.fit is not None, calibration.why_not
        data = json.loads(store(root, calibration).read_text())
        return {key: value for key, value in data.items() if key not in ("made_at", "seconds")}

    assert stored(stored_near_chunks) == stored(matrix_near_chunks)
