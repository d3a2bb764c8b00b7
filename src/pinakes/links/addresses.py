"""What a person types to name a document, resolved to (KB ULID, document ULID): the one grammar.

`pnk get`, `pnk link`, `pnk unlink` and `pnk links` accept, for a document:

- a path to the document (or to its sidecar), relative to the working directory; the KB is the one
  containing it, which may be this KB or a connected one;
- a document ULID: a document of this KB;
- `ALIAS:PATH` or `ALIAS:ULID`: a document of the `[[links.kb]]` KB with that alias (`self:` is this
  KB), the path relative to that KB's root;
- a `pnk://<kb-ulid|alias|self>/<doc-ulid>` URI.

`name_form` says which of these a text is; a narrower grammar is a subset of its forms (MCP's
`pinakes_get` / `pinakes_links` take a document ULID only, and then the filesystem is never looked
at). `pnk get` takes any form naming a document of this KB (`resolve_in_kb`). A path is read where
`typed_path` says it points, which is also how `pnk adopt` reads its two paths.

Aliases are resolved to ULIDs here, before anything is written (spec §2.2): a link never depends on
a name that exists on one machine only. A document's id is read from its sidecar, the committed
truth, with the id of the KB that owns it as owner. An existing document is found by id through the
KB's index when it has one (checked against the sidecar on disk), else by reading its sidecars.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pinakes.errors import PinakesError, UsageError
from pinakes.ids import PNK_SCHEME, SELF_KB, is_ulid, parse_pnk_uri
from pinakes.kb import MANIFEST_NAME, SIDECAR_SUFFIX, find_kb_root
from pinakes.manifest import Manifest, load_manifest

NameForm = Literal["ulid", "uri", "alias", "path"]
EVERY_FORM: tuple[NameForm, ...] = ("ulid", "uri", "alias", "path")


@dataclass(frozen=True)
class DocumentRef:
    """A resolved document. `root` is None when its KB is not on this machine (or not known)."""

    kb_id: str
    doc_id: str
    root: Path | None = None
    path: str | None = None  # KB-root-relative, POSIX
    title: str | None = None

    @property
    def sidecar(self) -> Path | None:
        return self.root / (self.path + SIDECAR_SUFFIX) if self.root is not None and self.path else None

    @property
    def sidecar_relative(self) -> str | None:
        return self.path + SIDECAR_SUFFIX if self.path else None


@dataclass(frozen=True)
class Here:
    """The KB a command acts on, and the names it knows for other KBs."""

    root: Path
    manifest: Manifest

    @property
    def kb_id(self) -> str:
        return self.manifest.kb.id

    @property
    def aliases(self) -> dict[str, str]:
        return {linked.alias: linked.id for linked in self.manifest.links}

    def root_of(self, kb_id: str) -> Path | None:
        """Where the KB with this id lives on this machine (this KB, or a [[links.kb]] path that
        holds a KB whose own id matches); None when it is not here."""
        if kb_id == self.kb_id:
            return self.root
        from pinakes.links.reverse import PartnerError, open_partner

        linked = self.manifest.link(kb_id)
        if linked is None:
            return None
        try:
            return open_partner(self.root, linked)[0]
        except PartnerError:
            return None

    def known_aliases(self) -> str:
        names = ", ".join(sorted(self.aliases)) or "none: add one with `pnk link --add-kb ALIAS DIR`"
        return f"self (this KB) and the [[links.kb]] aliases: {names}"


def here(start: Path | str | None) -> Here:
    root = find_kb_root(start)
    return Here(root, load_manifest(root / MANIFEST_NAME))


def name_form(text: str, *, accept: Sequence[NameForm] = EVERY_FORM) -> NameForm | None:
    """Which way `text` names a document, or None when that form is not in `accept`. A text that is
    also an existing file's path is that path; only a grammar that accepts paths looks."""
    value = text.strip()
    is_file = "path" in accept and os.path.exists(value)
    form: NameForm
    if value.startswith(PNK_SCHEME):
        form = "uri"
    elif is_ulid(value.upper()) and not is_file:
        form = "ulid"
    elif ":" in value and not is_file:
        form = "alias"
    else:
        form = "path"
    return form if form in accept else None


