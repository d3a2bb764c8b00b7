"""From YAML nodes to JSON values under YAML 1.2's core schema, refusing at a line and column
whatever JSON cannot store.

It works on the composed node tree, never on constructed Python objects, so a hostile file is
refused before it costs anything: the first anchor met is refused, which is what makes an alias bomb
fail in linear time, and nesting is capped.
"""

from __future__ import annotations

from pathlib import Path

from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from pinakes.errors import SidecarError
from pinakes.sidecar.dialect import (
    _BOOL,
    _FLOAT,
    _INT,
    _MAP,
    _NULL,
    _SEQ,
    _STR,
    _STRING_TAGS,
    _YAML_TAG,
    _tag,
)
from pinakes.sidecar.model import MAX_NESTING, JSONValue

_FLATTEN = "flatten the structure; sidecar metadata is meant to be a few levels deep at most"
_FIX_IT = "fix the sidecar by hand; its id is permanent, so repair the file rather than deleting it"


def _mapping_entries(node: MappingNode, path: Path) -> dict[str, tuple[Node, Node]]:
    """A mapping's entries by key, refusing duplicate and non-string keys (never last-wins)."""
    _refuse_anchor(node, path)
    if _tag(node) != _MAP:
        raise _refused_tag(path, node)
    entries: dict[str, tuple[Node, Node]] = {}
    for key_node, value_node in node.value:
        _refuse_anchor(key_node, path)
        if _tag(key_node) == _YAML_TAG + "merge":
            raise _at(path, key_node, "merge keys (<<) are not allowed in a sidecar", "write the keys out")
        if not (isinstance(key_node, ScalarNode) and _tag(key_node) == _STR):
            raise _at(
                path, key_node, "mapping keys must be strings", "quote the key, or write it as a plain word"
            )
        key = key_node.value
        if key in entries:
            first = entries[key][0].start_mark.line + 1
            raise _at(
                path,
                key_node,
                f"duplicate key {key!r} (first defined on line {first})",
                "keep one of them; YAML does not say which would win",
            )
        entries[key] = (key_node, value_node)
    return entries


def _plain(node: Node, path: Path, *, depth: int) -> JSONValue:
    """The JSON value of a node under YAML 1.2's core schema, or a located refusal."""
    _refuse_anchor(node, path)
    if depth > MAX_NESTING:
        raise _at(path, node, f"values are nested deeper than {MAX_NESTING} levels", _FLATTEN)
    if isinstance(node, MappingNode):
        entries = _mapping_entries(node, path)
        return {key: _plain(value, path, depth=depth + 1) for key, (_, value) in entries.items()}
    if isinstance(node, SequenceNode):
        if _tag(node) != _SEQ:
            raise _refused_tag(path, node)
        return [_plain(item, path, depth=depth + 1) for item in node.value]
    assert isinstance(node, ScalarNode)
    return _scalar(node, path)


def _scalar(node: ScalarNode, path: Path) -> JSONValue:
    tag, text = _tag(node), node.value
    if tag in _STRING_TAGS:
        return text
    if tag == _NULL:
        return None
    if tag == _BOOL:
        return text.lower() == "true"
    try:
        if tag == _INT:
            return _parse_int(text)
        if tag == _FLOAT:
            if text.lower().lstrip("+-") in (".inf", ".nan"):
                raise _at(path, node, f"{text} is not a finite number, which JSON cannot store", "quote it")
            return float(text.replace("_", ""))
    except ValueError:
        raise _at(path, node, f"{text!r} is not a valid {tag.removeprefix(_YAML_TAG)}", _FIX_IT) from None
    raise _refused_tag(path, node)


def _refused_tag(path: Path, node: Node) -> SidecarError:
    return _at(
        path,
        node,
        f"the tag {_tag(node)} is not allowed in a sidecar: its value cannot be stored as JSON",
        "write the value as a plain string, number, boolean, list or mapping",
    )


def _parse_int(text: str) -> int:
    digits = text.replace("_", "")
    sign = -1 if digits.startswith("-") else 1
    digits = digits.lstrip("+-")
    for prefix, base in (("0b", 2), ("0o", 8), ("0x", 16)):
        if digits.lower().startswith(prefix):
            return sign * int(digits[2:], base)
    # YAML 1.2 has no leading-zero octal: 0755 is the decimal 755, as ruamel reads it.
    return sign * int(digits, 10)


def _refuse_anchor(node: Node, path: Path) -> None:
    if node.anchor is not None:
        raise _at(
            path,
            node,
            f"anchors and aliases (&{_anchor_name(node)}) are not allowed in a sidecar",
            "write the value out in full; a sidecar is small enough not to need references",
        )


def _anchor_name(node: Node) -> str:
    anchor = node.anchor
    return str(getattr(anchor, "value", anchor))


def _describe(value: JSONValue) -> str:
    if value is None:
        return "an empty value"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return repr(value)


def _at(path: Path, node: Node, problem: str, remedy: str | None) -> SidecarError:
    return _located(path, node.start_mark.line + 1, node.start_mark.column + 1, problem, remedy)


def _located(path: Path, line: int, column: int, problem: str, remedy: str | None) -> SidecarError:
    return SidecarError(f"line {line}, column {column}: {problem}", remedy=remedy, path=path)
