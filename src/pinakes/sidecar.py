"""The sidecar, `<file>.pnk.yaml`: a document's permanent id and its metadata (spec §2.2).

Read as YAML 1.2 through ruamel.yaml's round-trip mode, because a file a person edits needs a
parser that can put it back: under YAML 1.1 `country: NO` would come back as `false`. Pinakes owns
five keys (id, title, tags, links, provenance) and preserves everything else as `extra`.

Reading is strict and every refusal names the line and column: a sidecar holds a permanent ULID,
so a typo must be reported where it is rather than guessed around. Writing is rare and narrow:
`write_new_sidecar` mints (never over an existing file) and `update_sidecar` reconciles only the
owned keys it is given into the document that was read, so comments, quoting, key order, blank
lines and the author's own keys survive, and an update that changes nothing writes nothing.

Decisions this module makes (docs/SIDECAR.md explains each):
- Values must be JSON-encodable (the index stores them as JSON): only str/int/float/bool/null,
  lists and string-keyed mappings. Non-finite floats and tags such as !!binary, !!set or
  !!python/... are refused. A YAML timestamp (`created: 2024-05-01`) is kept as the text written.
- Anchors and aliases are refused outright, which is what makes an alias bomb fail in linear time.
- A `%YAML` directive other than 1.2 is refused, since it would switch the file back to 1.1 rules.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from io import StringIO
from pathlib import Path
from types import EllipsisType
from typing import Any

import xxhash
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.constructor import RoundTripConstructor
from ruamel.yaml.error import CommentMark, MarkedYAMLError, YAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from ruamel.yaml.reader import ReaderError
from ruamel.yaml.representer import RoundTripRepresenter
from ruamel.yaml.scalarstring import FoldedScalarString, LiteralScalarString, ScalarString
from ruamel.yaml.tokens import CommentToken

from pinakes.atomic import atomic_write_bytes
from pinakes.errors import FilesystemError, PinakesError, SidecarError
from pinakes.ids import format_pnk_uri, is_ulid, parse_pnk_uri
from pinakes.kb import SIDECAR_SUFFIX

# The keys Pinakes owns, in the order a minted sidecar writes them.
OWNED_KEYS = ("id", "title", "tags", "links", "provenance")
EXTRACTION_FIELDS = ("backend", "fingerprint", "extracted", "content_hash")
LINK_FIELDS = ("target", "rel")

# A sidecar is a few hundred bytes; the cap bounds the work a hostile or mistaken file can cause.
MAX_SIDECAR_BYTES = 1 << 20
MAX_NESTING = 64

_UTF8_BOM = b"\xef\xbb\xbf"
_YAML_TAG = "tag:yaml.org,2002:"
_STR, _NULL, _BOOL, _INT, _FLOAT, _TIMESTAMP, _SEQ, _MAP = (
    _YAML_TAG + name for name in ("str", "null", "bool", "int", "float", "timestamp", "seq", "map")
)
_STRING_TAGS = (_STR, _TIMESTAMP)  # a timestamp is kept as the text written
_DIRECTIVE = re.compile(r"^%YAML[ \t]+(\S+)", re.MULTILINE)
# A `---` or `...` at column 0 is always a document marker, even inside a block scalar.
_DOCUMENT_START = re.compile(r"^---(?:[ \t]|\r?$)", re.MULTILINE)
_DOCUMENT_END = re.compile(r"^\.\.\.(?:[ \t]|\r?$)", re.MULTILINE)

_SLIM = "a sidecar holds an id and a little metadata; move bulky content into a document"
_FLATTEN = "flatten the structure; sidecar metadata is meant to be a few levels deep at most"
_FIX_IT = "fix the sidecar by hand; its id is permanent, so repair the file rather than deleting it"

JSONValue = Any  # str | int | float | bool | None | list[JSONValue] | dict[str, JSONValue]


@dataclass(frozen=True)
class Link:
    """An authored link: this document -> (kb_id, doc_id), with a relation such as `cites`."""

    kb_id: str
    doc_id: str
    rel: str

    @property
    def uri(self) -> str:
        return format_pnk_uri(self.kb_id, self.doc_id)


@dataclass(frozen=True)
class Sidecar:
    """One parsed sidecar. `provenance` and `extra` are plain JSON values; treat them as read-only."""

    path: Path
    id: str
    title: str | None
    tags: tuple[str, ...]
    links: tuple[Link, ...]
    provenance: dict[str, JSONValue]
    extra: dict[str, JSONValue]
    raw_hash: str  # xxh3-128 of the file's bytes: documents.sidecar_hash

    @property
    def extraction(self) -> dict[str, JSONValue] | None:
        """`provenance.extraction`, present only after a paid extraction (spec §2.2)."""
        return self.provenance.get("extraction")

    def metadata_json(self) -> str:
        """The JSON the index stores in documents.metadata."""
        return json.dumps(
            {
                "title": self.title,
                "tags": list(self.tags),
                "links": [{"target": link.uri, "rel": link.rel} for link in self.links],
                "provenance": self.provenance,
                "extra": self.extra,
            },
            ensure_ascii=False,
            allow_nan=False,
            separators=(",", ":"),
        )


def sidecar_path_for(doc_path: Path) -> Path:
    """`<file>.pnk.yaml` beside the document."""
    return doc_path.with_name(doc_path.name + SIDECAR_SUFFIX)


def is_sidecar_path(path: Path | str) -> bool:
    name = Path(path).name
    return name.endswith(SIDECAR_SUFFIX) and len(name) > len(SIDECAR_SUFFIX)


def document_path_for(sidecar_path: Path) -> Path:
    """The document a sidecar belongs to (the inverse of `sidecar_path_for`)."""
    if not is_sidecar_path(sidecar_path):
        raise ValueError(f"not a sidecar path: {sidecar_path}")
    return sidecar_path.with_name(sidecar_path.name[: -len(SIDECAR_SUFFIX)])


# --------------------------------------------------------------------------------------------
# Reading


def read_sidecar(path: Path, *, kb_id: str) -> Sidecar:
    """Parse and validate a sidecar. `kb_id` is the owning KB: what `pnk://self/...` means."""
    return parse_sidecar_bytes(_read_bytes(path), path=path, kb_id=kb_id)


def parse_sidecar_bytes(data: bytes, *, path: Path, kb_id: str) -> Sidecar:
    """`read_sidecar` for bytes already in hand (a staged blob, a partner KB's file)."""
    source = _load_source(data, path)
    return _interpret(source, kb_id)


@dataclass
class _Source:
    """A sidecar's bytes, their decoded text and layout, and the composed (unconstructed) tree."""

    path: Path
    data: bytes
    text: str
    root: MappingNode
    has_bom: bool
    crlf: bool
    explicit_start: bool
    explicit_end: bool
    declares_version: bool


def _read_bytes(path: Path) -> bytes:
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_SIDECAR_BYTES + 1)
    except FileNotFoundError:
        raise SidecarError("the sidecar does not exist", remedy="check the path", path=path) from None
    except OSError as exc:
        raise FilesystemError(
            f"could not read the sidecar ({exc.strerror or exc})",
            remedy="check the file's permissions",
            path=path,
        ) from exc
    return data  # at most one byte over the cap, which _load_source refuses


