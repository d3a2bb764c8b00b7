"""Which document a link written in text names, resolved as Obsidian resolves it: a pure function of
the link, the path of the document it is in, and the KB's document paths (`PathIndex`).

The rules, in order (Obsidian's help, "Internal links"; its tie-break as observed through its
`metadataCache.getFirstLinkpathDest` and reported in public issue trackers, docs/GUIDE.md):

1. A path starting `./` or `../` is relative to the linking document's folder, and only that: an
   exact path or nothing (a leading `/` is the KB root, likewise exact).
2. A Markdown link's destination (inline, image or reference-style) is first read as CommonMark
   reads it, relative to the linking document's folder.
3. The path from the KB root: `[[Projects/Three laws of motion]]` is that file.
4. Else by file name, anywhere in the KB: a Markdown document's name without its extension
   (`[[Note]]`, `[[Note.md]]`), any other document's name with it (`[[Figure 1.pdf]]`); a path
   given with the name must end the candidate's path (`[[b/Note]]` matches `a/b/Note.md`). With
   several candidates: the one in the linking document's own folder, else the shortest path
   (string length), else the first in path order; such a link is `ambiguous` and reported.

Matching ignores case and Unicode normalisation (NFC), as Obsidian does on every platform. What
is not a rule: a front-matter alias never resolves a link (Obsidian offers aliases as
suggestions only, and leaves `[[Alias]]` unresolved), so neither does Pinakes. A link none of the
rules resolves is `unresolved`, unless it names a file type Obsidian embeds and Pinakes does not
index (an image, audio, video, canvas or a PDF outside the sources): that is an `attachment`, not a
document, and is neither an edge nor a problem.
"""

from __future__ import annotations

import posixpath
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

Status = Literal["resolved", "ambiguous", "unresolved", "attachment"]

# What a Markdown document's name is written without (Obsidian: `.md`; Pinakes reads these as
# Markdown too).
MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdown", ".mkd")
# Obsidian's accepted file formats other than notes ("Accepted file formats"): a link to one that
# is not a document of the KB names a file Pinakes does not index.
ATTACHMENT_SUFFIXES = frozenset({
    ".avif", ".bmp", ".gif", ".jpeg", ".jpg", ".png", ".svg", ".webp",  # images
    ".flac", ".m4a", ".mp3", ".ogg", ".wav", ".webm", ".3gp",  # audio
    ".mkv", ".mov", ".mp4", ".ogv",  # video
    ".pdf", ".canvas", ".base",
})
# Syntaxes whose destination CommonMark reads relative to the document (rule 2).
RELATIVE_SYNTAXES = frozenset({"markdown", "image", "reference"})


@dataclass(frozen=True)
class Resolution:
    status: Status
    path: str | None = None  # the document resolved to (resolved, ambiguous)
    candidates: int = 0  # documents that matched by name (ambiguous: more than one)


def _key(path: str) -> str:
    return unicodedata.normalize("NFC", path).casefold()


def name_key(path: str) -> str:
    """The last component of `path` as the resolver matches it (NFC, case-folded)."""
    return _key(path).rsplit("/", 1)[-1]


class PathLookup(Protocol):
    """What `resolve_link` asks of the KB's paths: a document at an exact path, documents by name."""

    def exact_path(self, path: str) -> str | None: ...

    def named(self, name: str) -> Sequence[str]: ...


