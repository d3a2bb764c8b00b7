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
that batch only confirms; a section a non-additive tokenizer pushed over the limit is packed
again, counting each chunk as it closes and re-splitting it tighter.
"""

from __future__ import annotations

import bisect
import re
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

CountTokens = Callable[[str], int]
CountTokensBatch = Callable[[Sequence[str]], Sequence[int]]

# The version of what this module outputs for given inputs. It is part of every document's build key,
# so bumping it re-chunks (and re-embeds) every KB on its next sync. tests/test_chunker_version.py
# holds a digest of the output over fixed inputs per version: a change to chunk output without a bump
# fails there. "2": the output after the first release's five chunking changes (was "1"); "3": chunks
# bounded in characters too (MAX_CHARS_PER_TOKEN); "4": a heading never stands alone (a section holding
# only its heading joins the next), reST and AsciiDoc section titles are headings.
CHUNKER_VERSION = "4"

# A chunk holds at most max_tokens x this many characters. Tokens bound what the model sees, but not
# what a chunk holds: a WordPiece tokenizer reads any run of more than 100 characters without a space
# as one unknown token, so a 5 MB line was one "1-token" chunk of 5 MB, returned whole by every search
# that touched it. English runs at about 4 characters per token; 16 leaves ordinary text untouched.
MAX_CHARS_PER_TOKEN = 16

HEADING_MODES = ("none", "numbered")
CHUNKED_SOURCE_TYPES = ("markdown", "text", "code", "pdf")
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
) -> list[Chunk]:
    """Cut `text` into chunks of at most `max_tokens` tokens (see the module docstring).

    `count_tokens` counts the tokens of one string as the embedding model will see them (without
    special tokens); `count_tokens_batch`, when given, counts many at once and is used wherever
    the chunker can batch. `pages` are per-page `(char_start, char_end)` spans of a paged source,
    in page order; chunks then carry 1-indexed page_start/page_end. `markup` ("rst", "asciidoc")
    names the markup of a text source, whose section titles are then its headings.
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

    lines = _line_spans(text)
    if source_type == "markdown":
        sections, fenced = _markdown_sections(text, lines)
    elif source_type == "text" and markup == "rst":
        sections, fenced = _rst_sections(text, lines), None
    elif source_type == "text" and markup == "asciidoc":
        sections, fenced = _asciidoc_sections(text, lines)
    elif source_type == "text" and mode == "numbered":
        sections, fenced = _numbered_sections(text, lines), None
    else:
        sections, fenced = [_Section(0, len(lines), None)], None
    sections = _without_lone_headings(text, lines, sections,
                                      clauses=source_type == "text" and markup is None)

    counter = _Counter(count_tokens, count_tokens_batch)
    packer = _Packer(text, counter, max_tokens, overlap, split_sentences=source_type != "code")
    section_blocks = [_blocks(text, lines, section, fenced) for section in sections]
    all_blocks = [block for blocks in section_blocks for block in blocks]
    block_tokens = iter(counter.many([text[start:end] for start, end in all_blocks]))

    section_atoms: list[list[_Atom]] = []
    for section, blocks in zip(sections, section_blocks, strict=True):
        atoms = [_Atom(start, end, next(block_tokens)) for start, end in blocks]
        if section.heading_path is not None and atoms:
            atoms[0] = _Atom(atoms[0].start, atoms[0].end, atoms[0].tokens, heading=True)
        section_atoms.append(atoms)

    # Pack on estimates, then count every chunk for real in one batch; only a section where the
    # estimate proved wrong is packed again, counting as it goes.
    planned = packer.pack_estimated(section_atoms)
    counts = iter(counter.many([text[start:end] for spans in planned for start, end in spans]))
    page_of = _PageLookup(pages) if pages is not None else None
    max_chars = max_tokens * MAX_CHARS_PER_TOKEN
    chunks: list[Chunk] = []
    for section, atoms, spans in zip(sections, section_atoms, planned, strict=True):
        counted = [(start, end, next(counts)) for start, end in spans]
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
                  counter: _Counter) -> list[tuple[int, int, int]]:
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


# --- lines, sections and blocks -------------------------------------------------------------------

_NON_BLANK = re.compile(r"\S")


