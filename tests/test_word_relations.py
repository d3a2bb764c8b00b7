"""WordNet's relations between words (lexical/relations.py) and the confidence feature that reads
them, `related_share` (search/signals.py; issue #25, docs/QUALITY.md "#25" (i)): a paraphrase's
words are held by a passage that holds their relatives, an unanswerable question's asked thing is not."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from pathlib import Path

import pytest

from pinakes.index.schema import FTS_TOKENIZE
from pinakes.lexical.relations import TABLE, WordRelations, packaged
from pinakes.lexical.tokenizer import Tokenizer
from pinakes.search.core import Searcher, SearchSettings
from tests.fakes import VectorTableEmbedder
from tests.kb_helpers import build_kb, searchable


@pytest.fixture(scope="module")
def relations() -> WordRelations:
    return packaged()


def test_a_paraphrase_finds_the_word_its_passage_uses(relations: WordRelations):
    assert "glove" in relations.relatives("mittens")  # a mitten is a kind of glove; plural through morphy
    assert "pen" in relations.relatives("Biro")  # a synonym of ballpoint pen: a compound by its head
    assert "book" in relations.relatives("tome")
    assert {"insect", "pest"} <= relations.relatives("bugs")
    assert "seal" in relations.relatives("stamps")


def test_relatives_are_index_terms_and_never_function_words(relations: WordRelations):
    tokenizer = Tokenizer(FTS_TOKENIZE)
    function_terms = {terms[0] for terms in tokenizer.function_terms if len(terms) == 1}
    for word in ("old", "get", "use", "take", "record", "office", "leaves"):
        related = relations.relatives(word)
        assert related, word
        assert not related & function_terms, (word, related & function_terms)
        # Each relative is what the index's own tokenizer makes of a word: one lower-case term.
        assert all(re.fullmatch(r"[a-z0-9]+", term) for term in related), word
    # "leaves" is filed under leaf (noun) and leave (verb): both lemmas' senses are read.
    assert {"foliag", "depart"} <= relations.relatives("leaves")
    tokenizer.close()


def test_a_word_wordnet_lacks_has_no_relatives(relations: WordRelations):
    assert relations.relatives("zzzunheard") == frozenset()
    assert relations.relatives("the") == frozenset()
    assert relations.relatives("") == frozenset()
    assert relations.relatives("café") == frozenset()  # WordNet's words are ASCII
    assert relations.relatives("glove" + "s" * 40) == frozenset()  # longer than any word it holds


def test_the_packaged_table_is_the_one_its_notice_names():
    notice = (TABLE.parent / "NOTICE").read_text(encoding="utf-8")
    assert hashlib.sha256(TABLE.read_bytes()).hexdigest() in notice
    assert "Princeton University" in notice  # WordNet's licence travels with its data


# -- related_share through a KB built by the sync ------------------------------------------------

GLOVES = "Wear cotton gloves when handling photographs."
EXITS = "Leave by the nearest exit when the alarm sounds."


@pytest.fixture(scope="module")
def gloves_kb(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, VectorTableEmbedder]:
    embedder = VectorTableEmbedder({GLOVES: [1.0, 0.0], EXITS: [0.0, 1.0]}, query=[1.0, 0.2])
    index = build_kb(tmp_path_factory.mktemp("relations") / "kb",
                     searchable({"gloves.md": GLOVES + "\n", "exits.md": EXITS + "\n"}), embedder)
    return index, embedder


def features_of(kb: tuple[Path, VectorTableEmbedder], query: str) -> Mapping[str, float]:
    index, embedder = kb
    with Searcher(index, SearchSettings(rerank=False), embedder=embedder) as searcher:
        result = searcher.search(query)
    assert result.passages[0].path == "docs/gloves.md"
    features = result.confidence.features
    assert features is not None
    return features


def idf(document_frequency: int, chunks: int = 2) -> float:
    return math.log(1.0 + (chunks - document_frequency + 0.5) / (document_frequency + 0.5))


def test_a_word_held_through_its_relative_counts_as_held(gloves_kb: tuple[Path, VectorTableEmbedder]):
    features = features_of(gloves_kb, "mittens photographs")
    # "mittens" is a word the index never saw: keyword_share weighs it at the highest IDF, unheld.
    assert features["keyword_share"] == pytest.approx(idf(1) / (idf(1) + idf(0)), abs=1e-5)
    # The top passage holds gloves, mittens' relative: every keyword held.
    assert features["related_share"] == pytest.approx(1.0)


def test_the_asked_thing_no_passage_relates_to_stays_unheld(gloves_kb: tuple[Path, VectorTableEmbedder]):
    features = features_of(gloves_kb, "earthquake photographs")
    assert features["related_share"] == pytest.approx(idf(1) / (idf(1) + idf(0)), abs=1e-5)
    assert features["related_share"] == pytest.approx(features["keyword_share"], abs=1e-6)
