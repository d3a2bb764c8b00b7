"""The `[embedding]` section as the model layer reads it: which model, where it runs, and (for a
provider behind an endpoint) how the endpoint is reached.

It lives here, below the manifest, which builds and holds it (manifest/readers.py), as the budget's
section lives in budget/settings.py: every module of `embed` takes it, and none of them may reach up
to the manifest for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from pinakes.embed.registry import PROVIDERS


@dataclass(frozen=True)
class RemoteEmbedding:
    """Where and how an OpenAI-compatible `/v1/embeddings` endpoint is reached (embed/provider_openai.py).

    `api_key_env` names the environment variable holding the key, never the key: a manifest is
    committed. `max_input_tokens` is the model's input limit as `tokenizer` counts (a local
    tokenizer.json, KB-relative or absolute); without a tokenizer, tokens are bounded by UTF-8 bytes.
    `input_usd_per_mtok`: the price per million input tokens; None means the user asserts it is free.
    `timeout_s` bounds one whole request (connect to last byte); `search_timeout_s` everything one
    search waits on the endpoint (its requests, a retry, a Retry-After) before keyword results."""

    base_url: str
    api_key_env: str | None = None
    concurrency: int = 4
    timeout_s: float = 60.0
    max_input_tokens: int = 512
    tokenizer: str | None = None
    input_usd_per_mtok: Decimal | None = None
    search_timeout_s: float = 10.0


@dataclass(frozen=True)
class EmbeddingSection:
    provider: str
    model: str
    dim: int
    revision: str | None = None
    batch_size: int = 32
    # Where the model runs during a sync: this process, or a Ray cluster's workers
    # (embed/executor_ray.py). The vectors are the same either way, so neither enters a build key.
    executor: str = "local"
    ray_address: str | None = None  # None: Ray's own conventions (RAY_ADDRESS, else "auto")
    # The endpoint's keys (RemoteEmbedding says what each means), taken by a provider whose model
    # runs behind one (embed/registry.py); None/defaults otherwise.
    base_url: str | None = None
    api_key_env: str | None = None
    concurrency: int = 4
    timeout_s: int = 60
    search_timeout_s: int = 10
    max_input_tokens: int = 512
    tokenizer: str | None = None
    input_usd_per_mtok: Decimal | None = None

    @property
    def remote(self) -> RemoteEmbedding | None:
        """The endpoint, when the provider's model runs behind one."""
        spec = PROVIDERS.get(self.provider)
        if spec is None or spec.runs != "endpoint" or self.base_url is None:
            return None
        return RemoteEmbedding(self.base_url, self.api_key_env, self.concurrency, float(self.timeout_s),
                               self.max_input_tokens, self.tokenizer, self.input_usd_per_mtok,
                               float(self.search_timeout_s))
