"""Test doubles. `FakeEmbedder` implements the Embedder interface deterministically and instantly
(hashed bag of words), so sync and search logic can be tested without loading a model. Real
models are exercised by the embedding tests and the end-to-end tests that are marked heavy."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import xxhash

from pinakes.embed.base import ModelIdentity
from pinakes.manifest import EmbeddingSection

WORD = re.compile(r"\w+", re.UNICODE)


class FakeEmbedder:
    def __init__(self, dim: int = 384, model: str = "sentence-transformers/all-MiniLM-L6-v2",
                 provider: str = "fastembed"):  # what the demo KB and a fresh `pnk init` name
        self.identity = ModelIdentity(provider, model, "fake", "0" * 64, dim)
        self.max_input_tokens = 254
        self.calls = 0

    def count_tokens(self, text: str) -> int:
        return len(WORD.findall(text))

    def count_tokens_batch(self, texts: Sequence[str]) -> list[int]:
        return [self.count_tokens(t) for t in texts]

    def _vector(self, text: str) -> np.ndarray:
        vector = np.zeros(self.identity.dim, dtype=np.float32)
        for word in WORD.findall(text.lower()):
            vector[xxhash.xxh32_intdigest(word.encode()) % self.identity.dim] += 1.0
        norm = float(np.linalg.norm(vector))
        if norm == 0:
            vector[0] = 1.0
            return vector
        return vector / norm

    def embed_documents(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        self.calls += 1
        if not texts:
            return np.zeros((0, self.identity.dim), dtype=np.float32)
        return np.stack([self._vector(t) for t in texts]).astype(np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self._vector(text)


def default_section(provider: str) -> EmbeddingSection:
    """The manifest's [embedding] for the packaged default model under `provider`."""
    return EmbeddingSection(provider=provider, model="sentence-transformers/all-MiniLM-L6-v2", dim=384)