class PathIndex:
    """The KB's document paths (KB-root-relative, POSIX), looked up as links name them."""

    def __init__(self, paths: Iterable[str]):
        self.exact: dict[str, str] = {}
        self.by_name: dict[str, list[str]] = {}
        for path in sorted(paths):
            key = _key(path)
            self.exact.setdefault(key, path)
            name = key.rsplit("/", 1)[-1]
            self.by_name.setdefault(name, []).append(path)
            stem = _without_markdown_suffix(name)
            if stem is not None:
                self.by_name.setdefault(stem, []).append(path)

    def exact_path(self, path: str) -> str | None:
        """The document at `path` (case-insensitive), or at `path` plus a Markdown suffix."""
        key = _key(path)
        found = self.exact.get(key)
        if found is None:
            found = next((self.exact[key + suffix] for suffix in MARKDOWN_SUFFIXES if key + suffix in self.exact), None)
        return found

    def named(self, name: str) -> Sequence[str]:
        """The documents whose name, or Markdown name without its suffix, is `name` (a key), in path
        order."""
        return self.by_name.get(name, ())


@dataclass
class NamesLookedUp:
    """A `PathLookup` that finds nothing and remembers the name keys it was asked about, with each
    Markdown suffix added: every name key a document must have for some lookup to find it.

    A link's lookups are a prefix of those it makes when nothing is found (each rule is tried only
    when the ones before it found nothing), so `resolve_link` over a `PathIndex` of only the paths
    whose `name_key` is in `names` resolves it exactly as over every path of the KB: each exact key
    and each name it looks up finds the same paths, in the same (path) order."""

    names: set[str] = field(default_factory=lambda: set[str]())

    def exact_path(self, path: str) -> str | None:
        self._add(name_key(path))
        return None

    def named(self, name: str) -> Sequence[str]:
        self._add(name)
        return ()

    def _add(self, name: str) -> None:
        self.names.add(name)
        self.names.update(name + suffix for suffix in MARKDOWN_SUFFIXES)


def _without_markdown_suffix(name: str) -> str | None:
    return next((name[: -len(suffix)] for suffix in MARKDOWN_SUFFIXES if name.endswith(suffix) and
                 len(name) > len(suffix)), None)


def resolve_link(target: str, syntax: str, source_path: str, index: PathLookup) -> Resolution:
    """The document `target` (a link's path part, as `links.text_links` parsed it) names from the
    document at `source_path`."""
    folder = posixpath.dirname(source_path)
    linkpath = target.strip().replace("\\", "/")
    if linkpath.startswith(("./", "../", "/")):
        joined = linkpath.lstrip("/") if linkpath.startswith("/") else posixpath.join(folder, linkpath)
        normal = posixpath.normpath(joined)
        found = None if normal.startswith("../") or normal == ".." else index.exact_path(normal)
        return Resolution("resolved", found, 1) if found else _missing(linkpath)
    if syntax in RELATIVE_SYNTAXES and folder:
        found = index.exact_path(posixpath.normpath(posixpath.join(folder, linkpath)))
        if found is not None:
            return Resolution("resolved", found, 1)
    found = index.exact_path(linkpath)
    if found is not None:
        return Resolution("resolved", found, 1)
    wanted = _key(linkpath)
    name = wanted.rsplit("/", 1)[-1]
    candidates = [path for path in index.named(name) if _ends_with(path, wanted)]
    if not candidates:
        return _missing(linkpath)
    if len(candidates) == 1:
        return Resolution("resolved", candidates[0], 1)
    same_folder = [path for path in candidates if posixpath.dirname(path) == folder]
    chosen = same_folder[0] if same_folder else min(candidates, key=lambda path: (len(path), path))
    return Resolution("ambiguous", chosen, len(candidates))


def _ends_with(path: str, wanted: str) -> bool:
    """Whether `path` (with or without its Markdown suffix) is `wanted` or ends with `/wanted`."""
    key = _key(path)
    forms = [key]
    stem = _without_markdown_suffix(key)
    if stem is not None:
        forms.append(stem)
    return any(form == wanted or form.endswith("/" + wanted) for form in forms)


def _missing(linkpath: str) -> Resolution:
    name = linkpath.rsplit("/", 1)[-1].lower()
    dot = name.rfind(".")
    if dot > 0 and name[dot:] in ATTACHMENT_SUFFIXES:
        return Resolution("attachment")
    return Resolution("unresolved")