@dataclass(frozen=True, slots=True)
class _Section:
    first_line: int  # index into the line spans
    end_line: int  # exclusive
    heading_path: tuple[str, ...] | None
    heading_lines: int = 1  # lines its heading takes (a reST title with its adornment: 2 or 3)


def _line_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every line, `end` excluding the "\\n" (a CRLF line keeps its "\\r")."""
    spans: list[tuple[int, int]] = []
    position, length = 0, len(text)
    while position < length:
        newline = text.find("\n", position)
        if newline < 0:
            spans.append((position, length))
            break
        spans.append((position, newline))
        position = newline + 1
    return spans


def _is_blank(text: str, span: tuple[int, int]) -> bool:
    return _NON_BLANK.search(text, span[0], span[1]) is None


def _blocks(
    text: str, lines: list[tuple[int, int]], section: _Section, fenced: list[bool] | None
) -> list[tuple[int, int]]:
    """Blank-line separated blocks of a section as (start, end) spans, trailing whitespace excluded.

    A section's heading line is a block of its own, so it can lead the first chunk however the
    paragraph after it packs; a fenced code block stays one block across its blank lines.
    """
    blocks: list[tuple[int, int]] = []
    block_start: int | None = None
    block_end = 0
    for index in range(section.first_line, section.end_line):
        span = lines[index]
        inside_fence = fenced is not None and fenced[index]
        blank = _is_blank(text, span)
        if blank and not inside_fence:
            if block_start is not None:
                blocks.append((block_start, block_end))
                block_start = None
            continue
        if block_start is None:
            block_start = span[0]
        if not blank:
            block_end = _rstrip(text, span[0], span[1])
        if index == section.first_line + section.heading_lines - 1 and section.heading_path is not None:
            blocks.append((block_start, block_end))
            block_start = None
    if block_start is not None:
        blocks.append((block_start, block_end))
    return blocks


def _rstrip(text: str, start: int, end: int) -> int:
    while end > start and text[end - 1].isspace():
        end -= 1
    return end


def _lstrip(text: str, start: int, end: int) -> int:
    while start < end and text[start].isspace():
        start += 1
    return start


# --- markdown: ATX headings ---------------------------------------------------------------------

_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*\r?$")
_ATX_CLOSING = re.compile(r"(?:^|[ \t]+)#+$")
_FENCE_OPEN = re.compile(r" {0,3}(`{3,}|~{3,})(.*?)\r?$")
_FENCE_CLOSE = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*\r?$")
_FRONT_MATTER_OPEN = re.compile(r"---[ \t]*\r?$")
_FRONT_MATTER_CLOSE = re.compile(r"(?:---|\.\.\.)[ \t]*\r?$")


def _markdown_sections(
    text: str, lines: list[tuple[int, int]]
) -> tuple[list[_Section], list[bool]]:
    """Sections at ATX headings (`#` .. `######`), skipping fenced code and YAML front matter.

    Returns the sections and, per line, whether it belongs to a fenced code block (fences keep
    their blank lines inside one block). A heading with no text (`#` alone) is not a section
    boundary: it would put an empty string into every heading_path below it.
    """
    headings, fenced, skip_until = _scan_markdown(text, lines)
    starts: list[tuple[int, tuple[str, ...]]] = []
    stack: list[tuple[int, str]] = []
    for index, level, title in headings:
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        starts.append((index, tuple(title for _, title in stack)))
    return _sections_from_starts(starts, len(lines), first_line=skip_until), fenced


def markdown_headings(text: str) -> list[tuple[int, str]]:
    """Every ATX heading of a Markdown text as (level, title), outside front matter and fenced code:
    what the chunker reads as headings (the document's own title is the first level-1 one)."""
    headings, _fenced, _skip = _scan_markdown(text, _line_spans(text))
    return [(level, title) for _index, level, title in headings]


def _scan_markdown(text: str, lines: list[tuple[int, int]]) -> tuple[list[tuple[int, int, str]], list[bool], int]:
    """(line index, level, title) of each heading with text, per-line fenced flags, and the first
    line after the front matter."""
    fenced = [False] * len(lines)
    skip_until = _front_matter_end(text, lines)
    fence: tuple[str, int] | None = None  # (fence character, run length) while inside one
    headings: list[tuple[int, int, str]] = []
    for index in range(skip_until, len(lines)):
        line = text[lines[index][0]:lines[index][1]]
        if fence is not None:
            fenced[index] = True
            closing = _FENCE_CLOSE.match(line)
            if closing and closing.group(1)[0] == fence[0] and len(closing.group(1)) >= fence[1]:
                fence = None
            continue
        opening = _FENCE_OPEN.match(line)
        if opening and not (opening.group(1)[0] == "`" and "`" in opening.group(2)):
            fenced[index] = True
            fence = (opening.group(1)[0], len(opening.group(1)))
            continue
        heading = _ATX.match(line)
        if heading is None:
            continue
        title = _ATX_CLOSING.sub("", heading.group(2) or "").strip()
        if title:
            headings.append((index, len(heading.group(1)), title))
    return headings, fenced, skip_until


def front_matter_span(text: str) -> tuple[int, int] | None:
    """The character span of a Markdown document's leading YAML front matter, between (not
    including) its `---` lines, or None when it has none."""
    lines = _line_spans(text[:65536])  # front matter is a header: never scan a whole large file
    end = _front_matter_end(text, lines)
    if end == 0:
        return None
    return lines[0][1], lines[end - 1][0]


def _front_matter_end(text: str, lines: list[tuple[int, int]]) -> int:
    """The first line after a leading YAML front-matter block (`---` ... `---`), or 0 if none."""
    if not lines or not _FRONT_MATTER_OPEN.match(text, lines[0][0], lines[0][1]):
        return 0
    for index in range(1, len(lines)):
        if _FRONT_MATTER_CLOSE.match(text, lines[index][0], lines[index][1]):
            return index + 1
    return 0


def _sections_from_starts(starts: list[tuple[int, tuple[str, ...]]], line_count: int, *,
                          first_line: int = 0) -> list[_Section]:
    """Sections from heading starts; lines before `first_line` (front matter) belong to none: they
    are metadata, not text, and are never indexed."""
    sections: list[_Section] = []
    first_heading = starts[0][0] if starts else line_count
    if first_heading > first_line:
        sections.append(_Section(first_line, first_heading, None))
    for position, (line_index, path) in enumerate(starts):
        end = starts[position + 1][0] if position + 1 < len(starts) else line_count
        sections.append(_Section(line_index, end, path))
    return sections


def _without_lone_headings(text: str, lines: list[tuple[int, int]], sections: list[_Section], *,
                           clauses: bool) -> list[_Section]:
    """Sections where no title stands alone as a chunk.

    A section holding nothing but its heading, directly above its own subsection (a chapter title
    over its first section), joins that subsection: its first chunk then starts at the chapter title,
    so the title leads the text under it instead of being a chunk of its own. Every other heading-only
    section joins the section before it (a dangling title at the end of a document), except where a
    heading line is itself the text (`clauses`: a numbered outline's "2.1 A day permit costs £8.").
    """
    def lone(section: _Section) -> bool:
        return section.heading_path is not None and sum(
            1 for index in range(section.first_line, section.end_line)
            if not _is_blank(text, lines[index])) <= section.heading_lines

    def parent_of(section: _Section, child: _Section) -> bool:
        path, sub = section.heading_path or (), child.heading_path or ()
        return len(sub) > len(path) and sub[:len(path)] == path

    merged: list[_Section] = []
    pending: int | None = None  # first line of chapter titles waiting for their first section
    for position, section in enumerate(sections):
        following = sections[position + 1] if position + 1 < len(sections) else None
        if lone(section):
            if following is not None and parent_of(section, following):
                pending = section.first_line if pending is None else pending
                continue
            if not clauses and pending is None and merged:
                before = merged[-1]
                merged[-1] = _Section(before.first_line, section.end_line, before.heading_path,
                                      before.heading_lines)
                continue
        if pending is not None:
            # The chapter titles and this section's own heading make up its heading block.
            section = _Section(pending, section.end_line, section.heading_path,
                               section.first_line - pending + section.heading_lines)
            pending = None
        merged.append(section)
    return merged


# --- text: reStructuredText and AsciiDoc section titles -------------------------------------------

# reST adornment: one repeated punctuation character (docutils' set), at least as long as the title.
_RST_ADORNMENT = re.compile(r"([!-/:-@\[-`{-~])\1{1,}[ \t]*\r?$")


def _rst_sections(text: str, lines: list[tuple[int, int]]) -> list[_Section]:
    """Sections at reST titles: a text line underlined (and optionally overlined) by an adornment at
    least as long as it. Levels follow the order adornment styles first appear, as in docutils."""
    styles: list[tuple[str, bool]] = []
    starts: list[tuple[int, tuple[str, ...]]] = []
    heading_lines: dict[int, int] = {}
    stack: list[tuple[int, str]] = []
    count = len(lines)
    index = 0
    while index < count - 1:
        title_line = text[lines[index][0]:lines[index][1]].rstrip()
        under = _RST_ADORNMENT.match(text, lines[index + 1][0], lines[index + 1][1])
        if (not title_line.strip() or _RST_ADORNMENT.match(title_line) or title_line[:1].isspace()
                or under is None or len(under.group(0).rstrip()) < len(title_line.strip())
                or (index > 0 and not _is_blank(text, lines[index - 1])
                    and not _RST_ADORNMENT.match(text, lines[index - 1][0], lines[index - 1][1]))):
            index += 1
            continue
        char = under.group(1)
        above = lines[index - 1] if index > 0 else None
        overlined = above is not None and bool(_RST_ADORNMENT.match(text, above[0], above[1])) \
            and text[above[0]:above[1]].strip()[:1] == char
        style = (char, overlined)
        if style not in styles:
            styles.append(style)
        level = styles.index(style) + 1
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title_line.strip()))
        first = index - 1 if overlined else index
        heading_lines[first] = 3 if overlined else 2
        starts.append((first, tuple(title for _, title in stack)))
        index += 2
    sections = _sections_from_starts(starts, count)
    return [_Section(s.first_line, s.end_line, s.heading_path, heading_lines.get(s.first_line, 1))
            for s in sections]


