"""Issue #40: `pnk sync --rebuild` repairs what every index fault names it as the remedy for, and
says truly what it did. Real damage to real files: an index cut short, index pages overwritten
with Python as `dd` would, then the product's own commands (`pnk search`, `pnk doctor`, `pnk sync
--rebuild`, the MCP tools) against it. Flipped vector bits: tests/test_vector_reuse.py."""

from __future__ import annotations

import gc
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np
import pytest

from pinakes.cli import main
from pinakes.doctor import DoctorContext, run_checks
from pinakes.embed._common import ProviderEmbedder
from pinakes.embed.base import ModelIdentity
from pinakes.errors import PinakesError
from pinakes.index.integrity import damage
from pinakes.kb import KBPaths
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.conftest import REPO_ROOT
from tests.fakes import WORD, HashEmbedder, substitute_embedder
from tests.kb_helpers import Doc, build_kb, write_documents

if TYPE_CHECKING:
    from pinakes.embed.tokens import TokenCounter

DOCS = [Doc(f"docs/topic{k}/note{k}.md", f"# Note {k}\n\n" + "\n\n".join(
    f"Paragraph {p} of note {k}: " + " ".join(f"n{k}p{p}w{w}" for w in range(40)) for p in range(6)) + "\n")
    for k in range(12)]


@pytest.fixture
def kb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A KB of a few hundred chunks; every `pnk` command in the test gets the same fake model."""
    substitute_embedder(monkeypatch, lambda section, offline=None, threads=None: HashEmbedder())
    root = tmp_path / "kb"
    build_kb(root, DOCS, HashEmbedder(), max_tokens=40, overlap=0)
    return root


def pnk(root: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["-C", str(root), *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def checkpointed(index: Path) -> tuple[int, int]:
    """Fold the WAL into the file (what a finished sync leaves) and return (page size, page count).
    The fold must be whole: pages left in the WAL would hide the damage a test then writes into the
    file (a search read them from the WAL and answered, once in a loaded CI run). A statement some
    unreachable object of the sync still holds keeps a read snapshot open until it is collected."""
    gc.collect()
    conn = sqlite3.connect(index)
    try:
        busy, _log, _moved = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        assert busy == 0, "a reader still holds the index open: the WAL could not be folded into the file"
        return conn.execute("PRAGMA page_size").fetchone()[0], conn.execute("PRAGMA page_count").fetchone()[0]
    finally:
        conn.close()


def truncate(index: Path, keep: float) -> None:
    page_size, pages = checkpointed(index)
    os.truncate(index, page_size * max(2, int(pages * keep)))


def overwrite_root_pages(index: Path, *names: str) -> None:
    """Overwrite the root page of each named table or index with garbage past its first bytes, as
    `dd conv=notrunc` of random bytes would: every read of those b-trees meets the damage."""
    page_size, _pages = checkpointed(index)
    conn = sqlite3.connect(index)
    roots = {name: conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (name,)).fetchone()[0]
             for name in names}
    conn.close()
    garbage = np.random.default_rng(7).integers(0, 256, page_size - 8, dtype=np.uint8).tobytes()
    with open(index, "r+b") as handle:
        for root_page in roots.values():
            handle.seek((root_page - 1) * page_size + 8)
            handle.write(garbage)


def vector_rows(root: Path) -> list[tuple[str, int, str, bytes, bytes]]:
    conn = sqlite3.connect(KBPaths(root).index_db)
    try:
        return sorted(conn.execute(
            "SELECT d.path, c.ordinal, c.text, e.vector, e.text_key FROM embeddings e "
            "JOIN chunks c ON c.id = e.chunk_id JOIN documents d ON d.id = c.doc_id WHERE d.state = 'active'"))
    finally:
        conn.close()


def ids(root: Path) -> dict[str, str]:
    conn = sqlite3.connect(KBPaths(root).index_db)
    try:
        return dict(conn.execute("SELECT path, id FROM documents WHERE state = 'active'").fetchall())
    finally:
        conn.close()


def index_checks(root: Path) -> dict[str, tuple[str, str | None]]:
    return {c.name: (c.status, c.remedy) for c in run_checks(DoctorContext(root)) if c.name.startswith("index")}


DAMAGE: dict[str, Callable[[Path], None]] = {
    "cut-to-half": lambda index: truncate(index, 0.5),
    "cut-to-two-pages": lambda index: truncate(index, 0.0),
    "vector-pages-overwritten": lambda index: overwrite_root_pages(index, "embeddings"),
    "document-and-fts-pages-overwritten": lambda index: overwrite_root_pages(index, "documents", "chunks_fts_data"),
}


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_a_rebuild_recovers_a_damaged_index_and_says_so_truly(kb: Path, tmp_path: Path, kind: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Issue #40 item 2: a rebuild over a truncated index exited 65 naming itself as the remedy (the
    new index was backed up into the malformed file and left as index.db.new), claiming documents
    "kept". Now it replaces the damaged file, every command works after it, and what it prints holds."""
    before_ids = ids(kb)
    index = KBPaths(kb).index_db
    DAMAGE[kind](index)
    assert damage(sqlite3.connect(f"{index.as_uri()}?mode=ro", uri=True)) is not None

    code, out, err = pnk(kb, capsys, "sync", "--rebuild")
    assert code == 0, err
    assert "the live index was damaged" in out and "the rebuilt index replaced it whole" in out
    assert "kept" not in out + err
    assert not KBPaths(kb).rebuild_db.exists()
    assert not Path(f"{KBPaths(kb).rebuild_db}-wal").exists()
    conn = sqlite3.connect(f"{index.as_uri()}?mode=ro", uri=True)
    assert damage(conn) is None and conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()
    assert ids(kb) == before_ids  # every ID from its sidecar
    clean = tmp_path / "clean"
    build_kb(clean, DOCS, HashEmbedder(), max_tokens=40, overlap=0)
    assert vector_rows(kb) == vector_rows(clean)  # what a fresh sync writes, row for row
    assert set(index_checks(kb).values()) == {("OK", None)}
    code, out, err = pnk(kb, capsys, "search", "n3p2w7")
    assert code == 0 and "docs/topic3/note3.md" in out, err
    code, out, _err = pnk(kb, capsys, "sync")
    assert code == 0 and "added 0, changed 0" in out  # the next sync finds nothing to do


