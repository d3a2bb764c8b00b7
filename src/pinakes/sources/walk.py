"""The walk: find every source document and sidecar under the KB's roots, and hash what changed.

The walk runs on every sync, so its cost is the floor of a no-op sync. It never re-hashes a file
whose (size, mtime_ns, ctime_ns, inode) matches the `walk_cache` row from the last walk, as git and
DVC do; only new or touched files are read. The change time is what catches an in-place write that
restores the mtime afterwards (`rsync --inplace`, some editors and sync tools): nobody can set a
ctime. And as in git's racy-clean rule, a file whose mtime or ctime falls within the filesystem's
timestamp granularity of the last walk's start is hashed again, since it may have changed in the same
tick as it was read.

Nothing outside the KB is read, and so no sidecar is ever written outside it: a source root reached
through a symbolic link (`docs -> ../other-kb/docs`) is refused (`SourceRootError`), since the documents
it leads to belong to another folder, maybe another KB with its own IDs; below a root, symlinks are
reported, never followed, so every folder the walk enters is a real folder inside the root.

Every file under the roots is accounted for: a document, a sidecar, or a skipped path with its
reason (no extractor for the type, excluded by `[sources]`, a symbolic link, an unreadable file or
directory), so a sync can say what it did not index and why; or the temp file of a write that was
killed (`pinakes.atomic.is_temp_name`), which is never a document and which doctor lists.
"""

from __future__ import annotations

import gc
import os
import sqlite3
from collections.abc import Callable, Collection, Generator, Iterable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import cast

import xxhash

from pinakes.atomic import is_temp_name
from pinakes.errors import ManifestError
from pinakes.index.schema import unsettle
from pinakes.kb import MANIFEST_NAME, SIDECAR_SUFFIX, STATE_DIR_NAME
from pinakes.manifest import SourcesSection
from pinakes.sources.file_state import FileState
from pinakes.sources.left_out import type_left_out
from pinakes.sources.walk_table import DocRows, DocTable

ALWAYS_EXCLUDED_DIRS = frozenset({STATE_DIR_NAME, ".git", ".hg", ".svn", "__pycache__"})
HASH_CHUNK = 1 << 20
# The coarsest file timestamp in common use (FAT, SMB, some NFS servers): 2 s. A file stamped this
# close to the last walk's start may have been written again within one tick: hash it again.
RACY_WINDOW_NS = 2_000_000_000

# A first sync's walk (one that defers hashing) keeps its documents as columns (sources/walk_table.py);
# False keeps them as the dicts every other walk makes (a test compares the two).
COMPACT_FIRST_WALK = True

# Why a path under the roots is not a document (the report groups skipped paths by these).
SKIP_NO_EXTRACTOR = "no extractor for this file type"
SKIP_EXCLUDED = "excluded by [sources] include/exclude"
SKIP_SYMLINK = "symbolic link (not followed)"
SKIP_UNLISTABLE = "directory cannot be listed"
SKIP_NOT_UTF8 = "file name is not UTF-8 (rename it: the index, sidecars and JSON name files in UTF-8)"


class SourceRootError(ManifestError):
    """A `[sources] roots` entry is reached through a symbolic link: the walk does not follow it."""


