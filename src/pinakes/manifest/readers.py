"""One reader per section: each key's type and range, then the section's cross-key invariants
(widths that must narrow, overlap below max_tokens, thresholds in order, roots that do not overlap).

They are checked here, at read time, because a manifest that parses but cannot work is a failure
deferred to the least convenient moment. A value the spec names but this build does not implement is
refused too (spec §3.1): a setting the code ignores is not a setting.
"""

from __future__ import annotations

import difflib
import math
import posixpath
import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

from pinakes import __version__
from pinakes.embed.registry import EXECUTORS, PROVIDERS, RERANKERS, default_reranker
from pinakes.extract.registry import PDF_BACKENDS
from pinakes.extract.source_types import DEFAULT_SOURCE_TYPES, SOURCE_TYPES
from pinakes.ids import is_ulid
from pinakes.kb import STATE_DIR_NAME
from pinakes.manifest.patterns import GlobSet, is_within
from pinakes.manifest.problems import Problems
from pinakes.manifest.sections import (
    CHUNKING_STRATEGIES,
    DEFAULT_DEEP_MODEL,
    DEFAULT_EXTRACTION_MODEL,
    DEFAULT_INCLUDE,
    DEFAULT_RERANK_MODEL,
    FIT_FEATURES,
    GRAPH_CHANNELS,
    HEADING_GRAMMARS,
    MODEL,
    NONE_SIGNAL,
    ON_EXCEED,
    REQUIRED_SECTIONS,
    RERANK_APIS,
    SIGNALS,
    TOP_LEVEL_SECTIONS,
    UNBUILT_GRAPH_CHANNELS,
    UNBUILT_VECTOR_TIERS,
    VECTOR_TIERS,
    BudgetSection,
    ChunkingSection,
    CISection,
    ConfidenceSection,
    DeepSection,
    EmbeddingSection,
    ExtractionSection,
    FusionSection,
    KBSection,
    LinkedKB,
    Manifest,
    RerankSection,
    RetrievalSection,
    SourcesSection,
)
from pinakes.manifest.table import Table, TomlValue, toml_type

VERSION_FLOOR = re.compile(r"(\d+)\.(\d+)\.(\d+)")
_TEMPLATE_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*@\d+(?:\.\d+)*")


def read_manifest(data: Mapping[str, TomlValue], path: Path, problems: Problems) -> Manifest | None:
    for name, value in data.items():
        if name not in TOP_LEVEL_SECTIONS:
            close = difflib.get_close_matches(name, TOP_LEVEL_SECTIONS, n=1)
            hint = f"; did you mean [{close[0]}]?" if close else ""
            remedy = (f"rename it to [{close[0]}]" if close else
                      f"remove it (sections: {', '.join(TOP_LEVEL_SECTIONS)}); if a newer Pinakes "
                      "wrote this manifest, upgrade Pinakes")
            problems.add(name, f"unknown section [{name}]{hint}", remedy)
        elif not isinstance(value, dict):
            problems.add(name, f"must be a table ([{name}]), got {toml_type(value)}",
                         f"write it as a [{name}] section")
    tables: dict[str, Table] = {}
    for name in TOP_LEVEL_SECTIONS:
        value = data.get(name)
        if isinstance(value, dict):
            tables[name] = Table(value, name, name, problems)
            continue
        if name in REQUIRED_SECTIONS and name not in data:
            problems.add(name, f"the required section [{name}] is missing",
                         f"add the [{name}] section (see MANIFEST.md)")
        # Absent (or already reported): read as all defaults. A missing required section's keys
        # would each be "required" too; that is one problem, already said, so they go unreported.
        tables[name] = Table({}, name, name, Problems())

    kb = _read_kb(tables["kb"])
    sources = _read_sources(tables["sources"])
    embedding = _read_embedding(tables["embedding"])
    extraction = _read_extraction(tables["extraction"])
    chunking = _read_chunking(tables["chunking"])
    retrieval = _read_retrieval(tables["retrieval"])
    # A remote embedding model's reranker still runs in process: the lighter local provider.
    rerank = _read_rerank(tables["rerank"], default_provider=default_reranker(embedding.provider))
    budget = _read_budget(tables["budget"])
    deep = _read_deep(tables["deep"])
    links = _read_links(tables["links"])
    ci = _read_ci(tables["ci"])
    for table in tables.values():
        table.finish()
    if problems:
        return None
    return Manifest(path=path, kb=kb, sources=sources, embedding=embedding, extraction=extraction,
                    chunking=chunking, retrieval=retrieval, rerank=rerank, budget=budget, deep=deep,
                    links=links, ci=ci)


