"""What a valid manifest is, as data: the vocabulary of sections and keys, the values this build
implements, and one frozen dataclass per section.

Kept apart from the loader so code that only consumes a Manifest (search, sync, eval, serve) can read
its shape without wading through the validation machinery. The dataclasses are frozen because one
Manifest is read once and then shared by every part of a run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from functools import cached_property
from pathlib import Path

from pinakes.budget.settings import BudgetSection
from pinakes.embed.registry import RERANKERS, provider_keys, reranker_keys
from pinakes.embed.settings import EmbeddingSection
from pinakes.extract.registry import EXTRACTORS
from pinakes.extract.source_types import DEFAULT_SOURCE_TYPES, SUFFIX_TO_TYPE
from pinakes.kb import SIDECAR_SUFFIX, STATE_DIR_NAME
from pinakes.manifest.patterns import GlobSet, is_within

# The dialects a reranker behind an HTTP endpoint speaks (`[rerank] api`, search/rerank_api.py).
RERANK_APIS = ("tei", "cohere")

# Every section and the keys it accepts. The readers may take only declared keys, and any
# other key in the file is reported as unknown, so this table is the whole vocabulary.
SECTION_KEYS: dict[str, tuple[str, ...]] = {
    "kb": ("name", "id", "requires_pinakes", "template", "description"),
    "sources": ("roots", "include", "exclude", "types"),
    # The providers' and rerankers' own keys are declared with them (embed/registry.py).
    "embedding": ("provider", "model", "dim", "revision", "batch_size", "executor", "ray_address",
                  *provider_keys()),
    "extraction": ("backend", "model"),
    "chunking": ("strategy", "max_tokens", "overlap", "headings"),
    "retrieval": (
        "candidates_per_source", "fusion_top_k", "final_k", "rrf_k", "rerank", "vector_tier",
        "adjacent_k", "graph_channel", "confidence", "fusion",
    ),
    "retrieval.confidence": ("high", "low", "fitted_for", "signal", "features", "weights", "bias"),
    "retrieval.fusion": ("keyword_weight", "vector_weight", "rrf_k", "fitted_for"),
    "rerank": ("provider", "model", "revision", "batch_size", *reranker_keys()),
    "budget": (
        "confirm_above_eur", "per_operation_eur", "daily_eur", "monthly_eur", "timezone",
        "on_exceed", "max_price_age_days",
    ),
    "deep": ("max_rounds", "model"),
    "links": ("kb",),
    "links.kb": ("id", "alias", "path"),
    "ci": ("install",),
}
TOP_LEVEL_SECTIONS = ("kb", "sources", "embedding", "extraction", "chunking", "retrieval", "rerank",
                      "budget", "deep", "links", "ci")
REQUIRED_SECTIONS = ("kb", "sources", "embedding")

CHUNKING_STRATEGIES = ("structural",)
HEADING_GRAMMARS = ("none", "numbered")
ON_EXCEED = ("abort", "partial")
# Settings the code implements. A value the spec names but this build does not implement is refused
# at load time (spec §3.1): a setting the code ignores is not a setting.
VECTOR_TIERS = ("auto", "numpy")  # search/vector_tier.py
UNBUILT_VECTOR_TIERS = ("sqlite-vec",)
GRAPH_CHANNELS = ("off", "expand")
UNBUILT_GRAPH_CHANNELS = ("ppr",)

# Every extension that has a source type. A file must still have a source type that `types` names to
# be indexed; `include` only narrows which files the walk considers.
DEFAULT_INCLUDE = tuple(f"*{suffix}" for suffix in SUFFIX_TO_TYPE)
# Never sources, whatever `exclude` says: derived state, and the sidecars themselves.
ALWAYS_EXCLUDED = (f"{STATE_DIR_NAME}/", f"*{SIDECAR_SUFFIX}")

DEFAULT_RERANK_MODEL = "BAAI/bge-reranker-base"
# The Claude model each paid path calls unless `[extraction] model` / `[deep] model` names another.
# Either must have a price in the packaged table (pinakes/budget/prices.toml), checked at load: a
# call the accountant cannot price is a call it cannot cap. The extractor's default is its declared
# registry constant, so a KB that never sets the key keeps the fingerprint it was extracted under.
DEFAULT_EXTRACTION_MODEL = str(EXTRACTORS["claude-vision"].constants["model"])
DEFAULT_DEEP_MODEL = "claude-opus-5-5"


@dataclass(frozen=True)
class KBSection:
    name: str
    id: str
    requires_pinakes: str | None = None
    template: str | None = None
    description: str | None = None


@dataclass(frozen=True)
class SourcesSection:
    """Where the documents are. Paths are KB-root-relative POSIX paths.

    Glob patterns follow .gitignore's shape: `*` and `?` stay inside one path component, `**`
    crosses directories, a pattern containing `/` (other than a trailing one) is anchored at the KB
    root, one without matches at any depth, and a trailing `/` matches a directory and everything
    beneath it. A pattern matches a file if it matches the file's path or any directory above it.
    Matching ignores case.
    """

    roots: tuple[str, ...]
    include: tuple[str, ...] = DEFAULT_INCLUDE
    exclude: tuple[str, ...] = ()
    # The source types indexed (`[sources] types`). Absent: the four every KB indexed before the
    # document formats (DEFAULT_SOURCE_TYPES), so an upgrade never starts indexing files a KB skipped;
    # `pnk init` writes the line with every type, and status and doctor name what it leaves out.
    types: tuple[str, ...] = DEFAULT_SOURCE_TYPES

    @property
    def effective_exclude(self) -> tuple[str, ...]:
        return ALWAYS_EXCLUDED + self.exclude

    @cached_property
    def _include_globs(self) -> GlobSet:
        return GlobSet.compile(self.include)

    @cached_property
    def _exclude_globs(self) -> GlobSet:
        return GlobSet.compile(self.effective_exclude)

    @cached_property
    def _root_prefixes(self) -> tuple[str, ...] | None:
        """`root/` for each root; None when a root is the KB itself (everything is within it)."""
        if any(is_within("", root) for root in self.roots):
            return None
        return tuple(root + "/" for root in self.roots)

    def selects(self, relpath: str) -> bool:
        """Whether the file at `relpath` (KB-root-relative, POSIX) is a candidate source."""
        prefixes = self._root_prefixes
        if prefixes is not None and not relpath.startswith(prefixes) and relpath not in self.roots:
            return False
        return (self._include_globs.matches(relpath, is_dir=False)
                and not self._exclude_globs.matches(relpath, is_dir=False))

    def selector(self, reldir: str) -> Callable[[str, str], bool]:
        """`selects` for the files directly in the directory `reldir` ("" for the KB root), as
        (relpath, name) -> bool: the walk asks about every file, and what their directory decides
        is decided once for all of them."""
        prefixes = self._root_prefixes
        if prefixes is not None and not (reldir + "/").startswith(prefixes):
            return lambda relpath, name: self.selects(relpath)
        include = self._include_globs.file_matcher(reldir)
        exclude = self._exclude_globs.file_matcher(reldir)
        return lambda relpath, name: include(relpath, name) and not exclude(relpath, name)

    def prunes(self, reldir: str) -> bool:
        """Whether the walk may skip the directory at `reldir` without descending into it."""
        return self._exclude_globs.matches(reldir, is_dir=True)


@dataclass(frozen=True)
class ExtractionSection:
    backend: str = "pypdfium2"
    model: str = DEFAULT_EXTRACTION_MODEL  # what claude-vision calls (a priced model; part of its fingerprint)


@dataclass(frozen=True)
class ChunkingSection:
    strategy: str = "structural"
    max_tokens: int = 250
    overlap: int = 25
    headings: str = "none"


# The vocabulary of [retrieval.confidence]: the signals search/confidence.py reads, and the features
# search/signals.py computes for the model signal. Their home is here, below search, because the
# manifest's reader validates a file against them (manifest/readers.py).
# "none" turns the signal off: every search says `unknown`, whatever self-calibration or the prior
# would say (search/calibrated.py).
TOP_SCORE, MODEL, NONE_SIGNAL = "top-score", "model", "none"
SIGNALS = (TOP_SCORE, MODEL, NONE_SIGNAL)
FEATURES = ("cosine", "cosine_margin", "cosine_spread", "keyword_share", "bm25_ratio", "agreement", "csls", "crowding",
            "related_share")
# A feature only a reranked search has, the top passage's rerank score; a fit may weigh it too.
RERANK_FEATURE = "rerank"
FIT_FEATURES = (*FEATURES, RERANK_FEATURE)


@dataclass(frozen=True)
class ConfidenceSection:
    """What `pnk eval --fit-confidence` fitted (search/confidence.py reads it). `signal` "model" is a
    logistic model: `bias` + sum of `weights` × `features` (search/signals.py names them) gives the
    log-odds that the KB holds an answer; "top-score" (the default) compares the top rerank score
    or best cosine directly. `high` and `low` are thresholds on that signal. "none" (with no other
    key) turns confidence off: every search reports `unknown`."""

    high: float
    low: float
    fitted_for: str
    signal: str = TOP_SCORE
    features: tuple[str, ...] = ()
    weights: tuple[float, ...] = ()
    bias: float = 0.0


@dataclass(frozen=True)
class FusionSection:
    """What `pnk eval --fit-fusion` fitted on the KB's golden set (calibration/fusion_fit.py):
    each list's weight in reciprocal rank fusion (a weight of 0 leaves that list out) and the RRF k.
    Absent, a search fuses both lists with weight 1 at [retrieval] rrf_k (fixed RRF)."""

    keyword_weight: float
    vector_weight: float
    rrf_k: int
    fitted_for: str


@dataclass(frozen=True)
class RetrievalSection:
    candidates_per_source: int = 50
    fusion_top_k: int = 20
    final_k: int = 8
    rrf_k: int = 60
    rerank: bool = True
    vector_tier: str = "auto"
    # The traversal fan-out cap (spec §4): the default of `pnk links` / pinakes_links, and the graph
    # expansion channel's per-seed cap (search/graph.py). graph_channel refuses "ppr" (unbuilt) by name.
    adjacent_k: int = 5
    graph_channel: str = "off"
    confidence: ConfidenceSection | None = None  # absent ⇒ confidence is reported as "unknown"
    fusion: FusionSection | None = None  # absent ⇒ fixed RRF: both lists weigh 1, k = rrf_k


@dataclass(frozen=True)
class HTTPRerank:
    """Where and how a reranker behind an HTTP endpoint is reached (search/rerank_remote.py).

    `api` is the endpoint's dialect: "tei" (text-embeddings-inference's `POST /rerank`) or "cohere"
    (the Cohere/Jina-compatible `POST /rerank` that vLLM and Infinity serve too). `timeout_s` bounds
    one search's whole rerank, retries and waits included. `api_key_env` names the variable holding
    the key, never the key. At most one price: `input_usd_per_mtok` (per million input tokens) or
    `usd_per_1k_search_units` (Cohere's unit); neither means the user asserts it is free."""

    base_url: str
    api: str
    api_key_env: str | None = None
    timeout_s: float = 10.0
    concurrency: int = 4
    input_usd_per_mtok: Decimal | None = None
    usd_per_1k_search_units: Decimal | None = None


@dataclass(frozen=True)
class RerankSection:
    provider: str
    model: str = DEFAULT_RERANK_MODEL
    revision: str | None = None
    batch_size: int = 16
    # The endpoint's keys (HTTPRerank says what each means), taken by a reranker behind one
    # (embed/registry.py); None/defaults otherwise.
    base_url: str | None = None
    api: str | None = None
    api_key_env: str | None = None
    timeout_s: int = 10
    concurrency: int = 4
    input_usd_per_mtok: Decimal | None = None
    usd_per_1k_search_units: Decimal | None = None

    @property
    def http(self) -> HTTPRerank | None:
        """The endpoint, when the provider's reranker runs behind one."""
        spec = RERANKERS.get(self.provider)
        if spec is None or spec.runs != "endpoint" or self.base_url is None or self.api is None:
            return None
        return HTTPRerank(self.base_url, self.api, self.api_key_env, float(self.timeout_s), self.concurrency,
                          self.input_usd_per_mtok, self.usd_per_1k_search_units)


@dataclass(frozen=True)
class DeepSection:
    max_rounds: int = 3
    model: str = DEFAULT_DEEP_MODEL  # what `pnk ask --deep` calls (a priced model)


@dataclass(frozen=True)
class CISection:
    """What the workflow `pnk ci init` writes installs. None: exactly this Pinakes, from where it was
    installed (pinakes.distribution.installed_origin); a pip requirement naming pinakes-kb overrides it."""

    install: str | None = None


@dataclass(frozen=True)
class LinkedKB:
    """One `[[links.kb]]`: the partner's permanent ULID plus a machine-local alias and path."""

    id: str
    alias: str
    path: str


@dataclass(frozen=True)
class Manifest:
    path: Path
    kb: KBSection
    sources: SourcesSection
    embedding: EmbeddingSection
    extraction: ExtractionSection
    chunking: ChunkingSection
    retrieval: RetrievalSection
    rerank: RerankSection
    budget: BudgetSection
    deep: DeepSection
    links: tuple[LinkedKB, ...] = ()
    ci: CISection = CISection()

    @property
    def root(self) -> Path:
        return self.path.parent

    def link(self, alias_or_id: str) -> LinkedKB | None:
        """The connected KB named by alias or ULID, or None."""
        for linked in self.links:
            if alias_or_id in (linked.alias, linked.id):
                return linked
        return None
