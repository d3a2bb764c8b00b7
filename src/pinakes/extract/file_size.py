"""A source file's size checked before any parser reads it: unreadable, over its type's limit, or
empty is that one file's failure, said with the remedy its type calls for."""

from __future__ import annotations

from pathlib import Path

from pinakes.errors import SourceError

TOO_LARGE_REMEDY = "split it, or exclude it in [sources]"
EMPTY_REMEDY = "copy or save it again, then run `pnk sync`; or exclude it in [sources]"


def checked_size(path: Path, limit: int, what: str, *, too_large: str = TOO_LARGE_REMEDY,
                 empty: str = EMPTY_REMEDY) -> int:
    """The size of `path` in bytes; `what` names the file in the message ("the PDF", "the image")."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise SourceError(f"cannot read the file: {exc.strerror or exc}",
                          remedy="fix its permissions, then run `pnk sync`", path=path) from exc
    if size > limit:
        raise SourceError(f"the {what} is {size:,} bytes, over the {limit:,}-byte limit; not indexed",
                          remedy=too_large, path=path)
    if size == 0:
        raise SourceError("the file is empty (0 bytes); not indexed", remedy=empty, path=path)
    return size
