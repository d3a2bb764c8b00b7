"""Reading a sidecar strictly: bytes to a validated `Sidecar`, every refusal naming its line and
column, because the file holds a permanent ULID and a typo must be reported where it is rather than
guessed around.

The bytes are capped before parsing, and a `%YAML` directive other than 1.2 is refused, since it
would switch the file back to 1.1 rules (`NO` read as `false`). `Source` keeps the file's surface
form (BOM, line ends, document markers) so that a rewrite can reproduce it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import xxhash
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.reader import ReaderError

from pinakes.errors import FilesystemError, PinakesError, SidecarError
from pinakes.ids import is_ulid, parse_pnk_uri
from pinakes.sidecar.dialect import NULL, SEQ, STR, STRING_TAGS, UTF8_BOM, new_yaml
from pinakes.sidecar.minted import parse_minted
from pinakes.sidecar.model import (
    EXTRACTION_FIELDS,
    LINK_FIELDS,
    MAX_NESTING,
    MAX_SIDECAR_BYTES,
    OWNED_KEYS,
    JSONValue,
    Link,
    Sidecar,
)
from pinakes.sidecar.nodes import (
    FIX_IT,
    FLATTEN,
    describe,
    error_at,
    error_located,
    mapping_entries,
    plain_value,
    refuse_anchor,
)
from pinakes.sidecar.tree import YamlMapping, YamlNode, YamlScalar, YamlSequence, compose

_DIRECTIVE = re.compile(r"^%YAML[ \t]+(\S+)", re.MULTILINE)
# A `---` or `...` at column 0 is always a document marker, even inside a block scalar.
_DOCUMENT_START = re.compile(r"^---(?:[ \t]|\r?$)", re.MULTILINE)
DOCUMENT_END = re.compile(r"^\.\.\.(?:[ \t]|\r?$)", re.MULTILINE)

_SLIM = "a sidecar holds an id and a little metadata; move bulky content into a document"


def read_sidecar(path: Path, *, kb_id: str) -> Sidecar:
    """Parse and validate a sidecar. `kb_id` is the owning KB: what `pnk://self/...` means."""
    return parse_sidecar_bytes(read_bytes(path), path=path, kb_id=kb_id)


def parse_sidecar_bytes(data: bytes, *, path: Path, kb_id: str) -> Sidecar:
    """`read_sidecar` for bytes already in hand (a staged blob, a partner KB's file)."""
    minted = parse_minted(data, path)
    if minted is not None:  # exactly what a sync mints: read without the YAML library
        return minted
    source = load_source(data, path)
    return interpret(source, kb_id)


@dataclass
class Source:
    """A sidecar's bytes, their decoded text and layout, and the composed (unconstructed) tree."""

    path: Path
    data: bytes
    text: str
    root: YamlMapping
    has_bom: bool
    crlf: bool
    explicit_start: bool
    explicit_end: bool
    declares_version: bool


def read_bytes(path: Path) -> bytes:
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
    return data  # at most one byte over the cap, which load_source refuses


def load_source(data: bytes, path: Path) -> Source:
    if len(data) > MAX_SIDECAR_BYTES:
        raise SidecarError(
            f"the sidecar is larger than {MAX_SIDECAR_BYTES // 1024} KiB", remedy=_SLIM, path=path
        )
    has_bom = data.startswith(UTF8_BOM)
    body = data[len(UTF8_BOM) :] if has_bom else data
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, column = _byte_location(body, exc.start)
        raise error_located(path, line, column, "not valid UTF-8", "save the file as UTF-8") from None
    _refuse_other_yaml_versions(text, path)
    root = _compose(text, path)
    return Source(
        path=path,
        data=data,
        text=text,
        root=root,
        has_bom=has_bom,
        crlf="\r\n" in text and text.count("\r\n") == text.count("\n"),
        explicit_start=_DOCUMENT_START.search(text) is not None,
        explicit_end=DOCUMENT_END.search(text) is not None,
        declares_version=_DIRECTIVE.search(text) is not None,  # only 1.2 gets this far
    )


def _refuse_other_yaml_versions(text: str, path: Path) -> None:
    for match in _DIRECTIVE.finditer(text):
        if match.group(1) != "1.2":
            line = text.count("\n", 0, match.start()) + 1
            raise error_located(
                path,
                line,
                1,
                f"a sidecar is YAML 1.2, but this file declares %YAML {match.group(1)}",
                "remove the %YAML directive (or declare 1.2); YAML 1.1 rules would turn NO into false",
            )


def _compose(text: str, path: Path) -> YamlMapping:
    """The node tree, resolved under YAML 1.2. Composing builds no Python values, so an alias
    bomb costs nothing here; `interpret` refuses the first anchor it meets."""
    yaml = new_yaml()
    try:
        root = compose(yaml, text)
    except MarkedYAMLError as exc:
        if type(exc).__name__ == "MaxDepthExceededError":  # its text suggests raising the limit
            raise SidecarError(
                f"the sidecar is nested deeper than {MAX_NESTING} levels", remedy=FLATTEN, path=path
            ) from None
        mark = exc.problem_mark or exc.context_mark
        problem = str(exc.problem or exc.context or "invalid YAML")
        if exc.context and exc.problem:
            context = str(exc.context)
            problem = f"{problem} ({context})" if context.startswith("while") else f"{context}, {problem}"
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        raise error_located(path, line, column, problem, FIX_IT) from None
    except ReaderError as exc:
        line, column = _text_location(text, exc.position)
        character = chr(exc.character) if isinstance(exc.character, int) else str(exc.character)
        raise error_located(
            path,
            line,
            column,
            f"the character U+{ord(character[:1] or ' '):04X} is not allowed in YAML",
            FIX_IT,
        ) from None
    except YAMLError as exc:
        raise SidecarError(f"invalid YAML: {exc}", remedy=FIX_IT, path=path) from None
    except RecursionError:
        raise SidecarError(
            f"the sidecar is nested deeper than {MAX_NESTING} levels", remedy=FLATTEN, path=path
        ) from None
    if root is None:
        raise error_located(path, 1, 1, "the sidecar is empty", "it needs at least the document's `id`")
    if not isinstance(root, YamlMapping):
        raise error_at(path, root, "the top level of a sidecar must be a mapping (key: value lines)", FIX_IT)
    return root


def interpret(source: Source, kb_id: str) -> Sidecar:
    path = source.path
    entries = mapping_entries(source.root, path)
    if "id" not in entries:
        raise error_located(
            path,
            source.root.start.line + 1,
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
            key: plain_value(node, path, depth=1) for key, (_, node) in entries.items() if key not in OWNED_KEYS
        },
        raw_hash=xxhash.xxh3_128_hexdigest(source.data),
    )