def _load_source(data: bytes, path: Path) -> _Source:
    if len(data) > MAX_SIDECAR_BYTES:
        raise SidecarError(
            f"the sidecar is larger than {MAX_SIDECAR_BYTES // 1024} KiB", remedy=_SLIM, path=path
        )
    has_bom = data.startswith(_UTF8_BOM)
    body = data[len(_UTF8_BOM) :] if has_bom else data
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, column = _byte_location(body, exc.start)
        raise _located(path, line, column, "not valid UTF-8", "save the file as UTF-8") from None
    _refuse_other_yaml_versions(text, path)
    root = _compose(text, path)
    return _Source(
        path=path,
        data=data,
        text=text,
        root=root,
        has_bom=has_bom,
        crlf="\r\n" in text and text.count("\r\n") == text.count("\n"),
        explicit_start=_DOCUMENT_START.search(text) is not None,
        explicit_end=_DOCUMENT_END.search(text) is not None,
        declares_version=_DIRECTIVE.search(text) is not None,  # only 1.2 gets this far
    )


def _refuse_other_yaml_versions(text: str, path: Path) -> None:
    for match in _DIRECTIVE.finditer(text):
        if match.group(1) != "1.2":
            line = text.count("\n", 0, match.start()) + 1
            raise _located(
                path,
                line,
                1,
                f"a sidecar is YAML 1.2, but this file declares %YAML {match.group(1)}",
                "remove the %YAML directive (or declare 1.2); YAML 1.1 rules would turn NO into false",
            )


