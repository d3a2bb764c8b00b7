"""The approximate vector file (src/pinakes/vectors/): built from an index the real sync wrote,
searched with exact rescoring, updated in place, and refused whenever it cannot answer for the
index: missing, stale, damaged (bytes flipped in the payload or the footer, the file cut short),
or its library absent. A writer killed before the swap leaves the old file intact.

The threshold is lowered (`min_rows=0`) so a KB of a few hundred chunks exercises the tier.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xxhash

from pinakes.embed.base import identity_meta
from pinakes.index import schema
from pinakes.kb import KBPaths
from pinakes.search.vectors import load_matrix, vector_search
from pinakes.vectors import (
    FILE_NAME,
    OpenVectorFile,
    RefreshReport,
    VectorFileUnusable,
    approximate_search,
    expected_key,
    fallback_note,
    open_vector_file,
    refresh_vector_file,
    vector_file_path,
    vectors_of,
)
from pinakes.vectors.approximate import ExactRows
from pinakes.vectors.fileformat import FOOTER_BYTES, read_header
from tests.fakes import HashEmbedder
from tests.kb_helpers import Doc, build_kb, delete_documents, sync, write_documents

if importlib.util.find_spec("usearch") is None:  # not imported here: only through vectors/engine.py,
    pytest.skip("usearch is not installed", allow_module_level=True)  # which imports onnxruntime first


@pytest.fixture(autouse=True)
def _no_sync_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests drive `refresh_vector_file` themselves, between syncs that leave the file alone;
    the sync's own step (pipeline/vector_file.py) is tested in tests/test_vector_tier_search.py."""
    import pinakes.pipeline.vector_file as step

    def skipped(_ctx: object) -> None:
        return None

    monkeypatch.setattr(step, "refresh", skipped)

DIM = 64
CLUSTERS = 12


class ClusteredEmbedder(HashEmbedder):
    """Deterministic vectors with neighbourhoods, as real text has: each chunk text lands near one
    of a few centres (chosen by its hash), with its own noise, so nearest neighbours are not ties."""

    def __init__(self, dim: int = DIM) -> None:
        super().__init__(dim=dim, model="test/clustered")
        self.centres = np.random.default_rng(45).standard_normal((CLUSTERS, dim)).astype(np.float32)

    def _vector(self, text: str) -> np.ndarray:
        seed = xxhash.xxh64_intdigest(text.encode())
        rng = np.random.default_rng(seed)
        vector = self.centres[seed % CLUSTERS] + 0.6 * rng.standard_normal(self.identity.dim).astype(np.float32)
        return (vector / np.linalg.norm(vector)).astype(np.float32)


def corpus(documents: int, paragraphs: int = 6, start: int = 0) -> list[Doc]:
    return [Doc(f"docs/d{number:04d}.md",
                "\n\n".join(f"Paragraph {p} of document {number}: word{number * 31 + p} topic{(number + p) % 17}."
                            for p in range(paragraphs)))
            for number in range(start, start + documents)]


def identity_of(embedder: HashEmbedder) -> dict[str, str]:
    return identity_meta(embedder.identity)


def refresh(root: Path, embedder: HashEmbedder, **options: Any) -> RefreshReport:
    conn = schema.open_reader(KBPaths(root).index_db)
    try:
        return refresh_vector_file(conn, root / ".pinakes", identity_of(embedder), embedder.identity.dim, min_rows=0,
                                   **options)
    finally:
        conn.close()


def open_file(root: Path, embedder: HashEmbedder) -> OpenVectorFile:
    conn = schema.open_reader(KBPaths(root).index_db)
    try:
        key = expected_key(conn, identity_of(embedder))
    finally:
        conn.close()
    return open_vector_file(vector_file_path(root / ".pinakes"), key, identity_of(embedder), DIM)


def exact_rows_from(root: Path) -> ExactRows:
    conn = schema.open_reader(KBPaths(root).index_db)

    def exact_rows(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return vectors_of(conn, ids.tolist(), DIM)
    return exact_rows


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ClusteredEmbedder]:
    root = tmp_path_factory.mktemp("ann") / "kb"
    embedder = ClusteredEmbedder()
    build_kb(root, corpus(120), embedder, max_tokens=10, overlap=0)
    report = refresh(root, embedder)
    assert report.mode == "full" and report.rows >= 600, report
    return root, embedder


