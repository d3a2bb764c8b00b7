"""Embedding: the `Embedder` interface, its two providers, the packaged offline model, coherence.

Importing this package is cheap: numpy, torch, sentence_transformers and fastembed are imported
only by `load_embedder`, inside the provider it selects.
"""

from __future__ import annotations

from pinakes.embed.base import META_KEYS, Embedder, ModelIdentity, identity_meta
from pinakes.embed.loader import DEFAULT_BATCH_SIZE, PROVIDERS, check_max_tokens, load_embedder

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "META_KEYS",
    "PROVIDERS",
    "Embedder",
    "ModelIdentity",
    "check_max_tokens",
    "identity_meta",
    "load_embedder",
]
