"""Coverage (search/coverage.py) reads which query terms a chunk holds from its term counts: the
same terms tokenizing its text finds, for every chunk of a KB built by the sync (tldr pages, Markdown
with code, and text in Han and Cyrillic), and the same tie-breaking coverage on every search."""

from __future__ import annotations

from pathlib import Path

import pytest

from pinakes.index.schema import FTS_TOKENIZE
from pinakes.lexical.tokenizer import Tokenizer
from pinakes.search import coverage
from pinakes.search.core import Searcher, SearchSettings
from tests.fakes import HashEmbedder
from tests.kb_helpers import Doc, build_kb
from tests.test_search_twice import _pages  # pyright: ignore[reportPrivateUsage] -- shares that test's corpus


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("coverage") / "kb"
    extra = [Doc("docs/mixed.md", "# Über naïve café\n\n東京都の天気は晴れです。Привет, мир! running runs ran\n\n"
                                  "`tar -xzvf archive.tar.gz` unpacks; x86_64 and C++ and e-mail.\n")]
    return build_kb(root, [*_pages(30), *extra], HashEmbedder(), max_tokens=48, overlap=0)


def test_the_terms_a_chunk_holds_are_those_tokenizing_its_text_finds(built: Path):
    with Searcher(built, embedder=HashEmbedder()) as searcher, searcher.snapshot() as generation:
        conn = generation.conn
        assert generation.tokenizer.tokenize == FTS_TOKENIZE
        chunks = conn.execute("SELECT id, text FROM chunks ORDER BY id").fetchall()
        assert len(chunks) > 40
        # Every term of the index (text or context), and words no chunk holds.
        terms = {row[0] for row in conn.execute("SELECT DISTINCT term FROM chunk_terms")} | {"zzqx", "nowhere"}
        ids, texts = [chunk_id for chunk_id, _ in chunks], [text for _, text in chunks]
        tokenizer = Tokenizer(FTS_TOKENIZE)
        try:
            assert coverage.held(conn, ids, terms) == dict(zip(ids, tokenizer.presence(texts, terms), strict=True))
        finally:
            tokenizer.close()


def test_searches_break_ties_as_tokenizing_did(built: Path, monkeypatch: pytest.MonkeyPatch):
    queries = ["extract a tar archive", "list files in a directory", "東京 天気", "café running", "git push origin"]
    with Searcher(built, SearchSettings(rerank=False), embedder=HashEmbedder()) as searcher:
        read = [searcher.search(query) for query in queries]
        monkeypatch.setattr(coverage, "FTS_TOKENIZE", "not this index's")  # tokenize the texts, as before
        tokenized = [searcher.search(query) for query in queries]
    for first, second in zip(read, tokenized, strict=True):
        assert first.passages == second.passages and first.confidence == second.confidence
        assert first.passages