def test_the_rebuild_reuses_the_vectors_a_damaged_index_still_holds_intact(kb: Path) -> None:
    """A row whose checksum matches is exactly what was written, in a damaged file too: only what
    cannot be read back is embedded again, and the report counts each."""
    rows = len(vector_rows(kb))
    overwrite_root_pages(KBPaths(kb).index_db, "documents")  # the vectors' own pages are intact
    report = run_sync(kb, SyncOptions(rebuild=True, quiet=True), embedder=HashEmbedder())
    assert report.ok and report.chunks_embedded == 0 and report.chunks_reused == rows
    assert any("the index being replaced is damaged or unreadable" in note for note in report.notes)
    assert report.installed == "replaced the damaged live index"


@pytest.mark.parametrize("table", ["embeddings", "chunk_terms", "chunks"])
def test_search_on_a_damaged_index_is_an_error_naming_the_rebuild(kb: Path, table: str,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Issue #40 item 10: overwritten pages gave a raw sqlite3.DatabaseError traceback from
    `load_matrix` on every search, and doctor reported 0 FAIL."""
    overwrite_root_pages(KBPaths(kb).index_db, table)
    code, out, err = pnk(kb, capsys, "search", "n3p2w7")
    assert code == 65 and out == ""
    assert "pnk: error:" in err and "remedy: pnk sync --rebuild" in err and "Traceback" not in err
    checks = index_checks(kb)
    assert checks["index schema"] == ("FAIL", "pnk sync --rebuild")
    code, out, _err = pnk(kb, capsys, "doctor")
    assert code == 1 and "quick_check finds the file damaged" in out


def test_no_command_meets_a_damaged_index_with_a_traceback_or_calls_it_a_bug(kb: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Past search and serve: every command that reads the damaged pages says what they are."""
    overwrite_root_pages(KBPaths(kb).index_db, "documents")
    for argv in (["status"], ["list"], ["links", "docs/topic1/note1.md"]):
        code, _out, err = pnk(kb, capsys, *argv)
        assert code == 65 and "the index is damaged" in err and "remedy: pnk sync --rebuild" in err, argv
    code, out, _err = pnk(kb, capsys, "doctor")
    assert code == 1 and "Pinakes bug" not in out and "quick_check finds the file damaged" in out


def test_the_mcp_tools_name_the_rebuild_for_a_damaged_index(kb: Path) -> None:
    from pinakes.search.core import Searcher, SearchSettings
    from pinakes.serve.config import ServedKB, load_kb
    from pinakes.serve.tools import PinakesTools

    def searcher(served: ServedKB) -> Searcher:
        return Searcher(served.paths.index_db, SearchSettings.from_retrieval(served.manifest.retrieval),
                        embedder=HashEmbedder(), embedding_section=served.manifest.embedding)

    doc_id = ids(kb)["docs/topic3/note3.md"]
    overwrite_root_pages(KBPaths(kb).index_db, "embeddings", "documents")
    tools = PinakesTools([load_kb(kb)], searcher_factory=searcher)
    try:
        for name, arguments in (("pinakes_search", {"query": "n3p2w7"}), ("pinakes_get", {"doc_id": doc_id})):
            with pytest.raises(PinakesError) as raised:
                tools.call(name, arguments)
            assert raised.value.remedy is not None and "pnk sync --rebuild" in raised.value.remedy, name
            assert tools.describe_error(raised.value)["remedy"] == raised.value.remedy
    finally:
        tools.close()


def test_a_rebuild_that_stops_says_its_work_was_discarded_never_kept(kb: Path) -> None:
    """The old message ("the sync stopped after indexing N documents (they are kept)") was false for
    a rebuild, whose new index is discarded: the error now says what is left."""
    from pinakes.errors import ModelUnavailableError

    class Failing(HashEmbedder):
        """Gone when the one large document (embedded after the small ones, slice by slice) comes."""

        def embed_documents(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
            if any("bigword" in text for text in texts):
                raise ModelUnavailableError("the model went away", remedy="install it")
            return super().embed_documents(texts, batch_size)

    write_documents(kb, [Doc("docs/big.md", "# Big\n\n" + "\n\n".join(
        f"Paragraph {p}: bigword " + " ".join(f"b{p}w{w}" for w in range(30)) for p in range(80)) + "\n")])
    run_sync(kb, SyncOptions(quiet=True), embedder=HashEmbedder())
    before = vector_rows(kb)
    with pytest.raises(ModelUnavailableError) as raised:
        run_sync(kb, SyncOptions(rebuild=True, no_reuse=True, quiet=True), embedder=Failing())
    details = "\n".join(raised.value.details)
    assert "the rebuild stopped after building" in details and "which was discarded" in details
    assert "the live index is as it was" in details and "kept" not in details
    assert not KBPaths(kb).rebuild_db.exists() and vector_rows(kb) == before


KILLED_WRITER = """
import os, signal, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA wal_autocheckpoint = 0")
conn.execute("INSERT INTO meta (key, value) VALUES ('canary', 'a frame of the old generation')")
os.kill(os.getpid(), signal.SIGKILL)  # the frame stays in index.db-wal, never checkpointed
"""


def test_replacing_a_damaged_index_pairs_no_old_journal_with_the_new_file(kb: Path, tmp_path: Path) -> None:
    """The rename is what reliability.md warns about (a surviving -wal is tied to the path): the
    damaged file's -wal holds a killed writer's frame and a reader is mid-transaction on it, and
    neither reaches the new generation, before or after the reader closes."""
    index = KBPaths(kb).index_db
    overwrite_root_pages(index, "embeddings")
    killed = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(index)], capture_output=True, timeout=60)
    assert killed.returncode == -signal.SIGKILL and Path(f"{index}-wal").stat().st_size > 0
    reader = sqlite3.connect(f"{index.as_uri()}?mode=ro", uri=True, isolation_level=None)
    reader.execute("BEGIN")
    documents = reader.execute("SELECT count(*) FROM documents").fetchone()
    assert reader.execute("SELECT value FROM meta WHERE key = 'canary'").fetchone() is not None

    report = run_sync(kb, SyncOptions(rebuild=True, quiet=True), embedder=HashEmbedder())
    assert report.ok and report.installed == "replaced the damaged live index"
    assert reader.execute("SELECT count(*) FROM documents").fetchone() == documents  # its snapshot holds
    reader.execute("ROLLBACK")
    reader.close()

    writer = sqlite3.connect(index, isolation_level=None)  # a read-write open replays any -wal at the path
    assert writer.execute("SELECT value FROM meta WHERE key = 'canary'").fetchone() is None
    assert damage(writer) is None
    writer.close()
    clean = tmp_path / "clean"
    build_kb(clean, DOCS, HashEmbedder(), max_tokens=40, overlap=0)
    assert vector_rows(kb) == vector_rows(clean)