def _compose(text: str, path: Path) -> MappingNode:
    """The node tree, resolved under YAML 1.2. Composing builds no Python values, so an alias
    bomb costs nothing here; `_interpret` refuses the first anchor it meets."""
    yaml = _new_yaml()
    try:
        root = yaml.compose(text)
    except MarkedYAMLError as exc:
        if type(exc).__name__ == "MaxDepthExceededError":  # its text suggests raising the limit
            raise SidecarError(
                f"the sidecar is nested deeper than {MAX_NESTING} levels", remedy=_FLATTEN, path=path
            ) from None
        mark = exc.problem_mark or exc.context_mark
        problem = str(exc.problem or exc.context or "invalid YAML")
        if exc.context and exc.problem:
            context = str(exc.context)
            problem = f"{problem} ({context})" if context.startswith("while") else f"{context}, {problem}"
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        raise _located(path, line, column, problem, _FIX_IT) from None
    except ReaderError as exc:
        line, column = _text_location(text, exc.position)
        character = chr(exc.character) if isinstance(exc.character, int) else str(exc.character)
        raise _located(
            path,
            line,
            column,
            f"the character U+{ord(character[:1] or ' '):04X} is not allowed in YAML",
            _FIX_IT,
        ) from None
    except YAMLError as exc:
        raise SidecarError(f"invalid YAML: {exc}", remedy=_FIX_IT, path=path) from None
    except RecursionError:
        raise SidecarError(
            f"the sidecar is nested deeper than {MAX_NESTING} levels", remedy=_FLATTEN, path=path
        ) from None
    if root is None:
        raise _located(path, 1, 1, "the sidecar is empty", "it needs at least the document's `id`")
    if not isinstance(root, MappingNode):
        raise _at(path, root, "the top level of a sidecar must be a mapping (key: value lines)", _FIX_IT)
    return root


def _interpret(source: _Source, kb_id: str) -> Sidecar:
    path = source.path
    entries = _mapping_entries(source.root, path)
    if "id" not in entries:
        raise _located(
            path,
            source.root.start_mark.line + 1,
            1,
            "the sidecar has no `id`",
            "restore the document's id (e.g. from `git log -p` of this file); minting a new one "
            "breaks every link pointing at the document",
        )
    return Sidecar(
        path=path,
        id=_read_id(entries["id"], path),
        title=_read_title(entries.get("title"), path),
        tags=_read_tags(entries.get("tags"), path),
        links=_read_links(entries.get("links"), path, kb_id),
        provenance=_read_provenance(entries.get("provenance"), path),
        extra={
            key: _plain(node, path, depth=1) for key, (_, node) in entries.items() if key not in OWNED_KEYS
        },
        raw_hash=xxhash.xxh3_128_hexdigest(source.data),
    )


