"""What both providers share: token counting, the no-truncation guard, batches capped by padded
tokens (embed/batching.py), unit float32 output."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pinakes.embed.base import ModelIdentity
from pinakes.embed.batching import MAX_BATCH_TOKENS, plan_batches
from pinakes.embed.tokens import TokenCounter

if TYPE_CHECKING:
    import numpy as np


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
