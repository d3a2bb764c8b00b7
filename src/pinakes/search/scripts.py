"""Which embedding models cannot read Han, kana or Hangul: query policy of the vector retriever.

The text side of those scripts (the shadow FTS5 indexes, the bigrams a query becomes) is the
neutral text layer's, `pinakes.lexical.scripts`; this module only decides when a query's vector
list is noise.
"""

from __future__ import annotations

from pinakes.lexical.scripts import has_segmented

# Embedding models known to have been trained on English text only: their vectors for Han, kana or
# Hangul text are noise (measured for the default model on the CJK development set,
# docs/QUALITY.md). A model not named here is trusted to read what it is given.
ENGLISH_ONLY_MODELS = frozenset({
    "sentence-transformers/all-MiniLM-L6-v2",
    "sentence-transformers/all-MiniLM-L12-v2",
    "sentence-transformers/all-mpnet-base-v2",
    "sentence-transformers/multi-qa-MiniLM-L6-cos-v1",
    "BAAI/bge-small-en-v1.5",
    "BAAI/bge-base-en-v1.5",
    "BAAI/bge-large-en-v1.5",
})


def vectors_blind_to(query: str, model: str | None) -> bool:
    """A retriever is blind when its model cannot read the query: the vector list of an
    English-only model for a query holding any Han, kana or Hangul. Fusion then leaves that list
    out, so hybrid search there is keyword search. Measured on the CJK development set: keeping the
    vectors where most of the query's letters are such characters cost 0.16 nDCG@10, and keeping
    them where fewer are (a command name in Latin letters) still cost 0.01 on zh and ko."""
    return model in ENGLISH_ONLY_MODELS and has_segmented(query)