def _read_id(entry: tuple[Node, Node], path: Path) -> str:
    _, node = entry
    _refuse_anchor(node, path)
    value = node.value if isinstance(node, ScalarNode) and _tag(node) == _STR else None
    if not isinstance(value, str) or not is_ulid(value):
        shown = node.value if isinstance(node, ScalarNode) else "a collection"
        raise _at(
            path,
            node,
            f"`id` must be a ULID (26 upper-case Crockford base32 characters), not {shown!r}",
            "restore the document's original id; a new one breaks every link pointing at it",
        )
    return value


def _read_title(entry: tuple[Node, Node] | None, path: Path) -> str | None:
    if entry is None:
        return None
    _, node = entry
    value = _plain(node, path, depth=1)
    if value is not None and not (isinstance(node, ScalarNode) and _tag(node) in _STRING_TAGS):
        raise _at(path, node, f"`title` must be a string, not {_describe(value)}", 'quote it: title: "..."')
    return value


def _read_tags(entry: tuple[Node, Node] | None, path: Path) -> tuple[str, ...]:
    items = _sequence_items(entry, "tags", path)
    tags = []
    for node in items:
        value = _plain(node, path, depth=2)
        if not (isinstance(node, ScalarNode) and _tag(node) in _STRING_TAGS) or not value:
            raise _at(
                path,
                node,
                f"every tag must be a non-empty string, not {_describe(value)}",
                "quote a tag that YAML reads as a number or a boolean: tags: ['0755', 'true']",
            )
        tags.append(value)
    return tuple(tags)


def _read_links(entry: tuple[Node, Node] | None, path: Path, kb_id: str) -> tuple[Link, ...]:
    links = []
    for node in _sequence_items(entry, "links", path):
        if not isinstance(node, MappingNode):
            raise _at(path, node, "a link must be a mapping with `target` and `rel`", _LINK_REMEDY)
        fields = _mapping_entries(node, path)
        unknown = [key for key in fields if key not in LINK_FIELDS]
        if unknown:
            raise _at(
                path,
                fields[unknown[0]][0],
                f"a link has only `target` and `rel`, not {unknown[0]!r}",
                "move notes about a link into a YAML comment",
            )
        missing = [key for key in LINK_FIELDS if key not in fields]
        if missing:
            raise _at(path, node, f"this link has no `{missing[0]}`", _LINK_REMEDY)
        target_node, rel_node = fields["target"][1], fields["rel"][1]
        target, rel = _plain(target_node, path, depth=3), _plain(rel_node, path, depth=3)
        if not isinstance(rel, str) or not rel:
            raise _at(
                path,
                rel_node,
                f"a link's `rel` must be a non-empty string, not {_describe(rel)}",
                _LINK_REMEDY,
            )
        try:
            link_kb, link_doc = parse_pnk_uri(target, self_kb_id=kb_id)
        except PinakesError as exc:
            raise _at(path, target_node, exc.message, exc.remedy) from None
        links.append(Link(kb_id=link_kb, doc_id=link_doc, rel=rel))
    return tuple(links)


_LINK_REMEDY = "write each link as `- target: pnk://<kb-ulid>/<doc-ulid>` with `rel: <relation>` below it"


def _read_provenance(entry: tuple[Node, Node] | None, path: Path) -> dict[str, JSONValue]:
    if entry is None:
        return {}
    _, node = entry
    _refuse_anchor(node, path)
    if isinstance(node, ScalarNode) and _tag(node) == _NULL:
        return {}  # `provenance:` left empty
    if not isinstance(node, MappingNode):
        value = _plain(node, path, depth=1)
        raise _at(path, node, f"`provenance` must be a mapping, not {_describe(value)}", _FIX_IT)
    entries = _mapping_entries(node, path)
    provenance = {key: _plain(value, path, depth=2) for key, (_, value) in entries.items()}
    if "extraction" in provenance:
        _check_extraction(provenance["extraction"], entries["extraction"][1], path)
    return provenance


