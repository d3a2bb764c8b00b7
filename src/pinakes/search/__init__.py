"""Read-only retrieval: BM25, vectors, fusion, rerank, confidence, suggestions.

`search.core.search()` (one call) and `search.core.Searcher` (held by long-lived callers) are the
single entry point for the CLI, the MCP server and eval. Nothing here writes the index: the text
the writer and this package share (the tokenizer, the CJK shadow, the document filters) is the
neutral text layer's, `pinakes.lexical`. Importing this package loads nothing: no numpy, no model.
"""
