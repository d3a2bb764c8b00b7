"""What both providers share: token counting, the no-truncation guard, batches capped by padded
tokens, unit float32 output."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pinakes.embed.base import ModelIdentity
from pinakes.embed.tokens import TokenCounter

if TYPE_CHECKING:
    import numpy as np

# The most padded tokens one model call may see: rows x the longest row's tokens, the special
# tokens the model adds included. A call's activations grow with it (attention scores with
# rows x tokens^2), and ONNX Runtime's arena keeps what the largest call needed: fastembed's int8
# MiniLM peaked at 0.96 GB RSS at 8,192 padded tokens (32 x 256), 0.62 GB at 4,096 and 1.74 GB at
# 16,384 (bench/bench_embed_memory.py, docs/perf/embedding-memory.md, 2026-12-01). 8,192 is the
# default batch_size (32) times MiniLM's max_seq_length (256): at the default settings no batch
# changes, so throughput does not either, while a larger [embedding] batch_size or a longer-input
# model cannot push one call past it. 4,096 would halve sentence-transformers' batches of long
# chunks, +26% CPU per chunk (docs/perf/embedding.md).
MAX_BATCH_TOKENS = 8192


def refuse_too_long(counts: list[int], max_input_tokens: int) -> list[int]:
    """The texts' token counts, or ValueError naming how many exceed the model's input (a model
    would silently truncate them)."""
    too_long = [index for index, count in enumerate(counts) if count > max_input_tokens]
    if too_long:
        first = too_long[0]
        raise ValueError(
            f"{len(too_long)} of {len(counts)} texts exceed the model's {max_input_tokens}-token "
            f"input (the first, #{first}, has {counts[first]}); chunk them first"
        )
    return counts


def plan_batches(token_counts: Sequence[int], special_tokens: int, batch_size: int,
                 max_batch_tokens: int = MAX_BATCH_TOKENS, call_tokens: int | None = None) -> list[list[int]]:
    """The texts' indices in model calls: longest first (each call is padded to its longest row, so
    sorting keeps padding small), at most `batch_size` rows and at most `max_batch_tokens` padded
    tokens per call. A text longer than the cap on its own is still embedded, alone.

    With `call_tokens` (what one more model call costs, in padded tokens' worth of work), the sorted
    run is cut where a shorter batch saves more padding than the call costs (`_cut_by_cost`); without
    it every batch is filled (a model whose batches of a few rows cost far more per row)."""
    if batch_size < 1 or max_batch_tokens < 1:
        raise ValueError(f"batch_size ({batch_size}) and max_batch_tokens ({max_batch_tokens}) must be positive")
    order = sorted(range(len(token_counts)), key=lambda index: token_counts[index], reverse=True)
    if call_tokens is not None:
        widths = [token_counts[index] + special_tokens for index in order]
        return [order[start:end] for start, end in _cut_by_cost(widths, batch_size, max_batch_tokens, call_tokens)]
    batches: list[list[int]] = []
    current: list[int] = []
    width = 0  # the current batch's padded row length: its first (longest) row's
    for index in order:
        if current and (len(current) >= batch_size or (len(current) + 1) * width > max_batch_tokens):
            batches.append(current)
            current = []
        if not current:
            width = token_counts[index] + special_tokens
        current.append(index)
    if current:
        batches.append(current)
    return batches


def _cut_by_cost(widths: Sequence[int], batch_size: int, max_batch_tokens: int,
                 call_tokens: int) -> list[tuple[int, int]]:
    """[start, end) slices of `widths` (padded row lengths, longest first) of least total cost, a
    slice costing `call_tokens` + its rows x its first row's width, within the row and token caps.

    A first sync streams its documents in groups, each its own sorted set: filling every batch pads
    each group's sparse stretches of lengths again, ~3% more model work at 1,000 pages in 4 groups
    than the one sorted set of the whole corpus (docs/perf/sync.md "batches by cost")."""
    count = len(widths)
    best = [0] + [0] * count  # best[end]: the least cost of widths[:end]
    cut = [0] * (count + 1)   # cut[end]: where the last slice of that plan starts
    for end in range(1, count + 1):
        best_cost = -1
        for start in range(end - 1, max(0, end - batch_size) - 1, -1):
            rows = end - start
            if rows > 1 and rows * widths[start] > max_batch_tokens:
                break  # a longer slice starts at a row at least as wide: over the cap too
            cost = best[start] + call_tokens + rows * widths[start]
            if best_cost < 0 or cost < best_cost:
                best_cost, cut[end] = cost, start
        best[end] = best_cost
    slices: list[tuple[int, int]] = []
    end = count
    while end:
        slices.append((cut[end], end))
        end = cut[end]
    return slices[::-1]


class ProviderEmbedder:
    """Base of the provider classes; subclasses implement `_encode_documents` and `_encode_query`."""

    def __init__(self, identity: ModelIdentity, max_input_tokens: int, counter: TokenCounter,
                 batch_size: int, max_batch_tokens: int = MAX_BATCH_TOKENS, call_tokens: int | None = None) -> None:
        self.identity = identity
        self.max_input_tokens = max_input_tokens
        self.batch_size = batch_size
        self.max_batch_tokens = max_batch_tokens
        # What one more model call costs in padded tokens' worth of work (`plan_batches`); None
        # where a call of a few rows costs far more per row than a full one.
        self.call_tokens = call_tokens
        self._counter = counter

    @property
    def token_counter(self) -> TokenCounter:
        """The counter `count_tokens` uses (a Ray worker sends it to the driver, which chunks with it)."""
        return self._counter

    def count_tokens(self, text: str) -> int:
        return self._counter.count(text)

    def count_tokens_batch(self, texts: Sequence[str]) -> list[int]:
        return self._counter.count_batch(texts)

    def embed_documents(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        """Unit float32 vectors, one row per text. A text longer than max_input_tokens is refused:
        the model would embed only its head, and nothing downstream could tell.

        However many texts are passed, the model sees one bounded batch at a time (`plan_batches`:
        at most `batch_size` rows and `max_batch_tokens` padded tokens), so memory does not grow
        with the input; only the result (dim float32 per text) does."""
        import numpy as np

        texts = list(texts)
        if not texts:
            return np.zeros((0, self.identity.dim), dtype=np.float32)
        counts = refuse_too_long(self.count_tokens_batch(texts), self.max_input_tokens)
        size = batch_size or self.batch_size
        vectors = np.empty((len(texts), self.identity.dim), dtype=np.float32)
        for batch in plan_batches(counts, self._counter.special_tokens, size, self.max_batch_tokens, self.call_tokens):
            encoded = self._encode_documents([texts[index] for index in batch], len(batch))
            vectors[batch] = self._unit_rows(encoded, len(batch))
        return vectors

    def embed_query(self, text: str) -> np.ndarray:
        """One unit float32 vector. A query past max_input_tokens is embedded from its head only."""
        return self._unit_rows(self._encode_query(text).reshape(1, -1), 1)[0]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Unit float32 vectors, one row per query, each as `embed_query` gives it (a query past
        max_input_tokens from its head), in bounded batches (`plan_batches`)."""
        import numpy as np

        texts = list(texts)
        vectors = np.empty((len(texts), self.identity.dim), dtype=np.float32)
        counts = [min(count, self.max_input_tokens) for count in self.count_tokens_batch(texts)] if texts else []
        for batch in plan_batches(counts, self._counter.special_tokens, self.batch_size, self.max_batch_tokens):
            vectors[batch] = self._unit_rows(self._encode_queries([texts[index] for index in batch]), len(batch))
        return vectors

    def _encode_documents(self, texts: list[str], batch_size: int) -> np.ndarray:
        """One model call's vectors, one row per text, in the order given. `texts` is one batch of
        `plan_batches` (longest first, `batch_size` = its row count)."""
        raise NotImplementedError

    def _encode_query(self, text: str) -> np.ndarray:
        raise NotImplementedError

    def _encode_queries(self, texts: list[str]) -> np.ndarray:
        """One batch's query vectors, in the order given: a call per query unless the provider's
        model embeds queries in one call."""
        import numpy as np

        return np.stack([np.asarray(self._encode_query(text)).reshape(-1) for text in texts])

    def _unit_rows(self, vectors: object, rows: int) -> np.ndarray:
        import numpy as np

        matrix = np.asarray(vectors, dtype=np.float32)
        if matrix.shape != (rows, self.identity.dim):
            raise RuntimeError(
                f"{self.identity.provider} returned vectors of shape {matrix.shape}, "
                f"expected ({rows}, {self.identity.dim})"
            )
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        # Re-normalised here whatever the provider did: search scores are plain dot products.
        return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
