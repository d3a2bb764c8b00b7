"""The composed YAML tree as the sidecar layer's own typed nodes.

ruamel's node classes leave their attributes untyped and spell some of them differently across
versions (a tag is a str in some, a `Tag` in others; an anchor likewise), so `compose` reads a
composed tree once, here, and the reader, the layout guesser and the splicer work on these values.

No Python value is constructed, and an anchored node is read without its contents: a sidecar may
hold no anchor, and the reader refuses each node's anchor before it looks inside (`nodes.py`). So an
alias bomb, or an alias to the node that holds it, costs one node here whatever it would expand to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from ruamel.yaml import YAML
from ruamel.yaml.error import StreamMark
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode


@dataclass(frozen=True, slots=True)
class Mark:
    """A position in the text, all 0-based: what an error names (1-based) and a splice cuts at."""

    line: int
    column: int
    index: int


@dataclass(frozen=True, slots=True, eq=False)
class YamlScalar:
    tag: str  # resolved under YAML 1.2: tag:yaml.org,2002:str, ...:int, ...
    text: str  # as written, quotes and escapes resolved
    style: str | None  # None (plain), '"', "'", "|" or ">"
    anchor: str | None
    start: Mark
    end: Mark


@dataclass(frozen=True, slots=True, eq=False)
class YamlSequence:
    tag: str
    items: tuple[YamlNode, ...]
    flow: bool  # written `[a, b]`
    anchor: str | None
    start: Mark
    end: Mark


@dataclass(frozen=True, slots=True, eq=False)
class YamlMapping:
    tag: str
    entries: tuple[tuple[YamlNode, YamlNode], ...]  # (key, value), in document order
    flow: bool  # written `{a: 1}`
    anchor: str | None
    start: Mark
    end: Mark


YamlNode: TypeAlias = YamlScalar | YamlSequence | YamlMapping


def compose(yaml: YAML, text: str) -> YamlNode | None:
    """The text's one document as typed nodes (None when it holds none). ruamel's own errors pass
    through, and so does a RecursionError from a tree nested past what it composes."""
    root = yaml.compose(text)
    return None if root is None else _typed(root)


def _typed(node: Node) -> YamlNode:
    tag, anchor = tag_text(node.tag), _anchor(node.anchor)
    start, end = _mark(node.start_mark), _mark(node.end_mark)
    if isinstance(node, MappingNode):
        entries = () if anchor is not None else tuple((_typed(key), _typed(value)) for key, value in node.value)
        return YamlMapping(tag, entries, bool(node.flow_style), anchor, start, end)
    if isinstance(node, SequenceNode):
        items = () if anchor is not None else tuple(_typed(item) for item in node.value)
        return YamlSequence(tag, items, bool(node.flow_style), anchor, start, end)
    if isinstance(node, ScalarNode):
        return YamlScalar(tag, node.value, node.style, anchor, start, end)
    raise TypeError(f"ruamel composed a node of an unknown kind: {type(node).__name__}")


def tag_text(tag: object) -> str:
    """A node's tag (or anchor) as text: a str in some ruamel versions, a Tag in others."""
    return str(getattr(tag, "value", tag))


def _anchor(anchor: object) -> str | None:
    return None if anchor is None else tag_text(anchor)


def _mark(mark: StreamMark) -> Mark:
    return Mark(mark.line, mark.column, mark.index)