@pytest.mark.heavy  # ~8 s: a 720-chunk sync
def test_candidates_rescored_exactly_match_the_exact_search(built: tuple[Path, ClusteredEmbedder]) -> None:
    root, embedder = built
    conn = schema.open_reader(KBPaths(root).index_db)
    matrix = load_matrix(conn, DIM)
    conn.close()
    opened = open_file(root, embedder)
    exact_rows = exact_rows_from(root)
    rng = np.random.default_rng(7)
    recalls: list[float] = []
    for _ in range(40):
        query = embedder.centres[rng.integers(CLUSTERS)] + 0.6 * rng.standard_normal(DIM).astype(np.float32)
        query = (query / np.linalg.norm(query)).astype(np.float32)
        exact = vector_search(matrix, query, 10)
        approximate = approximate_search(opened, query, 10, exact_rows)
        recalls.append(len({c for c, _ in exact} & {c for c, _ in approximate}) / len(exact))
        # Every cosine returned is the exact path's own number for that chunk, best first.
        exact_scores = dict(vector_search(matrix, query, len(matrix)))
        assert all(exact_scores[chunk] == pytest.approx(score, abs=1e-6) for chunk, score in approximate)
        assert [s for _, s in approximate] == sorted((s for _, s in approximate), reverse=True)
    opened.close()
    assert float(np.mean(recalls)) >= 0.98, recalls


def test_a_second_refresh_with_nothing_changed_leaves_the_file(built: tuple[Path, ClusteredEmbedder]) -> None:
    root, embedder = built
    before = vector_file_path(root / ".pinakes").stat()
    report = refresh(root, embedder)
    assert report.mode == "unchanged"
    after = vector_file_path(root / ".pinakes").stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def small_kb(tmp_path: Path, documents: int = 40) -> tuple[Path, ClusteredEmbedder]:
    root = tmp_path / "kb"
    embedder = ClusteredEmbedder()
    build_kb(root, corpus(documents), embedder, max_tokens=10, overlap=0)
    assert refresh(root, embedder).mode == "full"
    return root, embedder


def chunk_ids_of(root: Path, path: str) -> list[int]:
    conn = schema.open_reader(KBPaths(root).index_db)
    try:
        return [row[0] for row in conn.execute(
            "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE d.path = ?", (path,))]
    finally:
        conn.close()


def test_a_sync_makes_the_file_stale_and_a_refresh_updates_it_in_place(tmp_path: Path) -> None:
    root, embedder = small_kb(tmp_path)
    gone = chunk_ids_of(root, "docs/d0003.md")
    write_documents(root, corpus(2, start=500))
    sync(root, embedder)
    delete_documents(root, ["docs/d0003.md"], embedder)

    with pytest.raises(VectorFileUnusable) as stale:
        open_file(root, embedder)
    assert stale.value.reason == "stale"
    assert "pnk sync" in fallback_note(stale.value)

    report = refresh(root, embedder)
    assert report.mode == "incremental", report
    assert report.added == len(chunk_ids_of(root, "docs/d0500.md")) + len(chunk_ids_of(root, "docs/d0501.md"))
    assert report.removed == len(gone)
    opened = open_file(root, embedder)
    exact_rows = exact_rows_from(root)
    new = chunk_ids_of(root, "docs/d0500.md")
    conn = schema.open_reader(KBPaths(root).index_db)
    (vector,) = conn.execute("SELECT vector FROM embeddings WHERE chunk_id = ?", (new[0],)).fetchone()
    conn.close()
    hits = approximate_search(opened, np.frombuffer(vector, dtype=np.float32), 10, exact_rows)
    assert hits[0] == (new[0], pytest.approx(1.0, abs=1e-5))  # a new chunk is found, by itself first
    for chunk in gone:  # a deleted document's chunks never come back, even as candidates
        ids = opened.search(np.random.default_rng(chunk).standard_normal(DIM).astype(np.float32), 500)
        assert chunk not in set(ids.tolist())
    opened.close()


