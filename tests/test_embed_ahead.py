"""The embed stage on an embedder that takes calls ahead (embed/base.py `DispatchAhead`, what the Ray
executor implements): a group's cross-document batches are sent up to `calls_ahead` before the
oldest is written, written in order, and the index is the one a synchronous sync writes. Fast: the
embedder is a deterministic fake that records what was outstanding when."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import cast

import numpy as np
import pytest

from pinakes.embed.base import DispatchAhead
from pinakes.embed.tokens import TokenCounter
from pinakes.pipeline import embed as embed_step
from pinakes.pipeline.report import SyncReport
from pinakes.pipeline.run import SyncOptions
from pinakes.sync.engine import run_sync
from tests.fakes import HashEmbedder
from tests.kb_helpers import Doc, init_test_kb, packaged_token_counter, write_documents

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
        self.sent_calls: list[list[str]] = []
        self.collected = 0
        self.cancelled = 0

    @property
    def calls_ahead(self) -> int:
        return CALLS_AHEAD

    def embed_documents_async(self, texts: Sequence[str], batch_size: int | None = None, *,
                              known_counts: Mapping[str, int] | None = None) -> object:
        self.outstanding.append(list(texts))
        self.sent_calls.append(list(texts))
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
    ahead = run_sync(ahead_root, SyncOptions(), embedder=embedder)
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
    synchronous: SyncReport = run_sync(synchronous_root, SyncOptions(), embedder=HashEmbedder())
    assert not isinstance(HashEmbedder(), DispatchAhead)
    assert index_dump(ahead_root) == index_dump(synchronous_root)
    assert (ahead.chunks_embedded, ahead.chunks_reused) == (synchronous.chunks_embedded, synchronous.chunks_reused)
    assert ahead.chunks_reused >= 1  # the twin


@pytest.mark.usefixtures("two_chunk_batches")
def test_ctrl_c_while_calls_are_out_cancels_them_and_keeps_what_was_written(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", 12)
    embedder = AheadEmbedder(root / ".pinakes" / "index.db", interrupt_at=2)
    with pytest.raises(KeyboardInterrupt):
        run_sync(root, SyncOptions(), embedder=embedder)
    assert embedder.collected == 2 and embedder.cancelled == CALLS_AHEAD - 1
    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    try:
        committed = conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
        orphans = conn.execute("SELECT COUNT(*) FROM chunks c LEFT JOIN embeddings e ON e.chunk_id = c.id "
                               "WHERE e.chunk_id IS NULL").fetchone()[0]
    finally:
        conn.close()
    assert committed == 4 and orphans == 0  # the two calls written, two documents each, whole


class CountingAheadEmbedder(AheadEmbedder):
    """AheadEmbedder counting with the packaged model's tokenizer (whose counts add up over whitespace),
    noting the counts each call was handed."""

    def __init__(self, index_db: Path, counter: TokenCounter) -> None:
        super().__init__(index_db)
        self.token_counter = counter
        self.known_handed: list[Mapping[str, int]] = []

    def count_tokens(self, text: str) -> int:
        return self.token_counter.count(text)

    def count_tokens_batch(self, texts: Sequence[str]) -> list[int]:
        return self.token_counter.count_batch(texts)

    def embed_documents_async(self, texts: Sequence[str], batch_size: int | None = None, *,
                              known_counts: Mapping[str, int] | None = None) -> object:
        self.known_handed.append(dict(known_counts or {}))
        return super().embed_documents_async(texts, batch_size, known_counts=known_counts)


@pytest.mark.usefixtures("two_chunk_batches")
def test_every_text_sent_ahead_comes_with_the_count_the_tokenizer_gives(tmp_path: Path) -> None:
    """The stage hands the executor the counts the chunker already knows, so a cluster's driver does not
    count every text again to plan its model batches."""
    counter = packaged_token_counter()
    root = make_kb(tmp_path / "kb", 12)
    embedder = CountingAheadEmbedder(root / ".pinakes" / "index.db", counter)
    report = run_sync(root, SyncOptions(), embedder=embedder)
    assert report.ok and report.chunks_embedded == len(embedder.texts_sent) > 10
    handed = [(text, known.get(text)) for texts, known in zip(embedder.sent_calls, embedder.known_handed, strict=True)
              for text in texts]
    assert all(count is not None for _text, count in handed), [text for text, count in handed if count is None]
    assert [count for _text, count in handed] == counter.count_batch([text for text, _count in handed])


class _Ref:
    def __init__(self, texts: list[str]) -> None:
        self.texts = texts


class _Worker:
    """A Ray actor handle's shape: `embed.remote(texts, size)` gives a reference to its vectors."""

    def __init__(self, batches: list[list[str]]) -> None:
        self.batches = batches
        self.embed = self

    def remote(self, texts: list[str], size: int) -> _Ref:
        self.batches.append(texts)
        return _Ref(texts)


