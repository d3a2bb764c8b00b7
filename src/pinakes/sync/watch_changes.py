"""Which file events `pnk watch` syncs for, and which are its own (sync/watch.py runs the loop).

A sync reads documents and sidecars under the source roots (and the manifest); everything else a
file system reports is noise to it: `.pinakes/` (the index, the lock, the caches a sync writes),
`.git/` and the other directories the walk never enters, the temp files of atomic writes
(`.NAME.<hex>.pnk.tmp`), and files of a type no extractor reads (an editor's swap or backup file,
`4913`, `*.orig`). A path that no longer exists cannot be typed by what it is: a removed or moved
directory looks like that, so it counts (a sync decides what it was); a gone file of a readable type
counts because its document was deleted.

The sidecars a sync mints are written into the source tree, so their events come back to the
watcher after the sync that wrote them. `OwnWrites` remembers each one's (mtime, size, inode) as the
sync left it: an event on such a path is dropped while the file still carries exactly that stamp,
and counts as soon as anyone else writes it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pinakes.atomic import is_temp_name
from pinakes.kb import MANIFEST_NAME, SIDECAR_SUFFIX
from pinakes.manifest import SourcesSection
from pinakes.manifest.patterns import is_within
from pinakes.sources.walk import ALWAYS_EXCLUDED_DIRS

Stamp = tuple[int, int, int]  # (mtime_ns, size, inode)


@dataclass(frozen=True)
class ChangeFilter:
    """Decides whether an event's path is one a sync of the KB at `root` could see."""

    root: Path
    sources: SourcesSection

    def relative(self, path: str) -> str | None:
        """The KB-relative POSIX path of `path`, None outside the KB."""
        root = str(self.root)
        if path == root or not path.startswith(root + os.sep):
            return None
        rel = path[len(root) + 1:]
        return rel if os.sep == "/" else rel.replace(os.sep, "/")

    def counts(self, path: str) -> bool:
        rel = self.relative(path)
        if rel is None:
            return False
        if rel == MANIFEST_NAME:
            return True  # its roots or its model may have changed (the watcher checks it by its stamp)
        parts = rel.split("/")
        if any(part in ALWAYS_EXCLUDED_DIRS for part in parts):
            return False
        name = parts[-1]
        if name.startswith(".") and is_temp_name(name):
            return False
        if not any(is_within(rel, root) for root in self.sources.roots):
            return False
        if name.endswith(SIDECAR_SUFFIX):
            return self.sources.selects(rel[: -len(SIDECAR_SUFFIX)])
        from pinakes.extract.source_types import source_type_for

        source_type = source_type_for(name)
        if source_type is not None:  # a type `[sources] types` leaves out is skipped by the walk too
            return source_type in self.sources.types and self.sources.selects(rel)
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            return not self.sources.prunes(rel)  # gone: maybe a directory moved or removed
        if stat.S_ISDIR(mode):
            return not self.sources.prunes(rel)
        return False  # a file no extractor reads, or a symbolic link (the walk never follows one)

    def relevant(self, paths: Iterable[str]) -> set[str]:
        return {path for path in paths if self.counts(path)}


@dataclass
class OwnWrites:
    """The files the last sync wrote into the source tree, as it left them."""

    stamps: dict[str, Stamp] = field(default_factory=dict[str, Stamp])

    def remember(self, root: Path, relative_paths: Iterable[str]) -> None:
        self.stamps.clear()
        for rel in relative_paths:
            path = str(root / rel)
            found = _stamp(path)
            if found is not None:
                self.stamps[path] = found

    def drop_own(self, paths: set[str]) -> set[str]:
        """`paths` without those still exactly as the sync wrote them."""
        kept: set[str] = set()
        for path in paths:
            written = self.stamps.get(path)
            if written is not None and _stamp(path) == written:
                continue
            self.stamps.pop(path, None)  # someone else wrote it since: from now on its events count
            kept.add(path)
        return kept


def _stamp(path: str) -> Stamp | None:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)
