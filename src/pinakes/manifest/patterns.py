"""Which files `[sources] include/exclude` select: gitignore-shaped globs, whose semantics are
documented on `SourcesSection`.

Patterns are compiled by kind into a few alternations rather than tested one by one, because the
sync walk tests every file in the KB and the default include alone has one pattern per supported
extension.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

_PLAIN_SUFFIX = re.compile(r"\*[^*?\[/]*")  # `*.md`: testable with str.endswith


@dataclass(frozen=True)
class GlobSet:
    """Patterns compiled by kind, so testing a path costs a few regex calls however many patterns
    there are (the default include has one per supported extension, and the walk tests every file)."""

    suffixes: tuple[str, ...]  # unanchored `*.ext` patterns, lowercased
    names: re.Pattern[str] | None  # other unanchored patterns, tested on each path component
    dir_names: re.Pattern[str] | None  # unanchored with a trailing `/`: directory components only
    paths: re.Pattern[str] | None  # anchored patterns, tested on each path prefix
    dir_paths: re.Pattern[str] | None  # anchored with a trailing `/`: directory prefixes only
    _directory_cache: dict[str, bool] = field(default_factory=dict[str, bool], compare=False, repr=False)

    @classmethod
    def compile(cls, patterns: Sequence[str]) -> GlobSet:
        suffixes: list[str] = []
        kinds: dict[tuple[bool, bool], list[str]] = {}
        for pattern in patterns:
            directory_only = pattern.endswith("/")
            body = pattern.rstrip("/")
            anchored = body.startswith("/") or "/" in body.lstrip("/")
            body = body.lstrip("/")
            if not anchored and not directory_only and _PLAIN_SUFFIX.fullmatch(body):
                suffixes.append(body[1:].lower())
            else:
                kinds.setdefault((anchored, directory_only), []).append(_translate_glob(body))
        return cls(tuple(suffixes), _alternation(kinds.get((False, False))),
                   _alternation(kinds.get((False, True))), _alternation(kinds.get((True, False))),
                   _alternation(kinds.get((True, True))))

    def matches(self, relpath: str, *, is_dir: bool) -> bool:
        """Whether any pattern matches `relpath` itself or a directory above it."""
        head, _, name = relpath.rpartition("/")
        if head and self._matches_directory(head):
            return True
        return self._matches_last(relpath, name, is_dir)

    def file_matcher(self, reldir: str) -> Callable[[str, str], bool]:
        """`matches(relpath, is_dir=False)` for the files directly in `reldir` ("" for the KB root),
        as (relpath, name) -> bool, with the directory's part decided once."""
        if reldir and self._matches_directory(reldir):
            return lambda relpath, name: True
        if self.names is None and self.paths is None:  # only `*.ext` patterns can match a file here
            suffixes = self.suffixes
            return lambda relpath, name: name.lower().endswith(suffixes)
        return lambda relpath, name: self._matches_last(relpath, name, False)

    def _matches_directory(self, reldir: str) -> bool:
        # The walk asks about every file, and siblings share their directories: decide each
        # directory once rather than once per file beneath it.
        known = self._directory_cache.get(reldir)
        if known is None:
            known = self.matches(reldir, is_dir=True)
            self._directory_cache[reldir] = known
        return known

    def _matches_last(self, relpath: str, name: str, is_dir: bool) -> bool:
        """The patterns tested against the last component (`name`) or the whole path."""
        if self.suffixes and name.lower().endswith(self.suffixes):
            return True
        if self.names is not None and self.names.fullmatch(name):
            return True
        if is_dir and self.dir_names is not None and self.dir_names.fullmatch(name):
            return True
        if self.paths is not None and self.paths.fullmatch(relpath):
            return True
        return is_dir and self.dir_paths is not None and self.dir_paths.fullmatch(relpath) is not None


def _alternation(regexes: Sequence[str] | None) -> re.Pattern[str] | None:
    if not regexes:
        return None
    # Case-insensitive: a KB moves between case-sensitive and case-insensitive filesystems, and
    # `*.pdf` must find `Paper.PDF` on both.
    return re.compile("|".join(f"(?:{regex})" for regex in regexes), re.IGNORECASE)


def _translate_glob(pattern: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("/**", i) and i + 3 == len(pattern):
            out.append("(?:/.*)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and (end := pattern.find("]", i + 2)) != -1:
            members = pattern[i + 1:end]
            if members.startswith("!"):
                members = "^" + members[1:]
            # A `[` inside the set is a literal (`[[]` matches "["), never the start of a nested set.
            out.append("[" + members.replace("\\", "\\\\").replace("[", "\\[") + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return "".join(out)


def is_within(relpath: str, root: str) -> bool:
    return root == "." or relpath == root or relpath.startswith(root + "/")


def literal_pattern(relpath: str) -> str:
    """The pattern that matches exactly the file at `relpath` (KB-root-relative, POSIX): glob
    characters bracketed so they match themselves, and a file at the KB root anchored with a
    leading `/` (a pattern without `/` would match that name at any depth)."""
    pattern = "".join(f"[{char}]" if char in "*?[" else char for char in relpath)
    return pattern if "/" in pattern else f"/{pattern}"


def exclude_line(exclude: Sequence[str], adding: Sequence[str]) -> str:
    """The `[sources]` line that keeps the manifest's `exclude` patterns and adds `adding`, as TOML
    (a JSON string is a TOML basic string)."""
    import json

    patterns = dict.fromkeys([*exclude, *adding])
    return "exclude = [" + ", ".join(json.dumps(pattern, ensure_ascii=False) for pattern in patterns) + "]"