def _ulid(table: Table, name: str) -> str:
    value = table.required_string(name, '"01J9Z8Y7X6W5V4T3S2R1Q0P9N8"')
    if value and not _is_canonical_ulid(value):
        hint = f" (write it in uppercase: {value.upper()})" if _is_canonical_ulid(value.upper()) else ""
        table.fail(name, f"{value!r} is not a ULID (26 Crockford base32 characters){hint}",
                   "copy the ULID exactly; never invent one (a KB id is permanent)")
    return value


def _is_canonical_ulid(value: str) -> bool:
    return is_ulid(value)


def _read_kb(table: Table) -> KBSection:
    name = table.required_string("name", '"my-research"')
    kb_id = _ulid(table, "id")
    floor = table.optional_string("requires_pinakes", f'"{__version__}"')
    if floor is not None and not VERSION_FLOOR.fullmatch(floor):
        table.fail("requires_pinakes", f"{floor!r} is not a version X.Y.Z",
                   f'write the oldest Pinakes that can read this KB, e.g. "{__version__}"')
    template = table.optional_string("template", '"default@1"')
    if template is not None and not _TEMPLATE_REF.fullmatch(template):
        table.fail("template", f"{template!r} is not a template reference NAME@VERSION",
                   'write e.g. template = "default@1"')
    description = table.optional_string("description", '"What this KB is about"')
    return KBSection(name=name, id=kb_id, requires_pinakes=floor, template=template,
                     description=description)


def _read_sources(table: Table) -> SourcesSection:
    roots = table.string_list("roots", None, '["docs"]')
    if table.ok("roots") and not roots:
        table.fail("roots", "is empty: no document would ever be found", 'list at least one, e.g. ["docs"]')
    roots = _normalise_roots(table, roots)
    include = table.string_list("include", DEFAULT_INCLUDE, '["*.md", "*.pdf"]')
    if table.ok("include") and not include:
        table.fail("include", "is empty: no file would ever be a source",
                   "delete the line to include every supported type, or list patterns")
    exclude = table.string_list("exclude", (), '["drafts/"]')
    types = table.string_list("types", DEFAULT_SOURCE_TYPES, '["markdown", "text", "pdf", "html"]')
    unknown = [name for name in types if name not in SOURCE_TYPES]
    if table.ok("types") and (unknown or not types):
        table.fail("types", f"names {', '.join(map(repr, unknown))}, not a source type" if unknown
                   else "is empty: no file would ever be a source",
                   f"list source types from: {', '.join(SOURCE_TYPES)}")
    for name, patterns in (("include", include), ("exclude", exclude)):
        for pattern in patterns:
            try:
                GlobSet.compile([pattern])
            except re.error as exc:
                table.fail(name, f"{pattern!r} is not a valid glob ({exc})", "fix the pattern")
    return SourcesSection(roots=roots, include=include, exclude=exclude, types=types)


