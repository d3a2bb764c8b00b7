"""What an extractor returns: the indexed text of one document and where it came from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ExtractedText:
    """The text a document is chunked from (`indexed_text` in spec §4.6).

    `pages` holds one `(char_start, char_end)` span into `text` per page, in page order, for paged
    sources (PDF); it is None for text sources. Spans never overlap and the text between two spans
    is the separator the extractor put there. `backend` names the extractor (a key of
    `pinakes.extract.registry.EXTRACTORS`) and `fingerprint` is that extractor's fingerprint when
    it ran: together they pin which characters the chunk offsets address.

    `pages_without_text` lists, 1-based, the pages whose native text layer fell under the fitted
    text-yield floor while drawing something (a scan, an image of text): the free path has no OCR,
    so they are reported, never passed off as indexed. Plain data, so it crosses a process boundary.
    """

    text: str
    pages: tuple[tuple[int, int], ...] | None
    backend: str
    fingerprint: str
    pages_without_text: tuple[int, ...] = ()
    # The running heads and feet a PDF's layout stripped from `text` (extract/layout.py), kept as the
    # document's context (pipeline/context.py): not body text, never part of a chunk.
    running_heads: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.pages is None:
            if self.pages_without_text:
                raise ValueError("only a paged extraction can have pages without text")
            return
        if list(self.pages_without_text) != sorted(set(self.pages_without_text)) or not all(
                1 <= number <= len(self.pages) for number in self.pages_without_text):
            raise ValueError(f"pages without text must be ascending page numbers of this extraction: "
                             f"{self.pages_without_text!r}")
        previous_end = 0
        for start, end in self.pages:
            if not 0 <= previous_end <= start <= end <= len(self.text):
                raise ValueError(
                    f"page spans must be ordered, non-overlapping and inside the text: {self.pages!r}"
                )
            previous_end = end

    @classmethod
    def from_pages(cls, page_texts: Sequence[str], separator: str, *, backend: str, fingerprint: str,
                   pages_without_text: tuple[int, ...] = (), running_heads: tuple[str, ...] = ()) -> ExtractedText:
        """Join the pages' texts with `separator`, recording each page's span."""
        parts: list[str] = []
        spans: list[tuple[int, int]] = []
        position = 0
        for number, page_text in enumerate(page_texts):
            if number:
                parts.append(separator)
                position += len(separator)
            spans.append((position, position + len(page_text)))
            parts.append(page_text)
            position += len(page_text)
        return cls(text="".join(parts), pages=tuple(spans), backend=backend, fingerprint=fingerprint,
                   pages_without_text=pages_without_text, running_heads=running_heads)