def typed_path(kb_root: Path, text: str | Path) -> Path:
    """Where a path typed on the command line points: from the working directory when that names
    something inside the KB, else from the KB's root when that names something (a KB-relative path,
    as sync and `pnk status` print them, given from elsewhere: -C, a subfolder), else from the working
    directory when that names something (a connected KB's document), else from the KB's root."""
    path = Path(text)
    if path.is_absolute():
        return path
    from_cwd, from_root = Path.cwd() / path, kb_root / path
    if from_cwd.exists() and from_cwd.resolve().is_relative_to(kb_root.resolve()):
        return from_cwd
    if from_root.exists() or not from_cwd.exists():
        return from_root
    return from_cwd


def resolve_in_kb(kb_root: Path, text: str) -> str:
    """The ULID of the document of the KB at `kb_root` that `text` names, in any form; an id is
    taken as given (the caller's lookup says whether it is there), a path must have its sidecar."""
    kb = here(kb_root)
    ref = resolve(kb, text, locate=False)
    if ref.kb_id != kb.kb_id:
        raise UsageError(f"{text.strip()} names a document in another KB ({ref.kb_id}); this KB is {kb.kb_id}",
                         remedy="run `pnk -C DIR ...` with DIR inside that KB")
    return ref.doc_id


def resolve(kb: Here, text: str, *, locate: bool = True) -> DocumentRef:
    """The document `text` names. With `locate`, it must exist: its KB on this machine, its sidecar
    holding the id (refusals name what is missing); without, an id-only form is taken as given.
    A file or folder on the way that cannot be read is a refusal naming it, never a crash."""
    try:
        return _resolve(kb, text, locate=locate)
    except OSError as exc:
        where = os.fsdecode(exc.filename) if exc.filename else text
        raise UsageError(f"cannot read {where} while looking for {text!r} ({exc.strerror or type(exc).__name__})",
                         remedy="check the permissions of that path (and any symbolic link on the way)") from None
    except RuntimeError as exc:  # pathlib's resolve() reports a symbolic-link loop this way
        if not str(exc).startswith("Symlink loop"):
            raise
        raise UsageError(f"{text!r} leads into a symbolic-link loop ({exc})",
                         remedy="fix or remove the looping link") from None


def _resolve(kb: Here, text: str, *, locate: bool) -> DocumentRef:
    value = text.strip()
    if not value:
        raise UsageError("an empty document reference", remedy=_FORMS)
    form = name_form(value)
    if form == "uri":
        kb_id, doc_id = parse_pnk_uri(value, self_kb_id=kb.kb_id, aliases=kb.aliases)
        return _by_id(kb, kb_id, doc_id, value) if locate else DocumentRef(kb_id, doc_id)
    if form == "ulid":
        return _by_id(kb, kb.kb_id, value.upper(), value) if locate else DocumentRef(kb.kb_id, value.upper())
    if form == "alias":
        prefix, _colon, rest = value.partition(":")
        if prefix != SELF_KB and prefix not in kb.aliases:
            raise UsageError(f"{prefix!r} in {value!r} is not a known KB alias",
                             remedy=f"use {kb.known_aliases()}, or a path or document ULID")
        kb_id = kb.kb_id if prefix == SELF_KB else kb.aliases[prefix]
        if is_ulid(rest.upper()):
            return _by_id(kb, kb_id, rest.upper(), value) if locate else DocumentRef(kb_id, rest.upper())
        root = kb.root_of(kb_id)
        if root is None:
            raise _not_on_this_machine(kb, kb_id, value)
        return _by_path(root, root / rest, value)
    return _by_path(None, typed_path(kb.root, value), value)