def test_an_update_in_place_never_holds_a_copy_of_the_file_in_memory(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The index is loaded by the library from the path: the update's own Python allocations (traced:
    the rows read, the diff, the checksum's reads) stay far below the payload, which a buffered read
    held twice over (at 917k rows: a 1,083 MB peak against 617 MB loaded from the path). The model's
    width (384) makes the payload what it is at scale, mostly the vectors' int8 codes; the checksum's
    read size (8 MiB, a whole small file) is lowered to what it is against a large one."""
    import tracemalloc

    import pinakes.vectors.fileformat as fileformat

    root, embedder = tmp_path / "kb", ClusteredEmbedder(dim=384)
    build_kb(root, corpus(80), embedder, max_tokens=10, overlap=0)
    assert refresh(root, embedder).mode == "full"
    write_documents(root, corpus(1, start=500))
    sync(root, embedder)
    assert refresh(root, embedder).mode == "incremental"  # once untraced: what it imports is not the update
    payload = read_header(vector_file_path(root / ".pinakes")).payload_bytes
    write_documents(root, corpus(1, start=501))
    sync(root, embedder)
    monkeypatch.setattr(fileformat, "_READ_BYTES", 16 << 10)
    tracemalloc.start()
    try:
        report = refresh(root, embedder)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert report.mode == "incremental" and report.added > 0, report
    assert peak < payload / 2, (peak, payload)


def flip_byte(path: Path, offset: int) -> None:
    with open(path, "r+b") as handle:
        handle.seek(offset)
        byte = handle.read(1)
        handle.seek(offset)
        handle.write(bytes([byte[0] ^ 0x5A]))


@pytest.mark.parametrize("where", ["payload", "ids", "footer", "truncated"])
def test_a_damaged_file_is_refused_then_rebuilt_whole(tmp_path: Path, where: str) -> None:
    root, embedder = small_kb(tmp_path)
    path = vector_file_path(root / ".pinakes")
    header = read_header(path)
    if where == "payload":
        flip_byte(path, header.payload_bytes // 2)
    elif where == "ids":
        flip_byte(path, header.ids_offset + 3)
    elif where == "footer":
        flip_byte(path, header.file_bytes - FOOTER_BYTES + 40)
    else:
        os.truncate(path, header.file_bytes - 100)
    with pytest.raises(VectorFileUnusable) as damaged:
        open_file(root, embedder)
    assert damaged.value.reason == "damaged", damaged.value

    report = refresh(root, embedder)
    assert report.mode == "full" and report.why_full, report
    open_file(root, embedder).close()


def test_a_missing_file_and_a_missing_library_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, embedder = small_kb(tmp_path, documents=10)
    monkeypatch.setitem(sys.modules, "usearch", None)  # an import of it now fails, as when not installed
    with pytest.raises(VectorFileUnusable) as unavailable:
        open_file(root, embedder)
    assert unavailable.value.reason == "unavailable"
    assert "pinakes-kb[ann]" in fallback_note(unavailable.value)
    with pytest.raises(VectorFileUnusable):
        refresh(root, embedder, params={"metric": "cos", "dtype": "i8", "connectivity": 8, "expansion_add": 64})
    monkeypatch.undo()
    vector_file_path(root / ".pinakes").unlink()
    with pytest.raises(VectorFileUnusable) as missing:
        open_file(root, embedder)
    assert missing.value.reason == "missing"


def test_below_the_threshold_the_file_is_removed(tmp_path: Path) -> None:
    root, embedder = small_kb(tmp_path, documents=10)
    conn = schema.open_reader(KBPaths(root).index_db)
    try:
        report = refresh_vector_file(conn, root / ".pinakes", identity_of(embedder), DIM, min_rows=10_000)
    finally:
        conn.close()
    assert report.mode == "below-threshold"
    assert not vector_file_path(root / ".pinakes").exists()


KILLED_REFRESH = """
import sys
from pathlib import Path
from pinakes.embed.base import identity_meta
from pinakes.index import schema
from pinakes.vectors import refresh_vector_file
from tests.test_vectors_file import ClusteredEmbedder, DIM
root = Path(sys.argv[1])
conn = schema.open_reader(root / ".pinakes" / "index.db")
refresh_vector_file(conn, root / ".pinakes", identity_meta(ClusteredEmbedder().identity), DIM, min_rows=0)
"""


@pytest.mark.heavy  # ~9 s each: a sync and two child processes
@pytest.mark.parametrize("point", ["vectors.before-footer", "atomic.before-rename"])
def test_a_refresh_killed_before_the_swap_leaves_the_old_file_whole(tmp_path: Path, point: str) -> None:
    root, embedder = small_kb(tmp_path, documents=20)
    path = vector_file_path(root / ".pinakes")
    old = path.read_bytes()
    write_documents(root, corpus(3, start=900))
    sync(root, embedder)

    repo = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PNK_FAULT=point, PYTHONPATH=os.pathsep.join([str(repo / "src"), str(repo)]))
    killed = subprocess.run([sys.executable, "-c", KILLED_REFRESH, str(root)], env=env, check=False,
                            capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr
    assert path.read_bytes() == old  # the old file, whole: readers that open it now see it intact
    assert read_header(path).content_key != ""
    leftovers = [name for name in os.listdir(root / ".pinakes") if FILE_NAME in name and name != FILE_NAME]
    assert leftovers, "the killed writer's temp file should be there for the next write to sweep"

    with pytest.raises(VectorFileUnusable) as stale:  # intact, but of the rows before the sync
        open_file(root, embedder)
    assert stale.value.reason == "stale"
    os.utime(root / ".pinakes" / leftovers[0], (1, 1))  # older than a live writer's temp file can be
    env.pop("PNK_FAULT")
    again = subprocess.run([sys.executable, "-c", KILLED_REFRESH, str(root)], env=env, check=False,
                           capture_output=True, text=True)  # the next sync: a new process, which sweeps
    assert again.returncode == 0, again.stderr
    open_file(root, embedder).close()
    assert [name for name in os.listdir(root / ".pinakes") if FILE_NAME in name] == [FILE_NAME]
