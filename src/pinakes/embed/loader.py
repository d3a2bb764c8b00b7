"""`load_embedder`: from the manifest's [embedding] section to a loaded model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pinakes.embed.base import Embedder
from pinakes.embed.hub import prepare_hub_environment, resolve_offline
from pinakes.embed.packaged import PackagedModel, packaged_model
from pinakes.errors import ManifestError

if TYPE_CHECKING:
    from pathlib import Path

    from pinakes.embed.spending import EmbeddingSpending
    from pinakes.manifest import EmbeddingSection, Manifest

PROVIDERS = ("sentence-transformers", "fastembed", "openai-compatible")
# The pip extra that installs each provider (what `pnk init` tells a user to install and what a
# generated CI workflow installs); a reranker's provider needs the same extra as the embedder's.
PROVIDER_EXTRAS = {"sentence-transformers": "st", "fastembed": "light", "openai-compatible": "remote"}


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

    The remote provider (`openai-compatible`) is probed instead of loaded (embed/provider_openai.py):
    `kb_root` resolves its KB-relative tokenizer, `spending` is the budget a priced endpoint's
    requests go through (`spending_for`); offline mode does not apply to a server the user runs;
    `for_search`: the probe is a search's first request, within its `search_timeout_s`.
    """
    if section.provider == "openai-compatible":
        from pinakes.embed import provider_openai

        return provider_openai.load(section, kb_root=kb_root, spending=spending, for_search=for_search)
    provider = section.provider
    model = section.model
    revision = section.revision or None
    is_offline = resolve_offline(offline)
    packaged = _packaged_for(provider, model, revision)

    prepare_hub_environment(is_offline)
    if provider == "sentence-transformers":
        from pinakes.embed import provider_st as implementation
    elif provider == "fastembed":
        from pinakes.embed import provider_fastembed as implementation
    else:
        raise ManifestError(
            f"unknown [embedding] provider {provider!r}",
            remedy=f"use one of: {', '.join(PROVIDERS)}",
        )
    embedder = implementation.load(model, None if packaged else revision, offline=is_offline,
                                   batch_size=section.batch_size, packaged=packaged, threads=threads)
    if embedder.identity.dim != section.dim:
        raise ManifestError(
            f"[embedding] dim = {section.dim}, but {model} ({provider}) produces "
            f"{embedder.identity.dim}-dimensional vectors",
            remedy=f"set [embedding] dim = {embedder.identity.dim}, or name the model you meant",
        )
    return embedder


def _packaged_for(provider: str, model: str, revision: str | None) -> PackagedModel | None:
    packaged = packaged_model(provider, model)
    if packaged is None or revision not in (None, packaged.revision):
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


def spending_for(kb_root: Path, manifest: Manifest) -> EmbeddingSpending | None:
    """The budget a priced remote endpoint's requests go through; None for every free model."""
    remote = manifest.embedding.remote
    if remote is None or remote.input_usd_per_mtok is None:
        return None
    from pinakes.embed.spending import EmbeddingSpending

    return EmbeddingSpending(kb_root, manifest.budget, manifest.kb.id, manifest.embedding.model,
                             remote.input_usd_per_mtok)


def load_for_kb(kb_root: Path, manifest: Manifest, *, offline: bool | None = None,
                threads: int | None = None, for_search: bool = False) -> Embedder:
    """`load_embedder` for the KB at `kb_root`: its tokenizer paths and its budget resolved."""
    if manifest.embedding.remote is None:
        # A local model needs neither; resolved through the package, as the sync resolves it, so a
        # substituted `pinakes.embed.load_embedder` (a test's model) is the one both use.
        from pinakes import embed

        return embed.load_embedder(manifest.embedding, offline=offline, threads=threads)
    return load_embedder(manifest.embedding, offline=offline, threads=threads, kb_root=kb_root,
                         spending=spending_for(kb_root, manifest), for_search=for_search)
