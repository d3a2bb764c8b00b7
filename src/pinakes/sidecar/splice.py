"""Writing back only the owned keys that changed: every other byte of the file stays as it was.

The round-trip dumper re-renders the whole document, and a re-render is not byte-faithful: it
decodes `"Caf\\u00e9"` into `"Café"`, respaces `tags: [ a,  "b" ,c ]`, and applies one indentation
to every key. So the reconciled document is dumped (which is what renders the changed keys well,
with their comments and quoting), and the file is put together again key by key: a changed key's
lines come from the dump, every other key's from the original file (spec §2.2: a Pinakes edit
changes only the keys it owns).

Each top-level key has its own lines (from the key to the end of the line its value ends on) and
the comment lines after them, up to the next key. The reconciliation moves comment lines between
keys only when it inserts or deletes one (they stay above what followed), so an unchanged key keeps
its original comment lines unless its neighbour in the dump is not its neighbour in the file; then
they come from the dump, where the reconciliation put them. Everything is done on the decoded text
(the byte-order mark and line ends are the source's), and `None` means the two cannot be aligned
(the caller then keeps the whole dump).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from pinakes.sidecar.dialect import UTF8_BOM
from pinakes.sidecar.reading import DOCUMENT_END, Source
from pinakes.sidecar.tree import YamlMapping, YamlNode, YamlScalar, YamlSequence

_Span = tuple[int, int]


def splice_keys(source: Source, changed: Collection[str], dumps: Mapping[str, Source],
                structure: Source) -> bytes | None:
    """`source`'s bytes with each `changed` top-level key as the dump made for it (`dumps[key]`) has
    it, and the comment lines around an inserted or deleted key as `structure` (the whole dump) has
    them; None when they cannot be aligned (a key that is not a plain scalar at the left margin, or
    unchanged keys in another order)."""
    old = _entries(source)
    new = _entries(structure)
    rendered = {key: _entries(dump) for key, dump in dumps.items()}
    if old is None or new is None or not new or any(entries is None for entries in rendered.values()):
        return None
    old_names, new_names = list(old), list(new)
    if [name for name in old_names if name not in changed] != [name for name in new_names if name not in changed]:
        return None
    same_start = bool(old_names) and old_names[0] == new_names[0]
    parts = [source.text[: old[old_names[0]][0].start.index] if same_start
             else structure.text[: new[new_names[0]][0].start.index]]
    for position, name in enumerate(new_names):
        if name in changed:
            dump, entries = dumps[name], rendered[name]
            assert entries is not None
            parts.append(_slice(dump, _own_lines(dump.text, entries[name])))
            parts.append(_slice(dump, _after(dump, entries, name)))
            continue
        parts.append(_slice(source, _own_lines(source.text, old[name])))
        following_new = new_names[position + 1] if position + 1 < len(new_names) else None
        at = old_names.index(name)
        following_old = old_names[at + 1] if at + 1 < len(old_names) else None
        if following_new == following_old:
            parts.append(_slice(source, _after(source, old, name)))
        else:
            parts.append(_slice(structure, _after(structure, new, name)))
    parts.append(source.text[_body_end(source.text):])
    return (UTF8_BOM if source.has_bom else b"") + "".join(parts).encode("utf-8")


def _entries(source: Source) -> dict[str, tuple[YamlNode, YamlNode]] | None:
    """Top-level key -> (key node, value node), in document order; None when a key is not a plain
    scalar at column 0 (then a key's line is not simply where its text starts)."""
    root = source.root
    if root.flow:
        return None
    entries: dict[str, tuple[YamlNode, YamlNode]] = {}
    for key_node, value_node in root.entries:
        if not isinstance(key_node, YamlScalar) or key_node.start.column != 0:
            return None
        entries[key_node.text] = (key_node, value_node)
    return entries


def _after(source: Source, entries: dict[str, tuple[YamlNode, YamlNode]], key: str) -> _Span:
    """The comment and blank lines after the key's own lines, up to the next key (or the end of the
    document's body)."""
    names = list(entries)
    start = _own_lines(source.text, entries[key])[1]
    following = names.index(key) + 1
    end = entries[names[following]][0].start.index if following < len(names) else _body_end(source.text)
    return start, max(start, end)


def _own_lines(text: str, entry: tuple[YamlNode, YamlNode]) -> _Span:
    """From the key to the end of the line its last character is on (the line break included)."""
    return entry[0].start.index, _line_end(text, _last_index(entry[1]))


def _slice(source: Source, span: _Span) -> str:
    return source.text[span[0]: span[1]]


def _body_end(text: str) -> int:
    marker = DOCUMENT_END.search(text)
    return marker.start() if marker else len(text)


def _last_index(node: YamlNode) -> int:
    """Where the node's last character ends (a block collection's own end mark lies at whatever
    token follows it, past any comment lines, so it is found through its last leaf)."""
    if isinstance(node, YamlMapping) and not node.flow and node.entries:
        return _last_index(node.entries[-1][1])
    if isinstance(node, YamlSequence) and not node.flow and node.items:
        return _last_index(node.items[-1])
    return node.end.index


def _line_end(text: str, index: int) -> int:
    if index > 0 and text[index - 1] == "\n":
        return index  # a block scalar ends with its line break
    found = text.find("\n", index)
    return len(text) if found < 0 else found + 1
