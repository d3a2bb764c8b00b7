"""Set one member of a JSON object inside a config file, leaving every other byte of the file as it was.

A client's MCP config is a file its owner edits by hand and other tools rewrite: its formatting, key
order, comments (VS Code and Cursor read JSON with comments) and every other server's entry are not
ours to touch. So the file is never parsed and dumped again: it is scanned for the spans of the
objects on the path to the member (`mcpServers` → `pinakes-notes`), and the one change is spliced
into the text: the member's value replaced, or the member inserted after the object's last one (a
comma added after it), or an empty object filled, indented as its neighbours are.

The scanner reads JSON plus what editors allow in these files: `//` and `/* */` comments and a
trailing comma. Anything else is a `JSONSpliceError` naming the line, and nothing is written.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_LITERALS = ("true", "false", "null")


class JSONSpliceError(ValueError):
    """The file is not JSON (with comments) of the shape the splice needs."""


@dataclass
class Member:
    key: str
    key_start: int  # where its key's opening quote is
    value_start: int
    value_end: int  # one past the value's last character
    value: Node


@dataclass
class Node:
    start: int
    end: int
    members: list[Member] | None = None  # an object's, in order; None for any other value
    close: int = 0  # an object's closing brace


@dataclass
class _Scanner:
    text: str
    pos: int = 0

    def fail(self, what: str) -> JSONSpliceError:
        line = self.text.count("\n", 0, self.pos) + 1
        return JSONSpliceError(f"line {line}: {what}")

    def skip(self) -> None:
        """Whitespace and comments."""
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            if char in " \t\r\n\ufeff":
                self.pos += 1
            elif text.startswith("//", self.pos):
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end + 1
            elif text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                if end < 0:
                    raise self.fail("a /* comment is never closed")
                self.pos = end + 2
            else:
                return

    def value(self) -> Node:
        self.skip()
        start, text = self.pos, self.text
        if start >= len(text):
            raise self.fail("the file ends where a value should be")
        char = text[start]
        if char == "{":
            return self.obj()
        if char == "[":
            self.pos += 1
            self.skip()
            if text.startswith("]", self.pos):
                self.pos += 1
                return Node(start, self.pos)
            while True:
                self.value()
                self.skip()
                if text.startswith(",", self.pos):
                    self.pos += 1
                    self.skip()
                    if text.startswith("]", self.pos):  # a trailing comma
                        self.pos += 1
                        return Node(start, self.pos)
                elif text.startswith("]", self.pos):
                    self.pos += 1
                    return Node(start, self.pos)
                else:
                    raise self.fail("expected , or ] in an array")
        if char == '"':
            self.string()
            return Node(start, self.pos)
        for literal in _LITERALS:
            if text.startswith(literal, start):
                self.pos += len(literal)
                return Node(start, self.pos)
        match = _NUMBER.match(text, start)
        if match:
            self.pos = match.end()
            return Node(start, self.pos)
        raise self.fail(f"unexpected {char!r}")

    def string(self) -> str:
        text, start = self.text, self.pos
        index = start + 1
        while index < len(text):
            char = text[index]
            if char == "\\":
                index += 2
                continue
            if char == '"':
                self.pos = index + 1
                try:
                    return json.loads(text[start:self.pos])
                except ValueError:
                    raise self.fail("a string with a bad escape") from None
            if char == "\n":
                break
            index += 1
        raise self.fail("a string is never closed")

    def obj(self) -> Node:
        start, text = self.pos, self.text
        self.pos += 1
        members: list[Member] = []
        self.skip()
        if text.startswith("}", self.pos):
            self.pos += 1
            return Node(start, self.pos, members, self.pos - 1)
        while True:
            self.skip()
            if not text.startswith('"', self.pos):
                raise self.fail("expected a quoted key")
            key_start = self.pos
            key = self.string()
            self.skip()
            if not text.startswith(":", self.pos):
                raise self.fail(f"expected : after the key {key!r}")
            self.pos += 1
            node = self.value()
            members.append(Member(key, key_start, node.start, node.end, node))
            self.skip()
            if text.startswith(",", self.pos):
                self.pos += 1
                self.skip()
                if text.startswith("}", self.pos):  # a trailing comma
                    self.pos += 1
                    return Node(start, self.pos, members, self.pos - 1)
            elif text.startswith("}", self.pos):
                self.pos += 1
                return Node(start, self.pos, members, self.pos - 1)
            else:
                raise self.fail("expected , or } in an object")


def parse(text: str) -> Node:
    scanner = _Scanner(text)
    root = scanner.value()
    scanner.skip()
    if scanner.pos != len(text):
        raise scanner.fail("more text after the top-level value")
    if root.members is None:
        raise JSONSpliceError("the top-level value is not an object")
    return root


def set_member(text: str, path: tuple[str, ...], value: object) -> str:
    """`text` with the object member at `path` (keys from the top-level object) set to `value`.
    Objects missing on the path are created; every byte outside the one change is kept."""
    node = parse(text)
    for depth, key in enumerate(path):
        assert node.members is not None
        found = next((member for member in reversed(node.members) if member.key == key), None)
        last = depth == len(path) - 1
        if found is None:
            return _insert(text, node, key, _nested(path[depth + 1:], value))
        if last:
            indent = _line_indent(text, found.key_start)
            rendered = _render(value, indent, _unit(text, node))
            return text[:found.value_start] + rendered + text[found.value_end:]
        if found.value.members is None:
            raise JSONSpliceError(f"`{key}` is not an object")
        node = found.value
    raise AssertionError("an empty path")


def _nested(keys: tuple[str, ...], value: object) -> object:
    for key in reversed(keys):
        value = {key: value}
    return value


def _insert(text: str, node: Node, key: str, value: object) -> str:
    """Add `key: value` as the last member of the object `node`."""
    assert node.members is not None
    unit = _unit(text, node)
    if node.members:
        last = node.members[-1]
        indent = _line_indent(text, last.key_start)
        inline = "\n" not in text[node.start:node.end]
        rendered = _render(value, indent, unit)
        member = f"{json.dumps(key, ensure_ascii=False)}: {rendered}"
        separator = ", " if inline else ",\n" + indent
        return text[:last.value_end] + separator + member + text[last.value_end:]
    outer = _line_indent(text, node.start)
    indent = outer + unit
    rendered = _render(value, indent, unit)
    member = f"{json.dumps(key, ensure_ascii=False)}: {rendered}"
    return text[:node.start + 1] + "\n" + indent + member + "\n" + outer + text[node.close:]


def _render(value: object, indent: str, unit: str) -> str:
    """`value` as JSON at `indent` (its first line follows the key; the rest indented by `unit`)."""
    lines = json.dumps(value, indent=unit or 2, ensure_ascii=False).splitlines()
    return "\n".join([lines[0], *(indent + line for line in lines[1:])])


def _line_indent(text: str, position: int) -> str:
    line_start = text.rfind("\n", 0, position) + 1
    prefix = text[line_start:position]
    return prefix[: len(prefix) - len(prefix.lstrip(" \t"))]


def _unit(text: str, node: Node) -> str:
    """One level of indentation as the file writes it (from the first member of an object on its
    own line), two spaces when nothing says."""
    for member in _all_members(node):
        inner = _line_indent(text, member.key_start)
        line_start = text.rfind("\n", 0, member.key_start) + 1
        if text[line_start:member.key_start].strip():
            continue  # not at the start of its line
        outer_object = _enclosing_indent(text, member.key_start)
        if inner.startswith(outer_object) and len(inner) > len(outer_object):
            return inner[len(outer_object):]
    return "  "


def _enclosing_indent(text: str, position: int) -> str:
    """The indentation of the line holding the brace that opens the object around `position`."""
    depth = 0
    index = position
    while index > 0:
        index -= 1
        char = text[index]
        if char == "}":
            depth += 1
        elif char == "{":
            if depth == 0:
                return _line_indent(text, index)
            depth -= 1
    return ""


def _all_members(node: Node) -> list[Member]:
    found: list[Member] = []
    for member in node.members or []:
        found.append(member)
        found += _all_members(member.value)
    return found


def loads(text: str) -> object:
    """The file's value, comments and trailing commas allowed (what the splice reads)."""
    return json.loads(_strip(text))


def _strip(text: str) -> str:
    """JSON with comments removed and trailing commas dropped, string contents kept."""
    out: list[str] = []
    plain: list[str] = []  # the text since the last string: where a trailing comma can be

    def flush() -> None:
        out.append(re.sub(r",(\s*[}\]])", r"\1", "".join(plain)))
        plain.clear()

    index = 0
    while index < len(text):
        char = text[index]
        if char == '"':
            end = index + 1
            while end < len(text) and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            flush()
            out.append(text[index:end + 1])
            index = end + 1
        elif text.startswith("//", index):
            newline = text.find("\n", index)
            index = len(text) if newline < 0 else newline
        elif text.startswith("/*", index):
            end = text.find("*/", index + 2)
            index = len(text) if end < 0 else end + 2
        else:
            plain.append(char)
            index += 1
    flush()
    return "".join(out)
