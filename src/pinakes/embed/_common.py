"""What both providers share: token counting, the no-truncation guard, unit float32 output."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pinakes.embed.base import ModelIdentity
from pinakes.embed.tokens import TokenCounter

if TYPE_CHECKING:
    import numpy as np


class ProviderEmbedder:
    """Base of the provider classes; subclasses implement `_encode_documents` and `_encode_query`."""

    def __init__(self, identity: ModelIdentity, max_input_tokens: int, counter: TokenCounter,
                 batch_size: int) -> None:
        self.identity = identity
        self.max_input_tokens = max_input_tokens
        self.batch_size = batch_size
        self._counter = counter

    def count_tokens(self, text: str) -> int:
        return self._counter.count(text)

    def count_tokens_batch(self, texts: Sequence[str]) -> list[int]:
        return self._counter.count_batch(texts)

    def embed_documents(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        """Unit float32 vectors, one row per text. A text longer than max_input_tokens is refused:
        the model would embed only its head, and nothing downstream could tell."""
        import numpy as np

        texts = list(texts)
        if not texts:
            return np.zeros((0, self.identity.dim), dtype=np.float32)
        counts = self.count_tokens_batch(texts)
        too_long = [index for index, count in enumerate(counts) if count > self.max_input_tokens]
        if too_long:
            first = too_long[0]
            raise ValueError(
                f"{len(too_long)} of {len(texts)} texts exceed the model's {self.max_input_tokens}-token "
                f"input (the first, #{first}, has {counts[first]}); chunk them first"
            )
        size = batch_size or self.batch_size
        return self._unit_rows(self._encode_documents(texts, size), len(texts))

    def embed_query(self, text: str) -> np.ndarray:
        """One unit float32 vector. A query past max_input_tokens is embedded from its head only."""
        return self._unit_rows(self._encode_query(text).reshape(1, -1), 1)[0]

    def _encode_documents(self, texts: list[str], batch_size: int) -> np.ndarray:
        raise NotImplementedError

    def _encode_query(self, text: str) -> np.ndarray:
        raise NotImplementedError

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