# -- a model's vector that must never be stored (issue #40 item 7) --------------------------------


class RawModel(ProviderEmbedder):
    """A provider as the packaged ones are (`ProviderEmbedder`: batching, normalisation) whose model
    returns hashed-word counts, unnormalised, with one component of 3e38 for a text holding
    "hugeword" and a NaN for "nanword". Same identity as HashEmbedder, so a test KB's manifest fits."""

    class _Words:
        special_tokens = 0

        def count(self, text: str) -> int:
            return len(WORD.findall(text))

        def count_batch(self, texts: list[str]) -> list[int]:
            return [self.count(text) for text in texts]

    def __init__(self) -> None:
        identity: ModelIdentity = HashEmbedder().identity
        super().__init__(identity, 254, cast("TokenCounter", self._Words()), 32)  # a word count stands in

    def _encode_documents(self, texts: list[str], batch_size: int) -> np.ndarray:
        rows = np.stack([HashEmbedder()._vector(text) * 7.0  # pyright: ignore[reportPrivateUsage] -- raw hashed counts
                         for text in texts]).astype(np.float32)
        for row, text in enumerate(texts):
            if "hugeword" in text:
                rows[row, 3] = np.float32(3e38)
            if "nanword" in text:
                rows[row, 5] = np.float32(np.nan)
        return rows


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # the provider normalising 3e38
@pytest.mark.parametrize("word", ["hugeword", "nanword"])
def test_a_vector_that_is_not_finite_and_unit_fails_its_document_loudly_and_is_never_stored(
        tmp_path: Path, word: str) -> None:
    root = tmp_path / "kb"
    build_kb(root, DOCS[:3], HashEmbedder(), max_tokens=40, overlap=0)
    write_documents(root, [Doc("docs/bad.md", f"# Bad\n\nThis paragraph holds {word} and more.\n"),
                           Doc("docs/good.md", "# Good\n\nA plain paragraph about harbours.\n")])
    report = run_sync(root, SyncOptions(quiet=True), embedder=RawModel())
    assert [failure.path for failure in report.failures] == ["docs/bad.md"]
    error = report.failures[0].error
    assert "test/hash-bow" in error and "sentence-transformers" in error and "cannot be stored" in error
    assert "all zeros (what a vector holding NaN, an infinity or a component beyond float32's range" in error
    assert "docs/good.md" in report.added
    conn = sqlite3.connect(KBPaths(root).index_db)
    vectors = [np.frombuffer(blob, dtype=np.float32) for (blob,) in conn.execute("SELECT vector FROM embeddings")]
    paths = {row[0] for row in conn.execute("SELECT path FROM documents WHERE state = 'active'")}
    conn.close()
    assert "docs/bad.md" not in paths
    assert all(np.isfinite(vector).all() and abs(float(np.linalg.norm(vector)) - 1.0) < 1e-3 for vector in vectors)
    assert "docs/bad.md [embed]" in report.render_text()