def _read_id(entry: tuple[YamlNode, YamlNode], path: Path) -> str:
    _, node = entry
    refuse_anchor(node, path)
    value = node.text if isinstance(node, YamlScalar) and node.tag == STR else None
    if value is None or not is_ulid(value):
        shown = node.text if isinstance(node, YamlScalar) else "a collection"
        raise error_at(
            path,
            node,
            f"`id` must be a ULID (26 upper-case Crockford base32 characters), not {shown!r}",
            "restore the document's original id; a new one breaks every link pointing at it",
        )
    return value


def _read_title(entry: tuple[YamlNode, YamlNode] | None, path: Path) -> str | None:
    if entry is None:
        return None
    _, node = entry
    value = plain_value(node, path, depth=1)
    if value is None:
        return None
    if not (isinstance(node, YamlScalar) and node.tag in STRING_TAGS):
        raise error_at(path, node, f"`title` must be a string, not {describe(value)}", 'quote it: title: "..."')
    return node.text  # what a string-tagged scalar's value is


def _read_tags(entry: tuple[YamlNode, YamlNode] | None, path: Path) -> tuple[str, ...]:
    items = _sequence_items(entry, "tags", path)
    tags: list[str] = []
    for node in items:
        value = plain_value(node, path, depth=2)
        if not (isinstance(node, YamlScalar) and node.tag in STRING_TAGS) or not isinstance(value, str) or not value:
            raise error_at(
                path,
                node,
                f"every tag must be a non-empty string, not {describe(value)}",
                "quote a tag that YAML reads as a number or a boolean: tags: ['0755', 'true']",
            )
        tags.append(value)
    return tuple(tags)


