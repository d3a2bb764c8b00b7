"""Embedding: the `Embedder` interface, its two providers, the packaged offline model, coherence.

Importing this package is cheap: numpy, torch, sentence_transformers and fastembed are imported
only by `load_embedder`, inside the provider it selects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pinakes.embed.base import META_KEYS, Embedder, ModelIdentity, identity_meta

if TYPE_CHECKING:
    from pinakes.embed.loader import PROVIDERS, check_max_tokens, load_embedder, load_for_kb

_FROM_LOADER = ("PROVIDERS", "check_max_tokens", "load_embedder", "load_for_kb")


def __getattr__(name: str) -> Any:
    # The loader (and the packaged-model table behind it) loads on first use: a no-op sync imports
    # this package for the model identity's helpers alone, on every commit.
    if name in _FROM_LOADER:
        from pinakes.embed import loader

        return getattr(loader, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "META_KEYS",
    "PROVIDERS",
    "Embedder",
    "ModelIdentity",
    "check_max_tokens",
    "identity_meta",
    "load_embedder",
    "load_for_kb",
]