_ASCIIDOC_TITLE = re.compile(r"(={1,6})[ \t]+(\S.*?)[ \t]*\r?$")
_ASCIIDOC_DELIMITER = re.compile(r"(-{4,}|\.{4,}|={4,}|\*{4,}|_{4,}|\+{4,}|/{4,})[ \t]*\r?$")


def _asciidoc_sections(text: str, lines: list[tuple[int, int]]) -> tuple[list[_Section], list[bool]]:
    """Sections at AsciiDoc titles (`= Title`, `== Section`, ...), outside delimited blocks."""
    fenced = [False] * len(lines)
    delimiter: str | None = None
    starts: list[tuple[int, tuple[str, ...]]] = []
    stack: list[tuple[int, str]] = []
    for index, (start, end) in enumerate(lines):
        line = text[start:end].rstrip()
        block = _ASCIIDOC_DELIMITER.match(line)
        if delimiter is not None:
            fenced[index] = True
            if line == delimiter:
                delimiter = None
            continue
        if block is not None and not line.startswith("= "):
            delimiter = line
            fenced[index] = True
            continue
        title = _ASCIIDOC_TITLE.match(line)
        if title is None:
            continue
        level = len(title.group(1))
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title.group(2)))
        starts.append((index, tuple(name for _, name in stack)))
    return _sections_from_starts(starts, len(lines)), fenced