class _Ray:
    def wait(self, refs: list[_Ref], num_returns: int, timeout: float) -> tuple[list[_Ref], list[_Ref]]:
        return refs[:num_returns], refs[num_returns:]

    def get(self, ref: _Ref) -> np.ndarray:
        return np.stack([HashEmbedder(dim=384)._vector(text)  # pyright: ignore[reportPrivateUsage] -- its vectors
                         for text in ref.texts])


class _CountsCounted:
    """A TokenCounter that records the texts it was asked to count."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.special_tokens = counter.special_tokens
        self.asked: list[str] = []

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        self.asked.extend(texts)
        return self.counter.count_batch(texts)


def test_the_cluster_executor_plans_with_the_counts_it_is_handed_and_counts_only_the_rest() -> None:
    from pinakes.embed.base import ModelIdentity
    from pinakes.embed.batching import plan_batches
    from pinakes.embed.executor_ray import RayEmbedder

    counter = packaged_token_counter()
    texts = [("word " * (length % 37 + 1)) + f"text {length}" for length in range(40)]
    true_counts = counter.count_batch(texts)
    known = {text: count for text, count in zip(texts, true_counts, strict=True) if not text.endswith("7")}
    recorded = _CountsCounted(counter)
    batches: list[list[str]] = []
    embedder = RayEmbedder(_Ray(), [_Worker(batches)],
                           identity=ModelIdentity("fastembed", "m", "r", "0" * 64, 384), max_input_tokens=254,
                           counter=cast(TokenCounter, recorded), batch_size=8, address="127.0.0.1:1",  # duck-typed
                           owns_connection=False, on_workers=None)
    rows = embedder.collect(embedder.embed_documents_async(texts, known_counts=known))
    assert rows.shape == (40, 384)
    assert sorted(recorded.asked) == sorted(text for text in texts if text not in known)  # the rest, once
    planned = [[texts[index] for index in batch] for batch in plan_batches(true_counts, counter.special_tokens, 8)]
    assert batches == planned  # the same model batches as counting every text would plan


class _NoSynchronousCalls(CountingAheadEmbedder):
    """A cluster's executor whose synchronous path would plan its batches by counting every text
    again (RayEmbedder.embed_documents hands no counts): the stage must not take it."""

    collecting = False

    def collect(self, call: object) -> np.ndarray:
        self.collecting = True  # the fake computes a collected call's vectors with embed_documents
        try:
            return super().collect(call)
        finally:
            self.collecting = False

    def embed_documents(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        if not self.collecting:
            raise AssertionError(f"{len(texts)} texts sent without the chunker's counts")
        return super().embed_documents(texts, batch_size)


def test_a_document_too_large_for_one_call_reaches_the_executor_with_its_counts(tmp_path: Path) -> None:
    counter = packaged_token_counter()
    root = tmp_path / "kb"
    init_test_kb(root, HashEmbedder().identity)
    small = [Doc(f"docs/page{n:02d}.md", f"# Page {n}\n\nA short page {n} about topic {n % 7}.\n") for n in range(20)]
    manuals = [Doc(f"docs/manual{n}.md", "".join(f"## Section {s}\n\n" + f"Section {s} of manual {n} explains "
                                                 f"step {s}. " * 30 + "\n\n" for s in range(100))) for n in range(2)]
    write_documents(root, small + manuals)
    embedder = _NoSynchronousCalls(root / ".pinakes" / "index.db", counter)
    report = run_sync(root, SyncOptions(), embedder=embedder)
    assert report.ok, report.render_text()
    largest = max(len(texts) for texts in embedder.sent_calls)
    assert largest == embed_step.EMBED_SLICE_CHUNKS and report.chunks_embedded > 3 * largest  # the manuals streamed
    handed = [(text, known.get(text)) for texts, known in zip(embedder.sent_calls, embedder.known_handed, strict=True)
              for text in texts]
    assert len(handed) == report.chunks_embedded
    assert all(count is not None for _text, count in handed), [text for text, count in handed if count is None][:3]
    assert [count for _text, count in handed] == counter.count_batch([text for text, _count in handed])


def test_no_count_is_handed_where_the_tokenizer_is_not_proved_to_add_up(tmp_path: Path) -> None:
    """Counts are summed from a context's and a chunk's only where the tokenizer's counts add up over
    whitespace; WordPiece over whole lines (no pre-tokenizer) does not, and its texts are counted."""
    import json

    config = json.loads(packaged_token_counter().to_str())
    config["pre_tokenizer"] = None
    counter = TokenCounter.from_str(json.dumps(config))
    assert not counter.additive_over_whitespace
    root = tmp_path / "kb"
    init_test_kb(root, HashEmbedder().identity)
    write_documents(root, [Doc(f"docs/d{n:02d}.md", f"# Title {n}\n\nSome words for document {n}, with punctuation; "
                                                     f"and more words.\n\n## Part two\n\nSecond part {n}.\n")
                           for n in range(12)])
    embedder = CountingAheadEmbedder(root / ".pinakes" / "index.db", counter)
    assert run_sync(root, SyncOptions(), embedder=embedder).ok
    assert embedder.sent_calls and not any(embedder.known_handed), embedder.known_handed[:2]
