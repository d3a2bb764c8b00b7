"""The local cross-encoders (`[rerank] provider = "sentence-transformers"` or `"fastembed"`, the
registry's entries of embed/registry.py): sentence-transformers' CrossEncoder and fastembed's
TextCrossEncoder, both reporting sigmoid(logit) per (query, passage), so a threshold fitted under
one provider means the same thing under the other.

A local reranker that cannot run is an error, never a silent skip (search/rerank.py says why).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pinakes.embed.hub import fastembed_cache_dir, hf_home
from pinakes.errors import MissingExtraError, ModelUnavailableError

if TYPE_CHECKING:
    from pinakes.embed.untyped import FastembedModel, SentenceTransformersModel
    from pinakes.manifest import RerankSection
    from pinakes.search.rerank import RerankRequest


def load_sentence_transformers(section: RerankSection, request: RerankRequest) -> SentenceTransformersReranker:
    return SentenceTransformersReranker(section.model, section.revision, section.batch_size, request.offline)


def load_fastembed(section: RerankSection, request: RerankRequest) -> FastEmbedReranker:
    return FastEmbedReranker(section.model, section.batch_size, request.offline)


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
            self._encoder: SentenceTransformersModel = CrossEncoder(model, revision=revision, device="cpu", local_files_only=offline)
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
            self._encoder: FastembedModel = TextCrossEncoder(
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