# --- text: the numbered outline grammar ----------------------------------------------------------

# "1. Title", "1.2 Title", "2.3.1. Title": at the start of the line, then whitespace and a title.
# A single number needs its dot ("1." not "1"), or every line starting with a count would match.
_NUMBERED = re.compile(r"(\d{1,4}(?:\.\d{1,4})*)(\.?)[ \t]+(\S.*?)[ \t]*\r?$")


def _numbered_sections(text: str, lines: list[tuple[int, int]]) -> list[_Section]:
    """Sections at numbered outline headings, or one section when the numbers are not an outline.

    The grammar refuses rather than guesses (spec §4.6): `1.` at line start is also an ordered
    list, so a document's numbered lines are headings only if all of them together form a valid
    outline walk; one misstep anywhere and the document gets no headings at all.
    """
    candidates: list[tuple[int, tuple[int, ...], str]] = []
    for index, (start, end) in enumerate(lines):
        match = _NUMBERED.match(text, start, end)
        if match is None:
            continue
        number = tuple(int(part) for part in match.group(1).split("."))
        if len(number) == 1 and not match.group(2):
            continue
        candidates.append((index, number, text[start:end].strip()))
    if not candidates or not _is_outline_walk([number for _, number, _ in candidates]):
        return [_Section(0, len(lines), None)]
    starts: list[tuple[int, tuple[str, ...]]] = []
    stack: list[tuple[int, str]] = []
    for index, number, title in candidates:
        while stack and stack[-1][0] >= len(number):
            stack.pop()
        stack.append((len(number), title))
        starts.append((index, tuple(title for _, title in stack)))
    return _sections_from_starts(starts, len(lines))


