"""Where each key of a TOML file is, line by line, so an upgrade can change one value (and a rewrite
replace one table, `rewrite.py`) and leave every other byte (comments, spacing, key order, the
user's own lines) as it was.

This reads the shapes a manifest is written in: `[table]` headers, `[[array]]` headers, and
`key = value` lines whose value may run over several lines (an array). A key it cannot place (a
dotted key, a key inside an inline table) is simply not located: the upgrade then reports that
change as not applying, rather than guessing where it lives. Each located value is confirmed by
`tomllib`, so a span is never a regex's opinion of where a value ends.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass

_HEADER = re.compile(r"\s*(\[\[?)\s*([A-Za-z0-9_-]+(?:\s*\.\s*[A-Za-z0-9_-]+)*)\s*(\]\]?)\s*(?:#.*)?")
_KEY = re.compile(r"(\s*)([A-Za-z0-9_-]+|\"[A-Za-z0-9_ .-]*\")(\s*=\s*)")
ARRAY_TABLE_SUFFIX = "[]"  # sections under [[x]] are named "x[]": never addressed by an upgrade
UNPLACEABLE = "\0"  # the section of keys under a header this reader cannot name


@dataclass(frozen=True)
class KeySpan:
    section: str  # dotted table name, "" for the top level
    key: str
    start: int  # first line (index into the file's lines)
    end: int  # one past the last line
    prefix: str  # the first line up to the value: indentation, key, " = "
    value: str  # the value's own text (may span lines)
    suffix: str  # what follows the value on its last line: spacing, a comment, the line ending


@dataclass(frozen=True)
class FileLayout:
    lines: list[str]  # with their line endings
    keys: dict[tuple[str, str], KeySpan]
    headers: dict[str, int]  # section -> the line of its header
    section_ends: dict[str, int]  # section -> the line after its last key (or after its header)

    @property
    def newline(self) -> str:
        return "\r\n" if any(line.endswith("\r\n") for line in self.lines) else "\n"


def layout(text: str) -> FileLayout:
    lines = text.splitlines(keepends=True)
    keys: dict[tuple[str, str], KeySpan] = {}
    headers: dict[str, int] = {}
    section_ends: dict[str, int] = {}
    section = ""
    index = 0
    while index < len(lines):
        line = lines[index]
        body = line.rstrip("\r\n")
        stripped = body.strip()
        if not stripped or stripped.startswith("#"):
            index += 1
            continue
        header = _HEADER.fullmatch(body)
        if header is None and stripped.startswith("["):
            # A header this reader cannot name (quoted parts): the keys under it are left unlocated
            # rather than filed under the section before it.
            section = UNPLACEABLE
            index += 1
            continue
        if header:
            name = re.sub(r"\s+", "", header.group(2))
            section = name + ARRAY_TABLE_SUFFIX if header.group(1) == "[[" else name
            headers.setdefault(section, index)
            section_ends[section] = index + 1
            index += 1
            continue
        match = _KEY.match(body)
        span = _value_span(lines, index, match.end()) if match else None
        if match is None or span is None:
            index += 1  # a shape this reader does not place (a dotted key, say): left unlocated
            continue
        end, value, suffix = span
        key = match.group(2).strip('"')
        keys.setdefault((section, key), KeySpan(section, key, index, end, body[:match.end()], value, suffix))
        section_ends[section] = end
        index = end
    return FileLayout(lines, keys, headers, section_ends)


def _value_span(lines: list[str], start: int, column: int) -> tuple[int, str, str] | None:
    """(end line, value text, suffix) of the value starting at `column` of line `start`."""
    text = lines[start][column:]
    for end in range(start + 1, min(len(lines), start + 500) + 1):
        if end > start + 1:
            text += lines[end - 1]
        last_line_from = len(text) - len(lines[end - 1]) if end > start + 1 else 0
        body = text.rstrip("\r\n")
        # The value ends before a comment on its last line, or at the line's end.
        cuts = [i for i, char in enumerate(body) if char == "#" and i >= last_line_from] + [len(body)]
        for cut in cuts:
            candidate = body[:cut].rstrip()
            if candidate and _parses(candidate):
                return end, candidate, text[len(candidate):]
    return None


def _parses(value: str) -> bool:
    try:
        tomllib.loads(f"k = {value}\n")
    except tomllib.TOMLDecodeError:
        return False
    return True