def _normalise_roots(table: Table, roots: tuple[str, ...]) -> tuple[str, ...]:
    normalised: list[str] = []
    for root in roots:
        if "\\" in root:
            table.fail("roots", f"{root!r} uses a backslash",
                       "use forward slashes: the manifest is shared across machines")
            continue
        if root.startswith("/") or re.match(r"[A-Za-z]:", root):
            table.fail("roots", f"{root!r} is absolute; roots are relative to the KB root",
                       'write it relative to the directory holding pinakes.toml, e.g. "docs"')
            continue
        clean = posixpath.normpath(root)
        if clean == ".." or clean.startswith("../"):
            table.fail("roots", f"{root!r} leaves the KB", "keep every root inside the KB directory")
            continue
        if clean.split("/")[0] == STATE_DIR_NAME:
            table.fail("roots", f"{root!r} is inside {STATE_DIR_NAME}/, which is derived state",
                       "name a directory holding your documents")
            continue
        for earlier in normalised:
            if is_within(clean, earlier) or is_within(earlier, clean):
                table.fail("roots", f"{root!r} overlaps the root {earlier!r}: files would be found twice",
                           "keep only the outer directory")
                break
        else:
            normalised.append(clean)
    return tuple(normalised)


def _read_embedding(table: Table) -> EmbeddingSection:
    return EmbeddingSection(
        provider=table.choice("provider", None, tuple(PROVIDERS)),
        model=table.required_string("model", '"sentence-transformers/all-MiniLM-L6-v2"'),
        dim=table.integer("dim", None, minimum=1),
        revision=table.optional_string("revision", '"<commit hash>"'),
        batch_size=table.integer("batch_size", 32, minimum=1),
        executor=_read_executor(table),
        ray_address=table.optional_string("ray_address", '"auto"'),
        **_read_remote_embedding(table),
    )


def _read_executor(table: Table) -> str:
    """Where the model runs; a remote provider's model already runs elsewhere, so not on Ray."""
    executor = table.choice("executor", "local", tuple(EXECUTORS))
    provider = PROVIDERS.get(str(table.raw_value("provider")))
    if provider is not None and EXECUTORS[executor].refuses(provider):
        table.fail("executor", f'"{executor}" runs a local model on a cluster; provider "{provider.name}" '
                               "already embeds on its server", 'delete the line (or set executor = "local")')
    return executor


def _read_remote_embedding(table: Table) -> dict[str, Any]:  # Any: each key's own type, spread into EmbeddingSection
    """The keys the chosen provider takes as its own (embed/registry.py: the endpoint's, for
    `provider = "openai-compatible"`), read; any other provider's own key is refused."""
    taken = _own_keys(table, {name: spec.keys for name, spec in PROVIDERS.items()})
    return {name: _EMBEDDING_KEY_READERS[name](table) for name in taken}


def _own_keys(table: Table, keys_by_provider: Mapping[str, tuple[str, ...]]) -> tuple[str, ...]:
    """The keys the table's provider takes as its own. A key only other providers take is refused,
    naming them: a key the chosen provider ignores is not a setting."""
    taken = keys_by_provider.get(str(table.raw_value("provider")), ())
    for name in dict.fromkeys(key for keys in keys_by_provider.values() for key in keys):
        if name not in taken and table.has(name):
            owners = " or ".join(f'provider = "{provider}"' for provider, keys in keys_by_provider.items()
                                 if name in keys)
            table.fail(name, f"only applies to {owners}", "delete the line, or set the provider it belongs to")
    return taken


def _url(table: Table, example: str) -> str:
    base_url = table.required_string("base_url", f'"{example}"')
    if base_url and not base_url.startswith(("http://", "https://")):
        table.fail("base_url", f"{base_url!r} is not an http:// or https:// URL",
                   f'write the endpoint\'s root, e.g. base_url = "{example}"')
    return base_url


def _variable_name(table: Table, example: str) -> str | None:
    api_key_env = table.optional_string("api_key_env", f'"{example}"')
    if api_key_env is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", api_key_env):
        table.fail("api_key_env", f"{api_key_env!r} is not an environment variable's name (the key "
                                  "itself never goes in the manifest)",
                   f'name the variable that holds the key, e.g. api_key_env = "{example}"')
    return api_key_env