def _check_extraction(extraction: JSONValue, node: Node, path: Path) -> None:
    remedy = (
        "provenance.extraction is written by a paid extraction; restore it from git, "
        "or re-run `pnk sync --extract=<backend>` to record it afresh"
    )
    if not isinstance(extraction, dict):
        raise _at(
            path, node, f"`provenance.extraction` must be a mapping, not {_describe(extraction)}", remedy
        )
    for field in EXTRACTION_FIELDS:
        if not isinstance(extraction.get(field), str) or not extraction[field]:
            raise _at(path, node, f"`provenance.extraction.{field}` must be a non-empty string", remedy)


def _sequence_items(entry: tuple[Node, Node] | None, key: str, path: Path) -> list[Node]:
    if entry is None:
        return []
    _, node = entry
    _refuse_anchor(node, path)
    if isinstance(node, ScalarNode) and _tag(node) == _NULL:
        return []  # `tags:` left empty
    if not isinstance(node, SequenceNode) or _tag(node) != _SEQ:
        raise _at(path, node, f"`{key}` must be a list", f"write it as {key}: [...] or as `- ` lines")
    return list(node.value)


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


def _tag(node: Node) -> str:
    tag = node.tag
    return str(getattr(tag, "value", tag))  # a str in some ruamel versions, a Tag in others


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


def _text_location(text: str, position: int) -> tuple[int, int]:
    line_start = text.rfind("\n", 0, position) + 1
    return text.count("\n", 0, position) + 1, position - line_start + 1


def _byte_location(data: bytes, offset: int) -> tuple[int, int]:
    line_start = data.rfind(b"\n", 0, offset) + 1
    return data.count(b"\n", 0, offset) + 1, offset - line_start + 1


# --------------------------------------------------------------------------------------------
# Writing


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
    document = CommentedMap()
    document["id"] = doc_id
    if title is not None:
        document["title"] = _checked_title(title)
    document["tags"] = _set_style(CommentedSeq(_checked_tags(tags)), flow=True)
    document["links"] = CommentedSeq(_link_entry(link) for link in _checked_links(links))
    if provenance:
        document["provenance"] = _commented(_checked_json(dict(provenance), "provenance"))
    data = _dump(document, _Layout())
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
    data = _read_bytes(path)
    source = _load_source(data, path)
    current = _interpret(source, kb_id)
    changes: dict[str, Any] = {}
    if title is not ... and _checked_title(title) != current.title:
        changes["title"] = title
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

    document = _round_trip_load(source)
    _apply_changes(document, current, changes)
    new_data = _dump(document, _Layout.of(source))
    if new_data == data:
        return current
    updated = parse_sidecar_bytes(new_data, path=path, kb_id=kb_id)
    _verify_update(current, updated, changes)
    atomic_write_bytes(path, new_data)
    return updated


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


def _checked_title(title: Any) -> str | None:
    if title is not None and not isinstance(title, str):
        raise TypeError(f"title must be a str or None, not {type(title).__name__}")
    return title


def _checked_tags(tags: Any) -> list[str]:
    checked = [] if isinstance(tags, str) else list(tags)
    if isinstance(tags, str) or not all(isinstance(tag, str) and tag for tag in checked):
        raise TypeError(f"tags must be a sequence of non-empty strings, not {tags!r}")
    return checked


def _checked_links(links: Any) -> list[Link]:
    checked = list(links)
    for link in checked:
        if not isinstance(link, Link) or not link.rel:
            raise TypeError(f"links must be Link values with a rel, not {link!r}")
        format_pnk_uri(link.kb_id, link.doc_id)  # raises on an id that is not a ULID
    return checked


def _checked_extraction(extraction: Any) -> dict[str, str] | None:
    if extraction is None:
        return None
    wanted = dict(extraction)
    missing = [
        field for field in EXTRACTION_FIELDS if not isinstance(wanted.get(field), str) or not wanted[field]
    ]
    if missing:
        raise TypeError(f"provenance_extraction needs non-empty strings for {missing}")
    return _checked_json(wanted, "provenance_extraction")


