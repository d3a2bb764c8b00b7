"""How texts become model calls: longest first, in batches capped by rows and padded tokens, cut by
cost where the provider says what a call costs (`plan_batches`), and the embed stage's calls made of
whole batches (`calls_of_whole_batches`)."""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral

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
    if call_tokens is not None and call_tokens < 1:
        raise ValueError(f"call_tokens ({call_tokens}) must be positive: a call is never free")
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


def calls_of_whole_batches(embedder: object, counts: Sequence[int], batch_size: int, most_texts: int) -> list[list[int]]:
    """`counts`' indices, longest first (`plan_batches`' order), in calls of at most `most_texts`
    (or one batch, if larger) made of the model batches `embedder` would plan over all of them:
    each call then plans, within its own texts, the batches the whole set's plan has there (a least-
    cost cut is least-cost on each run of its batches), where fixed slices of the sorted order would
    cut a batch of the whole plan in two at every slice's end. An embedder that does not say how it
    plans (no `max_batch_tokens` and `token_counter`) gets fixed slices."""
    max_batch_tokens = _planning_number(embedder, "max_batch_tokens", getattr(embedder, "max_batch_tokens", None))
    counter = getattr(embedder, "token_counter", None)
    special = _planning_number(embedder, "special_tokens", getattr(counter, "special_tokens", None))
    if max_batch_tokens is None or special is None:
        order = sorted(range(len(counts)), key=lambda index: counts[index], reverse=True)
        return [order[start:start + most_texts] for start in range(0, len(order), most_texts)]
    call_tokens = _planning_number(embedder, "call_tokens", getattr(embedder, "call_tokens", None))
    calls: list[list[int]] = []
    current: list[int] = []
    for batch in plan_batches(counts, special, batch_size, max_batch_tokens, call_tokens):
        if current and len(current) + len(batch) > most_texts:
            calls.append(current)
            current = []
        current.extend(batch)
    if current:
        calls.append(current)
    return calls


def _planning_number(embedder: object, name: str, value: object) -> int | None:
    """An embedder that says how it plans is taken at its word: a value that is not a whole number is
    a bug to hear of, not a reason to plan differently in silence."""
    if value is None:
        return None
    refused = TypeError(f"{type(embedder).__name__}.{name} must be a whole number to plan batches with, not {value!r}")
    if isinstance(value, bool):  # an Integral, and no number of tokens
        raise refused
    if isinstance(value, Integral):
        return int(value)
    raise refused


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
