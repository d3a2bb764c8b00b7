"""Writing back only the owned keys that changed: every other byte of the file stays as it was.

The round-trip dumper re-renders the whole document, and a re-render is not byte-faithful: it
decodes `"Caf\\u00e9"` into `"Café"`, respaces `tags: [ a,  "b" ,c ]`, and applies one indentation
to every key. So the reconciled document is dumped (which is what renders the changed keys well,
with their comments and quoting), and then only those keys' text is taken from the dump and put
into the original file in place of theirs (spec §2.2: a Pinakes edit changes only the keys it owns).

A top-level key's text runs from its key to the next top-level key (or the end of the document),
so the comment lines after it travel with it, as the reconciliation arranged them. An inserted key
is its own lines only, put after the key that precedes it in the dump; a deleted key loses its
own lines only. Both keep the comment lines around them where they were, as the dump does.
Everything is done on the decoded text (the byte-order mark and line ends are the source's), and
`None` means the dump could not be aligned with the source (the caller then keeps the dump).
"""

from __future__ import annotations

from collections.abc import Iterable

from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from pinakes.sidecar.dialect import _UTF8_BOM
from pinakes.sidecar.reading import _DOCUMENT_END, _Source

_Span = tuple[int, int]


def splice_keys(source: _Source, dumped: _Source, keys: Iterable[str]) -> bytes | None:
    """`source`'s bytes with each of `keys` (top-level) as `dumped` has it: replaced, inserted or
    deleted; None when the two cannot be aligned (a key that is not a plain scalar, a mapping that
    is not at the left margin)."""
    old_entries, new_entries = _entries(source), _entries(dumped)
    if old_entries is None or new_entries is None:
        return None
    edits: list[tuple[int, int, str]] = []  # (start, end, replacement) in source.text
    order = list(new_entries)
    # Insertions at one point go in the dump's order: applied last-first, each lands before the previous.
    for key in sorted(keys, key=lambda name: order.index(name) if name in order else -1):
        old, new = old_entries.get(key), new_entries.get(key)
        if old is not None and new is not None:
            edits.append((*_with_trailing(source, old_entries, key), _slice(dumped, _with_trailing(dumped, new_entries, key))))
        elif new is not None:
            edits.append(_insertion(source, old_entries, dumped, new_entries, key))
        elif old is not None:
            start, end = _own_lines(source.text, old)
            edits.append((start, end, ""))
    text = source.text
    for _, (start, end, replacement) in sorted(enumerate(edits), key=lambda edit: (*edit[1][:2], edit[0]),
                                               reverse=True):
        text = text[:start] + replacement + text[end:]
    return (_UTF8_BOM if source.has_bom else b"") + text.encode("utf-8")


def _entries(source: _Source) -> dict[str, tuple[Node, Node]] | None:
    """Top-level key -> (key node, value node), in document order; None when a key is not a plain
    scalar at column 0 (then a key's line is not simply where its text starts)."""
    root = source.root
    if not isinstance(root, MappingNode) or root.flow_style:
        return None
    entries: dict[str, tuple[Node, Node]] = {}
    for key_node, value_node in root.value:
        if not isinstance(key_node, ScalarNode) or key_node.start_mark.column != 0:
            return None
        entries[str(key_node.value)] = (key_node, value_node)
    return entries


def _with_trailing(source: _Source, entries: dict[str, tuple[Node, Node]], key: str) -> _Span:
    """From the key to the next top-level key (or the end of the document's body)."""
    names = list(entries)
    start = entries[key][0].start_mark.index
    following = names.index(key) + 1
    end = entries[names[following]][0].start_mark.index if following < len(names) else _body_end(source.text)
    return start, max(start, end)


def _own_lines(text: str, entry: tuple[Node, Node]) -> _Span:
    """From the key to the end of the line its last character is on (the line break included)."""
    return entry[0].start_mark.index, _line_end(text, _last_index(entry[1]))


def _insertion(source: _Source, old_entries: dict[str, tuple[Node, Node]], dumped: _Source,
               new_entries: dict[str, tuple[Node, Node]], key: str) -> tuple[int, int, str]:
    names = list(new_entries)
    earlier = [name for name in names[: names.index(key)] if name in old_entries]
    text = _slice(dumped, _own_lines(dumped.text, new_entries[key]))
    if earlier:
        at = _own_lines(source.text, old_entries[earlier[-1]])[1]
    elif old_entries:
        at = next(iter(old_entries.values()))[0].start_mark.index
    else:
        at = _body_end(source.text)
    if at and source.text[at - 1] not in "\n\r":
        text = ("\r\n" if source.crlf else "\n") + text
    return at, at, text


def _slice(source: _Source, span: _Span) -> str:
    return source.text[span[0]: span[1]]


def _body_end(text: str) -> int:
    marker = _DOCUMENT_END.search(text)
    return marker.start() if marker else len(text)


def _last_index(node: Node) -> int:
    """Where the node's last character ends (a block collection's own end mark lies at whatever
    token follows it, past any comment lines, so it is found through its last leaf)."""
    if isinstance(node, (MappingNode, SequenceNode)) and not node.flow_style and node.value:
        last = node.value[-1]
        return _last_index(last[1] if isinstance(node, MappingNode) else last)
    return node.end_mark.index


def _line_end(text: str, index: int) -> int:
    if index > 0 and text[index - 1] == "\n":
        return index  # a block scalar ends with its line break
    found = text.find("\n", index)
    return len(text) if found < 0 else found + 1
