"""Keeping the author's comment lines where they were when entries are inserted, deleted or replaced.

ruamel stores the comment lines after an entry on that entry (the last leaf of a block collection):
"# eol\n" then the following lines, or "\n" then the following lines. So any edit that moves or
removes an entry would carry the lines below it along, or drop them; these helpers detach such a
block and re-attach it to whatever now precedes it.
"""

from __future__ import annotations

from typing import TypeAlias

from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark
from ruamel.yaml.scalarstring import FoldedScalarString, LiteralScalarString
from ruamel.yaml.tokens import CommentToken

Container: TypeAlias = CommentedMap | CommentedSeq
Slot: TypeAlias = str | int  # a mapping's key or a sequence's index
# One entry's comments as ruamel keeps them: a mapping's [after its key, before its key, after its
# value, before its value], a sequence item's [after it, before it]; a "before" holds a list.
CommentSlots: TypeAlias = list[CommentToken | list[CommentToken] | None]


def keys_of(mapping: CommentedMap) -> list[str]:
    """A sidecar mapping's keys, in order: strings, since the reader refuses any other key."""
    return [str(key) for key in mapping]


def value_at(container: Container, slot: Slot) -> object:
    if isinstance(container, CommentedMap):
        return container[slot]
    assert isinstance(slot, int), "a sequence's slot is an index"
    return container[slot]


def token_at(comments: CommentSlots, index: int) -> CommentToken | None:
    token = comments[index]
    return token if isinstance(token, CommentToken) else None


def tokens_before(comments: CommentSlots) -> list[CommentToken]:
    """The comment lines kept before an entry (slot 1)."""
    before = comments[1]
    return before if isinstance(before, list) else []


def insert_entry(mapping: CommentedMap, position: int, key: str, value: object) -> None:
    """Insert so that comment lines after the previous entry stay above what followed it."""
    block = ""
    if position > 0:
        previous = keys_of(mapping)[position - 1]
        block = take_block(*trailing_slot(mapping, previous))
    mapping.insert(position, key, value)
    give_block(*trailing_slot(mapping, key), block)


def delete_entry(mapping: CommentedMap, key: str) -> None:
    """Delete so that the whole comment lines around the entry stay where they were.

    Lines after a flow collection are stored before the next key, so an entry can carry
    comment lines on both sides; its own end-of-line comment goes with it.
    """
    keys = keys_of(mapping)
    position = keys.index(key)
    before = tokens_before(mapping.ca.items.get(key, [None, None, None, None]))
    block = "".join(token.value for token in before) + take_block(*trailing_slot(mapping, key))
    del mapping[key]
    mapping.ca.items.pop(key, None)  # ruamel leaves it behind, to resurface on a re-added key
    if not block:
        return
    if position > 0:
        give_block(*trailing_slot(mapping, keys[position - 1]), block)
    else:
        _give_header(mapping, block)


def _give_header(mapping: CommentedMap, block: str) -> None:
    """Comment lines that now come before the first key of a mapping."""
    if mapping.ca.comment is None:
        mapping.ca.comment = [None, []]
    header = mapping.ca.comment[1]
    if not isinstance(header, list):  # None
        header = mapping.ca.comment[1] = []
    header.append(CommentToken(block, CommentMark(0), None))


def trailing_slot(container: Container, slot: Slot) -> tuple[Container, Slot]:
    """Where the comment lines after `container[slot]` are stored: its deepest last leaf."""
    value = value_at(container, slot)
    if isinstance(value, (CommentedMap, CommentedSeq)) and len(value) and not value.fa.flow_style():
        last = keys_of(value)[-1] if isinstance(value, CommentedMap) else len(value) - 1
        return trailing_slot(value, last)
    return container, slot


def _comment_index(container: Container) -> int:
    return 2 if isinstance(container, CommentedMap) else 0


def _ends_its_own_line(container: Container, slot: Slot) -> bool:
    """A block scalar ends with a line break, so the comment after it cannot be end-of-line."""
    return isinstance(value_at(container, slot), (LiteralScalarString, FoldedScalarString))


def take_block(container: Container, slot: Slot) -> str:
    """Detach and return the whole comment lines after an entry, keeping its end-of-line comment."""
    comments = container.ca.items.get(slot)
    token = token_at(comments, _comment_index(container)) if comments else None
    if comments is None or token is None or not token.value:
        return ""
    text = token.value
    if _ends_its_own_line(container, slot):
        eol, block = "", text
    elif text.startswith("#"):
        eol, _, block = text.partition("\n")
    else:
        eol, block = "", text[1:]
    if eol:
        token.value = eol + "\n"
    else:
        comments[_comment_index(container)] = None
    return block


def give_block(container: Container, slot: Slot, block: str) -> None:
    if not block:
        return
    comments = container.ca.items.setdefault(slot, [None, None, None, None])
    index = _comment_index(container)
    token = token_at(comments, index)
    if token is None:
        text = block if _ends_its_own_line(container, slot) else "\n" + block
        comments[index] = CommentToken(text, CommentMark(0), None)
    else:
        token.value += block
