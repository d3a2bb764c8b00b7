"""A first sync's plan as columns: every new document's work item made from its walk row on demand.

The first sync of a tree with no sidecars mints an ID for every document and has nothing else to
decide. As objects, that plan was a `DocWork`, a minted ID string and a pending-mint set entry per
document (~0.26 KB; docs/perf/sync.md, "What the streamed phase leaves pinned"). `WorkTable` is that
plan as the walk's `DocTable` (sources/walk_table.py) plus one bytes of fixed 26-character IDs: a
`Sequence[DocWork]` in path order whose items are made when read, so a group's `DocWork`s live only
while its invocation runs. The IDs are minted in row order by the monotonic mint (`ids.new_ulid`),
so they are sorted too and an ID's row is found by bisection. `PendingMints` is the mints not yet
written, a byte per row, behind the same set interface as the general plan's set of IDs.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, MutableSet, Sequence
from typing import TYPE_CHECKING, overload

from pinakes.ids import new_ulid
from pinakes.pipeline.context import context_naming
from pinakes.pipeline.types import DocWork

if TYPE_CHECKING:
    from pinakes.pipeline.keys import BuildKeys
    from pinakes.sources.walk_table import DocTable

ID_LENGTH = 26  # a ULID's canonical text


class _Minted:
    """What the rows of one plan share: the walk's table, the IDs, and the build keys."""

    __slots__ = ("ids", "keys", "last_found", "table")

    def __init__(self, table: DocTable, keys: BuildKeys) -> None:
        self.table = table
        self.keys = keys
        self.last_found = 0
        ids = bytearray()
        previous = ""
        for _row in range(len(table)):
            doc_id = new_ulid()
            if doc_id <= previous:  # the mint is monotonic within a process; the bisection relies on it
                raise AssertionError(f"minted IDs out of order: {previous} then {doc_id}")
            previous = doc_id
            encoded = doc_id.encode("ascii")
            if len(encoded) != ID_LENGTH:  # every later row's ID is read at a fixed offset
                raise AssertionError(f"a minted ID of {len(encoded)} characters: {doc_id!r}")
            ids += encoded
        self.ids = bytes(ids)

    def doc_id(self, row: int) -> str:
        return self.ids[row * ID_LENGTH:(row + 1) * ID_LENGTH].decode("ascii")

    def row_of(self, doc_id: object) -> int | None:
        if not isinstance(doc_id, str) or len(doc_id) != ID_LENGTH:
            return None
        # A group asks of its rows in order, each twice (is it pending, then it is not): the last
        # row found and the next are tried before bisecting.
        for row in (self.last_found, self.last_found + 1):
            if row < len(self.table) and self.doc_id(row) == doc_id:
                self.last_found = row
                return row
        low, high = 0, len(self.table)
        while low < high:  # bisection over the fixed-width IDs, sorted as minted
            middle = (low + high) // 2
            if self.doc_id(middle) < doc_id:
                low = middle + 1
            else:
                high = middle
        if low < len(self.table) and self.doc_id(low) == doc_id:
            self.last_found = low
            return low
        return None

    def work(self, row: int) -> DocWork:
        table = self.table
        path = table.path(row)
        source_type = table.source_type(row)
        content_hash = table.content_hash(row)
        # as pairing keys a minted document (pipeline/pair.py `_key`): "" until it is hashed
        key = self.keys.key(content_hash, source_type, context_naming(None, path)) if content_hash else ""
        return DocWork(self.doc_id(row), path, source_type, table.state(row, path), None, None, key, "added")


