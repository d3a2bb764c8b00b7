"""`load_embedder`: from the manifest's [embedding] section to a loaded model, through the provider
the registry names (embed/registry.py).

The loader holds what every provider shares: refusing a provider this build does not know, the
packaged offline model when the section names it, the Hugging Face environment set before a local
model library is imported, and a `dim` the model does not produce refused. How one provider loads
is its own module's `load(request)`, imported only now (on a Ray worker too: embed/executor_ray.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, cast

from pinakes.embed.base import Embedder
from pinakes.embed.registry import PROVIDERS, ProviderSpec, entry_point
from pinakes.errors import ManifestError

if TYPE_CHECKING:
    from pathlib import Path

    from pinakes.budget.settings import BudgetSection
    from pinakes.embed.packaged import PackagedModel
    from pinakes.embed.settings import EmbeddingSection
    from pinakes.embed.spending import EmbeddingSpending

    class _KBIdentity(Protocol):
        @property
        def id(self) -> str: ...

    class KBSettings(Protocol):
        """What `load_for_kb` reads of a Manifest (the manifest sits above this package)."""

        @property
        def kb(self) -> _KBIdentity: ...

        @property
        def embedding(self) -> EmbeddingSection: ...

        @property
        def budget(self) -> BudgetSection: ...


@dataclass(frozen=True)
class LoadRequest:
    """What a provider's `load` is given: the section, and what this run says about loading it."""

    section: EmbeddingSection
    offline: bool  # resolved (PNK_OFFLINE applied): never download; a server the user runs is no download
    threads: int | None  # the model runtime's thread cap (fastembed's ONNX session); None: its default
    packaged: PackagedModel | None = None  # the packaged offline model the section names, when it does
    kb_root: Path | None = None  # resolves KB-relative paths (a tokenizer file)
    spending: EmbeddingSpending | None = None  # the budget a priced endpoint's requests go through
    for_search: bool = False  # the load is a search's first need (an endpoint's probe is within its deadline)


LoadProvider = Callable[[LoadRequest], Embedder]


def load_embedder(section: EmbeddingSection, *, offline: bool | None = None,
                  threads: int | None = None, kb_root: Path | None = None,
                  spending: EmbeddingSpending | None = None, for_search: bool = False) -> Embedder:
    """Load the model `section` names, refusing rather than hanging or guessing.

    The packaged offline default is used whenever the section names it (and no other revision);
    any other model comes from the Hugging Face cache, downloading into HF_HOME unless `offline`
    (default: the PNK_OFFLINE environment variable) forbids it, in which case a model that is not
    already local raises ModelUnavailableError at once. A provider whose extra is not installed
    raises MissingExtraError; a `dim` the model does not produce raises ManifestError.

    `threads` caps the model runtime's threads for this model (fastembed's ONNX Runtime session);
    None leaves the runtime's default, every core, which a sync's batches want. sentence-transformers
    runs on torch, whose thread count is the whole process's, so it is left alone there.

    A provider behind an endpoint (`openai-compatible`) is probed instead of loaded
    (embed/provider_openai.py): `kb_root` resolves its KB-relative tokenizer, `spending` is the budget
    a priced endpoint's requests go through (`spending_for`); offline mode does not apply to a server
    the user runs; `for_search`: the probe is a search's first request, within its `search_timeout_s`.
    """
    spec = provider_spec(section.provider)
    from pinakes.embed.hub import prepare_hub_environment, resolve_offline

    is_offline = resolve_offline(offline)
    if spec.runs_here:
        prepare_hub_environment(is_offline)
    request = LoadRequest(section, is_offline, threads, packaged_for(spec, section), kb_root, spending, for_search)
    embedder = cast(LoadProvider, entry_point(spec.load))(request)
    if embedder.identity.dim != section.dim:
        raise ManifestError(
            f"[embedding] dim = {section.dim}, but {section.model} ({section.provider}) produces "
            f"{embedder.identity.dim}-dimensional vectors",
            remedy=f"set [embedding] dim = {embedder.identity.dim}, or name the model you meant",
        )
    return embedder


def provider_spec(name: str) -> ProviderSpec:
    """The registered provider `name`; ManifestError for one this build does not know."""
    spec = PROVIDERS.get(name)
    if spec is None:
        raise ManifestError(f"unknown [embedding] provider {name!r}", remedy=f"use one of: {', '.join(PROVIDERS)}")
    return spec


def packaged_for(spec: ProviderSpec, section: EmbeddingSection) -> PackagedModel | None:
    """The packaged model the section names, when its provider loads packaged models and the section
    pins no other revision."""
    if not spec.packaged:
        return None
    from pinakes.embed.packaged import packaged_model

    packaged = packaged_model(spec.name, section.model)
    if packaged is None or (section.revision or None) not in (None, packaged.revision):
        return None
    return packaged


def check_max_tokens(max_tokens: int, embedder: Embedder) -> None:
    """Refuse a [chunking] max_tokens the model cannot embed whole (spec §4.6: a hard error, never
    a silent truncation)."""
    if max_tokens > embedder.max_input_tokens:
        raise ManifestError(
            f"[chunking] max_tokens = {max_tokens}, but {embedder.identity.model} embeds at most "
            f"{embedder.max_input_tokens} tokens (its max_seq_length minus special tokens); "
            "longer chunks would be silently truncated",
            remedy=f"set [chunking] max_tokens to {embedder.max_input_tokens} or less",
        )


def spending_for(kb_root: Path, manifest: KBSettings) -> EmbeddingSpending | None:
    """The budget a priced remote endpoint's requests go through; None for every free model."""
    remote = manifest.embedding.remote
    if remote is None or remote.input_usd_per_mtok is None:
        return None
    from pinakes.embed.spending import EmbeddingSpending

    return EmbeddingSpending(kb_root, manifest.budget, manifest.kb.id, manifest.embedding.model,
                             remote.input_usd_per_mtok)


def load_for_kb(kb_root: Path, manifest: KBSettings, *, offline: bool | None = None,
                threads: int | None = None, for_search: bool = False) -> Embedder:
    """`load_embedder` for the KB at `kb_root`: its tokenizer paths and its budget resolved."""
    return load_embedder(manifest.embedding, offline=offline, threads=threads, kb_root=kb_root,
                         spending=spending_for(kb_root, manifest), for_search=for_search)