def _checked_json(value: Any, what: str) -> Any:
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} must be JSON-encodable: {exc}") from exc


def _verify_update(before: Sidecar, after: Sidecar, changes: Mapping[str, Any]) -> None:
    """Refuse to write a rewrite that lost anything: the file holds a permanent id."""
    expected_provenance = dict(before.provenance)
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


# --------------------------------------------------------------------------------------------
# Round-trip YAML: loading, layout and dumping


class _Verbatim:
    """A null, boolean, number or timestamp kept exactly as written (`~`, `True`, `+12`,
    `2024-1-5`), so rewriting a file never respells a value Pinakes does not own."""

    __slots__ = ("tag", "text")

    def __init__(self, tag: str, text: str):
        self.tag = tag
        self.text = text


class _SidecarConstructor(RoundTripConstructor):
    pass


class _SidecarRepresenter(RoundTripRepresenter):
    pass


def _construct_verbatim(constructor: RoundTripConstructor, node: ScalarNode) -> _Verbatim:
    return _Verbatim(_tag(node), node.value)


def _represent_verbatim(representer: RoundTripRepresenter, data: _Verbatim) -> Node:
    return representer.represent_scalar(data.tag, data.text)


# Registered on subclasses, so no other user of ruamel in the process is affected.
for _verbatim_tag in (_NULL, _BOOL, _INT, _FLOAT, _TIMESTAMP):
    _SidecarConstructor.add_constructor(_verbatim_tag, _construct_verbatim)
_SidecarRepresenter.add_representer(_Verbatim, _represent_verbatim)


def _new_yaml() -> YAML:
    # A fresh instance each time: ruamel keeps per-document state (such as a %YAML directive
    # seen while loading) on the instance and would carry it into the next dump.
    yaml = YAML(typ="rt")
    yaml.Constructor = _SidecarConstructor
    yaml.Representer = _SidecarRepresenter
    yaml.preserve_quotes = True
    yaml.width = 1 << 16  # never re-fold a long line the author wrote on one line
    yaml.allow_duplicate_keys = False
    # Newer ruamel stops composing past this depth; older versions hit RecursionError instead,
    # and _compose reports both the same way.
    yaml.max_depth = MAX_NESTING  # type: ignore[attr-defined]
    return yaml


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
    def of(cls, source: _Source) -> _Layout:
        defaults = cls()
        mapping_indent, sequence = _guess_indents(source.root, source.text)
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


# --------------------------------------------------------------------------------------------
# Reconciling owned keys into a round-trip document


def _apply_changes(document: CommentedMap, current: Sidecar, changes: Mapping[str, Any]) -> None:
    if "title" in changes:
        if changes["title"] is None:
            _delete_entry(document, "title")
        elif "title" in document:
            document["title"] = _in_same_style(document["title"], changes["title"])
        else:
            _insert_owned(document, "title", changes["title"])
    if "tags" in changes:
        _set_sequence(document, "tags", list(current.tags), changes["tags"], make=str, flow=True)
    if "links" in changes:
        _set_sequence(document, "links", list(current.links), changes["links"], make=_link_entry, flow=False)
    if "extraction" in changes:
        _set_extraction(document, current.extraction, changes["extraction"])


def _insert_owned(document: CommentedMap, key: str, value: Any) -> None:
    """Insert an absent owned key right after the nearest owned key that precedes it canonically."""
    predecessors = OWNED_KEYS[: OWNED_KEYS.index(key)]
    keys = list(document.keys())
    present = [keys.index(name) for name in predecessors if name in document]
    _insert_entry(document, max(present) + 1 if present else 0, key, value)