# How each provider-owned key is read: every key a provider may take (embed/registry.py) has one.
_EMBEDDING_KEY_READERS: dict[str, Callable[[Table], object]] = {
    "base_url": lambda table: _url(table, "http://127.0.0.1:11434/v1"),
    "api_key_env": lambda table: _variable_name(table, "OPENAI_API_KEY"),
    "concurrency": lambda table: table.integer("concurrency", 4, minimum=1),
    "timeout_s": lambda table: table.integer("timeout_s", 60, minimum=1),
    "search_timeout_s": lambda table: table.integer("search_timeout_s", 10, minimum=1),
    "max_input_tokens": lambda table: table.integer("max_input_tokens", 512, minimum=1),
    "tokenizer": lambda table: table.optional_string("tokenizer", '"models/bge-m3/tokenizer.json"'),
    "input_usd_per_mtok": lambda table: table.money("input_usd_per_mtok", Decimal(0), unit="USD") or None,  # 0: free
}


def _read_extraction(table: Table) -> ExtractionSection:
    return ExtractionSection(backend=table.choice("backend", "pypdfium2", PDF_BACKENDS),
                             model=_priced_model(table, DEFAULT_EXTRACTION_MODEL))


def _priced_model(table: Table, default: str) -> str:
    """`model`: the Claude model a paid path calls, refused here unless the packaged price table
    prices it (the accountant caps a call only at a price it knows, spec §5)."""
    from pinakes.budget.errors import PriceTableError
    from pinakes.budget.prices import load_prices

    model = table.optional_string("model", f'"{default}"')
    if model is None:
        return default
    try:
        table_of_prices = load_prices()
    except PriceTableError as exc:
        table.fail("model", f"cannot be checked: {exc.message}", exc.remedy or "reinstall Pinakes")
        return default
    priced = sorted(table_of_prices.models)
    if model not in priced:
        close = difflib.get_close_matches(model, priced, n=3, cutoff=0.5)
        hint = f"; did you mean {' or '.join(f'{name!r}' for name in close)}?" if close else ""
        table.fail("model", f"{model!r} has no price in the packaged price table (as of "
                            f"{table_of_prices.as_of}), and the budget cannot cap a call it cannot price{hint}",
                   f"set model to a priced one ({', '.join(priced)}), or delete the line for the default "
                   f'("{default}"); a model newer than the table needs a newer Pinakes')
        return default
    return model


def _read_chunking(table: Table) -> ChunkingSection:
    chunking = ChunkingSection(
        strategy=table.choice("strategy", "structural", CHUNKING_STRATEGIES),
        max_tokens=table.integer("max_tokens", 250, minimum=1),
        overlap=table.integer("overlap", 25, minimum=0),
        headings=table.choice("headings", "none", HEADING_GRAMMARS),
    )
    if table.ok("max_tokens", "overlap") and chunking.overlap >= chunking.max_tokens:
        table.fail("overlap", f"overlap ({chunking.overlap}) must be smaller than max_tokens "
                              f"({chunking.max_tokens})",
                   f"set overlap below {chunking.max_tokens} (the default is 25)")
    return chunking


def _read_retrieval(table: Table) -> RetrievalSection:
    retrieval = RetrievalSection(
        candidates_per_source=table.integer("candidates_per_source", 50, minimum=1),
        fusion_top_k=table.integer("fusion_top_k", 20, minimum=1),
        final_k=table.integer("final_k", 8, minimum=1),
        rrf_k=table.integer("rrf_k", 60, minimum=0),
        rerank=table.boolean("rerank", True),
        vector_tier=table.choice("vector_tier", "auto", VECTOR_TIERS, UNBUILT_VECTOR_TIERS),
        adjacent_k=table.integer("adjacent_k", 5, minimum=1),
        graph_channel=table.choice("graph_channel", "off", GRAPH_CHANNELS, UNBUILT_GRAPH_CHANNELS),
        confidence=_read_confidence(table.table("confidence")),
        fusion=_read_fusion(table.table("fusion")),
    )
    rule = "widths must narrow: final_k <= fusion_top_k <= candidates_per_source"
    if table.ok("final_k", "fusion_top_k") and retrieval.final_k > retrieval.fusion_top_k:
        table.fail("final_k", f"final_k ({retrieval.final_k}) is larger than fusion_top_k "
                              f"({retrieval.fusion_top_k}); {rule}",
                   f"lower final_k to at most {retrieval.fusion_top_k}, or raise fusion_top_k")
    if (table.ok("fusion_top_k", "candidates_per_source")
            and retrieval.fusion_top_k > retrieval.candidates_per_source):
        table.fail("fusion_top_k", f"fusion_top_k ({retrieval.fusion_top_k}) is larger than "
                                   f"candidates_per_source ({retrieval.candidates_per_source}); {rule}",
                   f"lower fusion_top_k to at most {retrieval.candidates_per_source}, or raise "
                   "candidates_per_source")
    return retrieval