def _by_path(root: Path | None, path: Path, shown: str) -> DocumentRef:
    """The document at `path` (or whose sidecar is `path`), with the id its sidecar holds."""
    from pinakes.sidecar import read_sidecar, sidecar_path_for

    if path.name.endswith(SIDECAR_SUFFIX):
        path = path.with_name(path.name[: -len(SIDECAR_SUFFIX)])
    absolute = Path(os.path.abspath(path))
    if not absolute.is_file():
        raise UsageError(f"no document at {shown!r} ({absolute} is not a file)",
                         remedy=f"name an existing document: {_FORMS}")
    kb_root = root or find_kb_root(absolute.parent)
    kb_root = kb_root.resolve()
    try:
        relative = absolute.resolve().relative_to(kb_root).as_posix()
    except ValueError:
        raise UsageError(f"{shown!r} lies outside the KB at {kb_root}", remedy=_FORMS) from None
    owner = load_manifest(kb_root / MANIFEST_NAME).kb.id  # its own id: what its `pnk://self/` means
    sidecar = sidecar_path_for(kb_root / relative)
    if not sidecar.is_file():
        raise UsageError(f"{relative} has no sidecar yet, so no document id",
                         remedy=f"run `pnk -C {kb_root} sync` first (it mints the id); pnk link never mints one")
    found = read_sidecar(sidecar, kb_id=owner)
    return DocumentRef(owner, found.id, kb_root, relative, found.title)


def _by_id(kb: Here, kb_id: str, doc_id: str, shown: str) -> DocumentRef:
    root = kb.root_of(kb_id)
    if root is None:
        raise _not_on_this_machine(kb, kb_id, shown)
    found = find_by_id(root, kb_id, doc_id)
    if found is None:
        where = "this KB" if kb_id == kb.kb_id else f"KB {kb_id} ({root})"
        raise UsageError(f"no document {doc_id} in {where}: no sidecar there holds that id",
                         remedy=f"check the id (`pnk -C {root} list` shows each document's), or link "
                                "by path: ALIAS:PATH")
    return found


def find_by_id(root: Path, kb_id: str, doc_id: str) -> DocumentRef | None:
    """The document of the KB at `root` whose sidecar holds `doc_id`: through the KB's index when it
    has one (confirmed by the sidecar on disk, which is the truth), else by reading its sidecars."""
    from pinakes.sidecar import read_sidecar

    candidate = _indexed_path(root, doc_id)
    if candidate is not None:
        sidecar = root / (candidate + SIDECAR_SUFFIX)
        try:
            found = read_sidecar(sidecar, kb_id=kb_id)
        except PinakesError:
            found = None
        if found is not None and found.id == doc_id and (root / candidate).is_file():
            return DocumentRef(kb_id, doc_id, root, candidate, found.title)
    from pinakes.sources.walk import walk

    manifest = load_manifest(root / MANIFEST_NAME)
    for document, state in sorted(walk(root, manifest.sources, {}, hash_contents=False).sidecars.items()):
        try:
            found = read_sidecar(root / state.path, kb_id=kb_id)
        except PinakesError:
            continue  # an unreadable sidecar is not the one asked for; sync and doctor report it
        if found.id == doc_id:
            return DocumentRef(kb_id, doc_id, root, document, found.title)
    return None


def _indexed_path(root: Path, doc_id: str) -> str | None:
    from pinakes.index import schema
    from pinakes.kb import KBPaths

    index_db = KBPaths(root).index_db
    if not index_db.exists():
        return None
    try:
        conn = schema.open_reader(index_db)
    except PinakesError:
        return None
    try:
        row = conn.execute("SELECT path FROM documents WHERE id = ? AND state = 'active'", (doc_id,)).fetchone()
    except Exception:
        return None
    finally:
        conn.close()
    return row[0] if row else None


def _not_on_this_machine(kb: Here, kb_id: str, shown: str) -> UsageError:
    listed = next((linked for linked in kb.manifest.links if linked.id == kb_id), None)
    if listed is None:
        return UsageError(f"{shown!r} names KB {kb_id}, which is not in this KB's [[links.kb]], so the "
                          "document cannot be checked", remedy="add it first: pnk link --add-kb ALIAS DIR")
    from pinakes.links.reverse import PartnerError, open_partner

    try:
        open_partner(kb.root, listed)
        why = f"is not at {listed.path} on this machine"
        remedy = f"fix `path` of [[links.kb]] {listed.alias!r} in pinakes.toml"
    except PartnerError as exc:
        why, remedy = f"cannot be used here: {exc.message}", exc.remedy or ""
    return UsageError(f"{shown!r} names KB {listed.alias!r} ({kb_id}), which {why}; so the document cannot be "
                      "checked", remedy=remedy)


_FORMS = ("a document is named by a path, a document ULID of this KB, ALIAS:PATH or ALIAS:ULID for a "
          "[[links.kb]] KB (self: for this one), or pnk://<kb>/<doc>")
