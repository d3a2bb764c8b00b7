"""The embed stage on an embedder that takes calls ahead (embed/base.py `DispatchAhead`, what the Ray
executor implements): a group's cross-document batches are sent up to `calls_ahead` before the
oldest is written, written in order, and the index is the one a synchronous sync writes. Fast: the
embedder is a deterministic fake that records what was outstanding when."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from pinakes.embed.base import DispatchAhead
from pinakes.pipeline import embed as embed_step
from pinakes.pipeline.report import SyncReport
from pinakes.pipeline.run import SyncOptions
from pinakes.sync.engine import run_sync
from tests.fakes import HashEmbedder
from tests.kb_helpers import Doc, init_test_kb, write_documents

CALLS_AHEAD = 3


class AheadEmbedder(HashEmbedder):
    """Computes a call's vectors only when it is collected; at each submission it notes how many
    calls were outstanding and how many documents the index had committed."""

    def __init__(self, index_db: Path, interrupt_at: int | None = None) -> None:
        super().__init__()
        self.index_db = index_db
        self.interrupt_at = interrupt_at  # Ctrl-C while collecting this call (0-based)
        self.outstanding: list[list[str]] = []
        self.submitted: list[tuple[int, int]] = []  # (outstanding calls, committed documents) at each
        self.texts_sent: list[str] = []
        self.collected = 0
        self.cancelled = 0

    @property
    def calls_ahead(self) -> int:
        return CALLS_AHEAD

    def embed_documents_async(self, texts: Sequence[str], batch_size: int | None = None) -> object:
        self.outstanding.append(list(texts))
        self.texts_sent.extend(texts)
        self.submitted.append((len(self.outstanding), self._committed()))
        return len(self.submitted) - 1

    def collect(self, call: object) -> np.ndarray:
        assert self.outstanding, "collected a call that was never submitted"
        texts = self.outstanding.pop(0)
        assert call == self.collected, "calls are collected in the order they were submitted"
        if call == self.interrupt_at:
            raise KeyboardInterrupt
        self.collected += 1
        return self.embed_documents(texts)

    def cancel(self) -> None:
        self.cancelled += len(self.outstanding)
        self.outstanding.clear()

    def _committed(self) -> int:
        if not self.index_db.exists():
            return 0
        conn = sqlite3.connect(self.index_db)
        try:
            return int(conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0])
        finally:
            conn.close()


def make_kb(root: Path, count: int) -> Path:
    docs = [Doc(f"docs/doc{number:02d}.md",
                f"# Document {number}\n\nParagraph {number} about topic {number % 3} and its details.\n")
            for number in range(count)]
    # The same file twice, in the first two calls: the second copy's text is planned before the
    # first copy is written, and still goes to the model once.
    twin = "# Twin\n\nA paragraph both copies share, word for word.\n"
    docs += [Doc("docs/a/twin.md", twin), Doc("docs/b/other.md", "# Other\n\nSomething else entirely.\n"),
             Doc("docs/c/twin.md", twin)]
    write_documents(init_test_kb(root, HashEmbedder().identity), docs)
    return root


def index_dump(root: Path) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    try:
        return conn.execute(
            "SELECT d.path, c.ordinal, c.text, c.context, c.char_start, c.char_end, e.vector, e.text_key "
            "FROM chunks c JOIN documents d ON d.id = c.doc_id JOIN embeddings e ON e.chunk_id = c.id "
            "ORDER BY d.path, c.ordinal").fetchall()
    finally:
        conn.close()


@pytest.fixture
def two_chunk_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    # Two one-chunk documents per cross-document call: a dozen documents make several calls in one group.
    monkeypatch.setattr(embed_step, "EMBED_SLICE_CHUNKS", 2)


@pytest.mark.usefixtures("two_chunk_batches")
def test_batches_are_sent_ahead_within_the_bound_and_the_index_is_a_synchronous_runs(tmp_path: Path) -> None:
    ahead_root = make_kb(tmp_path / "ahead", 12)
    embedder = AheadEmbedder(ahead_root / ".pinakes" / "index.db")
    assert isinstance(embedder, DispatchAhead)
    ahead = run_sync(ahead_root, SyncOptions(), embedder=embedder)  # type: ignore[arg-type]
    assert ahead.ok and not ahead.failures and ahead.indexed == 15

    assert len(embedder.submitted) >= 5, embedder.submitted
    # The second call went out before the first was written, the third before the second...
    assert [committed for _outstanding, committed in embedder.submitted[:CALLS_AHEAD]] == [0] * CALLS_AHEAD
    # ... and never more than CALLS_AHEAD were outstanding, a bound the stage reached.
    assert max(outstanding for outstanding, _committed in embedder.submitted) == CALLS_AHEAD
    assert embedder.collected == len(embedder.submitted) and not embedder.cancelled
    # The twin's text went to the model once although its second copy was planned before the first was written.
    assert len(embedder.texts_sent) == len(set(embedder.texts_sent)) == ahead.chunks_embedded

    synchronous_root = make_kb(tmp_path / "synchronous", 12)
    synchronous: SyncReport = run_sync(synchronous_root, SyncOptions(), embedder=HashEmbedder())  # type: ignore[arg-type]
    assert not isinstance(HashEmbedder(), DispatchAhead)
    assert index_dump(ahead_root) == index_dump(synchronous_root)
    assert (ahead.chunks_embedded, ahead.chunks_reused) == (synchronous.chunks_embedded, synchronous.chunks_reused)
    assert ahead.chunks_reused >= 1  # the twin


@pytest.mark.usefixtures("two_chunk_batches")
def test_ctrl_c_while_calls_are_out_cancels_them_and_keeps_what_was_written(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", 12)
    embedder = AheadEmbedder(root / ".pinakes" / "index.db", interrupt_at=2)
    with pytest.raises(KeyboardInterrupt):
        run_sync(root, SyncOptions(), embedder=embedder)  # type: ignore[arg-type]
    assert embedder.collected == 2 and embedder.cancelled == CALLS_AHEAD - 1
    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    try:
        committed = conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
        orphans = conn.execute("SELECT COUNT(*) FROM chunks c LEFT JOIN embeddings e ON e.chunk_id = c.id "
                               "WHERE e.chunk_id IS NULL").fetchone()[0]
    finally:
        conn.close()
    assert committed == 4 and orphans == 0  # the two calls written, two documents each, whole
