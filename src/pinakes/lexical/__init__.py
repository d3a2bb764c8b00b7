"""The neutral text layer: how text becomes index terms and how documents are selected.

Both the index writer (`index/`, the sync's stages) and the read-only searcher (`search/`) import
it, and it imports neither: `scripts.py` (the CJK shadow text FTS5 indexes), `tokenizer.py` (the
index's own FTS5 tokenizer run on arbitrary text) and `filters.py` (document filters compiled to
SQL). It loads no numpy and no model, so the no-op sync can read it on every run; `relations.py`
(WordNet's relations between words, a numpy table) is search's alone and loaded only by it.
"""