def _set_sequence(
    document: CommentedMap,
    key: str,
    old_values: list[Any],
    new_values: list[Any],
    *,
    make: Callable[[Any], Any],
    flow: bool,
) -> None:
    """`flow` is the style for a list Pinakes creates, or one written `[]` (which has no style)."""
    existing = document.get(key)
    if isinstance(existing, CommentedSeq):
        if existing.fa.flow_style() is None:
            _set_style(existing, flow=flow)
        _reconcile_sequence(document, key, existing, old_values, new_values, make)
    elif key in document:
        # `tags:` left empty: the value changes kind, and the comment lines after it stay after it.
        block = _take_block(*_trailing_slot(document, key))
        document[key] = _set_style(CommentedSeq(make(value) for value in new_values), flow=flow)
        _give_block(*_trailing_slot(document, key), block)
    else:
        _insert_owned(document, key, _set_style(CommentedSeq(make(value) for value in new_values), flow=flow))


def _reconcile_sequence(
    document: CommentedMap,
    key: str,
    sequence: CommentedSeq,
    old_values: list[Any],
    new_values: list[Any],
    make: Callable[[Any], Any],
) -> None:
    """Replace a list's items, keeping the objects (quoting, comments) of the items that stay.

    `old_values` are the items as read, aligned with `sequence`. A comment is stored against the
    item before it, so each old item's trailing comment lines are re-attached at the same
    position, and the last item's after the new last item: no comment is lost.
    """
    old_items = list(sequence)
    blocks = [""] * len(old_items)
    eol_comments: dict[int, Any] = {}
    if not sequence.fa.flow_style():
        for index in range(len(old_items)):
            blocks[index] = _take_block(*_trailing_slot(sequence, index))
            comments = sequence.ca.items.get(index) or [None, None, None, None]
            eol_comments[index] = comments[0]
            before: list[CommentToken] = comments[1] or []
            if index and before:  # lines kept before this item belong after the previous one
                blocks[index - 1] += "".join(token.value for token in before)
    unused = list(range(len(old_items)))
    new_items: list[Any] = []
    new_comments: dict[int, Any] = {}
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
        _give_block(*_trailing_slot(sequence, target), block)
    _give_block(document, key, leftover)


def _refreshed(old_item: Any, new_item: Any) -> Any:
    """An item that stays keeps its object; a link entry's fields take the canonical text
    (`pnk://self/...` is written out with the KB's ULID)."""
    if isinstance(old_item, CommentedMap) and isinstance(new_item, CommentedMap):
        for field, value in new_item.items():
            if str(old_item.get(field)) != value:
                old_item[field] = _in_same_style(old_item.get(field), value)
    return old_item


def _set_extraction(
    document: CommentedMap, current: dict[str, JSONValue] | None, extraction: Mapping[str, str] | None
) -> None:
    provenance = document.get("provenance")
    if extraction is None:
        if isinstance(provenance, CommentedMap) and "extraction" in provenance:
            _delete_entry(provenance, "extraction")
            if not provenance:
                _delete_entry(document, "provenance")
        return
    if not isinstance(provenance, CommentedMap):
        value = CommentedMap(extraction=_commented(dict(extraction)))
        if "provenance" in document:  # `provenance:` left empty
            block = _take_block(*_trailing_slot(document, "provenance"))
            document["provenance"] = value
            _give_block(*_trailing_slot(document, "provenance"), block)
        else:
            _insert_owned(document, "provenance", value)
        return
    block_map = provenance.get("extraction")
    if current is None or not isinstance(block_map, CommentedMap):
        _insert_entry(provenance, len(provenance), "extraction", _commented(dict(extraction)))
        return
    # Field by field, so comments inside the block stay beside their fields.
    for field in [field for field in block_map if field not in extraction]:
        _delete_entry(block_map, field)
    for field, value in extraction.items():
        if field not in block_map:
            _insert_entry(block_map, len(block_map), field, value)
        elif current.get(field) != value:
            block_map[field] = _in_same_style(block_map[field], value)


