"""Reproducing a file's surface form when it is rewritten: indentation, byte-order mark, line ends,
document markers and the `%YAML` directive, so that an update shows up in a diff as the lines it
changed and nothing else.

The dumper applies one indentation setting to the whole file, so it follows the source's first
example of each kind, which keeps most of an edited file as it was.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from io import StringIO

from ruamel.yaml.comments import CommentedMap

from pinakes.sidecar.dialect import UTF8_BOM, new_yaml
from pinakes.sidecar.reading import Source
from pinakes.sidecar.tree import YamlMapping, YamlNode, YamlScalar, YamlSequence


@dataclass(frozen=True)
class Layout:
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
    def of(cls, source: Source, key: str | None = None) -> Layout:
        """The source's layout, the indents guessed from the whole file or, given `key`, from that
        top-level entry alone (the defaults when it shows none): a key rewritten on its own then
        keeps its own indents rather than borrowing a nested key's."""
        defaults = cls()
        root = source.root
        if key is not None:
            root = replace(root, entries=tuple((k, v) for k, v in root.entries if isinstance(k, YamlScalar) and k.text == key))
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


def _guess_indents(root: YamlMapping, text: str) -> tuple[int | None, tuple[int, int] | None]:
    """The first nested block mapping's (or block scalar's) indent and the first block
    sequence's (indent, offset), measured from the key that holds them. The dumper applies one
    setting to the whole file, so following the source's first example keeps most of an edited
    file as it was."""
    lines = text.splitlines()
    mapping_indent: int | None = None
    sequence: tuple[int, int] | None = None
    for key_node, value_node in _block_entries(root):
        key_column = key_node.start.column
        if mapping_indent is None and isinstance(value_node, YamlMapping) and value_node.entries:
            mapping_indent = value_node.entries[0][0].start.column - key_column
        if mapping_indent is None and isinstance(value_node, YamlScalar) and value_node.style in ("|", ">"):
            content_line = value_node.start.line + 1
            if content_line < len(lines) and lines[content_line].strip():
                content = lines[content_line]
                mapping_indent = len(content) - len(content.lstrip(" ")) - key_column
        if sequence is None and isinstance(value_node, YamlSequence) and value_node.items:
            offset = value_node.start.column - key_column
            indent = value_node.items[0].start.column - key_column
            if offset >= 0 and indent >= offset + 2:
                sequence = (indent, offset)
        if mapping_indent is not None and sequence is not None:
            break
    if mapping_indent is not None and mapping_indent < 1:
        mapping_indent = None
    return mapping_indent, sequence


def _block_entries(node: YamlNode) -> Iterator[tuple[YamlNode, YamlNode]]:
    """Every (key, value) pair of block-style mappings, outermost first, through sequences too."""
    if isinstance(node, YamlMapping) and not node.flow:
        for key_node, value_node in node.entries:
            yield key_node, value_node
        for _, value_node in node.entries:
            yield from _block_entries(value_node)
    elif isinstance(node, YamlSequence) and not node.flow:
        for item in node.items:
            yield from _block_entries(item)


def round_trip_load(source: Source) -> CommentedMap:
    # Comment tokens keep a CR the scanner does not strip; dump_bytes puts the line ends back.
    text = source.text.replace("\r\n", "\n") if source.crlf else source.text
    document = new_yaml().load(text)
    assert isinstance(document, CommentedMap)  # load_source already proved the top level a mapping
    return document


def dump_bytes(document: CommentedMap, layout: Layout) -> bytes:
    yaml = new_yaml()
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
    return (UTF8_BOM if layout.has_bom else b"") + text.encode("utf-8")