def _is_outline_walk(numbers: list[tuple[int, ...]]) -> bool:
    """Each number is the first child of the previous one or the next sibling of it or of one of
    its ancestors; the walk starts at 1."""
    previous: tuple[int, ...] = ()
    for number in numbers:
        successors: set[tuple[int, ...]] = {(*previous, 1)} if previous else {(1,)}
        successors.update((*previous[:depth], previous[depth] + 1) for depth in range(len(previous)))
        if number not in successors:
            return False
        previous = number
    return True


# --- packing ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Atom:
    """A span packed whole: a block, or a part of a block too long to be one chunk."""

    start: int
    end: int
    tokens: int
    heading: bool = False  # a section's heading line, which must lead into the text after it
    level: int = 0  # the split level its parts would come from (see _Packer.split)


# A text this short is counted once per chunking run, however often it recurs: the overlap's
# candidate words repeat by the thousand ("the", "of") in a large document. Longer texts (blocks,
# chunks) seldom repeat, and remembering them would hold a second copy of the document.
_REMEMBERED_CHARS = 64


class _Counter:
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


_WORD = re.compile(r"\S+")
# A sentence ends at . ! ? (and any closing quotes or brackets) before whitespace, or at a
# CJK full stop, which is not followed by a space.
_SENTENCE_END = re.compile(r"[.!?][\"'”’)\]]*(?=\s)|[。！？]")
_SPLIT_SENTENCES, _SPLIT_LINES, _SPLIT_WORDS, _SPLIT_CHARACTERS = range(4)
# A character-level cut stops growing once a piece holds this share of the limit, or after this
# many steps (each step is one count of about one piece).
_GOOD_ENOUGH = 0.95
_MAX_GROW_STEPS = 6


@dataclass(frozen=True, slots=True)
class _Planned:
    """A chunk as packing planned it: its own atoms span [start, end); `overlap_limit` tokens are
    reserved in `tokens` for the tail of the previous chunk, which will be prepended."""

    start: int
    end: int
    tokens: int
    overlap_limit: int


