"""`chunk_text`: a document's indexed text cut into chunks, dispatched on its source type (see the
package docstring for what every chunk satisfies)."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from pinakes.chunking.counting import CountTokens, CountTokensBatch, TokenTally
from pinakes.chunking.markdown import markdown_sections
from pinakes.chunking.packing import Atom, Packer
from pinakes.chunking.spans import Section, blocks_of, line_spans, without_lone_headings
from pinakes.chunking.text_headings import asciidoc_sections, numbered_sections, rst_sections

# A chunk holds at most max_tokens x this many characters. Tokens bound what the model sees, but not
# what a chunk holds: a WordPiece tokenizer reads any run of more than 100 characters without a space
# as one unknown token, so a 5 MB line was one "1-token" chunk of 5 MB, returned whole by every search
# that touched it. English runs at about 4 characters per token; 16 leaves ordinary text untouched.
MAX_CHARS_PER_TOKEN = 16

HEADING_MODES = ("none", "numbered")
CHUNKED_SOURCE_TYPES = ("markdown", "text", "code", "pdf", "image")
# The markup a text source is written in (from its file name: `pinakes.extract.source_types.markup_for`);
# its section titles are headings whatever `headings` says, since the markup itself declares them.
TEXT_MARKUPS = ("rst", "asciidoc")


@dataclass(frozen=True, slots=True)
class Chunk:
    ordinal: int  # 0-based position in the document
    text: str
    char_start: int
    char_end: int
    token_count: int  # counted with the tokenizer the chunker was given, on exactly `text`
    heading_path: tuple[str, ...] | None  # outermost heading first; None outside any heading
    page_start: int | None  # 1-indexed; None for a non-paged source
    page_end: int | None


def chunk_text(
    text: str,
    source_type: str,
    *,
    max_tokens: int,
    overlap: int,
    headings: str | None = "none",
    count_tokens: CountTokens,
    count_tokens_batch: CountTokensBatch | None = None,
    pages: Sequence[tuple[int, int]] | None = None,
    markup: str | None = None,
    additive: bool = False,
) -> list[Chunk]:
    """Cut `text` into chunks of at most `max_tokens` tokens (see the package docstring).

    `count_tokens` counts the tokens of one string as the embedding model will see them (without
    special tokens); `count_tokens_batch`, when given, counts many at once and is used wherever
    the chunker can batch. `pages` are per-page `(char_start, char_end)` spans of a paged source,
    in page order; chunks then carry 1-indexed page_start/page_end. `markup` ("rst", "asciidoc")
    names the markup of a text source, whose section titles are then its headings. `additive`
    says the counter adds up over whitespace: count(a + g + b) == count(a) + count(b) for every
    non-empty run g of spaces, tabs, CRs and LFs (`TokenCounter.additive_over_whitespace` says when
    a tokenizer's configuration proves it); a chunk whose parts are all joined that way is then not
    counted again. The output is the same either way.
    """
    if source_type not in CHUNKED_SOURCE_TYPES:
        raise ValueError(f"unknown source type {source_type!r}; expected one of {CHUNKED_SOURCE_TYPES}")
    mode = headings or "none"
    if mode not in HEADING_MODES:
        raise ValueError(f"unknown heading mode {headings!r}; expected one of {HEADING_MODES}")
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, not {max_tokens}")
    if not 0 <= overlap < max_tokens:
        raise ValueError(f"overlap must be at least 0 and below max_tokens ({max_tokens}), not {overlap}")
    if markup is not None and markup not in TEXT_MARKUPS:
        raise ValueError(f"unknown markup {markup!r}; expected one of {TEXT_MARKUPS}")

    lines = line_spans(text)
    if source_type == "markdown":
        sections, fenced = markdown_sections(text, lines)
    elif source_type == "text" and markup == "rst":
        sections, fenced = rst_sections(text, lines), None
    elif source_type == "text" and markup == "asciidoc":
        sections, fenced = asciidoc_sections(text, lines)
    elif source_type == "text" and mode == "numbered":
        sections, fenced = numbered_sections(text, lines), None
    else:
        sections, fenced = [Section(0, len(lines), None)], None
    sections = without_lone_headings(text, lines, sections,
                                     clauses=source_type == "text" and markup is None)

    counter = TokenTally(count_tokens, count_tokens_batch)
    packer = Packer(text, counter, max_tokens, overlap, split_sentences=source_type != "code", additive=additive)
    section_blocks = [blocks_of(text, lines, section, fenced) for section in sections]
    all_blocks = [block for blocks in section_blocks for block in blocks]
    block_tokens = iter(counter.many([text[start:end] for start, end in all_blocks]))

    section_atoms: list[list[Atom]] = []
    for section, blocks in zip(sections, section_blocks, strict=True):
        atoms = [Atom(start, end, next(block_tokens)) for start, end in blocks]
        if section.heading_path is not None and atoms:
            atoms[0] = Atom(atoms[0].start, atoms[0].end, atoms[0].tokens, heading=True)
        section_atoms.append(atoms)

    # Pack on estimates, then count every chunk for real in one batch; only a section where the
    # estimate proved wrong is packed again, counting as it goes.
    # A chunk whose count its parts prove (`additive`) is not counted again.
    planned = packer.pack_estimated(section_atoms)
    counts = iter(counter.many([text[start:end] for spans in planned for start, end, exact in spans if exact is None]))
    page_of = _PageLookup(pages) if pages is not None else None
    max_chars = max_tokens * MAX_CHARS_PER_TOKEN
    chunks: list[Chunk] = []
    for section, atoms, spans in zip(sections, section_atoms, planned, strict=True):
        counted = [(start, end, next(counts) if exact is None else exact) for start, end, exact in spans]
        if any(tokens > max_tokens for _, _, tokens in counted):
            counted = packer.pack_exact(atoms)
        if any(end - start > max_chars for start, end, _ in counted):
            # A section too long in characters is cut without overlaps: each chunk's own span (from
            # where the previous one ended) is cut to size, so pieces stay in order and never repeat.
            cores: list[tuple[int, int, int]] = []
            previous_end = -1
            for start, end, tokens in counted:
                cores.append((max(start, previous_end), end, tokens))
                previous_end = end
            counted = [piece for span in cores if span[1] > span[0]
                       for piece in _within_chars(text, span, max_chars, max_tokens, counter)]
        for start, end, tokens in counted:
            page_start = page_end = None
            if page_of is not None:
                page_start, page_end = page_of.pages_for(start, end)
            chunks.append(Chunk(
                ordinal=len(chunks), text=text[start:end], char_start=start, char_end=end,
                token_count=tokens, heading_path=section.heading_path,
                page_start=page_start, page_end=page_end,
            ))  # fmt: skip
    return chunks


def _within_chars(text: str, span: tuple[int, int, int], max_chars: int, max_tokens: int,
                  counter: TokenTally) -> list[tuple[int, int, int]]:
    """`span` cut into pieces of at most `max_chars` characters (at the last whitespace in reach, else
    anywhere), each counted again and halved further if a cut word pushed it over `max_tokens`."""
    start, end, _tokens = span
    pieces: list[tuple[int, int]] = []
    position = start
    while position < end and text[position].isspace():
        position += 1
    while position < end:
        stop = min(position + max_chars, end)
        if stop < end:
            cut = max(text.rfind(" ", position + 1, stop), text.rfind("\n", position + 1, stop))
            if cut > position:
                stop = cut
        trimmed = stop
        while trimmed > position and text[trimmed - 1].isspace():
            trimmed -= 1
        if trimmed > position:
            pieces.append((position, trimmed))
        position = stop
        while position < end and text[position].isspace():
            position += 1

    def fitted(piece_start: int, piece_end: int, count: int) -> list[tuple[int, int, int]]:
        if count <= max_tokens or piece_end - piece_start <= 1:
            return [(piece_start, piece_end, count)]
        middle = (piece_start + piece_end) // 2
        left, right = counter.many([text[piece_start:middle], text[middle:piece_end]])
        return fitted(piece_start, middle, left) + fitted(middle, piece_end, right)

    counts = counter.many([text[a:b] for a, b in pieces])
    return [fit for (a, b), count in zip(pieces, counts, strict=True) for fit in fitted(a, b, count)]


class _PageLookup:
    """1-indexed pages of a character span, from the extractor's per-page spans."""

    def __init__(self, pages: Sequence[tuple[int, int]]) -> None:
        self._starts = [start for start, _ in pages]
        self._ends = [end for _, end in pages]

    def pages_for(self, start: int, end: int) -> tuple[int | None, int | None]:
        if not self._starts:
            return None, None
        # First page ending after `start`; last page starting before `end`. A chunk that begins
        # or ends in a separator between two pages takes the neighbouring page.
        first = min(bisect.bisect_right(self._ends, start), len(self._ends) - 1)
        last = max(bisect.bisect_left(self._starts, end) - 1, 0)
        return first + 1, max(first, last) + 1
