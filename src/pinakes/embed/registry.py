"""The model layer's extension points, each declared once: the embedding providers (`[embedding]
provider`), where a sync runs the model (`[embedding] executor`) and the rerankers (`[rerank]
provider`).

Everything that needs to know about one reads its entry here, so adding one is one entry:
- the manifest's validation: the names it accepts, and the keys each entry takes beyond its
  section's common ones (a key only other entries take is refused, naming them);
- doctor: the pip extra and the module it installs (located with find_spec, never imported), where
  a downloaded model's weights are kept, and whether the model runs here or behind an endpoint
  (which of doctor's checks apply);
- `pnk init`: the provider a new KB names and its install hint, the endpoint providers
  `--embedding` offers; a generated CI workflow's extras (ci/steps.py);
- docs/generate.py's manifest reference (the values `provider` and `executor` accept);
- the loaders, which resolve an entry's `load` ("module:function") only when a model loads, on a Ray
  worker as in this process (embed/loader.py, search/rerank.py);
- the sync, which connects an executor whose entry has a `connect` before it writes anything
  (embed/connect.py), and `pnk sync --executor`'s choices.

Importing this module imports no provider: it sits below the manifest, which reads it on every
load (tests/test_layers.py). The rerankers' implementations live in search/, above it, and are named
here as data only. docs/architecture.md, "Adding an embedding provider", walks through one entry;
tests/test_registries.py registers a fake provider, executor and reranker the same way
(`monkeypatch.setitem(PROVIDERS, spec.name, spec)`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Literal

# Where the model runs: in this process ("here": its weights are on this machine), behind an
# endpoint the user runs or rents ("endpoint"), or on a cluster's workers ("cluster", an executor).
Runs = Literal["here", "endpoint", "cluster"]
# How a provider's model is told apart from another (embed/base.py `ModelIdentity`): the digest of
# its weights, known from a local directory or the hub cache before loading ("snapshot") or only once
# loaded ("loaded"); or the vectors its endpoint gives a fixed probe ("probe", embed/remote_identity.py).
Identity = Literal["snapshot", "loaded", "probe"]
# Where a downloaded model is kept (embed/hub.py `local_copy`): the Hugging Face hub cache, or
# fastembed's cache under HF_HOME.
Cache = Literal["hub", "fastembed"]


@dataclass(frozen=True)
class ProviderSpec:
    """One embedding provider: what `[embedding] provider = "<name>"` selects."""

    name: str
    load: str  # "module:function" taking a loader.LoadRequest, returning an Embedder; imported only to load
    summary: str  # what it runs, in doctor's extras lines and the docs
    extra: str | None = None  # the pip extra that installs it; None: nothing to install
    requires: str | None = None  # the module that extra installs (doctor locates it, never imports it)
    keys: tuple[str, ...] = ()  # its own [embedding] keys (EmbeddingSection fields), refused with any other
    runs: Runs = "here"
    identity: Identity = "loaded"
    cache: Cache | None = None  # None: no downloaded weights to locate
    packaged: bool = False  # loads the packaged offline model when the manifest names it (embed/packaged.py)

    @property
    def runs_here(self) -> bool:
        """Its model runs in this process: a Ray worker can hold it, doctor looks for its weights."""
        return self.runs == "here"


@dataclass(frozen=True)
class ExecutorSpec:
    """One place a sync runs the model: what `[embedding] executor` and `pnk sync --executor` name."""

    name: str
    summary: str
    extra: str | None = None
    requires: str | None = None
    # "cluster": it holds the model itself, on a cluster's workers, so it runs only a provider whose
    # model runs here (doctor also checks that the cluster answers).
    runs: Runs = "here"
    # "module:function" taking an embed.connect.ConnectRequest and returning a ConnectedEmbedder: a run
    # on it connects before the pipeline writes anything, and closes it when the run ends
    # (embed/connect.py). None: the model loads in the sync's own process.
    connect: str | None = None

    def refuses(self, provider: ProviderSpec) -> bool:
        """Whether it cannot run `provider`'s model (one that already runs behind an endpoint)."""
        return self.runs == "cluster" and not provider.runs_here


@dataclass(frozen=True)
class RerankerSpec:
    """One reranker: what `[rerank] provider = "<name>"` selects."""

    name: str
    load: str  # "module:function" in search/ taking (RerankSection, rerank.RerankRequest), giving a Reranker
    summary: str
    extra: str | None = None
    requires: str | None = None
    keys: tuple[str, ...] = ()  # its own [rerank] keys (RerankSection fields), refused with any other
    runs: Runs = "here"
    cache: Cache | None = None
    batch_size: int = 16  # the default [rerank] batch_size: pairs per model call, or texts per request

    @property
    def runs_here(self) -> bool:
        return self.runs == "here"