class WorkTable(Sequence[DocWork]):
    """The plan's work, rows `start` to `stop` of a first sync's minted documents (module docstring).
    A slice is another view over the same columns."""

    __slots__ = ("_minted", "_start", "_stop")

    def __init__(self, minted: _Minted, start: int, stop: int) -> None:
        self._minted = minted
        self._start = start
        self._stop = stop

    @classmethod
    def minting(cls, table: DocTable, keys: BuildKeys) -> WorkTable:
        """A new ID for every document of `table`, in path order."""
        return cls(_Minted(table, keys), 0, len(table))

    def __len__(self) -> int:
        return self._stop - self._start

    @overload
    def __getitem__(self, index: int) -> DocWork: ...
    @overload
    def __getitem__(self, index: slice) -> WorkTable: ...
    def __getitem__(self, index: int | slice) -> DocWork | WorkTable:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                raise ValueError("a WorkTable slices in order only")
            return WorkTable(self._minted, self._start + start, self._start + max(start, stop))
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._minted.work(self._start + index)

    def __iter__(self) -> Iterator[DocWork]:
        work = self._minted.work
        return (work(row) for row in range(self._start, self._stop))

    def through(self, last: WorkTable) -> WorkTable:
        """The rows from this view's first to `last`'s last (two slices of one plan, in order)."""
        assert last._minted is self._minted and last._stop >= self._start
        return WorkTable(self._minted, self._start, last._stop)

    def sizes(self) -> Iterator[int]:
        """Each row's file size, in order, without making its work item (`stream_groups`)."""
        return iter(self._minted.table.sizes_between(self._start, self._stop))

    def content_hashes_of_type(self, source_type: str) -> Iterator[str]:
        table = self._minted.table
        return (table.content_hash(row) for row in table.rows_of_types((source_type,), self._start, self._stop))

    def count_of_types(self, source_types: Collection[str], smaller_than: int) -> int:
        table = self._minted.table
        return sum(1 for row in table.rows_of_types(source_types, self._start, self._stop)
                   if table.size(row) < smaller_than)

    def position_of(self, doc_id: str) -> int | None:
        """Where the document `doc_id` is in this view, None when it is not: by the IDs' bisection."""
        row = self._minted.row_of(doc_id)
        return None if row is None or not self._start <= row < self._stop else row - self._start

    def doc_ids(self) -> Iterator[str]:
        doc_id = self._minted.doc_id
        return (doc_id(row) for row in range(self._start, self._stop))

    def pending_mints(self) -> PendingMints:
        """Every row's mint, none written yet."""
        return PendingMints(self._minted)


def total_size(work: Sequence[DocWork]) -> int:
    """The bytes of the plan's documents; a `WorkTable`'s read off its size column, not per work item
    (at 700k rows, making each item costs ~2 s a pass: docs/perf/sync.md, "plantail")."""
    if isinstance(work, WorkTable):
        return sum(work.sizes())
    return sum(item.file.size for item in work)


def content_hashes_of_type(work: Sequence[DocWork], source_type: str) -> Iterator[str]:
    """The content hashes of the plan's documents of `source_type` ("" where hashing was deferred),
    in order; a `WorkTable`'s from its columns, only the rows of that type made into anything."""
    if isinstance(work, WorkTable):
        return work.content_hashes_of_type(source_type)
    return (item.file.content_hash for item in work if item.source_type == source_type)


def count_of_types(work: Sequence[DocWork], source_types: Collection[str], smaller_than: int) -> int:
    """How many of the plan's documents are of one of `source_types` and under `smaller_than` bytes;
    a `WorkTable`'s counted off its type and size columns."""
    if isinstance(work, WorkTable):
        return work.count_of_types(source_types, smaller_than)
    return sum(1 for item in work if item.source_type in source_types and item.file.size < smaller_than)


class PendingMints(MutableSet[str]):
    """The IDs of a `WorkTable` whose sidecars are not written yet: a byte per row."""

    __slots__ = ("_count", "_minted", "_pending")

    def __init__(self, minted: _Minted) -> None:
        self._minted = minted
        self._pending = bytearray(b"\1") * len(minted.table)
        self._count = len(minted.table)

    def __contains__(self, doc_id: object) -> bool:
        row = self._minted.row_of(doc_id)
        return row is not None and bool(self._pending[row])

    def __iter__(self) -> Iterator[str]:
        doc_id = self._minted.doc_id
        return (doc_id(row) for row, pending in enumerate(self._pending) if pending)

    def __len__(self) -> int:
        return self._count

    def add(self, value: str) -> None:
        row = self._minted.row_of(value)
        if row is None:
            raise KeyError(f"{value} is not one of this plan's minted IDs")
        if not self._pending[row]:
            self._pending[row] = 1
            self._count += 1

    def discard(self, value: str) -> None:
        row = self._minted.row_of(value)
        if row is not None and self._pending[row]:
            self._pending[row] = 0
            self._count -= 1
