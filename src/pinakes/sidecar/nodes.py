"""From YAML nodes to JSON values under YAML 1.2's core schema, refusing at a line and column
whatever JSON cannot store.

It works on the composed node tree, never on constructed Python objects, so a hostile file is
refused before it costs anything: the first anchor met is refused, which is what makes an alias bomb
fail in linear time, and nesting is capped.
"""

from __future__ import annotations

from pathlib import Path

from pinakes.errors import SidecarError
from pinakes.sidecar.dialect import BOOL, FLOAT, INT, MAP, NULL, SEQ, STR, STRING_TAGS, YAML_TAG
from pinakes.sidecar.model import MAX_NESTING, JSONValue
from pinakes.sidecar.tree import YamlMapping, YamlNode, YamlScalar, YamlSequence

FLATTEN = "flatten the structure; sidecar metadata is meant to be a few levels deep at most"
FIX_IT = "fix the sidecar by hand; its id is permanent, so repair the file rather than deleting it"


def mapping_entries(node: YamlMapping, path: Path) -> dict[str, tuple[YamlNode, YamlNode]]:
    """A mapping's entries by key, refusing duplicate and non-string keys (never last-wins)."""
    refuse_anchor(node, path)
    if node.tag != MAP:
        raise _refused_tag(path, node)
    entries: dict[str, tuple[YamlNode, YamlNode]] = {}
    for key_node, value_node in node.entries:
        refuse_anchor(key_node, path)
        if key_node.tag == YAML_TAG + "merge":
            raise error_at(path, key_node, "merge keys (<<) are not allowed in a sidecar", "write the keys out")
        if not (isinstance(key_node, YamlScalar) and key_node.tag == STR):
            raise error_at(
                path, key_node, "mapping keys must be strings", "quote the key, or write it as a plain word"
            )
        key = key_node.text
        if key in entries:
            first = entries[key][0].start.line + 1
            raise error_at(
                path,
                key_node,
                f"duplicate key {key!r} (first defined on line {first})",
                "keep one of them; YAML does not say which would win",
            )
        entries[key] = (key_node, value_node)
    return entries


def plain_value(node: YamlNode, path: Path, *, depth: int) -> JSONValue:
    """The JSON value of a node under YAML 1.2's core schema, or a located refusal."""
    refuse_anchor(node, path)
    if depth > MAX_NESTING:
        raise error_at(path, node, f"values are nested deeper than {MAX_NESTING} levels", FLATTEN)
    if isinstance(node, YamlMapping):
        entries = mapping_entries(node, path)
        return {key: plain_value(value, path, depth=depth + 1) for key, (_, value) in entries.items()}
    if isinstance(node, YamlSequence):
        if node.tag != SEQ:
            raise _refused_tag(path, node)
        return [plain_value(item, path, depth=depth + 1) for item in node.items]
    return _scalar(node, path)


def _scalar(node: YamlScalar, path: Path) -> JSONValue:
    tag, text = node.tag, node.text
    if tag in STRING_TAGS:
        return text
    if tag == NULL:
        return None
    if tag == BOOL:
        return text.lower() == "true"
    try:
        if tag == INT:
            return _parse_int(text)
        if tag == FLOAT:
            if text.lower().lstrip("+-") in (".inf", ".nan"):
                raise error_at(path, node, f"{text} is not a finite number, which JSON cannot store", "quote it")
            return float(text.replace("_", ""))
    except ValueError:
        raise error_at(path, node, f"{text!r} is not a valid {tag.removeprefix(YAML_TAG)}", FIX_IT) from None
    raise _refused_tag(path, node)


def _refused_tag(path: Path, node: YamlNode) -> SidecarError:
    return error_at(
        path,
        node,
        f"the tag {node.tag} is not allowed in a sidecar: its value cannot be stored as JSON",
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


def refuse_anchor(node: YamlNode, path: Path) -> None:
    if node.anchor is not None:
        raise error_at(
            path,
            node,
            f"anchors and aliases (&{node.anchor}) are not allowed in a sidecar",
            "write the value out in full; a sidecar is small enough not to need references",
        )


def describe(value: JSONValue) -> str:
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


def error_at(path: Path, node: YamlNode, problem: str, remedy: str | None) -> SidecarError:
    return error_located(path, node.start.line + 1, node.start.column + 1, problem, remedy)


def error_located(path: Path, line: int, column: int, problem: str, remedy: str | None) -> SidecarError:
    return SidecarError(f"line {line}, column {column}: {problem}", remedy=remedy, path=path)
