"""How a passage is cited (spec §4.1).

Text sources cite character offsets into the indexed text (`path:120-480`); paged sources cite
pages with an explicit `p` (`report.pdf:p12`, `report.pdf:p12-13`), because a bare `12-13` would
be a page range and a character range in one syntax, told apart only by knowing the file.
"""

from __future__ import annotations

from collections.abc import Sequence


def citation(path: str, char_start: int, char_end: int, page_start: int | None, page_end: int | None) -> str:
    if page_start is not None:
        last = page_end if page_end is not None else page_start
        return f"{path}:p{page_start}" if last == page_start else f"{path}:p{page_start}-{last}"
    return f"{path}:{char_start}-{char_end}"


def with_heading(cited: str, heading_path: Sequence[str] | None) -> str:
    """`path:locator (Heading > Subheading)`, the form a person reads."""
    if not heading_path:
        return cited
    return f"{cited} ({' > '.join(heading_path)})"
