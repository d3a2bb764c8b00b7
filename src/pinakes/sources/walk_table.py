"""The documents a first sync's walk found, as columns: one bytes of joined paths and `array`s of
their stats, not a `FileState`, two dict entries and a path string per document.

A first sync of 700,000 documents held ~0.45 KB a document of small Python objects for its walk
alone, and a few objects made later among them kept those pymalloc arenas resident to the sync's
end (docs/perf/sync.md, "What the streamed phase leaves pinned"). These columns are a few large
buffers, which the allocator gives back whole once they are let go.

`DocTable` is a read-only `Mapping[str, FileState]` over the rows, sorted by path (pairing orders
its work so), whose `FileState`s are made on demand; `source_types` is the same rows' `Mapping[str,
str]`. A path is found through a sorted column of its 64-bit hash, not a dict of strings. The walk
builds one only for a first sync (`sources.walk.walk`'s `compact`); every other walk keeps its dicts.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import overload

import xxhash

from pinakes.sources.file_state import FileState

_ENCODING = "utf-8"
_ERRORS = "surrogateescape"  # a file name that is not UTF-8 round-trips as os.fsdecode gives it


class DocRows:
    """The walk's documents while it walks: appended one at a time, then `freeze`d into a table. A
    path is kept as UTF-8 in one buffer from the start: a string a document held through the walk
    would land among the objects the sync keeps and keep their arenas resident after it."""

    def __init__(self) -> None:
        self._text = bytearray()
        self._ends = array("q")
        self._stats = array("q")  # size, mtime_ns, inode, ctime_ns per row
        self._types: list[str] = []  # the source types seen, a byte per row indexes them
        self._type_of = bytearray()
        self._hashes: dict[int, str] = {}  # row -> content hash, for the few the walk hashed (PDFs, images)

    def add(self, state: FileState, source_type: str) -> None:
        row = len(self._ends)
        self._text += state.path.encode(_ENCODING, _ERRORS)
        self._ends.append(len(self._text))
        self._stats.extend((state.size, state.mtime_ns, state.inode, state.ctime_ns))
        if source_type not in self._types:
            self._types.append(source_type)
        self._type_of.append(self._types.index(source_type))
        if state.content_hash:
            self._hashes[row] = state.content_hash

    def __len__(self) -> int:
        return len(self._ends)

    def _path(self, row: int) -> str:
        return self._text[self._ends[row - 1] if row else 0:self._ends[row]].decode(_ENCODING, _ERRORS)

    def as_dicts(self) -> tuple[dict[str, FileState], dict[str, str], list[str]]:
        """The rows as the walk's usual dicts (path -> state, path -> source type) and the paths
        whose hashing it deferred (hash ""), in walk order."""
        docs: dict[str, FileState] = {}
        source_types: dict[str, str] = {}
        deferred: list[str] = []
        for row in range(len(self)):
            path = self._path(row)
            size, mtime_ns, inode, ctime_ns = self._stats[row * 4:row * 4 + 4]
            docs[path] = FileState(path, size, mtime_ns, inode, self._hashes.get(row, ""), ctime_ns)
            source_types[path] = self._types[self._type_of[row]]
            if not docs[path].content_hash:
                deferred.append(path)
        return docs, source_types, deferred

    def freeze(self) -> DocTable:
        """The rows sorted by path, as columns; this builder is emptied. The sort's keys are made all
        at once and let go all at once, so they leave no arena behind."""
        stats, type_of, hashes = self._stats, self._type_of, self._hashes
        order = sorted(range(len(self)), key=self._path)
        text = bytearray()
        offsets = array("q", [0])
        sorted_stats = array("q")
        sorted_types = bytearray()
        sorted_hashes: dict[int, str] = {}
        old_text, old_ends = self._text, self._ends
        for new_row, row in enumerate(order):
            text += old_text[old_ends[row - 1] if row else 0:old_ends[row]]
            offsets.append(len(text))
            sorted_stats.extend(stats[row * 4:row * 4 + 4])
            sorted_types.append(type_of[row])
            if row in hashes:
                sorted_hashes[new_row] = hashes[row]
        del order
        self._text, self._ends, self._stats, self._type_of, self._hashes = bytearray(), array("q"), array("q"), bytearray(), {}
        return DocTable(bytes(text), offsets, sorted_stats, tuple(self._types), bytes(sorted_types), sorted_hashes)


def _path_hash(path: str) -> int:
    return xxhash.xxh3_64_intdigest(path.encode(_ENCODING, _ERRORS))


class DocTable(Mapping[str, "FileState"]):
    """The walk's documents by path, as columns (module docstring): row N is the Nth path in order."""

    def __init__(self, text: bytes, offsets: array[int], stats: array[int], types: tuple[str, ...],
                 type_of: bytes, hashes: dict[int, str]) -> None:
        self._text = text
        self._offsets = offsets
        self._stats = stats
        self._types = types
        self._type_of = type_of
        self._hashes = hashes
        row_keys = array("Q", (xxhash.xxh3_64_intdigest(text[offsets[row]:offsets[row + 1]])
                               for row in range(len(offsets) - 1)))
        keyed = sorted(range(len(row_keys)), key=row_keys.__getitem__)
        self._keys = array("Q", (row_keys[row] for row in keyed))
        self._key_rows = array("q", keyed)
        del keyed, row_keys
        self.source_types: Mapping[str, str] = _SourceTypes(self)
        self.paths: Sequence[str] = _Paths(self, range(len(self)))
        # the documents whose hashing the walk deferred (hash ""), in path order
        self.deferred: Sequence[str] = _Paths(self, array("q", (row for row in range(len(self)) if row not in hashes)))

    def path(self, row: int) -> str:
        return self._text[self._offsets[row]:self._offsets[row + 1]].decode(_ENCODING, _ERRORS)

    def size(self, row: int) -> int:
        return self._stats[row * 4]

    def source_type(self, row: int) -> str:
        return self._types[self._type_of[row]]

    def sizes_between(self, start: int, stop: int) -> array[int]:
        """The file sizes of rows `start` to `stop`, read off the stats column (no row is made)."""
        return self._stats[start * 4:stop * 4:4]

    def rows_of_types(self, source_types: Collection[str], start: int, stop: int) -> Iterator[int]:
        """The rows from `start` to `stop` whose source type is one of `source_types`, in order."""
        codes = bytes(code for code, name in enumerate(self._types) if name in source_types)
        if not codes:
            return iter(())
        type_of = self._type_of
        return (row for row in range(start, stop) if type_of[row] in codes)

    def content_hash(self, row: int) -> str:
        """The hash the walk read, "" for a document whose hashing it deferred."""
        return self._hashes.get(row, "")

    def state(self, row: int, path: str | None = None) -> FileState:
        size, mtime_ns, inode, ctime_ns = self._stats[row * 4:row * 4 + 4]
        return FileState(self.path(row) if path is None else path, size, mtime_ns, inode,
                         self._hashes.get(row, ""), ctime_ns)

    def row_of(self, path: object) -> int | None:
        """The row of `path`, None when the walk found no such document."""
        if not isinstance(path, str):
            return None
        key = _path_hash(path)
        keys = self._keys
        at = bisect_left(keys, key)
        while at < len(keys) and keys[at] == key:
            row = self._key_rows[at]
            if self.path(row) == path:
                return row
            at += 1
        return None

    def __getitem__(self, path: str) -> FileState:
        row = self.row_of(path)
        if row is None:
            raise KeyError(path)
        return self.state(row, path)

    def __contains__(self, path: object) -> bool:
        return self.row_of(path) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self.paths)

    def __len__(self) -> int:
        return len(self._offsets) - 1


class _SourceTypes(Mapping[str, str]):
    """A `DocTable`'s rows as path -> source type."""

    def __init__(self, table: DocTable) -> None:
        self._table = table

    def __getitem__(self, path: str) -> str:
        row = self._table.row_of(path)
        if row is None:
            raise KeyError(path)
        return self._table.source_type(row)

    def __contains__(self, path: object) -> bool:
        return self._table.row_of(path) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)


class _Paths(Sequence[str]):
    """Some of a `DocTable`'s paths, by their rows."""

    def __init__(self, table: DocTable, rows: Sequence[int]) -> None:
        self._table = table
        self._rows = rows

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self._table.path(row) for row in self._rows[index]]
        return self._table.path(self._rows[index])

    def __iter__(self) -> Iterator[str]:
        path = self._table.path
        return (path(row) for row in self._rows)

    def __len__(self) -> int:
        return len(self._rows)