class _Packer:
    def __init__(
        self, text: str, counter: _Counter, max_tokens: int, overlap: int, *, split_sentences: bool
    ) -> None:
        self.text = text
        self.counter = counter
        self.max_tokens = max_tokens
        self.overlap = overlap
        self.first_level = _SPLIT_SENTENCES if split_sentences else _SPLIT_LINES

    def pack_estimated(self, sections: list[list[_Atom]]) -> list[list[tuple[int, int]]]:
        """Chunk spans per section, sized by adding the counts of their parts.

        Each chunk after the first of a section reserves room for its overlap while packing; the
        overlaps themselves are resolved afterwards for the whole document in one counting batch.
        """
        planned = [self._pack(atoms) for atoms in sections]
        jobs: list[tuple[int, int, list[tuple[int, int]]]] = []  # (section, chunk, candidate words)
        for section_index, chunks in enumerate(planned):
            for chunk_index in range(1, len(chunks)):
                previous, limit = chunks[chunk_index - 1], chunks[chunk_index].overlap_limit
                if limit > 0:
                    jobs.append((section_index, chunk_index, self._overlap_words(previous, limit)))
        counts = iter(self.counter.many([self.text[a:b] for _, _, words in jobs for a, b in words]))
        starts: dict[tuple[int, int], int] = {}
        for section_index, chunk_index, words in jobs:
            limit = planned[section_index][chunk_index].overlap_limit
            overlap_start = self._overlap_start(words, [next(counts) for _ in words], limit)
            if overlap_start is not None:
                starts[section_index, chunk_index] = overlap_start
        return [
            [(starts.get((section_index, chunk_index), chunk.start), chunk.end)
             for chunk_index, chunk in enumerate(chunks)]
            for section_index, chunks in enumerate(planned)
        ]

    def pack_exact(self, atoms: list[_Atom]) -> list[tuple[int, int, int]]:
        """Chunk spans of one section, each counted for real as it closes and re-split when a
        tokenizer that is not additive over the whitespace between parts put it over the limit.
        The next chunk's overlap is taken from the chunk actually emitted. Slower (one counting
        call per chunk), so used only where the estimate proved wrong."""
        chunks: list[tuple[int, int, int]] = []
        for planned in self._pack(atoms):
            start = planned.start
            if planned.overlap_limit > 0 and chunks:
                last_start, last_end, _ = chunks[-1]
                words = self._overlap_words(_Planned(last_start, last_end, 0, 0), planned.overlap_limit)
                counts = self.counter.many([self.text[a:b] for a, b in words])
                overlap_start = self._overlap_start(words, counts, planned.overlap_limit)
                if overlap_start is not None:
                    start = overlap_start
            chunks.extend(self._fitted(start, planned.end))
        return chunks

    def _pack(self, atoms: list[_Atom]) -> list[_Planned]:
        """Greedily pack atoms into chunks of at most max_tokens tokens (estimated).

        An atom longer than max_tokens is replaced by its parts. A heading that would otherwise
        end up alone (the paragraph after it is too long to join it) pulls in that paragraph's
        first parts instead, so the heading line leads real text.
        """
        limit = self.max_tokens
        queue = deque(atoms)
        chunks: list[_Planned] = []
        start = end = tokens = reserved = 0
        open_chunk = only_heading = False
        while queue:
            atom = queue.popleft()
            if atom.tokens > limit or (only_heading and tokens + atom.tokens > limit):
                parts = self.split(atom)
                if len(parts) > 1 or parts[0] != atom:
                    queue.extendleft(reversed(parts))
                    continue
            if not open_chunk:
                start, end, tokens, reserved, open_chunk = atom.start, atom.end, atom.tokens, 0, True
            elif tokens + atom.tokens <= limit:
                end, tokens = atom.end, tokens + atom.tokens
            else:
                chunks.append(_Planned(start, end, tokens, reserved))
                reserved = max(0, min(self.overlap, limit - atom.tokens))
                start, end, tokens = atom.start, atom.end, reserved + atom.tokens
            only_heading = atom.heading
        if open_chunk:
            chunks.append(_Planned(start, end, tokens, reserved))
        return chunks

    def split(self, atom: _Atom) -> list[_Atom]:
        """The parts of `atom` at the first split level that divides it, each counted.

        Parts still longer than max_tokens carry the next level, so packing splits them again.
        """
        for level in range(max(atom.level, self.first_level), _SPLIT_CHARACTERS):
            spans = self._split_spans(atom.start, atom.end, level)
            if len(spans) > 1:
                counts = self.counter.many([self.text[start:end] for start, end in spans])
                return [
                    _Atom(start, end, tokens, level=level + 1)
                    for (start, end), tokens in zip(spans, counts, strict=True)
                ]
        if atom.tokens > self.max_tokens:
            return self._split_characters(atom.start, atom.end, self.max_tokens)
        return [atom]

    def _split_spans(self, start: int, end: int, level: int) -> list[tuple[int, int]]:
        text = self.text
        if level == _SPLIT_WORDS:
            return [match.span() for match in _WORD.finditer(text, start, end)]
        if level == _SPLIT_LINES:
            cuts = [match.end() for match in re.finditer("\n", text[start:end])]
        else:
            cuts = [match.end() for match in _SENTENCE_END.finditer(text[start:end])]
        spans = []
        piece_start = start
        for cut in [*(start + cut for cut in cuts), end]:
            piece_end = _rstrip(text, piece_start, cut)
            piece_start = _lstrip(text, piece_start, piece_end)
            if piece_start < piece_end:
                spans.append((piece_start, piece_end))
            piece_start = cut
        return spans

    def _split_characters(self, start: int, end: int, limit: int) -> list[_Atom]:
        """Cut an unbroken string (no whitespace to split at) into pieces of at most `limit` tokens.

        Each cut is found by proportion rather than bisection: guess a length from the characters
        per token seen so far, then shrink or grow it by the ratio of the count to the limit. On
        text of even density (an unspaced CJK run, a base64 blob) that takes two or three counts
        of about one piece each, where a bisection counts a window many times larger a dozen
        times. Pieces end within a few percent of the limit, never over it. Each piece takes at
        least one character, so this always terminates; a single character worth more than
        `limit` tokens (only possible with a tiny limit) becomes its own piece.
        """
        pieces: list[_Atom] = []
        text, count = self.text, self.counter.one
        chars_per_token = 4.0  # a first guess; replaced by what the text itself shows
        position = start
        while position < end:
            rest = end - position
            length = max(1, min(rest, int(limit * chars_per_token)))
            tokens = count(text[position:position + length])
            while tokens > limit and length > 1:
                length = max(1, min(length - 1, length * limit // tokens))
                tokens = count(text[position:position + length])
            for _ in range(_MAX_GROW_STEPS):
                if length >= rest or tokens >= limit * _GOOD_ENOUGH:
                    break
                longer = min(rest, length + max(1, length * (limit - tokens) // max(tokens, 1)))
                longer_tokens = count(text[position:position + longer])
                if longer_tokens > limit:
                    break
                length, tokens = longer, longer_tokens
            pieces.append(_Atom(position, position + length, tokens, level=_SPLIT_CHARACTERS))
            chars_per_token = length / max(tokens, 1)
            position += length
        return pieces

    def _overlap_words(self, previous: _Planned, limit: int) -> list[tuple[int, int]]:
        """The words of `previous` that could be repeated: at most the last `limit` (every word
        is at least one token), never its first word, so a chunk never holds all of the previous.

        Only the chunk's tail is scanned (every chunk's, so a whole scan re-read the document): the
        first word found in a window that starts inside the chunk may be cut, or be the chunk's
        first word, so it is dropped; every later one is a whole word the full scan finds too. The
        window widens until it holds `limit` words after that one or reaches the chunk's start."""
        reach = (limit + 1) * 8
        while True:
            window = max(previous.start, previous.end - reach)
            words = [match.span() for match in _WORD.finditer(self.text, window, previous.end)][1:]
            if window == previous.start or len(words) >= limit:
                return words[-limit:]
            reach *= 4

    @staticmethod
    def _overlap_start(words: list[tuple[int, int]], counts: list[int], limit: int) -> int | None:
        """Where the longest run of trailing words within `limit` tokens starts; None if none fits."""
        overlap_start, tokens = None, 0
        for (word_start, _), word_tokens in zip(reversed(words), reversed(counts), strict=True):
            if tokens + word_tokens > limit:
                break
            overlap_start, tokens = word_start, tokens + word_tokens
        return overlap_start

    def _fitted(self, start: int, end: int) -> list[tuple[int, int, int]]:
        """[start, end) counted for real; re-split tighter when it is over the limit."""
        tokens = self.counter.one(self.text[start:end])
        if tokens <= self.max_tokens:
            return [(start, end, tokens)]
        return self._refit(start, end, tokens)

    def _refit(self, start: int, end: int, tokens: int) -> list[tuple[int, int, int]]:
        """Split [start, end) (`tokens` long) into pieces that each count within the limit, by
        packing it again under a budget shrunk in proportion to the overshoot."""
        budget = self.max_tokens
        while True:
            budget = max(1, min(budget - 1, budget * self.max_tokens // tokens))
            tight = _Packer(self.text, self.counter, budget, 0,
                            split_sentences=self.first_level == _SPLIT_SENTENCES)
            pieces = tight._pack([_Atom(start, end, budget + 1)])
            counts = self.counter.many([self.text[piece.start:piece.end] for piece in pieces])
            if max(counts) <= self.max_tokens or budget == 1:
                return [(piece.start, piece.end, count) for piece, count in zip(pieces, counts, strict=True)]
            tokens = max(counts)


# --- pages --------------------------------------------------------------------------------------


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
