"""Chunking: cutting a document's indexed text into passages (spec §4.6).

The source type dispatches. markdown gets ATX headings; text gets the numbered outline grammar,
opt-in (`headings="numbered"`) and accepted only when the whole document forms a valid outline
walk; code and pdf take the plain-text path and record no heading_path. A chunk never crosses a
section, and a heading line is part of the first chunk beneath it, so words that appear only in a
heading stay searchable.

Every chunk satisfies the span invariant `chunk.text == text[chunk.char_start:chunk.char_end]`:
chunks are slices, never rewritten text. Within a section, paragraph blocks (blank-line separated)
are packed up to `max_tokens` counted with the model's tokenizer. A block longer than that is split
at sentence, then line, then word boundaries, and as a last resort at characters: split, never
trimmed, so every non-whitespace character of the text lands in some chunk. `overlap` tokens from
the tail of the previous chunk of the same section are repeated at the start of the next.

Token counting is the cost that matters at sync (10k+ documents), so each piece of text is counted
once, in batches: blocks up front, split parts as they are split, overlap candidates per chunk.
Chunk sizes are first estimated by adding those counts, then every chunk is counted for real in
one batch. With a WordPiece tokenizer (MiniLM, BERT) counts add up exactly over whitespace, so
that batch would only confirm: where the caller says so (`additive`, proved from the tokenizer's
configuration by `TokenCounter.additive_over_whitespace`) a chunk whose parts are all joined by
spaces, tabs or line breaks takes the sum of their counts and only the others are counted. A
section a non-additive tokenizer pushed over the limit is packed again, counting each chunk as it
closes and re-splitting it tighter.

The modules, by concern: `chunker` (`chunk_text`, the dispatch and the character bound), `spans`
(lines, sections and blocks), `markdown` (ATX headings, fences, front matter), `text_headings`
(reST, AsciiDoc and numbered-outline headings), `packing` (blocks into chunks, splitting, overlap),
`counting` (token counts, batched and remembered) and `version` (`CHUNKER_VERSION`).
"""

from pinakes.chunking.chunker import (
    CHUNKED_SOURCE_TYPES,
    HEADING_MODES,
    MAX_CHARS_PER_TOKEN,
    TEXT_MARKUPS,
    Chunk,
    chunk_text,
)
from pinakes.chunking.counting import CountTokens, CountTokensBatch
from pinakes.chunking.counting import TokenTally as _Counter
from pinakes.chunking.markdown import front_matter_end as _front_matter_end
from pinakes.chunking.markdown import front_matter_span, markdown_headings
from pinakes.chunking.packing import WORD as _WORD
from pinakes.chunking.packing import Packer as _Packer
from pinakes.chunking.packing import Planned as _Planned
from pinakes.chunking.spans import line_spans as _line_spans
from pinakes.chunking.version import CHUNKER_VERSION

__all__ = [
    "CHUNKED_SOURCE_TYPES",
    "CHUNKER_VERSION",
    "HEADING_MODES",
    "MAX_CHARS_PER_TOKEN",
    "TEXT_MARKUPS",
    "Chunk",
    "CountTokens",
    "CountTokensBatch",
    "chunk_text",
    "front_matter_span",
    "markdown_headings",
]
# The names tests/test_chunking*.py reach inside the chunker by, from when it was one module.
__all__ += ["_WORD", "_Counter", "_Packer", "_Planned", "_front_matter_end", "_line_spans"]
