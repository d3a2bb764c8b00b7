"""Writing a sidecar, which is rare and narrow.

`write_new_sidecar` mints, and never over an existing file: that file holds a permanent id even when
it does not parse (spec §6.4). `update_sidecar` reconciles only the owned keys it is given and
writes nothing when nothing changes. Every new text is parsed back and checked against the intended
values before it replaces the file, so a rewrite that would lose anything is refused instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import EllipsisType
from typing import cast

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from pinakes.atomic import atomic_write_bytes
from pinakes.errors import SidecarError
from pinakes.ids import format_pnk_uri, is_ulid
from pinakes.sidecar.layout import Layout, dump_bytes, round_trip_load
from pinakes.sidecar.minted import minted_bytes
from pinakes.sidecar.model import EXTRACTION_FIELDS, JSONValue, Link, Sidecar, sidecar_path_for
from pinakes.sidecar.reading import (
    Source,
    interpret,
    load_source,
    parse_sidecar_bytes,
    read_bytes,
    read_sidecar,
)
from pinakes.sidecar.reconcile import SidecarChanges, apply_changes, commented, link_entry, set_style
from pinakes.sidecar.splice import splice_keys


def write_new_sidecar(
    doc_path: Path,
    *,
    doc_id: str,
    title: str | None = None,
    tags: Sequence[str] = (),
    links: Sequence[Link] = (),
    provenance: Mapping[str, JSONValue] | None = None,
) -> Path:
    """Mint `<doc>.pnk.yaml` in canonical key order. Never over an existing sidecar (spec §6.4):
    that file holds a permanent id, even when it does not parse."""
    path = sidecar_path_for(doc_path)
    if not is_ulid(doc_id):
        raise ValueError(f"doc_id {doc_id!r} is not a canonical ULID")
    data = minted_bytes(doc_id) if title is None and not tags and not links and not provenance else None
    if data is None:
        document = CommentedMap()
        document["id"] = doc_id
        if title is not None:
            document["title"] = _checked_title(title)
        document["tags"] = set_style(CommentedSeq(_checked_tags(tags)), flow=True)
        document["links"] = CommentedSeq(link_entry(link) for link in _checked_links(links))
        if provenance:
            document["provenance"] = commented(_checked_json(dict(provenance), "provenance"))
        data = dump_bytes(document, Layout())
        # A minted sidecar never says `self`, so any owner id reads it the same way.
        parse_sidecar_bytes(data, path=path, kb_id=doc_id)
    if path.exists():
        raise _refuse_to_mint_over(path)
    try:
        atomic_write_bytes(path, data, exclusive=True)
    except FileExistsError:
        raise _refuse_to_mint_over(path) from None
    return path


def update_sidecar(
    path: Path,
    *,
    kb_id: str,
    title: str | EllipsisType | None = ...,
    tags: Sequence[str] | EllipsisType = ...,
    links: Sequence[Link] | EllipsisType = ...,
    provenance_extraction: Mapping[str, str] | EllipsisType | None = ...,
) -> Sidecar:
    """Reconcile the given owned keys into the sidecar; `...` (the default) leaves a key alone.

    `title=None` removes the title; `provenance_extraction=None` removes provenance.extraction and
    leaves the rest of provenance. Links are written as `pnk://<kb-ulid>/<doc-ulid>`. Everything
    else in the file survives. If nothing changes, the file is not written at all: same bytes,
    same mtime. Returns the sidecar as it now is on disk (compare `raw_hash` to tell a rewrite).
    """
    data = read_bytes(path)
    source = load_source(data, path)
    current = interpret(source, kb_id)
    changes: SidecarChanges = {}
    if title is not ...:
        wanted_title = _checked_title(title)
        if wanted_title != current.title:
            changes["title"] = wanted_title
    if tags is not ...:
        wanted_tags = _checked_tags(tags)
        if tuple(wanted_tags) != current.tags:
            changes["tags"] = wanted_tags
    if links is not ...:
        wanted_links = _checked_links(links)
        if tuple(wanted_links) != current.links:
            changes["links"] = wanted_links
    if provenance_extraction is not ...:
        wanted = _checked_extraction(provenance_extraction)
        if wanted != current.extraction:
            changes["extraction"] = wanted
    if not changes:
        return current

    document = round_trip_load(source)
    apply_changes(document, current, changes)
    new_data, updated = _only_changed_keys(source, document, current, changes, kb_id)
    if new_data == data:
        return current
    atomic_write_bytes(path, new_data)
    return updated


# The top-level key each change is written under.
_CHANGED_KEY = {"title": "title", "tags": "tags", "links": "links", "extraction": "provenance"}


def _only_changed_keys(source: Source, document: CommentedMap, current: Sidecar, changes: SidecarChanges,
                       kb_id: str) -> tuple[bytes, Sidecar]:
    """The source's bytes with only the changed keys' text taken from a dump (`splice`), each key
    dumped with the indents it shows itself; proven by parsing it back. When the two cannot be
    aligned, the whole dump, proven the same way."""
    whole = dump_bytes(document, Layout.of(source))
    keys = {_CHANGED_KEY[name] for name in changes}
    dumps = {key: load_source(dump_bytes(document, Layout.of(source, key)), source.path) for key in keys}
    spliced = splice_keys(source, keys, dumps, load_source(whole, source.path))
    if spliced is not None:
        try:
            updated = parse_sidecar_bytes(spliced, path=source.path, kb_id=kb_id)
            _verify_update(current, updated, changes)
            return spliced, updated
        except (SidecarError, RuntimeError):
            pass  # the whole dump below is proven on its own
    updated = parse_sidecar_bytes(whole, path=source.path, kb_id=kb_id)
    _verify_update(current, updated, changes)
    return whole, updated


def _refuse_to_mint_over(path: Path) -> SidecarError:
    try:
        existing = read_sidecar(path, kb_id=_ANY_OWNER)
    except SidecarError as exc:
        return SidecarError(
            f"a sidecar already exists here and does not parse ({exc.message}); "
            "refusing to mint a new id over it",
            remedy="fix that error by hand: the file holds the document's permanent id, and every "
            "inbound link points at it",
            path=path,
        )
    return SidecarError(
        f"a sidecar already exists here (id {existing.id}); refusing to mint a new id over it",
        remedy="keep it: the document's id is permanent, and every inbound link points at it",
        path=path,
    )


# Only `pnk://self/` reads depend on the owner, and naming a parse problem does not.
_ANY_OWNER = "0" * 26


def _checked_title(title: object) -> str | None:
    if title is not None and not isinstance(title, str):
        raise TypeError(f"title must be a str or None, not {type(title).__name__}")
    return title


# The checks below are for callers the type checker does not see: hence `object`.
def _checked_tags(tags: Sequence[object]) -> list[str]:
    given = [] if isinstance(tags, str) else list(tags)
    checked = [tag for tag in given if isinstance(tag, str) and tag]
    if isinstance(tags, str) or len(checked) != len(given):
        raise TypeError(f"tags must be a sequence of non-empty strings, not {tags!r}")
    return checked


def _checked_links(links: Sequence[object]) -> list[Link]:
    checked: list[Link] = []
    for link in links:
        if not isinstance(link, Link) or not link.rel:
            raise TypeError(f"links must be Link values with a rel, not {link!r}")
        format_pnk_uri(link.kb_id, link.doc_id)  # raises on an id that is not a ULID
        checked.append(link)
    return checked


def _checked_extraction(extraction: Mapping[str, str] | None) -> dict[str, str] | None:
    if extraction is None:
        return None
    wanted = dict(extraction)
    missing = [
        field for field in EXTRACTION_FIELDS if not isinstance(wanted.get(field), str) or not wanted[field]
    ]
    if missing:
        raise TypeError(f"provenance_extraction needs non-empty strings for {missing}")
    return cast("dict[str, str]", _checked_json(wanted, "provenance_extraction"))  # a round trip of str values


def _checked_json(value: object, what: str) -> JSONValue:
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} must be JSON-encodable: {exc}") from exc


def _verify_update(before: Sidecar, after: Sidecar, changes: SidecarChanges) -> None:
    """Refuse to write a rewrite that lost anything: the file holds a permanent id."""
    expected_provenance: dict[str, object] = dict(before.provenance)
    if "extraction" in changes:
        expected_provenance.pop("extraction", None)
        if changes["extraction"] is not None:
            expected_provenance["extraction"] = changes["extraction"]
    expected = (
        before.id,
        changes.get("title", before.title),
        tuple(changes.get("tags", before.tags)),
        tuple(changes.get("links", before.links)),
        expected_provenance,
        before.extra,
    )
    actual = (after.id, after.title, after.tags, after.links, after.provenance, after.extra)
    if actual != expected:
        raise RuntimeError(
            f"Pinakes bug: rewriting {before.path} would not give the intended values "
            f"(wanted {expected!r}, got {actual!r}); the file was left unchanged"
        )