def _link_entry(link: Link) -> CommentedMap:
    return CommentedMap(target=link.uri, rel=link.rel)


def _set_style(sequence: CommentedSeq, *, flow: bool) -> CommentedSeq:
    if flow:
        sequence.fa.set_flow_style()
    else:
        sequence.fa.set_block_style()
    return sequence


def _commented(value: Any) -> Any:
    if isinstance(value, dict):
        return CommentedMap((key, _commented(item)) for key, item in value.items())
    if isinstance(value, list):
        return CommentedSeq(_commented(item) for item in value)
    return value


def _in_same_style(old: Any, new: str) -> str:
    """A replacement string written in the quoting style the author chose for the old one."""
    if isinstance(old, ScalarString):
        return type(old)(new)
    return new


# Comment plumbing. ruamel stores the comment lines after an entry on that entry (the last leaf of
# a block collection): "# eol\n" then the following lines, or "\n" then the following lines.


def _insert_entry(mapping: CommentedMap, position: int, key: str, value: Any) -> None:
    """Insert so that comment lines after the previous entry stay above what followed it."""
    block = ""
    if position > 0:
        previous = list(mapping.keys())[position - 1]
        block = _take_block(*_trailing_slot(mapping, previous))
    mapping.insert(position, key, value)
    _give_block(*_trailing_slot(mapping, key), block)


def _delete_entry(mapping: CommentedMap, key: str) -> None:
    """Delete so that the whole comment lines around the entry stay where they were.

    Lines after a flow collection are stored before the next key, so an entry can carry
    comment lines on both sides; its own end-of-line comment goes with it.
    """
    keys = list(mapping.keys())
    position = keys.index(key)
    before = mapping.ca.items.get(key, [None, None, None, None])[1] or []
    block = "".join(token.value for token in before) + _take_block(*_trailing_slot(mapping, key))
    del mapping[key]
    mapping.ca.items.pop(key, None)  # ruamel leaves it behind, to resurface on a re-added key
    if not block:
        return
    if position > 0:
        _give_block(*_trailing_slot(mapping, keys[position - 1]), block)
    else:
        _give_header(mapping, block)


def _give_header(mapping: CommentedMap, block: str) -> None:
    """Comment lines that now come before the first key of a mapping."""
    if mapping.ca.comment is None:
        mapping.ca.comment = [None, []]
    if mapping.ca.comment[1] is None:
        mapping.ca.comment[1] = []
    mapping.ca.comment[1].append(CommentToken(block, CommentMark(0), None))


def _trailing_slot(container: Any, slot: Any) -> tuple[Any, Any]:
    """Where the comment lines after `container[slot]` are stored: its deepest last leaf."""
    value = container[slot]
    if isinstance(value, (CommentedMap, CommentedSeq)) and len(value) and not value.fa.flow_style():
        last = list(value.keys())[-1] if isinstance(value, CommentedMap) else len(value) - 1
        return _trailing_slot(value, last)
    return container, slot


def _comment_index(container: Any) -> int:
    return 2 if isinstance(container, CommentedMap) else 0


def _ends_its_own_line(container: Any, slot: Any) -> bool:
    """A block scalar ends with a line break, so the comment after it cannot be end-of-line."""
    return isinstance(container[slot], (LiteralScalarString, FoldedScalarString))


def _take_block(container: Any, slot: Any) -> str:
    """Detach and return the whole comment lines after an entry, keeping its end-of-line comment."""
    comments = container.ca.items.get(slot)
    token = comments[_comment_index(container)] if comments else None
    if token is None or not token.value:
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


def _give_block(container: Any, slot: Any, block: str) -> None:
    if not block:
        return
    comments = container.ca.items.setdefault(slot, [None, None, None, None])
    index = _comment_index(container)
    token = comments[index]
    if token is None:
        text = block if _ends_its_own_line(container, slot) else "\n" + block
        comments[index] = CommentToken(text, CommentMark(0), None)
    else:
        token.value += block
