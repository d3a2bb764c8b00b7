"""The local cross-encoder reranker (spec §4.1, default BAAI/bge-reranker-base).

Two providers, mirroring [embedding]: sentence-transformers' CrossEncoder and fastembed's
TextCrossEncoder. Both report sigmoid(logit) per (query, passage), so a threshold fitted under
one provider means the same thing under the other.

Reranking that was asked for and cannot run is an error, never a silent skip: a search that
quietly fell back to fused order would report scores and confidence from a different scorer than
the one the KB was calibrated on. No PyPI package ships cross-encoder weights usable offline (see
docs/QUALITY.md), so without a model cache the remedy is `rerank = false` or a one-time download.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from pinakes.embed.hub import fastembed_cache_dir, hf_home, prepare_hub_environment, resolve_offline
from pinakes.errors import MissingExtraError, ModelUnavailableError, UsageError

if TYPE_CHECKING:
    from pinakes.manifest import RerankSection

PROVIDERS = ("sentence-transformers", "fastembed")


class Reranker(Protocol):
    model: str

    def score(self, query: str, texts: Sequence[str]) -> list[float]: ...


def _sigmoid(value: float) -> float:
    if value >= 0:
        return 1.0 / (1.0 + math.exp(-value))
    exp = math.exp(value)
    return exp / (1.0 + exp)


class SentenceTransformersReranker:
    def __init__(self, model: str, revision: str | None, batch_size: int, offline: bool):
        try:
            from sentence_transformers import CrossEncoder
        except ImportError as exc:
            raise MissingExtraError("st", "reranking with sentence-transformers", missing_module=exc.name) from exc
        self.model = model
        self.batch_size = batch_size
        try:
            self._encoder: Any = CrossEncoder(model, revision=revision, device="cpu", local_files_only=offline)
        except Exception as exc:  # the hub client raises many types for "not in the cache"
            raise unavailable(model, "sentence-transformers", offline, exc) from exc

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        import torch

        if not texts:
            return []
        logits = self._encoder.predict(
            [(query, text) for text in texts], batch_size=self.batch_size,
            activation_fn=torch.nn.Identity(), show_progress_bar=False,
        )
        return [_sigmoid(float(value)) for value in logits]


class FastEmbedReranker:
    def __init__(self, model: str, batch_size: int, offline: bool):
        try:
            # fastembed ships no type stubs.
            from fastembed.rerank.cross_encoder import TextCrossEncoder  # pyright: ignore[reportMissingTypeStubs]
        except ImportError as exc:
            raise MissingExtraError("light", "reranking with fastembed", missing_module=exc.name) from exc
        self.model = model
        self.batch_size = batch_size
        try:
            # fastembed left alone caches under $TMPDIR; the shared HF cache survives reboots.
            self._encoder: Any = TextCrossEncoder(
                model_name=model, cache_dir=str(fastembed_cache_dir()), local_files_only=offline
            )
        except Exception as exc:
            raise unavailable(model, "fastembed", offline, exc) from exc

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        logits = self._encoder.rerank(query, list(texts), batch_size=self.batch_size)
        return [_sigmoid(float(value)) for value in logits]


def unavailable(model: str, provider: str, offline: bool, cause: BaseException) -> ModelUnavailableError:
    how = "offline mode forbids downloading it" if offline else "it could not be downloaded"
    detail = str(cause).strip().splitlines()[0][:200] if str(cause).strip() else type(cause).__name__
    return ModelUnavailableError(
        f"the reranker {model} ({provider}) has no weights in the local model cache and {how} ({detail})",
        remedy=(
            "search without it: set `rerank = false` under [retrieval] in pinakes.toml, or pass "
            "--no-rerank; or download the model once with network access (unset PNK_OFFLINE / "
            f"HF_HUB_OFFLINE and run a search), which caches it under {hf_home()}"
        ),
    )


def load_reranker(section: RerankSection, offline: bool | None = None) -> Reranker:
    """The reranker the manifest's [rerank] section names (provider, model, revision, batch_size)."""
    local_only = resolve_offline(offline)
    prepare_hub_environment(local_only)
    if section.provider == "sentence-transformers":
        return SentenceTransformersReranker(section.model, section.revision, section.batch_size, local_only)
    if section.provider == "fastembed":
        return FastEmbedReranker(section.model, section.batch_size, local_only)
    raise UsageError(f"unknown rerank provider {section.provider!r}", remedy=f"use one of: {', '.join(PROVIDERS)}")
