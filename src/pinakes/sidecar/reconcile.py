"""Reconciling owned keys into the round-trip document, so that a change touches only what it
must: list items that stay keep their objects (and so their quoting and comments), a replaced string
keeps the quoting style the author chose, and an absent owned key is inserted in canonical order.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import TypedDict, TypeVar

from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import ScalarString
from ruamel.yaml.tokens import CommentToken

from pinakes.sidecar.comments import (
    CommentSlots,
    delete_entry,
    give_block,
    insert_entry,
    keys_of,
    take_block,
    token_at,
    tokens_before,
    trailing_slot,
)
from pinakes.sidecar.model import OWNED_KEYS, JSONValue, Link, Sidecar

Item = TypeVar("Item")  # a list's values as read (a tag, a Link)


class SidecarChanges(TypedDict, total=False):
    """The owned keys one update changes, each with its new value; a key absent is left alone."""

    title: str | None
    tags: list[str]
    links: list[Link]
    extraction: dict[str, str] | None


def apply_changes(document: CommentedMap, current: Sidecar, changes: SidecarChanges) -> None:
    if "title" in changes:
        if changes["title"] is None:
            delete_entry(document, "title")
        elif "title" in document:
            document["title"] = _in_same_style(document["title"], changes["title"])
        else:
            _insert_owned(document, "title", changes["title"])
    if "tags" in changes:
        _set_sequence(document, "tags", list(current.tags), changes["tags"], make=str, flow=True)
    if "links" in changes:
        _set_sequence(document, "links", list(current.links), changes["links"], make=link_entry, flow=False)
    if "extraction" in changes:
        _set_extraction(document, current.extraction, changes["extraction"])


def _insert_owned(document: CommentedMap, key: str, value: object) -> None:
    """Insert an absent owned key right after the nearest owned key that precedes it canonically."""
    predecessors = OWNED_KEYS[: OWNED_KEYS.index(key)]
    keys = keys_of(document)
    present = [keys.index(name) for name in predecessors if name in document]
    insert_entry(document, max(present) + 1 if present else 0, key, value)


def _set_sequence(
    document: CommentedMap,
    key: str,
    old_values: list[Item],
    new_values: list[Item],
    *,
    make: Callable[[Item], object],
    flow: bool,
) -> None:
    """`flow` is the style for a list Pinakes creates, or one written `[]` (which has no style)."""
    existing = document.get(key)
    if isinstance(existing, CommentedSeq):
        if existing.fa.flow_style() is None:
            set_style(existing, flow=flow)
        _reconcile_sequence(document, key, existing, old_values, new_values, make)
    elif key in document:
        # `tags:` left empty: the value changes kind, and the comment lines after it stay after it.
        block = take_block(*trailing_slot(document, key))
        document[key] = set_style(CommentedSeq(make(value) for value in new_values), flow=flow)
        give_block(*trailing_slot(document, key), block)
    else:
        _insert_owned(document, key, set_style(CommentedSeq(make(value) for value in new_values), flow=flow))


def _reconcile_sequence(
    document: CommentedMap,
    key: str,
    sequence: CommentedSeq,
    old_values: list[Item],
    new_values: list[Item],
    make: Callable[[Item], object],
) -> None:
    """Replace a list's items, keeping the objects (quoting, comments) of the items that stay.

    `old_values` are the items as read, aligned with `sequence`. A comment is stored against the
    item before it, so each old item's trailing comment lines are re-attached at the same
    position, and the last item's after the new last item: no comment is lost.
    """
    old_items = list(sequence)
    blocks = [""] * len(old_items)
    eol_comments: dict[int, CommentToken | None] = {}
    if not sequence.fa.flow_style():
        for index in range(len(old_items)):
            blocks[index] = take_block(*trailing_slot(sequence, index))
            comments = sequence.ca.items.get(index) or [None, None, None, None]
            eol_comments[index] = token_at(comments, 0)
            before = tokens_before(comments)
            if index and before:  # lines kept before this item belong after the previous one
                blocks[index - 1] += "".join(token.value for token in before)
    unused = list(range(len(old_items)))
    new_items: list[object] = []
    new_comments: dict[Hashable, CommentSlots] = {}
    for position, value in enumerate(new_values):
        match = next((index for index in unused if old_values[index] == value), None)
        if match is None:
            new_items.append(make(value))
            continue
        unused.remove(match)
        new_items.append(_refreshed(old_items[match], make(value)))
        if eol_comments.get(match) is not None:
            new_comments[position] = [eol_comments[match], None, None, None]
    del sequence[:]
    sequence.ca.items.clear()
    sequence.extend(new_items)
    sequence.ca.items.update(new_comments)
    if not new_items:
        sequence.fa.set_flow_style()  # an empty list can only be written `[]`
    leftover = ""
    for index, block in enumerate(blocks):
        if not block:
            continue
        if not new_items:
            leftover += block
            continue
        last = index == len(blocks) - 1
        target = len(new_items) - 1 if last else min(index, len(new_items) - 1)
        give_block(*trailing_slot(sequence, target), block)
    give_block(document, key, leftover)


def _refreshed(old_item: object, new_item: object) -> object:
    """An item that stays keeps its object; a link entry's fields take the canonical text
    (`pnk://self/...` is written out with the KB's ULID)."""
    if isinstance(old_item, CommentedMap) and isinstance(new_item, CommentedMap):
        for field, value in new_item.items():
            if isinstance(value, str) and str(old_item.get(field)) != value:  # a link entry's fields are text
                old_item[field] = _in_same_style(old_item.get(field), value)
    return old_item


def _set_extraction(
    document: CommentedMap, current: dict[str, JSONValue] | None, extraction: Mapping[str, str] | None
) -> None:
    provenance = document.get("provenance")
    if extraction is None:
        if isinstance(provenance, CommentedMap) and "extraction" in provenance:
            delete_entry(provenance, "extraction")
            if not provenance:
                delete_entry(document, "provenance")
        return
    if not isinstance(provenance, CommentedMap):
        value = CommentedMap(extraction=commented(dict(extraction)))
        if "provenance" in document:  # `provenance:` left empty
            block = take_block(*trailing_slot(document, "provenance"))
            document["provenance"] = value
            give_block(*trailing_slot(document, "provenance"), block)
        else:
            _insert_owned(document, "provenance", value)
        return
    block_map = provenance.get("extraction")
    if current is None or not isinstance(block_map, CommentedMap):
        insert_entry(provenance, len(provenance), "extraction", commented(dict(extraction)))
        return
    # Field by field, so comments inside the block stay beside their fields.
    for field in [field for field in keys_of(block_map) if field not in extraction]:
        delete_entry(block_map, field)
    for field, value in extraction.items():
        if field not in block_map:
            insert_entry(block_map, len(block_map), field, value)
        elif current.get(field) != value:
            block_map[field] = _in_same_style(block_map[field], value)


def link_entry(link: Link) -> CommentedMap:
    return CommentedMap(target=link.uri, rel=link.rel)


def set_style(sequence: CommentedSeq, *, flow: bool) -> CommentedSeq:
    if flow:
        sequence.fa.set_flow_style()
    else:
        sequence.fa.set_block_style()
    return sequence


def commented(value: JSONValue) -> object:
    """A JSON value as the round-trip document holds it (mappings and lists that carry comments)."""
    if isinstance(value, dict):
        return CommentedMap((key, commented(item)) for key, item in value.items())
    if isinstance(value, list):
        return CommentedSeq(commented(item) for item in value)
    return value


def _in_same_style(old: object, new: str) -> str:
    """A replacement string written in the quoting style the author chose for the old one."""
    if isinstance(old, ScalarString):
        return type(old)(new)
    return new
