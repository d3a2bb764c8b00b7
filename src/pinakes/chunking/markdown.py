"""Markdown's structure as the chunker reads it: ATX headings (`#` .. `######`), fenced code blocks,
and the leading YAML front matter, which is metadata and never a chunk."""

from __future__ import annotations

import re

from pinakes.chunking.spans import Section, line_spans, sections_from_starts

_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*\r?$")
_ATX_CLOSING = re.compile(r"(?:^|[ \t]+)#+$")
_FENCE_OPEN = re.compile(r" {0,3}(`{3,}|~{3,})(.*?)\r?$")
_FENCE_CLOSE = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*\r?$")
_FRONT_MATTER_OPEN = re.compile(r"---[ \t]*\r?$")
_FRONT_MATTER_CLOSE = re.compile(r"(?:---|\.\.\.)[ \t]*\r?$")


def markdown_sections(
    text: str, lines: list[tuple[int, int]]
) -> tuple[list[Section], list[bool]]:
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
    return sections_from_starts(starts, len(lines), first_line=skip_until), fenced


def markdown_headings(text: str) -> list[tuple[int, str]]:
    """Every ATX heading of a Markdown text as (level, title), outside front matter and fenced code:
    what the chunker reads as headings (the document's own title is the first level-1 one)."""
    headings, _fenced, _skip = _scan_markdown(text, line_spans(text))
    return [(level, title) for _index, level, title in headings]


def _scan_markdown(text: str, lines: list[tuple[int, int]]) -> tuple[list[tuple[int, int, str]], list[bool], int]:
    """(line index, level, title) of each heading with text, per-line fenced flags, and the first
    line after the front matter."""
    fenced = [False] * len(lines)
    skip_until = front_matter_end(text, lines)
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
    lines = line_spans(text[:65536])  # front matter is a header: never scan a whole large file
    end = front_matter_end(text, lines)
    if end == 0:
        return None
    return lines[0][1], lines[end - 1][0]


def front_matter_end(text: str, lines: list[tuple[int, int]]) -> int:
    """The first line after a leading YAML front-matter block (`---` ... `---`), or 0 if none."""
    if not lines or not _FRONT_MATTER_OPEN.match(text, lines[0][0], lines[0][1]):
        return 0
    for index in range(1, len(lines)):
        if _FRONT_MATTER_CLOSE.match(text, lines[index][0], lines[index][1]):
            return index + 1
    return 0


