"""Reproducing a file's surface form when it is rewritten: indentation, byte-order mark, line ends,
document markers and the `%YAML` directive, so that an update shows up in a diff as the lines it
changed and nothing else.

The dumper applies one indentation setting to the whole file, so it follows the source's first
example of each kind, which keeps most of an edited file as it was.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from io import StringIO

from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from pinakes.sidecar.dialect import _UTF8_BOM, _new_yaml
from pinakes.sidecar.reading import _Source


@dataclass(frozen=True)
class _Layout:
    """What the dumper should reproduce of the source's surface form."""

    mapping_indent: int = 2
    sequence_indent: int = 4
    sequence_offset: int = 2
    has_bom: bool = False
    crlf: bool = False
    explicit_start: bool = False
    explicit_end: bool = False
    declares_version: bool = False

    @classmethod
    def of(cls, source: _Source, key: str | None = None) -> _Layout:
        """The source's layout, the indents guessed from the whole file or, given `key`, from that
        top-level entry alone (the defaults when it shows none): a key rewritten on its own then
        keeps its own indents rather than borrowing a nested key's."""
        defaults = cls()
        root = source.root
        if key is not None:
            root = MappingNode(root.tag, [(k, v) for k, v in root.value if isinstance(k, ScalarNode) and k.value == key])
        mapping_indent, sequence = _guess_indents(root, source.text)
        sequence_indent, sequence_offset = sequence or (defaults.sequence_indent, defaults.sequence_offset)
        return cls(
            mapping_indent=mapping_indent or defaults.mapping_indent,
            sequence_indent=sequence_indent,
            sequence_offset=sequence_offset,
            has_bom=source.has_bom,
            crlf=source.crlf,
            explicit_start=source.explicit_start,
            explicit_end=source.explicit_end,
            declares_version=source.declares_version,
        )


def _guess_indents(root: MappingNode, text: str) -> tuple[int | None, tuple[int, int] | None]:
    """The first nested block mapping's (or block scalar's) indent and the first block
    sequence's (indent, offset), measured from the key that holds them. The dumper applies one
    setting to the whole file, so following the source's first example keeps most of an edited
    file as it was."""
    lines = text.splitlines()
    mapping_indent: int | None = None
    sequence: tuple[int, int] | None = None
    for key_node, value_node in _block_entries(root):
        key_column = key_node.start_mark.column
        if mapping_indent is None and isinstance(value_node, MappingNode) and value_node.value:
            mapping_indent = value_node.value[0][0].start_mark.column - key_column
        if mapping_indent is None and isinstance(value_node, ScalarNode) and value_node.style in ("|", ">"):
            content_line = value_node.start_mark.line + 1
            if content_line < len(lines) and lines[content_line].strip():
                content = lines[content_line]
                mapping_indent = len(content) - len(content.lstrip(" ")) - key_column
        if sequence is None and isinstance(value_node, SequenceNode) and value_node.value:
            offset = value_node.start_mark.column - key_column
            indent = value_node.value[0].start_mark.column - key_column
            if offset >= 0 and indent >= offset + 2:
                sequence = (indent, offset)
        if mapping_indent is not None and sequence is not None:
            break
    if mapping_indent is not None and mapping_indent < 1:
        mapping_indent = None
    return mapping_indent, sequence


def _block_entries(node: Node) -> Iterator[tuple[Node, Node]]:
    """Every (key, value) pair of block-style mappings, outermost first, through sequences too."""
    if isinstance(node, MappingNode) and not node.flow_style:
        for key_node, value_node in node.value:
            yield key_node, value_node
        for _, value_node in node.value:
            yield from _block_entries(value_node)
    elif isinstance(node, SequenceNode) and not node.flow_style:
        for item in node.value:
            yield from _block_entries(item)


def _round_trip_load(source: _Source) -> CommentedMap:
    # Comment tokens keep a CR the scanner does not strip; _dump puts the line ends back.
    text = source.text.replace("\r\n", "\n") if source.crlf else source.text
    document = _new_yaml().load(text)
    assert isinstance(document, CommentedMap)  # _load_source already proved the top level a mapping
    return document


def _dump(document: CommentedMap, layout: _Layout) -> bytes:
    yaml = _new_yaml()
    yaml.indent(mapping=layout.mapping_indent, sequence=layout.sequence_indent, offset=layout.sequence_offset)
    yaml.explicit_start = layout.explicit_start
    yaml.explicit_end = layout.explicit_end
    if layout.declares_version:
        yaml.version = (1, 2)
    stream = StringIO()
    yaml.dump(document, stream)
    text = stream.getvalue()
    if layout.crlf:
        text = text.replace("\n", "\r\n")
    return (_UTF8_BOM if layout.has_bom else b"") + text.encode("utf-8")