def resolves_inside(root: Path | str, path: Path | str) -> bool:
    """Whether `path`, with every symbolic link on the way resolved, is `root` or inside it."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def _source_root_start(root: str, source_root: str) -> str | None:
    """The directory to walk for `source_root`, None when there is none; raises `SourceRootError`
    when the root is reached through a symbolic link (the manifest has already refused `..`)."""
    if source_root in ("", "."):
        return root
    start = os.path.join(root, source_root)
    if not os.path.lexists(start):
        return None
    real = os.path.realpath(start)
    if real != os.path.join(os.path.realpath(root), os.path.normpath(source_root)):
        where = "outside this KB" if not resolves_inside(root, real) else "elsewhere in this KB"
        raise SourceRootError(
            f"the source root {source_root!r} is reached through a symbolic link (it leads to {real}, "
            f"{where}); Pinakes does not follow it: the documents there are not this KB's, and the "
            "sidecars a sync writes beside them would land in that folder",
            remedy=f"make {source_root!r} a real folder inside the KB (move the documents in), or list "
                   f"the folder it leads to in [sources] roots if that is inside the KB; then run `pnk sync`",
            path=os.path.join(root, MANIFEST_NAME))
    return start if os.path.isdir(start) else None


def check_source_roots(root: Path, sources: SourcesSection) -> None:
    """Raise `SourceRootError` for a root the walk would refuse, without walking: a sync checks its
    roots before it creates anything (the lock, the index), so a refused sync leaves no trace."""
    for source_root in sources.roots:
        _source_root_start(str(root), source_root)


@dataclass
class WalkResult:
    # document path -> state, and -> source type: dicts, or in a first sync one `DocTable`'s columns
    docs: dict[str, FileState] | DocTable = field(default_factory=dict[str, FileState])
    source_types: Mapping[str, str] = field(default_factory=dict[str, str])
    sidecars: dict[str, FileState] = field(default_factory=dict[str, FileState])  # document path -> its sidecar
    orphan_sidecars: list[str] = field(default_factory=list[str])  # sidecar paths with no document
    skipped: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])  # (path, why): never documents
    unreadable: dict[str, str] = field(default_factory=dict[str, str])  # document path -> OS error: held, failed
    temp_files: list[str] = field(default_factory=list[str])  # left by a killed atomic write: never documents
    hashed: int = 0
    cache_updates: list[FileState] = field(default_factory=list[FileState])
    deferred: list[str] | Sequence[str] = field(default_factory=list[str])  # documents not hashed (`walk`'s `defer`): "" hash
    cache_removals: list[str] = field(default_factory=list[str])


def hash_file(path: str | Path) -> str:
    digest = xxhash.xxh3_128()
    with open(path, "rb") as handle:
        while block := handle.read(HASH_CHUNK):
            digest.update(block)
    return digest.hexdigest()


# FileState._make without its Python frame and length check per row (the query below selects exactly
# FileState's fields): ~10% of loading a 151k-row cache, the largest part of a no-op's own work.
_state_of_row = cast("Callable[[tuple[object, ...]], FileState]",
                     partial(tuple.__new__, FileState))  # pyright: ignore[reportUnknownMemberType]  # tuple.__new__'s overloads


def load_walk_cache(conn: sqlite3.Connection | None) -> dict[str, FileState]:
    if conn is None:
        return {}
    # Selected in FileState's field order: a file the walk finds unchanged is its cached row.
    rows = conn.execute("SELECT path, size, mtime_ns, inode, content_hash, ctime_ns FROM walk_cache")
    with _cyclic_gc_paused():
        return {row[0]: _state_of_row(row) for row in rows}


@contextmanager
def _cyclic_gc_paused() -> Generator[None]:
    """Hold the cyclic collector while building one state per file: those tuples and strings hold no
    cycles, yet each allocation-triggered collection re-scans everything the process has imported
    (~15% of a 10k-document no-op's walk)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def racy_after_ns(conn: sqlite3.Connection | None) -> int | None:
    """Files stamped at or after this instant are hashed even when their stat matches the cache."""
    if conn is None:
        return None
    row = conn.execute("SELECT value FROM meta WHERE key = 'walk_started_ns'").fetchone()
    return int(row[0]) - RACY_WINDOW_NS if row else None


def walk(root: Path, sources: SourcesSection, cache: dict[str, FileState], *,
         hash_contents: bool = True, only: set[str] | None = None,
         racy_after: int | None = None, defer: Collection[str] = ()) -> WalkResult:
    """Walk `sources.roots` under `root`. `only` restricts documents to those paths (staged files);
    a cached file stamped at or after `racy_after` (ns) is hashed again (see the module docstring).
    A document of a source type in `defer` that must be hashed is not: its state carries "" as its
    hash and its path is listed in `WalkResult.deferred` (the first sync of an empty index hashes
    each new document with its group, `pipeline.walk.hash_deferred`)."""
    with _cyclic_gc_paused():
        return _walk(root, sources, cache, hash_contents=hash_contents, only=only, racy_after=racy_after,
                     defer=frozenset(defer))


def walk_settled(root: Path, sources: SourcesSection, cache_digest: str, load_cache: Callable[[], dict[str, FileState]],
                 *, racy_after: int | None = None, defer: Collection[str] = ()) -> tuple[WalkResult, dict[str, FileState] | None]:
    """`walk` of a tree the walk cache is expected to describe exactly (`cache_digest`, its
    `walk_cache_digest`), without loading the cache when it does: the walk only stats, and when the
    files' stat digest equals `cache_digest` and no stamp is at or after `racy_after`, every file is
    as cached (their states carry "" as their hash; the cache is None). Otherwise the cache is loaded
    once and the stats just taken are compared with it as `walk` compares them: (that result, the cache)."""
    loaded: list[dict[str, FileState]] = []

    def cache_on_demand() -> dict[str, FileState]:
        loaded.append(load_cache())
        return loaded[0]

    with _cyclic_gc_paused():
        found = _walk(root, sources, {}, hash_contents=True, only=None, racy_after=racy_after,
                      defer=frozenset(defer), settled=(cache_digest, cache_on_demand))
    return found, (loaded[0] if loaded else None)


def _walk(root: Path, sources: SourcesSection, cache: dict[str, FileState], *,
          hash_contents: bool, only: set[str] | None, racy_after: int | None,
          defer: frozenset[str],
          settled: tuple[str, Callable[[], dict[str, FileState]]] | None = None) -> WalkResult:
    from pinakes.extract.source_types import source_type_of_name

    result = WalkResult()
    deferred_paths: list[str] = []
    result.deferred = deferred_paths
    docs: dict[str, FileState] = {}
    source_types: dict[str, str] = {}
    # A first sync's documents go into columns (sources/walk_table.py), not one object per file.
    rows = DocRows() if COMPACT_FIRST_WALK and defer and settled is None and only is None else None
    sidecar_files: dict[str, FileState] = {}
    sidecar_suffix_len = len(SIDECAR_SUFFIX)
    unseen = dict(cache)  # what is left once the walk has passed is gone from disk
    take_cached = unseen.pop
    # A cached state stamped at or after this is hashed again (the racy window); none without one.
    racy = racy_after if racy_after is not None else 1 << 63
    root_str = str(root)
    prefix_len = len(root_str) + 1
    stat_first = settled is not None  # each file's stat is taken now and compared after the walk, if need be

    posix = os.sep == "/"

    def relative(path: str) -> str:
        return path[prefix_len:] if posix else path[prefix_len:].replace(os.sep, "/")

    def settle(rel: str, path: str, size: int, mtime_ns: int, ctime_ns: int, inode: int,
               deferred: bool) -> FileState | None:
        cached = take_cached(rel, None)
        # ctime first: it moves whenever the mtime or the content does, so it decides most misses.
        if cached is not None and cached.ctime_ns == ctime_ns and cached.mtime_ns == mtime_ns \
                and cached.size == size and cached.inode == inode \
                and cached.ctime_ns < racy and cached.mtime_ns < racy:
            return cached
        if deferred or not hash_contents:
            if deferred and rows is None:  # rows know their own (hash "")
                deferred_paths.append(rel)
            return FileState(rel, size, mtime_ns, inode, "", ctime_ns)
        try:
            digest = hash_file(path)
        except OSError as exc:
            result.unreadable[rel] = exc.strerror or type(exc).__name__
            return None
        state = FileState(rel, size, mtime_ns, inode, digest, ctime_ns)
        result.hashed += 1
        result.cache_updates.append(state)
        return state

    def visit(rel: str, entry: os.DirEntry[str], deferred: bool) -> FileState | None:
        st = entry.stat(follow_symlinks=False)
        if stat_first:
            return FileState(rel, st.st_size, st.st_mtime_ns, st.st_ino, "", st.st_ctime_ns)
        return settle(rel, entry.path, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, deferred)

    stack: list[str] = []
    for source_root in sources.roots:
        start = _source_root_start(root_str, source_root)
        if start is not None:
            stack.append(start)
    visited_dirs: set[str] = set()
    indexed_types = frozenset(sources.types)
    while stack:
        directory = stack.pop()
        if directory in visited_dirs:
            continue
        visited_dirs.add(directory)
        try:
            entries = list(os.scandir(directory))
        except OSError as exc:
            result.skipped.append((shown_name(relative(directory)), f"{SKIP_UNLISTABLE} ({exc.strerror})"))
            continue
        select = sources.selector(relative(directory))
        for entry in entries:
            # is_file/is_dir with follow_symlinks=False answer from readdir's d_type (no syscall),
            # and are False for a symlink, which is reported rather than followed.
            if entry.is_file(follow_symlinks=False):
                rel = entry.path[prefix_len:] if posix else relative(entry.path)
                if not rel.isascii() and not _is_utf8(rel):
                    result.skipped.append((shown_name(rel), SKIP_NOT_UTF8))
                    continue
                name = entry.name
                if name[0] == "." and is_temp_name(name):
                    result.temp_files.append(rel)
                elif name.endswith(SIDECAR_SUFFIX):
                    sidecar = visit(rel, entry, False)
                    if sidecar is not None:
                        sidecar_files[rel[:-sidecar_suffix_len]] = sidecar
                elif only is not None and rel not in only:
                    continue
                elif select(rel, name):
                    source_type = source_type_of_name(name)  # the type follows the name alone
                    if source_type is None:
                        result.skipped.append((rel, SKIP_NO_EXTRACTOR))
                        continue
                    if source_type not in indexed_types:  # a newer type an older KB never chose
                        result.skipped.append((rel, type_left_out(source_type)))
                        continue
                    state = visit(rel, entry, source_type in defer)
                    if state is None:
                        continue
                    if rows is not None:
                        rows.add(state, source_type)
                    else:
                        docs[rel] = state
                        source_types[rel] = source_type
                else:
                    why = SKIP_EXCLUDED if source_type_of_name(name) is not None else SKIP_NO_EXTRACTOR
                    result.skipped.append((rel, why))
            elif entry.is_dir(follow_symlinks=False):
                if entry.name in ALWAYS_EXCLUDED_DIRS:
                    continue
                reldir = relative(entry.path)
                if sources.prunes(reldir):
                    result.skipped.append((shown_name(reldir) + "/", SKIP_EXCLUDED))
                else:
                    stack.append(entry.path)
            elif entry.is_symlink() and (only is None or relative(entry.path) in only):
                result.skipped.append((shown_name(relative(entry.path)), SKIP_SYMLINK))
    if settled is not None:
        expected, load_cache = settled
        states = [*docs.values(), *sidecar_files.values()]
        if not all(s.mtime_ns < racy and s.ctime_ns < racy for s in states) or states_digest(states) != expected:
            # Not as cached: compare each stat just taken with the cache, as `visit` does.
            unseen.update(load_cache())
            for rel, taken in list(docs.items()):
                state = settle(rel, os.path.join(root_str, rel), taken.size, taken.mtime_ns, taken.ctime_ns,
                               taken.inode, source_types[rel] in defer)
                if state is None:
                    del docs[rel], source_types[rel]
                else:
                    docs[rel] = state
            for doc_path, taken in list(sidecar_files.items()):
                state = settle(taken.path, os.path.join(root_str, taken.path), taken.size, taken.mtime_ns,
                               taken.ctime_ns, taken.inode, False)
                if state is None:
                    del sidecar_files[doc_path]
                else:
                    sidecar_files[doc_path] = state
    if rows is not None and not sidecar_files:
        table = rows.freeze()
        result.docs, result.source_types, result.deferred = table, table.source_types, table.deferred  # its rows, not strings
    else:
        if rows is not None:  # documents paired by their sidecars are looked up by path: the usual dicts
            docs, source_types, result.deferred = rows.as_dicts()
        result.docs, result.source_types = docs, source_types
    for doc_path, state in sidecar_files.items():
        if doc_path in result.docs:
            result.sidecars[doc_path] = state
        elif doc_path in result.unreadable:
            continue  # its document exists; the sidecar is not an orphan
        elif only is None or doc_path in only:
            result.orphan_sidecars.append(state.path)
    result.orphan_sidecars.sort()
    result.skipped.sort()
    result.temp_files.sort()
    if only is None:
        result.cache_removals = list(unseen)
    return result


StatRow = tuple[str, int, int, int, int]  # (path, size, mtime_ns, ctime_ns, inode): what a walk compares


def _is_utf8(path: str) -> bool:
    """Whether `path` came from a UTF-8 name: os.fsdecode keeps any other byte as a lone surrogate,
    which SQLite, YAML and JSON cannot store."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown_name(path: str) -> str:
    """`path` as printable text: a byte that is not UTF-8 shown as `\\x80`."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def stat_digest(rows: Iterable[StatRow]) -> str:
    """An order-independent digest of files' stats, without their hashes: equal for two sets of
    files exactly when they hold the same paths with the same (size, mtime_ns, ctime_ns, inode), up to
    a 128-bit collision. Folded as a sum, so a walk's files and the cache's rows need no sorting."""
    total = 0
    row_digest = xxhash.xxh3_128_intdigest
    for path, size, mtime_ns, ctime_ns, inode in rows:
        total += row_digest(f"{path}\0{size}\0{mtime_ns}\0{ctime_ns}\0{inode}".encode(errors="surrogateescape"))
    return format(total & ((1 << 128) - 1), "032x")


def walk_cache_digest(conn: sqlite3.Connection) -> str:
    """`stat_digest` of every row of the walk cache."""
    return stat_digest(conn.execute("SELECT path, size, mtime_ns, ctime_ns, inode FROM walk_cache"))


def states_digest(states: Iterable[FileState]) -> str:
    """`stat_digest` of what a walk found."""
    return stat_digest((s.path, s.size, s.mtime_ns, s.ctime_ns, s.inode) for s in states)


def save_walk_cache(conn: sqlite3.Connection, result: WalkResult, started_ns: int) -> None:
    """Record what this walk hashed, and when it started (call inside a transaction)."""
    remember_files(conn, result.cache_updates)
    if result.cache_removals:
        unsettle(conn)
    conn.executemany("DELETE FROM walk_cache WHERE path = ?", [(p,) for p in result.cache_removals])
    conn.execute("INSERT INTO meta (key, value) VALUES ('walk_started_ns', ?) "
                 "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (str(started_ns),))


def remember_files(conn: sqlite3.Connection, states: list[FileState]) -> None:
    """Put files whose hash is known into the walk cache (call inside a transaction)."""
    if states:
        unsettle(conn)  # the index no longer holds exactly what the cache describes
    conn.executemany(
        "INSERT INTO walk_cache (path, size, mtime_ns, ctime_ns, inode, content_hash) "
        "VALUES (?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (path) DO UPDATE SET size = excluded.size, mtime_ns = excluded.mtime_ns, "
        "ctime_ns = excluded.ctime_ns, inode = excluded.inode, content_hash = excluded.content_hash",
        [(s.path, s.size, s.mtime_ns, s.ctime_ns, s.inode, s.content_hash) for s in states],
    )