# -- a kill inside the replacement of a damaged index ---------------------------------------------

SCRIPT = """
import sys
sys.path.insert(0, {repo!r})
from tests.fakes import HashEmbedder
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
report = run_sync({kb!r}, SyncOptions(rebuild=True, quiet=True), embedder=HashEmbedder())
sys.exit(0 if report.ok else 1)
"""


@pytest.mark.heavy  # two sync subprocesses
def test_a_rebuild_killed_while_replacing_a_damaged_index_is_finished_by_the_next(kb: Path) -> None:
    before_ids = ids(kb)
    index = KBPaths(kb).index_db
    truncate(index, 0.5)
    env = {**{k: v for k, v in os.environ.items() if k != "PNK_FAULT"}, "PNK_FAULT": "index.replace-unlinked"}
    killed = subprocess.run([sys.executable, "-c", SCRIPT.format(repo=str(REPO_ROOT), kb=str(kb))], env=env,
                            capture_output=True, text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    env.pop("PNK_FAULT")
    again = subprocess.run([sys.executable, "-c", SCRIPT.format(repo=str(REPO_ROOT), kb=str(kb))], env=env,
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    conn = sqlite3.connect(f"{index.as_uri()}?mode=ro", uri=True)
    assert damage(conn) is None
    conn.close()
    assert ids(kb) == before_ids and not KBPaths(kb).rebuild_db.exists()
