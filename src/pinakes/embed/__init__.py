"""Embedding: the `Embedder` interface, the registry of providers, executors and rerankers
(embed/registry.py), their loader, the packaged offline model, coherence.

Importing this package is cheap: numpy, torch, sentence_transformers and fastembed are imported
only by `load_embedder`, inside the provider the registry names.
"""

from __future__ import annotations

from pinakes.embed.base import META_KEYS, Embedder, ModelIdentity, identity_meta
from pinakes.embed.loader import check_max_tokens, load_embedder, load_for_kb
from pinakes.embed.registry import EXECUTORS, PROVIDERS, RERANKERS

__all__ = [
    "EXECUTORS",
    "META_KEYS",
    "PROVIDERS",
    "RERANKERS",
    "Embedder",
    "ModelIdentity",
    "check_max_tokens",
    "identity_meta",
    "load_embedder",
    "load_for_kb",
]
