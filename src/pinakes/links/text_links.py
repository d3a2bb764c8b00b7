"""Links written in a document's text: what they say, where they are. Parsing only; which document
each one names is `links.resolve`, and storing them is `links.text_edges`.

A pure function of the text and its source type (`parse_text_links`), so its result is a property
of the document's content: sync parses a document when it writes it, and an unchanged document is
never parsed again (its build key folds in `TEXT_LINKS_VERSION`, pipeline/keys.py).

What is a link, in a Markdown document:

- wikilinks `[[Note]]`, `[[Note|label]]`, `[[Note#Heading]]`, `[[Note#^block]]`, `[[folder/Note]]`
  and embeds `![[Note]]` (Obsidian's syntax; `\\|` is the pipe a table cell escapes);
- inline Markdown links and images `[t](other.md)`, `[t](../dir/other%20note.md#section)`,
  `[t](<a b.md>)`, the destination percent-decoded;
- reference-style links `[t][label]`, `[label][]`, `[label]` whose label a `[label]: dest` line
  defines (case-insensitively, as CommonMark matches labels); the link is the use, not the
  definition;
- `pnk://<kb>/<doc>` addresses, bare or as a Markdown link's destination.

In every other source type but code only `pnk://` addresses are links: a plain text or PDF has no
link syntax of its own, and code is all code. Never a link: anything inside fenced code (``` or
~~~, also in a quote or a list), inline code spans, indented code blocks and HTML comments; an
external URL (any other scheme, `//host`, `mailto:`); a same-note reference (`[[#Heading]]`,
`[t](#section)`); Obsidian's search forms `[[## text]]` and `[[^^text]]`.

Spans are character offsets into the text the index stores (for a text source the file itself),
end exclusive, covering the whole link as written (`![[…]]`, `[t](…)`), and the 1-based line it
starts on: the citation `pnk links` and `pinakes_links` show.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote

# Bump when what is parsed changes: every document whose type is parsed is then parsed again once
# (its build key changes; its vectors are reused, pipeline/vector_reuse.py).
TEXT_LINKS_VERSION = 1

Syntax = Literal["wikilink", "embed", "markdown", "image", "reference", "uri"]
SYNTAXES: tuple[Syntax, ...] = ("wikilink", "embed", "markdown", "image", "reference", "uri")
# Source types whose text is parsed for links, and which syntaxes each has.
PARSED_TYPES: dict[str, tuple[Syntax, ...]] = {"markdown": SYNTAXES, "text": ("uri",), "pdf": ("uri",)}


@dataclass(frozen=True)
class TextLink:
    """One link as written. `target` is the path part (for a Markdown link percent-decoded, for a
    `uri` the whole `pnk://` address); `subpath` the heading or `^block` after `#`, if any."""

    syntax: Syntax
    target: str
    subpath: str | None
    char_start: int
    char_end: int
    line: int


def parses(source_type: str) -> bool:
    """Whether documents of `source_type` are parsed for links at all."""
    return source_type in PARSED_TYPES


def parse_text_links(text: str, source_type: str) -> list[TextLink]:
    """Every link in `text` (a document of `source_type`), in text order."""
    syntaxes = PARSED_TYPES.get(source_type, ())
    if not syntaxes:
        return []
    masked = _mask_code(text) if source_type == "markdown" else text
    lines = _LineIndex(text)
    found: list[TextLink] = []
    taken: list[tuple[int, int]] = []

    def add(syntax: Syntax, target: str, subpath: str | None, start: int, end: int) -> None:
        found.append(TextLink(syntax, target, subpath, start, end, lines.line_of(start)))
        taken.append((start, end))

    if "wikilink" in syntaxes:
        for match in _WIKILINK.finditer(masked):
            parsed = _wikilink_target(match.group("inner"))
            if parsed is not None:
                add("embed" if match.group("bang") else "wikilink", *parsed, match.start(), match.end())
        masked = _blank(masked, taken)
    if "markdown" in syntaxes:
        for match in _INLINE_LINK.finditer(masked):
            destination = match.group("angle") if match.group("angle") is not None else match.group("bare")
            syntax: Syntax = "image" if match.group("bang") else "markdown"
            parsed = _destination(destination)
            if parsed is None:
                continue
            target, subpath = parsed
            add("uri" if target.startswith(_PNK) else syntax, target, subpath, match.start(), match.end())
        masked = _blank(masked, taken)
        definitions, masked = _reference_definitions(masked)
        for match in _REFERENCE_USE.finditer(masked):
            label = match.group("label") or match.group("text")
            destination = definitions.get(_label_key(label))
            if destination is None:
                continue
            target, subpath = destination
            add("uri" if target.startswith(_PNK) else "reference", target, subpath, match.start(), match.end())
        masked = _blank(masked, taken)
    for match in _PNK_URI.finditer(masked):
        add("uri", match.group(0), None, match.start(), match.end())
    found.sort(key=lambda link: link.char_start)
    return found


# --- the syntaxes ----------------------------------------------------------------------------------

_PNK = "pnk://"
_WIKILINK = re.compile(r"(?<!\\)(?P<bang>!?)\[\[(?P<inner>[^\[\]\n]+)\]\]")
_INLINE_LINK = re.compile(
    r"(?<!\\)(?P<bang>!?)\[(?:\\.|[^\[\]\\\n]|\[(?:\\.|[^\[\]\\\n])*\])*\]"
    r"\(\s*(?:<(?P<angle>[^<>\n]*)>|(?P<bare>(?:[^\s()\\]|\\.|\((?:[^\s()\\]|\\.)*\))+))"
    r"(?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^()\n]*\)))?\s*\)")
_REFERENCE_DEFINITION = re.compile(
    r"^ {0,3}\[(?P<label>[^\]\n^][^\]\n]*)\]:[ \t]*(?:<(?P<angle>[^<>\n]*)>|(?P<bare>\S+))"
    r"(?:[ \t]+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^()\n]*\)))?[ \t]*$", re.MULTILINE)
# `[text][label]`, `[label][]`, or `[label]` alone (not followed by `(`, `[` or `:`).
_REFERENCE_USE = re.compile(
    r"(?<![\\\]!])\[(?P<text>[^\[\]\n]+)\](?:\[(?P<label>[^\[\]\n]*)\]|(?![\[(:]))")
_PNK_URI = re.compile(r"pnk://[A-Za-z0-9._-]+/[0-9A-Za-z]{26}(?![0-9A-Za-z])")
# A scheme (RFC 3986): an external link, unless it is pnk://. A drive letter is not one.
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")


def _wikilink_target(inner: str) -> tuple[str, str | None] | None:
    """(path, subpath) of a wikilink's inside; None when it names no other file."""
    # The display text follows the first pipe; in a table cell that pipe is written `\|`.
    path_part = re.split(r"\\?\|", inner, maxsplit=1)[0]
    path, _hash, subpath = path_part.partition("#")
    path = path.strip()
    if not path or path.startswith("^") or _SCHEME.match(path):
        return None  # [[#Heading]] (this note), [[^^search]], [[https://…]]
    return path, subpath.strip() or None