def _read_fusion(table: Table | None) -> FusionSection | None:
    if table is None:
        return None
    fusion = FusionSection(
        keyword_weight=table.required_float("keyword_weight", "1.0"),
        vector_weight=table.required_float("vector_weight", "1.0"),
        rrf_k=table.integer("rrf_k", None, minimum=0),
        fitted_for=table.optional_string("fitted_for", '"<embedding>, <golden set>"') or "",
    )
    for name in ("keyword_weight", "vector_weight"):
        if table.ok(name) and getattr(fusion, name) < 0:
            table.fail(name, f"is {getattr(fusion, name)}; a list's weight is 0 (left out) or more",
                       "re-fit with `pnk eval --fit-fusion --write`, or delete [retrieval.fusion] for fixed RRF")
    if table.ok("keyword_weight", "vector_weight") and fusion.keyword_weight == fusion.vector_weight == 0:
        table.fail("vector_weight", "both weights are 0, which leaves nothing to fuse",
                   "re-fit with `pnk eval --fit-fusion --write`, or delete [retrieval.fusion] for fixed RRF")
    if not fusion.fitted_for and table.ok("fitted_for"):
        table.fail("fitted_for", "is required: fusion weights are only valid for the model and golden set "
                                 "they were fitted on",
                   "name what they were fitted for, or re-fit with `pnk eval --fit-fusion --write`")
    table.finish()
    return fusion


def _read_confidence(table: Table | None) -> ConfidenceSection | None:
    if table is None:
        return None
    signal = table.choice("signal", "top-score", SIGNALS)
    if signal == NONE_SIGNAL:
        extra = [name for name in ("high", "low", "fitted_for", "features", "weights", "bias") if table.has(name)]
        if extra:
            table.fail(extra[0], 'is set, but signal = "none" turns confidence off and takes no other key',
                       'delete the other keys, or fit a block with `pnk eval --fit-confidence --write`')
        table.finish()
        return ConfidenceSection(high=0.0, low=0.0, fitted_for="", signal=NONE_SIGNAL)
    model = signal == MODEL
    features = table.string_list("features", None if model else (), '["cosine", "keyword_share"]')
    confidence = ConfidenceSection(
        high=table.required_float("high", "0.7"),
        low=table.required_float("low", "0.3"),
        fitted_for=table.optional_string("fitted_for", '"<embedding> + <reranker>, <golden set>"') or "",
        signal=signal,
        features=features,
        weights=_numbers(table, "weights", required=model),
        bias=table.required_float("bias", "-2.5") if model else _absent_number(table, "bias"),
    )
    if not confidence.fitted_for and table.ok("fitted_for"):
        table.fail("fitted_for", "is required whenever thresholds are present: thresholds are only "
                                 "valid for the models and golden set they were fitted on",
                   'name what they were fitted for, or re-fit with `pnk eval --fit-confidence`')
    if table.ok("high", "low") and confidence.low > confidence.high:
        table.fail("low", f"low ({confidence.low}) is above high ({confidence.high}); thresholds "
                          "must be ordered low <= high",
                   "swap them, or re-fit with `pnk eval --fit-confidence`")
    unknown = [name for name in confidence.features if name not in FIT_FEATURES]
    if unknown and table.ok("features"):
        table.fail("features", f"names no evidence feature this build computes: {', '.join(unknown)}",
                   f"use features from: {', '.join(FIT_FEATURES)}, or re-fit with `pnk eval --fit-confidence`")
    if model and table.ok("features", "weights") and len(confidence.weights) != len(confidence.features):
        table.fail("weights", f"has {len(confidence.weights)} numbers for {len(confidence.features)} features",
                   "give one weight per feature, or re-fit with `pnk eval --fit-confidence`")
    if not model and (confidence.features or confidence.weights) and table.ok("signal"):
        table.fail("signal", f'is "{signal}", which takes no features or weights',
                   'set signal = "model", or delete features, weights and bias')
    table.finish()
    return confidence


