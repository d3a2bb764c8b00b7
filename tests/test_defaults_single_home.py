"""Each default has one home: the section dataclasses of `pinakes.manifest` (manifest/sections.py).

The manifest's readers name a default again (to say it in a message), and search's settings mirror
[retrieval]; these tests fail as soon as either says something the dataclass does not.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pinakes.manifest import (
    BudgetSection,
    ChunkingSection,
    CISection,
    ConfidenceSection,
    DeepSection,
    EmbeddingSection,
    ExtractionSection,
    RerankSection,
    RetrievalSection,
    load_manifest,
)
from pinakes.search.core import SearchSettings

KB = '[kb]\nname = "defaults"\nid = "01M8P05RX7E8691VQVZ35N5HS3"\n'
SOURCES = '[sources]\nroots = ["docs"]\n'
EMBEDDING = '[embedding]\nprovider = "fastembed"\nmodel = "sentence-transformers/all-MiniLM-L6-v2"\ndim = 384\n'
# Sections a KB may leave out entirely, or write as an empty table: both mean "every default".
OPTIONAL_SECTIONS = ("extraction", "chunking", "retrieval", "rerank", "budget", "deep", "ci")


def shared_fields(left: type, right: type) -> set[str]:
    return {field.name for field in dataclasses.fields(left)} & {field.name for field in dataclasses.fields(right)}


def test_search_settings_default_to_the_retrieval_section() -> None:
    shared = shared_fields(SearchSettings, RetrievalSection)
    # Guard against a rename quietly emptying the comparison.
    assert {"candidates_per_source", "fusion_top_k", "final_k", "rrf_k", "rerank", "graph_channel",
            "adjacent_k", "confidence"} <= shared
    settings, retrieval = SearchSettings(), RetrievalSection()
    differing = {name: (getattr(settings, name), getattr(retrieval, name)) for name in shared
                 if getattr(settings, name) != getattr(retrieval, name)}
    assert not differing, f"SearchSettings restates [retrieval] defaults differently: {differing}"


def test_from_retrieval_carries_every_field_the_settings_share() -> None:
    confidence = ConfidenceSection(high=0.9, low=0.1, fitted_for="test")
    changed = RetrievalSection(candidates_per_source=70, fusion_top_k=30, final_k=4, rrf_k=10, rerank=False,
                               adjacent_k=9, graph_channel="expand", vector_tier="numpy",
                               confidence=confidence)
    assert all(getattr(changed, name) != getattr(RetrievalSection(), name)
               for name in shared_fields(SearchSettings, RetrievalSection))
    settings = SearchSettings.from_retrieval(changed)
    for name in shared_fields(SearchSettings, RetrievalSection):
        assert getattr(settings, name) == getattr(changed, name), name


@pytest.mark.parametrize("written", ["absent", "empty"])
def test_a_manifest_that_sets_nothing_reads_as_the_section_defaults(tmp_path: Path, written: str) -> None:
    tables = "".join(f"[{name}]\n" for name in OPTIONAL_SECTIONS) if written == "empty" else ""
    path = tmp_path / "pinakes.toml"
    path.write_text(KB + SOURCES + EMBEDDING + tables, encoding="utf-8")
    manifest = load_manifest(path)
    assert manifest.extraction == ExtractionSection()
    assert manifest.chunking == ChunkingSection()
    assert manifest.retrieval == RetrievalSection()
    assert manifest.budget == BudgetSection()
    assert manifest.deep == DeepSection()
    assert manifest.ci == CISection()
    # Required keys have no default; every other key of these two takes the dataclass's.
    assert manifest.embedding == EmbeddingSection(provider="fastembed", model="sentence-transformers/all-MiniLM-L6-v2",
                                                  dim=384)
    assert manifest.rerank == RerankSection(provider=manifest.embedding.provider)
