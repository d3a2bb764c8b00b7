"""Rewriting a KB's pinakes.toml in place: one table replaced by a block of text, every other byte kept.

Two commands write a manifest a user owns: `pnk upgrade --apply` (key by key) and `pnk eval
--fit-confidence --write` (one whole table, `[retrieval.confidence]`, with any `[retrieval.confidence.*]`
sub-table). Both go through `replace_manifest`: a backup beside the file, a rename-atomic write, the
result loaded again and the backup put back if it does not load (the KB's .gitignore, where there is
one, is given the rule that ignores the backups: `keep_backups_out_of_git`, through the same
`ensure_gitignore` that `pnk init` writes a new KB's `.gitignore` with). Neither
takes the sync lock: a manifest is the user's file, which a sync only reads, and the rename means a
reader sees the old file or the new one, never half of each.

Where a table's block is (`replace_table`), decided on lines located by `pinakes.manifest.lines` (the
same reader `pnk upgrade` places keys with, so a multi-line value is never mistaken for a header):

  - a live table: from its header line to the last line before the next header that is not blank or
    a comment. Comments and blank lines directly above the header stay (they describe the table, or
    end the one before it); those after its last key stay too (they usually introduce the next
    table); comments between its keys, and one on the header line, go with the block they annotated.
  - no live table but the template's commented-out one (`# [retrieval.confidence]` and the `# key =`
    lines under it): those placeholder lines become the block; the prose above them stays.
  - neither: after the parent table's (`[retrieval]`) last key, then at the end of the file.

The newline is the file's own (CRLF if any line uses it). The result is accepted only if `tomllib`
reads it as exactly the old document with that one table replaced, so a placement this reader got
wrong is refused rather than written; the caller then validates it as a manifest.
"""

from __future__ import annotations

import copy
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pinakes.errors import ManifestError, PinakesError
from pinakes.manifest.lines import layout
from pinakes.manifest.table import TomlValue

_COMMENTED_KEY = re.compile(r"\s*#\s*[A-Za-z0-9_-]+\s*=")

GitignoreAction = Literal["created", "appended", "unchanged"]


@dataclass(frozen=True)
class TableWrite:
    path: Path
    placement: str  # "replaced" | "placeholder" | "inserted" | "appended" | "unchanged"
    backup: Path | None  # None: nothing was written (the file already held exactly this block)


def write_table(path: Path, table: str, block: str, *, expected: bytes | None = None,
                backup_label: str, command: str = "pnk eval --fit-confidence") -> TableWrite:
    """Replace `table` (dotted, e.g. "retrieval.confidence") in the manifest at `path` with `block`,
    or refuse with the file untouched: when it changed since `expected` was read, when the block
    cannot be placed, or when the result is not a valid manifest. `command` is the fit that printed
    the block, named in a refusal's remedy."""
    from pinakes.manifest import parse_manifest

    original = path.read_bytes()
    if expected is not None and original != expected:
        raise ManifestError(f"{path.name} changed while the fit ran; nothing was written",
                            remedy=f"run `{command} --write` again", path=path)
    text = original.decode("utf-8")
    new_text, placement = replace_table(text, table, block, path=path, command=command)
    if new_text == text:
        return TableWrite(path, "unchanged", None)
    parse_manifest(new_text, path=path)  # an InvalidManifestError here leaves the file as it was
    backup = replace_manifest(path, original, new_text, backup_label)
    return TableWrite(path, placement, backup)


def replace_manifest(path: Path, original: bytes, new_text: str, backup_label: str) -> Path:
    """Back `original` up beside `path`, write `new_text` atomically, and put the backup's bytes back
    if the result does not load; a write refused outright (a read-only or immutable file) leaves no
    backup behind. Returns the backup's path."""
    from pinakes.atomic import atomic_write_bytes
    from pinakes.manifest import load_manifest

    backup = backup_path(path, backup_label)
    atomic_write_bytes(backup, original, exclusive=True)
    try:
        atomic_write_bytes(path, new_text.encode("utf-8"))
    except BaseException:
        if _holds(path, original):  # refused before the rename: a copy of an untouched file is clutter
            backup.unlink(missing_ok=True)
        raise
    try:
        load_manifest(path)
    except PinakesError:
        atomic_write_bytes(path, original)
        raise
    keep_backups_out_of_git(path.parent)  # a KB made before its .gitignore named the backups
    return backup


