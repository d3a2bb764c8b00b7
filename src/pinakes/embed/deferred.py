"""A model whose weights load only when a vector is asked for.

A sync needs the model for three things: its identity (the meta rows, the content key of every
vector), its tokenizer (the chunker counts tokens with it) and its vectors. Only the last needs the
weights. When every chunk's vector is already in the index (an unchanged `--rebuild`, a duplicated
folder, a PDF switched between extractors whose text agrees), loading the weights would be the
whole cost of the sync, so the packaged model is handed out as a `DeferredEmbedder`: its identity
comes from the digests pinned in `packaged.py` (the load verifies the same files against the same
digests, so the identity it would report is this one), its token counts from the model's own
tokenizer file, and the weights load on the first `embed_documents` / `embed_query`.

Every other model (a hub snapshot, a local directory, a remote provider) is loaded at once as before:
its identity is only known from the files or the endpoint the load reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from pinakes.embed.base import Embedder, ModelIdentity, QueryBatches
from pinakes.errors import ModelUnavailableError

if TYPE_CHECKING:
    import numpy as np

    from pinakes.embed.settings import EmbeddingSection
    from pinakes.embed.tokens import TokenCounter


class DeferredEmbedder:
    """An `Embedder` that loads its weights (`load`) on the first vector asked of it."""

    def __init__(self, identity: ModelIdentity, max_input_tokens: int,
                 count_tokens: Callable[[str], int],
                 count_tokens_batch: Callable[[Sequence[str]], list[int]],
                 load: Callable[[], Embedder], token_counter: TokenCounter | None = None) -> None:
        self.identity = identity
        self.max_input_tokens = max_input_tokens
        self._count_tokens = count_tokens
        self._count_tokens_batch = count_tokens_batch
        self._load = load
        self._loaded: Embedder | None = None
        self._token_counter = token_counter

    @property
    def token_counter(self) -> TokenCounter | None:
        """The counter `count_tokens` uses, when it is one (the packaged model's tokenizer file)."""
        return self._token_counter

    @property
    def weights_loaded(self) -> bool:
        return self._loaded is not None

    def count_tokens(self, text: str) -> int:
        return self._count_tokens(text)

    def count_tokens_batch(self, texts: Sequence[str]) -> list[int]:
        return self._count_tokens_batch(texts)

    def embed_documents(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        return self.loaded().embed_documents(texts, batch_size=batch_size)

    def embed_query(self, text: str) -> np.ndarray:
        return self.loaded().embed_query(text)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        model = self.loaded()
        if isinstance(model, QueryBatches):
            return model.embed_queries(texts)
        return np.stack([model.embed_query(text) for text in texts])

    def loaded(self) -> Embedder:
        if self._loaded is None:
            model = self._load()
            if model.identity != self.identity or model.max_input_tokens != self.max_input_tokens:
                # Cannot happen while the load verifies the pinned files; if it ever did, vectors
                # keyed under the announced identity would be mixed with another model's.
                raise ModelUnavailableError(
                    f"{self.identity.model} loaded as {model.identity} (limit {model.max_input_tokens} "
                    f"tokens), not as the {self.identity} (limit {self.max_input_tokens}) its pinned "
                    "files announce; refusing to mix the two",
                    remedy="pnk sync --rebuild --no-reuse")
            self._loaded = model
        return self._loaded


def embedder_for(section: EmbeddingSection, *, offline: bool | None, load: Callable[..., Embedder]) -> Embedder:
    """The model `section` names, as `load` (`pinakes.embed.load_embedder`) gives it: deferred when
    the section names the packaged model and its registered provider is one that loads it (its
    pinned files then say exactly what the load will report), loaded at once otherwise."""
    from pinakes.embed.loader import packaged_for, provider_spec

    packaged = packaged_for(provider_spec(section.provider), section)
    if packaged is None or packaged.dim != section.dim:
        return load(section, offline=offline)
    from pinakes.embed.packaged import verified_files
    from pinakes.embed.tokens import TokenCounter, max_seq_length_from_dir

    files = verified_files(packaged)  # the same check the load makes (a stat per file once hashed)
    tokenizer = next(path for pinned, path in files.items() if pinned.relative.endswith("/tokenizer.json"))
    max_seq_length = max_seq_length_from_dir(tokenizer.parent)
    if max_seq_length is None:  # the packaged files always say; should they not, the load decides
        return load(section, offline=offline)
    counter = TokenCounter.from_file(tokenizer)
    limit = max_seq_length - counter.special_tokens  # as tokens.max_input_tokens_from_dir counts it
    identity = ModelIdentity(section.provider, section.model, packaged.revision, packaged.weights.sha256,
                             packaged.dim)
    return DeferredEmbedder(identity, limit, counter.count, counter.count_batch,
                            lambda: load(section, offline=offline), token_counter=counter)