def _destination(raw: str) -> tuple[str, str | None] | None:
    """(path, subpath) of a Markdown link destination, percent-decoded; None for an external URL or
    a same-document anchor."""
    value = re.sub(r"\\(.)", r"\1", raw.strip())
    if value.startswith(_PNK):
        match = _PNK_URI.match(value)
        return (match.group(0), None) if match else None
    if not value or value.startswith(("#", "//", "?")) or _SCHEME.match(value):
        return None
    path, _hash, subpath = value.partition("#")
    path = unquote(path.split("?", 1)[0])
    if not path:
        return None
    return path, unquote(subpath) or None


def _reference_definitions(masked: str) -> tuple[dict[str, tuple[str, str | None]], str]:
    """The reference definitions (first one of a label wins, as in CommonMark), and the text with
    their lines blanked so a definition's own `[label]` is not read as a use."""
    definitions: dict[str, tuple[str, str | None]] = {}
    spans: list[tuple[int, int]] = []
    for match in _REFERENCE_DEFINITION.finditer(masked):
        destination = match.group("angle") if match.group("angle") is not None else match.group("bare")
        parsed = _destination(destination) if destination else None
        spans.append((match.start(), match.end()))
        key = _label_key(match.group("label"))
        if parsed is not None and key not in definitions:
            definitions[key] = parsed
    return definitions, _blank(masked, spans)


def _label_key(label: str) -> str:
    return " ".join(label.split()).casefold()


# --- what is code ----------------------------------------------------------------------------------

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_QUOTE = re.compile(r"^(?:[ \t]{0,3}>[ \t]?)+")
_LIST_ITEM = re.compile(r"^[ \t]*(?:[-+*]|\d{1,9}[.)])(?:[ \t]|$)")
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