def _numbers(table: Table, name: str, *, required: bool) -> tuple[float, ...]:
    """An array of finite numbers (the model's weights)."""
    example = "[1.5, -0.25]"
    value = table.checked_value(name, (list,), "an array of numbers", example)
    if value is None:
        if required:
            table.missing(name, example)
        return ()
    if not isinstance(value, list):
        return ()
    numbers: list[float] = []
    for index, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, (int, float)) or not math.isfinite(item):
            table.fail(name, f"item {index} must be a finite number, got {item!r}",
                       f"write numbers, e.g. {name} = {example}")
        else:
            numbers.append(float(item))
    return tuple(numbers)


def _absent_number(table: Table, name: str) -> float:
    """A key only the model signal takes: read (so it is known), refused when present."""
    value = table.checked_value(name, (int, float), "a number", "0.0")
    if value is not None and table.ok(name):
        table.fail(name, 'is only read with signal = "model"', f'set signal = "model", or delete {name}')
    return 0.0


def _read_rerank(table: Table, *, default_provider: str) -> RerankSection:
    chosen = RERANKERS.get(str(table.raw_value("provider") or default_provider))
    return RerankSection(
        provider=table.choice("provider", default_provider, tuple(RERANKERS)),
        model=table.optional_string("model", f'"{DEFAULT_RERANK_MODEL}"') or DEFAULT_RERANK_MODEL,
        revision=table.optional_string("revision", '"<commit hash>"'),
        batch_size=table.integer("batch_size", chosen.batch_size if chosen else 16, minimum=1),
        **_read_http_rerank(table),
    )


def _read_http_rerank(table: Table) -> dict[str, Any]:  # Any: each key's own type, spread into RerankSection
    """The keys the chosen reranker takes as its own (embed/registry.py: the endpoint's, for
    `provider = "http"`), read; any other reranker's own key is refused."""
    taken = _own_keys(table, {name: spec.keys for name, spec in RERANKERS.items()})
    values = {name: _RERANK_KEY_READERS[name](table) for name in taken}
    chosen = RERANKERS.get(str(table.raw_value("provider")))
    if chosen is not None and not chosen.runs_here and table.has("revision") and table.ok("revision"):
        table.fail("revision", "names a local model's commit; an HTTP reranker's identity is the scores "
                               "its endpoint gives (search/rerank_remote.py)", "delete the line")
    if (values.get("input_usd_per_mtok") is not None and values.get("usd_per_1k_search_units") is not None
            and table.ok("input_usd_per_mtok")):
        table.fail("usd_per_1k_search_units", "and input_usd_per_mtok both price the reranker; a vendor bills "
                                              "one way", "keep the one the vendor's price list uses")
    return values


_RERANK_KEY_READERS: dict[str, Callable[[Table], object]] = {
    "base_url": lambda table: _url(table, "http://127.0.0.1:8080"),
    "api": lambda table: table.choice("api", None, RERANK_APIS),
    "api_key_env": lambda table: _variable_name(table, "RERANK_API_KEY"),
    "timeout_s": lambda table: table.integer("timeout_s", 10, minimum=1),
    "concurrency": lambda table: table.integer("concurrency", 4, minimum=1),
    "input_usd_per_mtok": lambda table: table.money("input_usd_per_mtok", Decimal(0), unit="USD") or None,  # 0: free
    "usd_per_1k_search_units": lambda table: table.money("usd_per_1k_search_units", Decimal(0), unit="USD") or None,
}