def _read_links(entry: tuple[YamlNode, YamlNode] | None, path: Path, kb_id: str) -> tuple[Link, ...]:
    links: list[Link] = []
    for node in _sequence_items(entry, "links", path):
        if not isinstance(node, YamlMapping):
            raise error_at(path, node, "a link must be a mapping with `target` and `rel`", _LINK_REMEDY)
        fields = mapping_entries(node, path)
        unknown = [key for key in fields if key not in LINK_FIELDS]
        if unknown:
            raise error_at(
                path,
                fields[unknown[0]][0],
                f"a link has only `target` and `rel`, not {unknown[0]!r}",
                "move notes about a link into a YAML comment",
            )
        missing = [key for key in LINK_FIELDS if key not in fields]
        if missing:
            raise error_at(path, node, f"this link has no `{missing[0]}`", _LINK_REMEDY)
        target_node, rel_node = fields["target"][1], fields["rel"][1]
        target, rel = plain_value(target_node, path, depth=3), plain_value(rel_node, path, depth=3)
        if not isinstance(rel, str) or not rel:
            raise error_at(
                path,
                rel_node,
                f"a link's `rel` must be a non-empty string, not {describe(rel)}",
                _LINK_REMEDY,
            )
        try:
            link_kb, link_doc = parse_pnk_uri(target, self_kb_id=kb_id)  # it refuses a non-string
        except PinakesError as exc:
            raise error_at(path, target_node, exc.message, exc.remedy) from None
        links.append(Link(kb_id=link_kb, doc_id=link_doc, rel=rel))
    return tuple(links)


_LINK_REMEDY = "write each link as `- target: pnk://<kb-ulid>/<doc-ulid>` with `rel: <relation>` below it"


def _read_provenance(entry: tuple[YamlNode, YamlNode] | None, path: Path) -> dict[str, JSONValue]:
    if entry is None:
        return {}
    _, node = entry
    refuse_anchor(node, path)
    if isinstance(node, YamlScalar) and node.tag == NULL:
        return {}  # `provenance:` left empty
    if not isinstance(node, YamlMapping):
        value = plain_value(node, path, depth=1)
        raise error_at(path, node, f"`provenance` must be a mapping, not {describe(value)}", FIX_IT)
    entries = mapping_entries(node, path)
    provenance = {key: plain_value(value, path, depth=2) for key, (_, value) in entries.items()}
    if "extraction" in provenance:
        _check_extraction(provenance["extraction"], entries["extraction"][1], path)
    return provenance


def _check_extraction(extraction: JSONValue, node: YamlNode, path: Path) -> None:
    remedy = (
        "provenance.extraction is written by a paid extraction; restore it from git, "
        "or re-run `pnk sync --extract=<backend>` to record it afresh"
    )
    if not isinstance(extraction, dict):
        raise error_at(
            path, node, f"`provenance.extraction` must be a mapping, not {describe(extraction)}", remedy
        )
    for field in EXTRACTION_FIELDS:
        if not isinstance(extraction.get(field), str) or not extraction[field]:
            raise error_at(path, node, f"`provenance.extraction.{field}` must be a non-empty string", remedy)


def _sequence_items(entry: tuple[YamlNode, YamlNode] | None, key: str, path: Path) -> list[YamlNode]:
    if entry is None:
        return []
    _, node = entry
    refuse_anchor(node, path)
    if isinstance(node, YamlScalar) and node.tag == NULL:
        return []  # `tags:` left empty
    if not isinstance(node, YamlSequence) or node.tag != SEQ:
        raise error_at(path, node, f"`{key}` must be a list", f"write it as {key}: [...] or as `- ` lines")
    return list(node.items)


def _text_location(text: str, position: int) -> tuple[int, int]:
    line_start = text.rfind("\n", 0, position) + 1
    return text.count("\n", 0, position) + 1, position - line_start + 1


def _byte_location(data: bytes, offset: int) -> tuple[int, int]:
    line_start = data.rfind(b"\n", 0, offset) + 1
    return data.count(b"\n", 0, offset) + 1, offset - line_start + 1