def keep_backups_out_of_git(root: Path) -> GitignoreAction | None:
    """Add what a KB's `.gitignore` lacks of the rules `pnk init` writes (the manifest backups that
    `pnk upgrade --apply` and `pnk eval --fit-confidence --write` keep, for a KB made before the rule
    existed). Only a `.gitignore` that is there is touched, and a failure to write it is no failure
    of the command that made the backup: None."""
    path = root / ".gitignore"
    if not path.is_file():
        return None
    from pinakes.template_catalog import DEFAULT_TEMPLATE, TemplateCatalog

    try:
        return ensure_gitignore(path, TemplateCatalog().gitignore_block(DEFAULT_TEMPLATE))
    except (PinakesError, OSError):
        return None


def ensure_gitignore(path: Path, block: str) -> GitignoreAction:
    """Create `.gitignore` from `block`, or append the stanzas of it (a rule with the comment lines
    above it) whose rule the file does not already hold, keeping every byte that was there. An
    OSError of the read is the caller's to word (init: a FilesystemError; a rewrite: no failure)."""
    from pinakes.atomic import atomic_write_bytes

    try:
        existing = path.read_bytes().decode("utf-8", errors="surrogateescape")
    except FileNotFoundError:
        atomic_write_bytes(path, block.encode("utf-8"))
        return "created"
    present = {line.strip() for line in existing.splitlines()}
    missing = [stanza for rule, stanza in _stanzas(block) if not present & _spellings(rule)]
    if not missing:
        return "unchanged"
    newline = "\r\n" if "\r\n" in existing else "\n"
    separator = "" if not existing else (newline if existing.endswith("\n") else newline * 2)
    addition = "".join(missing).replace("\n", newline)
    atomic_write_bytes(path, (existing + separator + addition).encode("utf-8", errors="surrogateescape"))
    return "appended"


def _stanzas(block: str) -> list[tuple[str, str]]:
    """(rule, its text: the comment lines directly above it and the rule line) for each rule."""
    stanzas: list[tuple[str, str]] = []
    pending: list[str] = []
    for line in block.splitlines(keepends=True):
        pending.append(line)
        if line.strip() and not line.lstrip().startswith("#"):
            stanzas.append((line.strip(), "".join(pending)))
            pending = []
    return stanzas


def _spellings(rule: str) -> set[str]:
    """The lines that ignore what `rule` does at the KB root: with or without the leading or the
    trailing slash (`.pinakes`, `/.pinakes/`, ...)."""
    bare = rule.strip("/")
    return {bare, f"/{bare}", f"{bare}/", f"/{bare}/"}


def _holds(path: Path, data: bytes) -> bool:
    try:
        return path.read_bytes() == data
    except OSError:
        return False


def backup_path(path: Path, label: str) -> Path:
    """`pinakes.toml.<label>.bak` beside the manifest; never one that exists."""
    candidate = path.with_name(f"{path.name}.{label}.bak")
    counter = 1
    while candidate.exists():
        candidate = path.with_name(f"{path.name}.{label}.{counter}.bak")
        counter += 1
    return candidate


def replace_table(text: str, table: str, block: str, *, path: Path,
                  command: str = "pnk eval --fit-confidence") -> tuple[str, str]:
    """(`text` with `table` replaced by `block`, where it was placed); see the module docstring."""
    try:
        before = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"{path.name} is not valid TOML ({exc}); nothing was written",
                            remedy="fix it (`pnk doctor` names the problem), then run the command again",
                            path=path) from None
    wanted = _expected(before, table, block)
    document = _Document(text)
    block_lines = [line.rstrip("\r\n") + document.newline for line in block.splitlines()]
    for placement, lines in document.candidates(table, block_lines):
        candidate = "".join(lines)
        if _loads_or_none(candidate) == wanted:
            return candidate, placement
    raise ManifestError(f"cannot place [{table}] in {path.name} without changing anything else (it is "
                        "written as an inline table or dotted keys, or between keys); nothing was written",
                        remedy=f"replace [{table}] by hand with the block printed by `{command}`",
                        path=path)


