"""Strict loading and validation of `pinakes.toml` (spec §2.1; every field: docs/MANIFEST.md).

Three postures, each deliberate. Unknown keys and sections are rejected (with a did-you-mean),
because a typo silently ignored is a setting silently not applied. An explicit empty string is an
error, never a request for the default: substituting one hides the mistake until it fails far away.
Cross-key invariants are checked here, at read time, because a manifest that parses but cannot work
is a failure deferred to the least convenient moment.

`[kb] requires_pinakes` is read in a pre-pass over the raw TOML, before anything else: a manifest
written by a newer Pinakes must be diagnosed as "upgrade Pinakes", not as a spelling mistake in a key
this build has never heard of.

Every problem found is collected and reported at once, each naming its dotted key, what is wrong
and what to do, so a user fixes a broken manifest in one pass rather than one error per run.

The package is split so each part can be read on its own: `sections` (what a valid manifest is, as
data), `patterns` (the include/exclude globs), `problems` and `table` (how the strict reader
collects what is wrong), `readers` (the rules of each section) and `loading` (the entry points and
the requires_pinakes pre-pass). Import from `pinakes.manifest`, not from the parts.
"""

from pinakes.manifest.loading import load_manifest, parse_manifest
from pinakes.manifest.problems import InvalidManifestError, ManifestProblem
from pinakes.manifest.sections import (
    ALWAYS_EXCLUDED,
    CHUNKING_STRATEGIES,
    DEFAULT_DEEP_MODEL,
    DEFAULT_EXTRACTION_MODEL,
    DEFAULT_INCLUDE,
    DEFAULT_RERANK_MODEL,
    GRAPH_CHANNELS,
    HEADING_GRAMMARS,
    ON_EXCEED,
    REQUIRED_SECTIONS,
    SECTION_KEYS,
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

__all__ = [
    "ALWAYS_EXCLUDED",
    "CHUNKING_STRATEGIES",
    "DEFAULT_DEEP_MODEL",
    "DEFAULT_EXTRACTION_MODEL",
    "DEFAULT_INCLUDE",
    "DEFAULT_RERANK_MODEL",
    "GRAPH_CHANNELS",
    "HEADING_GRAMMARS",
    "ON_EXCEED",
    "REQUIRED_SECTIONS",
    "SECTION_KEYS",
    "TOP_LEVEL_SECTIONS",
    "UNBUILT_GRAPH_CHANNELS",
    "UNBUILT_VECTOR_TIERS",
    "VECTOR_TIERS",
    "BudgetSection",
    "CISection",
    "ChunkingSection",
    "ConfidenceSection",
    "DeepSection",
    "EmbeddingSection",
    "ExtractionSection",
    "FusionSection",
    "InvalidManifestError",
    "KBSection",
    "LinkedKB",
    "Manifest",
    "ManifestProblem",
    "RerankSection",
    "RetrievalSection",
    "SourcesSection",
    "load_manifest",
    "parse_manifest",
]
