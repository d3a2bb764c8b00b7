"""The sentence-transformers provider (the `[st]` extra; pulls torch)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes.embed._common import ProviderEmbedder
from pinakes.embed.base import ModelIdentity
from pinakes.embed.hub import hub_cache_dir, repo_cache_name
from pinakes.embed.packaged import sentence_transformers_dir
from pinakes.embed.snapshot import local_weights_identity, snapshot_identity
from pinakes.embed.tokens import TokenCounter
from pinakes.errors import MissingExtraError, ModelUnavailableError

if TYPE_CHECKING:
    import numpy as np

    from pinakes.embed.loader import LoadRequest
    from pinakes.embed.untyped import SentenceTransformersModel

PROVIDER = "sentence-transformers"


class SentenceTransformersEmbedder(ProviderEmbedder):
    def __init__(self, model: SentenceTransformersModel, identity: ModelIdentity, batch_size: int) -> None:
        tokenizer = model.tokenizer
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is None:
            raise ModelUnavailableError(
                f"{identity.model} has no fast (Rust) tokenizer, which Pinakes needs to count tokens",
                remedy="choose a model that ships tokenizer.json",
            )
        counter = TokenCounter(backend)
        max_seq_length = model.max_seq_length or tokenizer.model_max_length
        super().__init__(identity, int(max_seq_length) - counter.special_tokens, counter, batch_size)
        self._model = model

    def _encode_documents(self, texts: list[str], batch_size: int) -> np.ndarray:
        encode = getattr(self._model, "encode_document", self._model.encode)
        return encode(texts, batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=True,
                      show_progress_bar=False)

    def _encode_query(self, text: str) -> np.ndarray:
        return self._encode_queries([text])

    def _encode_queries(self, texts: list[str]) -> np.ndarray:
        encode = getattr(self._model, "encode_query", self._model.encode)
        return encode(texts, batch_size=len(texts), convert_to_numpy=True, normalize_embeddings=True,
                      show_progress_bar=False)


def load(request: LoadRequest) -> SentenceTransformersEmbedder:
    """The model `request.section` names (the registry's `load` for "sentence-transformers"). The
    request's thread cap is not applied: torch's thread count belongs to the whole process."""
    model, packaged, offline = request.section.model, request.packaged, request.offline
    revision = None if packaged is not None else request.section.revision or None
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise MissingExtraError("st", "the sentence-transformers embedding provider",
                                missing_module=exc.name or "sentence_transformers") from exc
    _quiet_weight_loading()

    loaded: SentenceTransformersModel
    if packaged is not None:
        model_dir = sentence_transformers_dir(packaged)
        loaded = SentenceTransformer(str(model_dir), local_files_only=True)
        identity_parts = (packaged.revision, packaged.weights.sha256)
    elif os.path.isdir(model):
        loaded = _load_hub(SentenceTransformer, model, None, offline=True)
        identity_parts = local_weights_identity(Path(model))
    else:
        loaded = _load_hub(SentenceTransformer, model, revision, offline=offline)
        identity_parts = snapshot_identity(hub_cache_dir() / repo_cache_name(model), revision)
    dimension = getattr(loaded, "get_embedding_dimension", None) or loaded.get_sentence_embedding_dimension
    dim = dimension()
    if dim is None:
        raise ModelUnavailableError(f"{model} does not report its embedding dimension")
    identity = ModelIdentity(PROVIDER, model, identity_parts[0], identity_parts[1], int(dim))
    return SentenceTransformersEmbedder(loaded, identity, request.section.batch_size)


def _cache_folder_argument() -> str | None:
    """The hub cache, passed only when huggingface_hub's own default (fixed when it was imported)
    disagrees with the environment now; sentence-transformers logs a deprecation warning whenever
    the argument is given."""
    from huggingface_hub import constants

    wanted = str(hub_cache_dir())
    return None if os.path.abspath(constants.HF_HUB_CACHE) == os.path.abspath(wanted) else wanted


def _quiet_weight_loading() -> None:
    """transformers draws a "Loading weights" progress bar on stderr for every load, which would
    interleave with the CLI's output; download progress (huggingface_hub's own bars) stays."""
    try:
        from transformers.utils import logging as transformers_logging
    except ImportError:
        return
    transformers_logging.disable_progress_bar()


def _load_hub(factory: type[SentenceTransformersModel], model: str, revision: str | None, *,
              offline: bool) -> SentenceTransformersModel:
    try:
        return factory(model, revision=revision, cache_folder=_cache_folder_argument(),
                       local_files_only=offline)
    except (OSError, ValueError) as exc:
        if offline:
            raise ModelUnavailableError(
                f"{model} is not in the local Hugging Face cache ({hub_cache_dir()}) and offline mode "
                "forbids downloading it",
                remedy="run once without --offline / PNK_OFFLINE to download it into HF_HOME, or use the "
                "packaged default sentence-transformers/all-MiniLM-L6-v2",
            ) from exc
        raise ModelUnavailableError(
            f"cannot load {model} from the Hugging Face hub: {exc}",
            remedy="check the model id and revision in [embedding] and the network, or use the "
            "packaged default sentence-transformers/all-MiniLM-L6-v2",
        ) from exc
