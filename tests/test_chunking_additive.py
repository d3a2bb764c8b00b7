"""The chunker's second counting pass, skipped where the tokenizer proves it adds up (issue #45).

With `additive=True` a chunk made of parts joined by spaces, tabs or line breaks takes the sum of
its parts' counts instead of being counted again. That may only ever save time: the chunks (spans,
counts, headings, pages) must be exactly those of the counting path, for any document, with the real
tokenizer of the default model. And the proof is read from the tokenizer's configuration: a
tokenizer that does not split at whitespace first is not trusted.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pinakes.chunking import Chunk, chunk_text
from pinakes.embed.tokens import TokenCounter
from tests.kb_helpers import packaged_token_counter

CORPORA = Path(__file__).resolve().parent.parent.parent / "shared" / "corpora"


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return packaged_token_counter()


def subwords(text: str) -> int:
    """Additive over any whitespace, like WordPiece: a word of n characters is ceil(n / 4) tokens."""
    return sum(math.ceil(len(word) / 4) for word in text.split())


def both_ways(text: str, source_type: str, count: Callable[[str], int],
              count_batch: Callable[[Sequence[str]], Sequence[int]] | None,
              **options: Any) -> tuple[list[Chunk], list[Chunk]]:
    plain = chunk_text(text, source_type, count_tokens=count, count_tokens_batch=count_batch, **options)
    summed = chunk_text(text, source_type, count_tokens=count, count_tokens_batch=count_batch, additive=True,
                        **options)
    return plain, summed


# Words and joins chosen where a wrong proof would show: whitespace BERT's normalizer deletes (a form
# feed, other controls) or keeps as a space (NBSP, ideographic space, line separators), combining
# marks at a word's start, CJK, punctuation, a special token's text, runs past WordPiece's 100
# characters a word, and sentence ends without a space after them (。).
_word = st.one_of(
    st.sampled_from(["alpha", "Beta.", "gamma!", "naïve", "e\u0301", "\u0301x", "東京。", "世界", "[SEP]", "[MASK]x",
                     "x" * 120, "ΣΑΣ", "İstanbul", "don't", "a-b_c", "1.", "2.1", "ﬁne", "\u200bzero", "ß"]),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=10).filter(
        lambda word: not word.isspace()),
)
_gap = st.sampled_from([" ", "  ", "\t", " \u00a0", "\u00a0", "\u3000", "\x0c", "\x0b", "\u2028", "\x1c", "\x85", ""])
_paragraph = st.lists(st.tuples(_word, _gap), min_size=1, max_size=60).map(
    lambda pairs: "".join(word + gap for word, gap in pairs).strip(" "))


def _heading_line(level: int, title: str) -> str:
    return "#" * level + " " + title


def _joined(lines: list[str], newline: str) -> str:
    return newline.join(lines)


_line = st.one_of(_paragraph, st.builds(_heading_line, st.integers(1, 4), _paragraph),
                  st.sampled_from(["", "   ", "\x0c", "\t", "```", "1. One", "1.1 Sub", "=====", "-----"]))
_document = st.builds(_joined, st.lists(_line, max_size=30),
                      st.sampled_from(["\n", "\r\n", "\n\n", "\n\x0c\n", "\n \u00a0\n"]))


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(text=_document, source_type=st.sampled_from(["markdown", "text", "code", "pdf"]),
       max_tokens=st.integers(1, 80), overlap_share=st.floats(0, 0.9))
def test_summed_counts_give_the_same_chunks_with_the_real_tokenizer(counter: TokenCounter, text: str,
                                                                    source_type: str, max_tokens: int,
                                                                    overlap_share: float) -> None:
    plain, summed = both_ways(text, source_type, counter.count, counter.count_batch, max_tokens=max_tokens,
                              overlap=int(max_tokens * overlap_share))
    assert summed == plain
    assert all(chunk.token_count == counter.count(chunk.text) for chunk in summed)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(text=_document, source_type=st.sampled_from(["markdown", "text", "code"]),
       max_tokens=st.integers(1, 60), overlap_share=st.floats(0, 0.9),
       headings=st.sampled_from(["none", "numbered"]))
def test_summed_counts_give_the_same_chunks_with_any_additive_counter(text: str, source_type: str, max_tokens: int,
                                                                      overlap_share: float, headings: str) -> None:
    plain, summed = both_ways(text, source_type, subwords, None, max_tokens=max_tokens,
                              overlap=int(max_tokens * overlap_share), headings=headings)
    assert summed == plain


def _corpus_sample() -> list[Path]:
    picked: list[Path] = []
    for name, stride in (("tldr-pages-translations", 601), ("python-3.11-docs-rst", 23), ("tldr-nl2bash-dev", 499),
                         ("cranfield", 97)):
        files = sorted(path for path in (CORPORA / name).rglob("*") if path.is_file()
                       and path.suffix in {".md", ".txt", ".rst"})
        picked.extend(files[::stride])
    return picked


def test_summed_counts_give_the_same_chunks_on_real_documents(counter: TokenCounter) -> None:
    """Manuals, man pages, tldr pages in 38 languages (CJK, Cyrillic, Arabic...), as a sync chunks
    them (the default model's 254 tokens less the context's reserve, 25 of overlap)."""
    sample = _corpus_sample()
    if len(sample) < 20:
        pytest.skip("the shared corpora are not here")
    summed_chunks = 0
    for path in sample:
        text = path.read_text(encoding="utf-8", errors="replace")
        source_type = "markdown" if path.suffix == ".md" else "text"
        markup = "rst" if path.suffix == ".rst" else None
        plain, summed = both_ways(text, source_type, counter.count, counter.count_batch, max_tokens=222, overlap=25,
                                  markup=markup)
        assert summed == plain, path
        summed_chunks += len(summed)
    assert summed_chunks > 100


def test_a_joined_chunk_is_not_counted_again() -> None:
    """What the summing saves: paragraphs joined by blank lines are counted once (as blocks), the
    chunks they make are not counted again; a form feed between them is not a proof, so the chunk
    across it is counted."""
    counted: list[str] = []

    def batch(texts: Sequence[str]) -> list[int]:
        counted.extend(texts)
        return [subwords(text) for text in texts]

    text = "\n\n".join(" ".join(f"w{n}x{i}" for i in range(12)) for n in range(40))
    plain = chunk_text(text, "text", max_tokens=100, overlap=0, count_tokens=subwords, count_tokens_batch=batch)
    counted_plain = sum(map(len, counted))
    counted.clear()
    summed = chunk_text(text, "text", max_tokens=100, overlap=0, count_tokens=subwords, count_tokens_batch=batch,
                        additive=True)
    assert summed == plain
    assert counted_plain >= 1.9 * len(text)  # blocks, then every chunk again
    assert sum(map(len, counted)) <= len(text)  # blocks only

    counted.clear()
    fed = text.replace("\n\n", "\n\x0c\n")
    summed = chunk_text(fed, "text", max_tokens=100, overlap=0, count_tokens=subwords, count_tokens_batch=batch,
                        additive=True)
    assert any(chunk.text in counted for chunk in summed if "\x0c" in chunk.text)


def _configuration(counter: TokenCounter) -> dict[str, Any]:
    return json.loads(counter.to_str())


def _edit(change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    """Types a configuration change written as a lambda."""
    return change


@pytest.mark.parametrize("change", [
    pytest.param(_edit(lambda config: config.update(pre_tokenizer={"type": "ByteLevel", "add_prefix_space": True,
                                                                   "trim_offsets": True, "use_regex": True})),
                 id="byte-level pre-tokenizer"),
    pytest.param(_edit(lambda config: config.update(pre_tokenizer={"type": "Metaspace", "replacement": "▁",
                                                                   "prepend_scheme": "always", "split": True})),
                 id="metaspace pre-tokenizer"),
    pytest.param(_edit(lambda config: config.update(pre_tokenizer=None)), id="no pre-tokenizer"),
    pytest.param(_edit(lambda config: config.update(normalizer={"type": "Sequence", "normalizers": [
        {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True, "strip_accents": None,
         "lowercase": True}, {"type": "Prepend", "prepend": "▁"}]})), id="prepending normalizer"),
    pytest.param(_edit(lambda config: config.update(normalizer={"type": "Replace", "pattern": {"String": " "},
                                                                "content": ""})), id="replacing normalizer"),
    pytest.param(_edit(lambda config: config["added_tokens"].append({
        "id": 30522, "content": "new york", "single_word": False, "lstrip": False, "rstrip": False,
        "normalized": True, "special": False})), id="an added token with a space"),
])
def test_a_tokenizer_not_proved_additive_is_counted(counter: TokenCounter,
                                                   change: Callable[[dict[str, Any]], None]) -> None:
    assert counter.additive_over_whitespace  # the default model's: BERT normalizer, pre-tokenizer, WordPiece
    config = _configuration(counter)
    change(config)
    assert not TokenCounter.from_str(json.dumps(config)).additive_over_whitespace


def test_a_bpe_model_is_counted(counter: TokenCounter) -> None:
    config = _configuration(counter)
    config["model"] = {"type": "BPE", "dropout": None, "unk_token": "[UNK]", "continuing_subword_prefix": None,
                       "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                       "vocab": {"[UNK]": 0, "a": 1, "b": 2, "ab": 3}, "merges": [["a", "b"]]}
    config["added_tokens"] = [token for token in config["added_tokens"] if token["content"] == "[UNK]"]
    config["added_tokens"][0]["id"] = 0
    config["post_processor"] = None
    config["decoder"] = None
    config["padding"] = None
    assert not TokenCounter.from_str(json.dumps(config)).additive_over_whitespace


def test_the_sync_chunks_with_summed_counts_for_the_default_model(counter: TokenCounter) -> None:
    from pinakes.pipeline.chunk import counts_add_up

    class Packaged:
        token_counter = counter

    class Remote:  # counts through a provider's tokenizer known only by its answers
        token_counter = None

    assert counts_add_up(Packaged())  # pyright: ignore[reportArgumentType]  # a stand-in: only token_counter
    assert not counts_add_up(Remote())  # pyright: ignore[reportArgumentType]  # a stand-in: only token_counter


def test_a_sync_writes_the_same_index_and_sends_the_same_calls_with_summed_counts(
        counter: TokenCounter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end: the chunker's summed counts and the embed stage's (context + chunk, for its
    longest-first order) leave every row of the index and every call to the model as counting does."""
    import sqlite3

    import numpy as np

    import pinakes.pipeline.chunk as chunk_stage
    import pinakes.pipeline.embed as embed_stage
    from pinakes.kb import KBPaths
    from tests.fakes import FakeEmbedder
    from tests.kb_helpers import Doc, build_kb

    sample = _corpus_sample()
    if len(sample) < 20:
        pytest.skip("the shared corpora are not here")
    docs = [Doc(f"docs/{number:03}-{path.name}", path.read_text(encoding="utf-8", errors="replace"))
            for number, path in enumerate(sample)]
    # Chunks full to the limit under headings too long for the room left beside them: the context
    # is cut to fit (fit_context), counted ahead of each chunk.
    heading = " ".join(f"heading{n} naïve 東京" for n in range(30))
    docs += [Doc(f"docs/tight-{number}.md", f"# {heading}\n\n## {heading} part\n\n"
                 + "\n\n".join(" ".join(f"w{number}x{block}y{word}" for word in range(70)) for block in range(8)))
             for number in range(3)]

    class Counting(FakeEmbedder):
        def __init__(self) -> None:
            super().__init__()
            self.token_counter = counter
            self.sent: list[list[str]] = []

        def count_tokens(self, text: str) -> int:
            return counter.count(text)

        def count_tokens_batch(self, texts: Sequence[str]) -> list[int]:
            return counter.count_batch(texts)

        def embed_documents(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
            self.sent.append(list(texts))
            return super().embed_documents(texts, batch_size)

    def index_of(root: Path, model: Counting) -> tuple[list[tuple[Any, ...]], list[list[str]]]:
        build_kb(root, docs, model)
        conn = sqlite3.connect(KBPaths(root).index_db)
        try:
            rows = conn.execute(
                "SELECT d.path, c.id, c.ordinal, c.char_start, c.char_end, c.text, c.token_count, c.context, "
                "c.heading_path, e.vector, e.text_key FROM chunks c JOIN documents d ON d.id = c.doc_id "
                "JOIN embeddings e ON e.chunk_id = c.id ORDER BY c.id").fetchall()
        finally:
            conn.close()
        return rows, model.sent

    summed = index_of(tmp_path / "summed", Counting())

    def never_adds_up(_embedder: object) -> bool:
        return False

    monkeypatch.setattr(chunk_stage, "counts_add_up", never_adds_up)
    monkeypatch.setattr(embed_stage, "counts_add_up", never_adds_up)
    counted = index_of(tmp_path / "counted", Counting())
    assert len(summed[0]) > 100
    assert any(path.startswith("docs/tight-") and context and "heading29" not in context
               for path, *_row, context, _heading, _vector, _key in summed[0])  # cut to fit
    assert any(len(call) > 1 for call in summed[1])
    assert summed == counted


def test_a_cluster_driver_chunks_with_summed_counts_too(counter: TokenCounter) -> None:
    """On Ray the driver counts with the workers' tokenizer (`RayEmbedder`): the same proof applies."""
    from pinakes.embed.base import ModelIdentity
    from pinakes.embed.executor_ray import RayEmbedder
    from pinakes.pipeline.chunk import counts_add_up

    embedder = RayEmbedder(None, [], identity=ModelIdentity("fastembed", "m", "r", "0" * 64, 384),
                           max_input_tokens=254, counter=counter, batch_size=32, address="127.0.0.1:1",
                           owns_connection=False, on_workers=None)
    assert embedder.token_counter is counter
    assert counts_add_up(embedder)
