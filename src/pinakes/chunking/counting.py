"""Token counting for one chunking run: each piece of text counted once, many at a time.

Token counting is the cost that matters at sync (10k+ documents), so the chunker counts in batches
(blocks up front, split parts as they are split, overlap candidates per chunk) and remembers the
count of every short text it has seen.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

CountTokens = Callable[[str], int]
CountTokensBatch = Callable[[Sequence[str]], Sequence[int]]

# A text this short is counted once per chunking run, however often it recurs: the overlap's
# candidate words repeat by the thousand ("the", "of") in a large document. Longer texts (blocks,
# chunks) seldom repeat, and remembering them would hold a second copy of the document.
_REMEMBERED_CHARS = 64


class TokenTally:
    """Counts with the model's tokenizer, one text or a batch; a short text is counted once per run."""

    def __init__(self, count: CountTokens, count_batch: CountTokensBatch | None) -> None:
        self._count = count
        self._count_batch = count_batch
        self._short: dict[str, int] = {}

    def one(self, text: str) -> int:
        known = self._short.get(text)
        if known is not None:
            return known
        tokens = self._count(text)
        if len(text) <= _REMEMBERED_CHARS:
            self._short[text] = tokens
        return tokens

    def many(self, texts: Sequence[str]) -> list[int]:
        short = self._short
        # Each distinct text not already known, counted once, in one batch.
        unknown = list(dict.fromkeys(text for text in texts if text not in short))
        if unknown:
            counted = dict(zip(unknown, self._counted(unknown), strict=True))
            short.update((text, tokens) for text, tokens in counted.items() if len(text) <= _REMEMBERED_CHARS)
            return [short[text] if text in short else counted[text] for text in texts]
        return [short[text] for text in texts]

    def _counted(self, texts: list[str]) -> list[int]:
        if self._count_batch is not None:
            counts = list(self._count_batch(texts))
            if len(counts) != len(texts):
                raise ValueError(f"count_tokens_batch returned {len(counts)} counts for {len(texts)} texts")
            return counts
        return [self._count(item) for item in texts]


