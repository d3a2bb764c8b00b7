"""`pnk link` / `pnk unlink`: author a link by writing one sidecar, and `pnk link --add-kb`.

A link is authored forward: only the source document's sidecar is written, in the KB the command
acts on, never a file of the KB it points at (spec §2.2) — that KB learns of the link by its own
reverse scan of this KB's committed sidecars (§6.2), at its next sync (the command marks the change
in this KB's .pinakes/ so that scan is due: `reverse.mark_links_changed`). The write goes through the sidecar round-trip
writer (`update_sidecar`): rename-atomic, and every byte outside `links` is kept (the one
normalisation is the writer's by design: a `pnk://self/...` entry already in the list is written
out with this KB's ULID). It takes no lock: a concurrent write to the same sidecar can lose one
side's change, which atomicity does not order (spec §2.2); re-run the change that went missing.

Every input is resolved before anything is written: aliases to ULIDs, paths to the ids their
sidecars hold, and the target checked to exist in its KB. A self-loop, an unknown alias (the known
ones are listed), a target that is not there (named) and a source outside this KB are refused.

`--add-kb ALIAS DIR` appends one `[[links.kb]]` table to this KB's pinakes.toml (the one write to a
manifest besides `pnk upgrade --apply` and `pnk eval --fit-confidence --write`): appended, so every
existing byte stays; checked by loading the result before it replaces the file; rename-atomic.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from pinakes.display import clipped
from pinakes.errors import UsageError
from pinakes.ids import is_ulid
from pinakes.kb import MANIFEST_NAME, find_kb_root
from pinakes.links.addresses import DocumentRef, Here, here, resolve
from pinakes.manifest import load_manifest

_ALIAS = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_-]|\.(?!\.)){0,62}")  # usable as a tool argument too
MAX_REL_CHARS = 64


@dataclass
class LinkChange:
    """What `pnk link` / `pnk unlink` did (or found already done)."""

    source: DocumentRef
    target: DocumentRef
    rels: list[str]
    changed: bool
    sidecar: str  # KB-relative path of the sidecar written (or left as it was)
    notes: list[str] = field(default_factory=list[str])

    def to_dict(self) -> dict[str, object]:
        return {"source": _ref_dict(self.source), "target": _ref_dict(self.target), "rels": self.rels,
                "changed": self.changed, "sidecar": self.sidecar, "notes": self.notes}


@dataclass(frozen=True)
class AddedKB:
    alias: str
    kb_id: str
    path: str
    name: str

    def to_dict(self) -> dict[str, str]:
        return {"alias": self.alias, "id": self.kb_id, "path": self.path, "name": self.name}


# The index learns a sidecar's links when sync reads it; pnk link takes no lock, so it never writes there.
SYNC_TO_SEE = "run `pnk sync` to see it in `pnk links`, MCP pinakes_links and search (the index reads sidecars then)"


def link(start: Path | str | None, source: str, target: str, rel: str) -> LinkChange:
    """Add `source -> target` with `rel` to the source's sidecar (a no-op when it is there)."""
    from pinakes.sidecar import Link, read_sidecar, update_sidecar

    kb = here(start)
    relation = check_rel(rel)
    src = _source(kb, source)
    dst = resolve(kb, target)
    if (src.kb_id, src.doc_id) == (dst.kb_id, dst.doc_id):
        raise UsageError(f"{source!r} and {target!r} are the same document ({dst.doc_id}): a link to itself "
                         "says nothing", remedy="name two different documents")
    sidecar_path = _sidecar(src)
    current = read_sidecar(sidecar_path, kb_id=kb.kb_id)
    wanted = Link(kb_id=dst.kb_id, doc_id=dst.doc_id, rel=relation)
    change = LinkChange(src, dst, [relation], changed=wanted not in current.links, sidecar=str(src.sidecar_relative))
    if change.changed:
        update_sidecar(sidecar_path, kb_id=kb.kb_id, links=[*current.links, wanted])
        _announce(kb, dst)
        change.notes.append(SYNC_TO_SEE)
    else:
        change.notes.append(f"{src.path} already links to {dst.doc_id} as {relation!r}; nothing was written")
    change.notes.extend(_visibility_notes(kb, dst))
    return change


def unlink(start: Path | str | None, source: str, target: str, rel: str | None = None) -> LinkChange:
    """Remove the source's links to `target` (only those with `rel`, when given)."""
    from pinakes.sidecar import read_sidecar, update_sidecar

    kb = here(start)
    relation = check_rel(rel) if rel is not None else None
    src = _source(kb, source)
    dst = resolve(kb, target, locate=False)  # a target that is gone is exactly what one unlinks
    sidecar_path = _sidecar(src)
    current = read_sidecar(sidecar_path, kb_id=kb.kb_id)
    removed = [item for item in current.links if (item.kb_id, item.doc_id) == (dst.kb_id, dst.doc_id)
               and (relation is None or item.rel == relation)]
    if not removed:
        existing = ", ".join(f"{item.uri} ({item.rel})" for item in current.links) or "none"
        wanted = f" as {relation!r}" if relation is not None else ""
        raise UsageError(f"{src.path} has no link to {dst.kb_id}/{dst.doc_id}{wanted}; its links: {existing}",
                         remedy="name a link the sidecar holds (`pnk links ID --direction out` lists them)")
    update_sidecar(sidecar_path, kb_id=kb.kb_id, links=[item for item in current.links if item not in removed])
    _announce(kb, dst)
    return LinkChange(src, dst, [item.rel for item in removed], changed=True, sidecar=str(src.sidecar_relative),
                      notes=[SYNC_TO_SEE])


