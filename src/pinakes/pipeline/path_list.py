"""A list of paths kept as one buffer: what a sync reports for every document it indexed.

A first sync of 700,000 documents reports each one as added and as having had its sidecar written;
as a list of strings that was ~135 B a document held to the sync's end, among pymalloc's small
objects, where the few that outlive the plan keep whole arenas resident (docs/perf/sync.md). Here
the paths are UTF-8 in one `bytearray` with their offsets in an `array('q')`: two large buffers,
decoded when read. It is a `MutableSequence[str]` and compares equal to a list of the same paths.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, MutableSequence, Sequence
from typing import ClassVar, cast, overload

_ENCODING = "utf-8"
_ERRORS = "surrogateescape"  # a file name that is not UTF-8, as os.fsdecode gives it


class PathList(MutableSequence[str]):
    """Paths in order, appended cheaply; deleting one moves the paths after it; inserting or
    replacing one rewrites the buffer (a report does neither)."""

    __slots__ = ("_ends", "_text")

    def __init__(self, paths: Iterable[str] = ()) -> None:
        self._text = bytearray()
        self._ends = array("q")
        self.extend(paths)

    def append(self, value: str) -> None:
        self._text += value.encode(_ENCODING, _ERRORS)
        self._ends.append(len(self._text))

    def extend(self, values: Iterable[str]) -> None:
        for value in list(values) if values is self else values:
            self.append(value)

    def _at(self, index: int) -> str:
        if index < 0:
            index += len(self._ends)
        if not 0 <= index < len(self._ends):
            raise IndexError("path index out of range")
        start = self._ends[index - 1] if index else 0
        return self._text[start:self._ends[index]].decode(_ENCODING, _ERRORS)

    def __len__(self) -> int:
        return len(self._ends)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self._at(at) for at in range(*index.indices(len(self)))]
        return self._at(index)

    def __iter__(self) -> Iterator[str]:
        return (self._at(at) for at in range(len(self._ends)))

    def _rewrite(self, paths: list[str]) -> None:
        self._text, self._ends = bytearray(), array("q")
        self.extend(paths)

    @overload
    def __setitem__(self, index: int, value: str) -> None: ...
    @overload
    def __setitem__(self, index: slice, value: Iterable[str]) -> None: ...
    def __setitem__(self, index: int | slice, value: str | Iterable[str]) -> None:
        paths = list(self)
        if isinstance(index, slice):
            paths[index] = cast("Iterable[str]", value)
        else:
            paths[index] = cast("str", value)
        self._rewrite(paths)

    def __delitem__(self, index: int | slice) -> None:
        if isinstance(index, slice):
            paths = list(self)
            del paths[index]
            self._rewrite(paths)
            return
        # One path cut out of the buffer, the offsets after it shifted: a sidecar taken back is the
        # latest group's document, so this moves a few rows, not every path (decoded, re-encoded).
        count = len(self._ends)
        if index < 0:
            index += count
        if not 0 <= index < count:
            raise IndexError("path index out of range")
        start = self._ends[index - 1] if index else 0
        width = self._ends[index] - start
        del self._text[start:start + width]
        tail = self._ends[index + 1:]
        del self._ends[index:]
        self._ends.extend(array("q", (end - width for end in tail)))

    def insert(self, index: int, value: str) -> None:
        paths = list(self)
        paths.insert(index, value)
        self._rewrite(paths)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PathList):
            return self._ends == other._ends and self._text == other._text
        return isinstance(other, Sequence) and not isinstance(other, str) \
            and list(self) == list(cast("Sequence[object]", other))

    __hash__: ClassVar[None] = None  # pyright: ignore[reportIncompatibleMethodOverride]  # mutable, like a list

    def __repr__(self) -> str:
        return f"PathList({list(self)!r})"
