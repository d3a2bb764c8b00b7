"""The reranker (spec §4.1): the local cross-encoder (default BAAI/bge-reranker-base), or one behind
an HTTP endpoint the user runs (search/rerank_remote.py).

Two local providers, mirroring [embedding]: sentence-transformers' CrossEncoder and fastembed's
TextCrossEncoder. Both report sigmoid(logit) per (query, passage), so a threshold fitted under
one provider means the same thing under the other; the HTTP provider asks its endpoint for the same
normalised score.

A local reranker that was asked for and cannot run is an error, never a silent skip: a search that
quietly fell back to fused order would report scores and confidence from a different scorer than
the one the KB was calibrated on. No PyPI package ships cross-encoder weights usable offline (see
docs/QUALITY.md), so without a model cache the remedy is `rerank = false` or a one-time download.
An HTTP reranker's endpoint is another matter: it may be down or slow at any moment, and an agent
is better served by results now than by an error; so when it fails, the search answers in fused
order, says so in a note (`reranked_or_note`), and its confidence is the un-reranked one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pinakes.budget.errors import BudgetError
from pinakes.embed.hub import fastembed_cache_dir, hf_home, prepare_hub_environment, resolve_offline
from pinakes.errors import MissingExtraError, ModelUnavailableError, RerankEndpointError, UsageError
from pinakes.manifest.sections import HTTP_RERANK_PROVIDER, RERANK_PROVIDERS
from pinakes.search.fusion import Candidate, order_reranked

if TYPE_CHECKING:
    from pinakes.manifest import BudgetSection, RerankSection

PROVIDERS = RERANK_PROVIDERS


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


def load_reranker(section: RerankSection, offline: bool | None = None, *, kb_root: Path | None = None,
                  budget: BudgetSection | None = None, kb_id: str | None = None) -> Reranker:
    """The reranker the manifest's [rerank] section names (provider, model, revision, batch_size).
    The HTTP provider records its identity under `kb_root` and spends through `budget` when priced;
    offline mode does not apply to a server the user runs."""
    if section.provider == HTTP_RERANK_PROVIDER:
        from pinakes.search.rerank_remote import load

        return load(section, kb_root=kb_root, budget=budget, kb_id=kb_id)
    local_only = resolve_offline(offline)
    prepare_hub_environment(local_only)
    if section.provider == "sentence-transformers":
        return SentenceTransformersReranker(section.model, section.revision, section.batch_size, local_only)
    if section.provider == "fastembed":
        return FastEmbedReranker(section.model, section.batch_size, local_only)
    raise UsageError(f"unknown rerank provider {section.provider!r}", remedy=f"use one of: {', '.join(PROVIDERS)}")


# -- an HTTP reranker that fails: results in fused order, and a note ------------------------------------


def reranker_or_note(load: Callable[[], Reranker], notes: list[str]) -> Reranker | None:
    """The reranker `load` gives; None, with a note, when an HTTP reranker cannot be set up (its key's
    variable unset). A local reranker's failure to load stays an error (the module docstring)."""
    try:
        return load()
    except RerankEndpointError as exc:
        notes.append(not_reranked(exc))
        return None


def reranked_or_note(reranker: Reranker, query: str, candidates: list[Candidate], texts: Sequence[str],
                     notes: list[str]) -> list[Candidate] | None:
    """`candidates` scored (their `rerank` set) and in reranked order; None, with a note, when an HTTP
    reranker failed or the budget admits no rerank request: the caller keeps the fused order."""
    try:
        scores = reranker.score(query, texts)
    except RerankEndpointError as exc:
        notes.append(not_reranked(exc))
        return None
    except BudgetError as exc:
        why = " ".join(line.strip() for line in exc.message.splitlines() if line.strip())
        notes.append(f"not reranked, passages are in fused order: the budget admits no rerank request now ({why}); "
                     "raise the cap it names in [budget] or wait for its window to pass (`pnk budget` shows the "
                     "spending), or set [retrieval] rerank = false")
        return None
    for candidate, score in zip(candidates, scores, strict=True):
        candidate.rerank = float(score)
    return order_reranked(candidates)


def not_reranked(exc: RerankEndpointError) -> str:
    remedy = f"; {exc.remedy}" if exc.remedy else ""
    return f"not reranked, passages are in fused order: {exc.message}{remedy}"