def _read_budget(table: Table) -> BudgetSection:
    budget = BudgetSection(
        confirm_above_eur=table.money("confirm_above_eur", Decimal("0.50")),
        per_operation_eur=table.money("per_operation_eur", Decimal("2.00")),
        daily_eur=table.money("daily_eur", Decimal("5.00")),
        monthly_eur=table.money("monthly_eur", Decimal("20.00")),
        timezone=table.optional_string("timezone", '"Europe/Rome"') or "UTC",
        on_exceed=table.choice("on_exceed", "abort", ON_EXCEED),
        max_price_age_days=table.integer("max_price_age_days", 90, minimum=1),
    )
    if table.ok("timezone") and not _is_timezone(budget.timezone):
        table.fail("timezone", f"{budget.timezone!r} is not an IANA time zone",
                   'write a name such as "UTC" or "Europe/Rome"')
    if (table.ok("confirm_above_eur", "per_operation_eur")
            and budget.confirm_above_eur > budget.per_operation_eur):
        table.fail("confirm_above_eur",
                   f"confirm_above_eur ({budget.confirm_above_eur}) is above per_operation_eur "
                   f"({budget.per_operation_eur}): the confirmation prompt would be unreachable",
                   f"set confirm_above_eur to at most {budget.per_operation_eur}")
    return budget


def _is_timezone(name: str) -> bool:
    if name == "UTC":  # needs no tz database, so it works even where none is installed
        return True
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def _read_deep(table: Table) -> DeepSection:
    return DeepSection(max_rounds=table.integer("max_rounds", 3, minimum=1),
                       model=_priced_model(table, DEFAULT_DEEP_MODEL))


def _read_ci(table: Table) -> CISection:
    from pinakes.distribution import DISTRIBUTION, requirement_problem

    example = f'"{DISTRIBUTION}[light,pdf] @ git+https://example.org/you/pinakes@<commit>"'
    install = table.optional_string("install", example)
    problem = requirement_problem(install) if install is not None else None
    if problem is not None:
        table.fail("install", problem, f"write one pip requirement for {DISTRIBUTION}, e.g. install = {example}")
    return CISection(install=install)


def _read_links(links: Table) -> tuple[LinkedKB, ...]:
    linked: list[LinkedKB] = []
    seen_alias: dict[str, int] = {}
    seen_id: dict[str, int] = {}
    for index, table in enumerate(links.array_of_tables("kb", "[[links.kb]]")):
        kb_id = _ulid(table, "id")
        alias = table.required_string("alias", '"partner"')
        if alias and table.ok("alias"):
            if alias == "self":
                table.fail("alias", '"self" is reserved (pnk://self/... names this KB)',
                           "choose another alias")
            elif _is_canonical_ulid(alias.upper()):
                table.fail("alias", f"{alias!r} looks like a ULID; tools accept an alias or a ULID, "
                                    "so it would be ambiguous", "choose a word-like alias")
        path = table.required_string("path", '"../partner-kb"')
        table.finish()
        if alias in seen_alias and table.ok("alias"):
            table.fail("alias", f'the alias "{alias}" is already used by links.kb[{seen_alias[alias]}]',
                       "give each connected KB its own alias")
        if kb_id in seen_id and table.ok("id"):
            table.fail("id", f"the KB {kb_id} is already linked by links.kb[{seen_id[kb_id]}]",
                       "keep one [[links.kb]] per connected KB")
        seen_alias.setdefault(alias, index)
        seen_id.setdefault(kb_id, index)
        linked.append(LinkedKB(id=kb_id, alias=alias, path=path))
    return tuple(linked)