def _mask_code(text: str) -> str:
    """`text` with every character inside code (and HTML comments) replaced by a space, newlines
    kept, so offsets into it are offsets into `text`."""
    chars = list(text)
    for start, end in _code_block_spans(text):
        _blank_range(chars, start, end)
    masked = "".join(chars)
    for match in _HTML_COMMENT.finditer(masked):
        _blank_range(chars, match.start(), match.end())
    masked = "".join(chars)
    for start, end in _inline_code_spans(masked):
        _blank_range(chars, start, end)
    return "".join(chars)


def _code_block_spans(text: str) -> list[tuple[int, int]]:
    """Fenced code blocks (in a quote or a list too; unclosed: to the end) and indented code blocks
    (four columns in, after a blank line, outside a list and a quote)."""
    spans: list[tuple[int, int]] = []
    offset = 0
    fence: tuple[str, int, int] | None = None  # (character, length, quote depth) of the open fence
    block_start = 0
    previous_blank = True
    indented = in_list = False  # `indented`: inside an indented code block
    for line in text.splitlines(keepends=True):
        line_start, offset = offset, offset + len(line)
        body = line.rstrip("\r\n")
        quote = _QUOTE.match(body)
        depth = quote.group(0).count(">") if quote else 0
        content = body[quote.end():] if quote else body
        blank = not content.strip()
        if fence is not None:
            if fence[2] > 0 and depth < fence[2]:  # the quote holding the fence ended: so did the fence
                spans.append((block_start, line_start))
                fence = None
            else:
                closing = _FENCE.match(content)
                if closing and closing.group("fence")[0] == fence[0] and len(closing.group("fence")) >= fence[1] \
                        and not closing.group("info").strip():
                    spans.append((block_start, offset))
                    fence = None
                previous_blank = False
                continue
        if indented and depth == 0 and (blank or _indented_code(content)):
            spans.append((line_start, offset))
            continue
        indented = False
        opening = _FENCE.match(content)
        if opening and not (opening.group("fence")[0] == "`" and "`" in opening.group("info")):
            fence = (opening.group("fence")[0], len(opening.group("fence")), depth)
            block_start = line_start
            continue
        if blank:
            previous_blank = True
            continue
        if depth == 0 and previous_blank and not in_list and _indented_code(content):
            indented = True
            spans.append((line_start, offset))
            continue
        if _LIST_ITEM.match(content):
            in_list = True
        elif not content.startswith((" ", "\t")) and previous_blank:
            in_list = False
        previous_blank = False
    if fence is not None:
        spans.append((block_start, len(text)))
    return spans


def _indented_code(content: str) -> bool:
    width = 0
    for char in content:
        if char == " ":
            width += 1
        elif char == "\t":
            width += 4 - width % 4
        else:
            break
        if width >= 4:
            return True
    return False


def _inline_code_spans(text: str) -> list[tuple[int, int]]:
    """Code spans: a run of backticks to the next run of the same length within the paragraph (an
    unmatched run is literal text)."""
    spans: list[tuple[int, int]] = []
    runs = [(match.start(), match.end()) for match in re.finditer(r"(?<!\\)`+", text)]
    paragraph_breaks = [match.start() for match in re.finditer(r"\n[ \t]*\r?\n", text)]
    index = 0
    while index < len(runs):
        start, end = runs[index]
        length = end - start
        limit = paragraph_breaks[bisect.bisect_left(paragraph_breaks, end)] \
            if bisect.bisect_left(paragraph_breaks, end) < len(paragraph_breaks) else len(text)
        closing = None
        for later in range(index + 1, len(runs)):  # within the paragraph only: linear in its runs
            if runs[later][0] >= limit:
                break
            if runs[later][1] - runs[later][0] == length:
                closing = later
                break
        if closing is None:
            index += 1
            continue
        spans.append((start, runs[closing][1]))
        index = closing + 1
    return spans


def _blank_range(chars: list[str], start: int, end: int) -> None:
    for position in range(start, end):
        if chars[position] not in "\r\n":
            chars[position] = " "


def _blank(text: str, spans: list[tuple[int, int]]) -> str:
    if not spans:
        return text
    chars = list(text)
    for start, end in spans:
        _blank_range(chars, start, end)
    return "".join(chars)


class _LineIndex:
    def __init__(self, text: str):
        self._starts = [match.end() for match in re.finditer("\n", text)]

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self._starts, offset) + 1