# The [embedding] keys of a provider behind an OpenAI-compatible endpoint (EmbeddingSection's
# RemoteEmbedding says what each means).
ENDPOINT_EMBEDDING_KEYS = ("base_url", "api_key_env", "concurrency", "timeout_s", "search_timeout_s",
                           "max_input_tokens", "tokenizer", "input_usd_per_mtok")
# The [rerank] keys of a reranker behind an HTTP endpoint (RerankSection's HTTPRerank).
ENDPOINT_RERANK_KEYS = ("base_url", "api", "api_key_env", "timeout_s", "concurrency", "input_usd_per_mtok",
                        "usd_per_1k_search_units")

# In the order error messages list them; the first is a refusal's example.
PROVIDERS: dict[str, ProviderSpec] = {spec.name: spec for spec in (
    ProviderSpec("sentence-transformers", "pinakes.embed.provider_st:load",
                 "the sentence-transformers embedding backend", extra="st", requires="sentence_transformers",
                 identity="snapshot", cache="hub", packaged=True),
    ProviderSpec("fastembed", "pinakes.embed.provider_fastembed:load",
                 "the fastembed embedding backend (ONNX, no torch)", extra="light", requires="fastembed",
                 cache="fastembed", packaged=True),
    ProviderSpec("openai-compatible", "pinakes.embed.provider_openai:load",
                 'embedding through an OpenAI-compatible server ([embedding] provider = "openai-compatible")',
                 extra="remote", requires="openai", keys=ENDPOINT_EMBEDDING_KEYS, runs="endpoint",
                 identity="probe"),
)}

# The provider `pnk init` names for a new KB's local model, in order of preference: the first whose
# module is installed, else the first (named for the remedy). init.py says why fastembed comes first.
NEW_KB_PROVIDERS = ("fastembed", "sentence-transformers")

EXECUTORS: dict[str, ExecutorSpec] = {spec.name: spec for spec in (
    ExecutorSpec("local", "the sync's own process"),
    ExecutorSpec("ray", "the embed stage on a Ray cluster (pnk sync --executor ray)", extra="ray",
                 requires="ray", runs="cluster", connect="pinakes.embed.executor_ray:connect"),
)}

# The local ones mirror the embedding providers of the same name (same extra, same cache), and
# report the same sigmoid scores (search/rerank_local.py).
RERANKERS: dict[str, RerankerSpec] = {spec.name: spec for spec in (
    RerankerSpec("sentence-transformers", "pinakes.search.rerank_local:load_sentence_transformers",
                 "sentence-transformers' CrossEncoder", extra="st", requires="sentence_transformers", cache="hub"),
    RerankerSpec("fastembed", "pinakes.search.rerank_local:load_fastembed", "fastembed's TextCrossEncoder",
                 extra="light", requires="fastembed", cache="fastembed"),
    # One request per search where the server allows it (TEI's default limit is 32 texts).
    RerankerSpec("http", "pinakes.search.rerank_remote:load", "a reranker behind an HTTP endpoint",
                 keys=ENDPOINT_RERANK_KEYS, runs="endpoint", batch_size=32),
)}

# The reranker when [rerank] names none and the embedding provider has none of its own name that
# runs here (a remote embedding model): the lighter local one.
FALLBACK_RERANKER = "fastembed"


def default_reranker(embedding_provider: str) -> str:
    """`[rerank] provider`'s default: the embedding provider's own, else FALLBACK_RERANKER."""
    spec = RERANKERS.get(embedding_provider)
    return embedding_provider if spec is not None and spec.runs_here else FALLBACK_RERANKER


def endpoint_providers() -> tuple[str, ...]:
    """The providers whose model runs behind an endpoint the user names (`pnk init --embedding`)."""
    return tuple(name for name, spec in PROVIDERS.items() if spec.runs == "endpoint")


def provider_keys() -> tuple[str, ...]:
    """Every [embedding] key some provider takes as its own, in the order the providers declare them."""
    return tuple(dict.fromkeys(key for spec in PROVIDERS.values() for key in spec.keys))


def reranker_keys() -> tuple[str, ...]:
    """Every [rerank] key some reranker takes as its own."""
    return tuple(dict.fromkeys(key for spec in RERANKERS.values() for key in spec.keys))


def entry_point(reference: str) -> object:
    """The function a spec's `load` names ("module:function"), its module imported now."""
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)