def add_kb(start: Path | str | None, alias: str, directory: str) -> AddedKB:
    """Append a `[[links.kb]]` for the KB at `directory`, named `alias` (see the module docstring)."""
    from pinakes.atomic import atomic_write_bytes
    from pinakes.manifest import parse_manifest

    kb = here(start)
    _check_alias(kb, alias)
    partner_root = Path(os.path.abspath(os.path.expanduser(directory)))
    try:
        os.stat(partner_root / MANIFEST_NAME)
    except (FileNotFoundError, NotADirectoryError):
        found = _enclosing_kb(partner_root)
        hint = f"; the KB containing it is {found}" if found is not None else ""
        raise UsageError(f"no pinakes.toml in {partner_root}{hint}", remedy="name the partner KB's root directory") \
            from None
    except OSError as exc:
        raise UsageError(f"cannot read {partner_root} ({exc.strerror or type(exc).__name__}); nothing was written",
                         remedy="check its permissions (and any symbolic link on the way), then run it again") \
            from None
    partner = load_manifest(partner_root / MANIFEST_NAME)
    if partner.kb.id == kb.kb_id:
        raise UsageError(f"{partner_root} is this KB ({kb.kb_id})", remedy="name another KB's directory")
    listed = next((linked for linked in kb.manifest.links if linked.id == partner.kb.id), None)
    if listed is not None:
        raise UsageError(f"KB {partner.kb.id} is already linked as {listed.alias!r} (path {listed.path})",
                         remedy="edit that [[links.kb]] in pinakes.toml to change its alias or path")
    relative = Path(os.path.relpath(os.path.realpath(partner_root), kb.root)).as_posix()
    manifest_path = kb.root / MANIFEST_NAME
    data = manifest_path.read_bytes()
    text = data.decode("utf-8")
    newline = "\r\n" if "\r\n" in text else "\n"
    block = newline.join(["", "[[links.kb]]", f"id = {_toml_string(partner.kb.id)}",
                          f"alias = {_toml_string(alias)}", f"path = {_toml_string(relative)}", ""])
    separator = "" if not text or text.endswith(newline) else newline
    new_text = text + separator + block
    parse_manifest(new_text, path=manifest_path)  # refuses (ManifestError) before anything is written
    atomic_write_bytes(manifest_path, new_text.encode("utf-8"))
    return AddedKB(alias, partner.kb.id, relative, partner.kb.name)


def _announce(kb: Here, target: DocumentRef) -> None:
    """A link into another KB: mark it, so that KB's next sync scans this one (not only when its
    freshness window ends), whether or not this KB syncs first."""
    if target.kb_id != kb.kb_id:
        from pinakes.kb import KBPaths
        from pinakes.links.reverse import mark_links_changed

        mark_links_changed(KBPaths(kb.root).state_dir)


def check_rel(rel: str) -> str:
    value = rel.strip()
    if not value or len(value) > MAX_REL_CHARS or any(not char.isprintable() for char in value):
        raise UsageError(f"--rel {clipped(rel, MAX_REL_CHARS + 2)!r} is not a relation name",
                         remedy=f"pass a short word such as cites, extends or see-also (at most {MAX_REL_CHARS} "
                                "printable characters)")
    return value


def _source(kb: Here, source: str) -> DocumentRef:
    ref = resolve(kb, source)
    if ref.kb_id != kb.kb_id:
        raise UsageError(f"{source!r} is a document of KB {ref.kb_id}, not of this KB ({kb.kb_id}); a link is "
                         "written into its source's sidecar, in the source's own KB",
                         remedy=f"run it there: pnk -C {ref.root} link ..." if ref.root else
                                "run it in the KB the source document belongs to")
    return ref


def _sidecar(ref: DocumentRef) -> Path:
    sidecar = ref.sidecar
    if sidecar is None or not sidecar.is_file():
        raise UsageError(f"{ref.path or ref.doc_id} has no sidecar on disk",
                         remedy="run `pnk sync` (it mints the sidecar) and try again")
    return sidecar


def _visibility_notes(kb: Here, target: DocumentRef) -> list[str]:
    """When the target's KB is on this machine but does not list this one, it will never scan this
    link: say so, with the command that fixes it."""
    if target.kb_id == kb.kb_id or target.root is None:
        return []
    try:
        partner = load_manifest(target.root / MANIFEST_NAME)
    except Exception:
        return []
    if any(linked.id == kb.kb_id for linked in partner.links):
        return []
    back = Path(os.path.relpath(kb.root, target.root)).as_posix()
    return [f"KB {partner.kb.name!r} does not list this KB in its [[links.kb]], so it will not see this link "
            f"as inbound until it does: pnk -C {target.root} link --add-kb ALIAS {back}"]


def _check_alias(kb: Here, alias: str) -> None:
    if alias == "self" or not _ALIAS.fullmatch(alias) or is_ulid(alias.upper()):
        raise UsageError(f"{alias!r} cannot be a KB alias",
                         remedy="use letters, digits, '-', '_' and single dots (not `self`, not a ULID)")
    if alias in kb.aliases:
        raise UsageError(f"the alias {alias!r} is already used by KB {kb.aliases[alias]}",
                         remedy=f"choose another; the aliases in use are {', '.join(sorted(kb.aliases))}")


def _enclosing_kb(directory: Path) -> Path | None:
    try:
        return find_kb_root(directory)
    except Exception:
        return None


def _toml_string(value: str) -> str:
    # A TOML basic string: JSON's escapes (\" \\ \n \uXXXX) are TOML's too.
    return json.dumps(value, ensure_ascii=False)


def _ref_dict(ref: DocumentRef) -> dict[str, object]:
    return {"kb_id": ref.kb_id, "doc_id": ref.doc_id, "path": ref.path, "title": ref.title}
