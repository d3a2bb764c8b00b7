"""Test doubles. `FakeEmbedder` implements the Embedder interface deterministically and instantly
(hashed bag of words), so sync and search logic can be tested without loading a model; a test makes
every provider load one with `substitute_embedder`. Real models are exercised by the embedding tests
and the end-to-end tests that are marked heavy."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

import numpy as np
import xxhash

from pinakes.embed.base import Embedder, ModelIdentity
from pinakes.embed.registry import PROVIDERS
from pinakes.manifest import EmbeddingSection

if TYPE_CHECKING:
    import pytest

    from pinakes.embed.loader import LoadRequest

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


class HashEmbedder(FakeEmbedder):
    """FakeEmbedder at 64 dimensions (texts sharing no word have cosine 0, up to hash collisions)
    under an identity a manifest can name: `sentence-transformers` / `test/hash-bow` / 64, what the
    search tests' KBs declare (tests/kb_helpers.py writes it into their manifests)."""

    def __init__(self, dim: int = 64, model: str = "test/hash-bow", provider: str = "sentence-transformers"):
        super().__init__(dim=dim, model=model, provider=provider)


class VectorTableEmbedder(HashEmbedder):
    """Hand-placed vectors: a text in `table` embeds as its vector (normalised), any other text by
    its hashed words; every query embeds as `query` when given. For tests that reason about exact
    cosines, built through a real sync: the chunk texts the sync embeds are the table's keys (the
    sync embeds each chunk's context, a blank line, then its text: the context is set aside here)."""

    def __init__(self, table: Mapping[str, Sequence[float]], query: Sequence[float] | None = None,
                 model: str = "test/vector-table"):
        dims: set[int] = {len(vector) for vector in table.values()} | ({len(query)} if query is not None else set[int]())
        if len(dims) != 1:
            raise ValueError(f"every placed vector needs the same dimension, not {sorted(dims)}")
        super().__init__(dim=dims.pop(), model=model)
        self.table = {text: _unit(vector) for text, vector in table.items()}
        self.query = None if query is None else _unit(query)
        self.embedded: list[str] = []  # every document text the sync asked for, in order

    def _vector(self, text: str) -> np.ndarray:
        chunk = _chunk_text(text)
        return self.table[chunk] if chunk in self.table else super()._vector(text)

    def embed_documents(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        self.embedded.extend(texts)
        return super().embed_documents(texts, batch_size)

    @property
    def embedded_chunks(self) -> list[str]:
        """The chunk texts of `embedded`, their contexts set aside."""
        return [_chunk_text(text) for text in self.embedded]

    def embed_query(self, text: str) -> np.ndarray:
        return self.query if self.query is not None else super().embed_query(text)


def _chunk_text(embedded: str) -> str:
    """The chunk's own text in what the sync embeds (its context, a blank line, its text)."""
    return embedded.split("\n\n", 1)[1] if "\n\n" in embedded else embedded


def _unit(vector: Sequence[float]) -> np.ndarray:
    array = np.asarray(vector, dtype=np.float32)
    return array / np.float32(np.linalg.norm(array))


def default_section(provider: str) -> EmbeddingSection:
    """The manifest's [embedding] for the packaged default model under `provider`."""
    return EmbeddingSection(provider=provider, model="sentence-transformers/all-MiniLM-L6-v2", dim=384)


class EmbedderLoad(Protocol):
    """What `load_substitute` calls: a function of the section and the loader's offline and threads
    (a lambda written `lambda section, offline=None, threads=None: ...` takes its types from here)."""

    def __call__(self, section: EmbeddingSection, *, offline: bool | None = None,
                 threads: int | None = None) -> Embedder: ...


_substitute: EmbedderLoad | None = None


def substitute_embedder(monkeypatch: pytest.MonkeyPatch | None, load: EmbedderLoad) -> None:
    """Make every registered [embedding] provider load `load(section, offline=..., threads=...)`'s
    model instead of its own: each is registered again with this module as its implementation
    (embed/registry.py), so a sync, a search and a status all load it through the real loader. With
    `monkeypatch`, undone after the test; with None (a child process's script), for the process."""
    global _substitute
    specs = {name: replace(spec, load=f"{__name__}:load_substitute", packaged=False)
             for name, spec in PROVIDERS.items()}
    if monkeypatch is None:
        _substitute = load
        PROVIDERS.update(specs)
        return
    monkeypatch.setattr(sys.modules[__name__], "_substitute", load)
    for name, spec in specs.items():
        monkeypatch.setitem(PROVIDERS, name, spec)


def load_substitute(request: LoadRequest) -> Embedder:
    """This module as a provider's implementation: the substitute's model."""
    if _substitute is None:
        raise RuntimeError("substitute_embedder names the model to load")
    return _substitute(request.section, offline=request.offline, threads=request.threads)
