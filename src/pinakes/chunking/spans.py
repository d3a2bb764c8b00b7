"""Lines, sections and blocks: the spans a document is cut along, before any token is counted.

A section runs from its heading line (or the document's start) to the next heading; its blocks are
its blank-line separated paragraphs, each a `(start, end)` span of the text with trailing whitespace
left out, so every chunk built from them is a slice of the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NON_BLANK = re.compile(r"\S")


@dataclass(frozen=True, slots=True)
class Section:
    first_line: int  # index into the line spans
    end_line: int  # exclusive
    heading_path: tuple[str, ...] | None
    heading_lines: int = 1  # lines its heading takes (a reST title with its adornment: 2 or 3)


def line_spans(text: str) -> list[tuple[int, int]]:
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


def is_blank(text: str, span: tuple[int, int]) -> bool:
    return _NON_BLANK.search(text, span[0], span[1]) is None


def blocks_of(
    text: str, lines: list[tuple[int, int]], section: Section, fenced: list[bool] | None
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
        blank = is_blank(text, span)
        if blank and not inside_fence:
            if block_start is not None:
                blocks.append((block_start, block_end))
                block_start = None
            continue
        if block_start is None:
            block_start = span[0]
        if not blank:
            block_end = rstrip(text, span[0], span[1])
        if index == section.first_line + section.heading_lines - 1 and section.heading_path is not None:
            blocks.append((block_start, block_end))
            block_start = None
    if block_start is not None:
        blocks.append((block_start, block_end))
    return blocks


def rstrip(text: str, start: int, end: int) -> int:
    while end > start and text[end - 1].isspace():
        end -= 1
    return end


def lstrip(text: str, start: int, end: int) -> int:
    while start < end and text[start].isspace():
        start += 1
    return start


def sections_from_starts(starts: list[tuple[int, tuple[str, ...]]], line_count: int, *,
                         first_line: int = 0) -> list[Section]:
    """Sections from heading starts; lines before `first_line` (front matter) belong to none: they
    are metadata, not text, and are never indexed."""
    sections: list[Section] = []
    first_heading = starts[0][0] if starts else line_count
    if first_heading > first_line:
        sections.append(Section(first_line, first_heading, None))
    for position, (line_index, path) in enumerate(starts):
        end = starts[position + 1][0] if position + 1 < len(starts) else line_count
        sections.append(Section(line_index, end, path))
    return sections


def without_lone_headings(text: str, lines: list[tuple[int, int]], sections: list[Section], *,
                          clauses: bool) -> list[Section]:
    """Sections where no title stands alone as a chunk.

    A section holding nothing but its heading, directly above its own subsection (a chapter title
    over its first section), joins that subsection: its first chunk then starts at the chapter title,
    so the title leads the text under it instead of being a chunk of its own. Every other heading-only
    section joins the section before it (a dangling title at the end of a document), except where a
    heading line is itself the text (`clauses`: a numbered outline's "2.1 A day permit costs £8.").
    """
    def lone(section: Section) -> bool:
        return section.heading_path is not None and sum(
            1 for index in range(section.first_line, section.end_line)
            if not is_blank(text, lines[index])) <= section.heading_lines

    def parent_of(section: Section, child: Section) -> bool:
        path, sub = section.heading_path or (), child.heading_path or ()
        return len(sub) > len(path) and sub[:len(path)] == path

    merged: list[Section] = []
    pending: int | None = None  # first line of chapter titles waiting for their first section
    for position, section in enumerate(sections):
        following = sections[position + 1] if position + 1 < len(sections) else None
        if lone(section):
            if following is not None and parent_of(section, following):
                pending = section.first_line if pending is None else pending
                continue
            if not clauses and pending is None and merged:
                before = merged[-1]
                merged[-1] = Section(before.first_line, section.end_line, before.heading_path,
                                     before.heading_lines)
                continue
        if pending is not None:
            # The chapter titles and this section's own heading make up its heading block.
            section = Section(pending, section.end_line, section.heading_path,
                              section.first_line - pending + section.heading_lines)
            pending = None
        merged.append(section)
    return merged


