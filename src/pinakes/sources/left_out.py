"""Files of a type this Pinakes indexes that a KB's `[sources] types` leaves out (issue #43).

A KB made before the document formats (HTML, EPUB, DOCX, ODT) and images existed has no `types`
line, so it indexes the four types it always did: an upgrade never starts indexing, embedding and
citing files nobody chose. (`pnk init` writes the line without "image" too: OCR is opt-in.) Its walk skips those files with a reason (`type_left_out`), and `pnk status` and
`pnk doctor` say once how many there are and how to take them in (`notice`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from pinakes.wording import counted

SKIP_TYPE_LEFT_OUT = "is not in [sources] types"


def type_left_out(source_type: str) -> str:
    """The walk's skip reason for a file of `source_type` that `[sources] types` leaves out."""
    return f"{source_type} {SKIP_TYPE_LEFT_OUT}"


def left_out_types(skipped: Iterable[tuple[str, str]]) -> dict[str, int]:
    """Source type -> how many skipped files were left out for it, most first."""
    found = Counter(reason.removesuffix(f" {SKIP_TYPE_LEFT_OUT}") for _path, reason in skipped
                    if reason.endswith(SKIP_TYPE_LEFT_OUT))
    return dict(found.most_common())


def notice(counts: dict[str, int], indexed: Sequence[str]) -> tuple[str, str] | None:
    """(what, remedy) telling that files of `counts`' types can now be indexed, or None."""
    if not counts:
        return None
    total = sum(counts.values())
    kinds = ", ".join(f"{kind} {number}" for kind, number in counts.items())
    wanted = ", ".join(f'"{kind}"' for kind in (*indexed, *counts))
    return (f"{counted(total, 'file')} ({kinds}) can now be indexed, but [sources] types leaves "
            f"{'its type' if len(counts) == 1 else 'their types'} out",
            f"to index them, set `types = [{wanted}]` under [sources] in pinakes.toml (`pnk upgrade` shows "
            "the template's new default), then run `pnk sync`"
            + ("; images are read by OCR (the [ocr] extra, seconds a page)" if "image" in counts else "")
            + "; to keep skipping them, nothing is needed")
