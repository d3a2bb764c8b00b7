"""The headings of a text source: reStructuredText and AsciiDoc section titles (the markup declares
them), and the numbered outline grammar (`headings = "numbered"`, accepted only as a whole)."""

from __future__ import annotations

import re

from pinakes.chunking.spans import Section, is_blank, sections_from_starts

# reST adornment: one repeated punctuation character (docutils' set), at least as long as the title.
_RST_ADORNMENT = re.compile(r"([!-/:-@\[-`{-~])\1{1,}[ \t]*\r?$")


def rst_sections(text: str, lines: list[tuple[int, int]]) -> list[Section]:
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
                or (index > 0 and not is_blank(text, lines[index - 1])
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
    sections = sections_from_starts(starts, count)
    return [Section(s.first_line, s.end_line, s.heading_path, heading_lines.get(s.first_line, 1))
            for s in sections]


_ASCIIDOC_TITLE = re.compile(r"(={1,6})[ \t]+(\S.*?)[ \t]*\r?$")
_ASCIIDOC_DELIMITER = re.compile(r"(-{4,}|\.{4,}|={4,}|\*{4,}|_{4,}|\+{4,}|/{4,})[ \t]*\r?$")


def asciidoc_sections(text: str, lines: list[tuple[int, int]]) -> tuple[list[Section], list[bool]]:
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
    return sections_from_starts(starts, len(lines)), fenced


# --- text: the numbered outline grammar ----------------------------------------------------------

# "1. Title", "1.2 Title", "2.3.1. Title": at the start of the line, then whitespace and a title.
# A single number needs its dot ("1." not "1"), or every line starting with a count would match.
_NUMBERED = re.compile(r"(\d{1,4}(?:\.\d{1,4})*)(\.?)[ \t]+(\S.*?)[ \t]*\r?$")


def numbered_sections(text: str, lines: list[tuple[int, int]]) -> list[Section]:
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
        return [Section(0, len(lines), None)]
    starts: list[tuple[int, tuple[str, ...]]] = []
    stack: list[tuple[int, str]] = []
    for index, number, title in candidates:
        while stack and stack[-1][0] >= len(number):
            stack.pop()
        stack.append((len(number), title))
        starts.append((index, tuple(title for _, title in stack)))
    return sections_from_starts(starts, len(lines))


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