def _expected(before: dict[str, TomlValue], table: str, block: str) -> dict[str, TomlValue]:
    """The document `before` with `table` set to the block's own table (and nothing else changed)."""
    parts = table.split(".")
    block_data: TomlValue = tomllib.loads(block)
    for part in parts:
        if not isinstance(block_data, dict) or set(block_data) != {part}:
            raise ValueError(f"the block must hold exactly [{table}], got {block!r}")
        block_data = block_data[part]
    wanted = copy.deepcopy(before)
    parent = wanted
    for part in parts[:-1]:
        child = parent.setdefault(part, {})
        if not isinstance(child, dict):  # `part = 1`: no table to set the block in
            raise ValueError(f"[{table}] cannot be set: {part} is not a table")
        parent = child
    parent[parts[-1]] = block_data
    return wanted


def _loads_or_none(text: str) -> dict[str, TomlValue] | None:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None


class _Document:
    """The file's lines, which of them are table headers, and the ways a block can go in."""

    def __init__(self, text: str):
        found = layout(text)
        self.lines = found.lines
        self.newline = found.newline
        inside_values = {index for span in found.keys.values() for index in range(span.start + 1, span.end)}
        section_of = {line: section for section, line in found.headers.items()}
        self.headers: list[tuple[int, str | None]] = [
            (index, section_of.get(index)) for index, line in enumerate(self.lines)
            if index not in inside_values and line.lstrip().startswith("[")]
        self.inside_values = inside_values

    def candidates(self, table: str, block: list[str]) -> list[tuple[str, list[str]]]:
        live = [(start, self._content_end(start)) for start, name in self.headers
                if name is not None and (name == table or name.startswith(table + "."))]
        if live:
            return [("replaced", self._replace_regions(live, block))]
        options: list[tuple[str, list[str]]] = []
        placeholder = self._placeholder(table)
        if placeholder is not None:
            options.append(("placeholder", self._replace_regions([placeholder], block)))
        parent = table.rsplit(".", 1)[0] if "." in table else None
        parent_header = next((start for start, name in self.headers if name == parent), None)
        if parent_header is not None:
            options.append(("inserted", self._insert_after(self._content_end(parent_header), block)))
        options.append(("appended", self._insert_after(len(self.lines), block)))
        return options

    def _content_end(self, header: int) -> int:
        """One past the last line of the table headed at `header` that is neither blank nor a comment."""
        following = next((start for start, _ in self.headers if start > header), len(self.lines))
        end = following
        while end > header + 1 and self._is_blank_or_comment(end - 1):
            end -= 1
        return end

    def _is_blank_or_comment(self, index: int) -> bool:
        stripped = self.lines[index].strip()
        return index not in self.inside_values and (not stripped or stripped.startswith("#"))

    def _placeholder(self, table: str) -> tuple[int, int] | None:
        header = re.compile(r"\s*#\s*\[\s*" + r"\s*\.\s*".join(map(re.escape, table.split("."))) + r"\s*\]\s*")
        for index, line in enumerate(self.lines):
            if index not in self.inside_values and header.fullmatch(line.rstrip("\r\n")):
                end = index + 1
                while end < len(self.lines) and _COMMENTED_KEY.match(self.lines[end]):
                    end += 1
                return index, end
        return None

    def _replace_regions(self, regions: list[tuple[int, int]], block: list[str]) -> list[str]:
        """The first region becomes `block`; the others (sub-tables elsewhere) are removed."""
        lines = list(self.lines)
        for number, (start, end) in enumerate(sorted(regions, reverse=True)):
            first = number == len(regions) - 1
            replacement = list(block) if first else []
            if end == len(lines) and lines and not lines[-1].endswith("\n") and replacement:
                replacement[-1] = replacement[-1].rstrip("\r\n")  # the file ended without a newline
            lines[start:end] = replacement
        return lines

    def _insert_after(self, index: int, block: list[str]) -> list[str]:
        """`block` as its own paragraph after line `index - 1`: a blank line before it, and one after
        it unless a blank line or the end of the file follows already."""
        head, tail = list(self.lines[:index]), list(self.lines[index:])
        lead = [] if not head or head[-1].endswith("\n") else [self.newline]
        trail = [self.newline] if tail and tail[0].strip() else []
        return head + lead + ([self.newline] if head else []) + list(block) + trail + tail
