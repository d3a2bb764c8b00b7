"""Extraction: turning a source file into the text that gets chunked (`indexed_text`).

`registry.py` declares every extractor by name with the constants that shape its output, so a
fingerprint can be computed (for sync keys and the per-query coherence check) without importing a
backend. The backends themselves live beside it and are imported only when extraction runs.
"""
