"""Doctor: the free PDF path — the fitted floors it cannot run without, and the indexed PDFs whose
pages have no usable text layer (scans: indexed for their other pages only, never silently)."""

from __future__ import annotations

import json
from collections.abc import Iterator

from pinakes.display import printable
from pinakes.doctor import Check, DoctorContext
from pinakes.doctor.index_reading import readable_index
from pinakes.errors import PinakesError
from pinakes.kb import KBPaths
from pinakes.wording import counted

SHOWN = 5


def checks(ctx: DoctorContext) -> Iterator[Check]:
    from pinakes.extract.floors import load_floors

    assert ctx.kb_root is not None
    try:
        floors = load_floors()
    except PinakesError as exc:
        yield Check("pdf floors", "FAIL", exc.render().splitlines()[0], exc.remedy)
    else:
        yield Check("pdf floors", "OK", f"running-head threshold {floors.running_head_threshold}, text-yield "
                                        f"floor {floors.text_yield_floor} characters a page")
    yield from _pages_without_text(KBPaths(ctx.kb_root))


def _pages_without_text(paths: KBPaths) -> Iterator[Check]:
    with readable_index(paths.index_db) as conn:
        if conn is None:
            return
        rows = conn.execute("SELECT path, pages_without_text FROM documents WHERE state = 'active' "
                            "AND pages_without_text IS NOT NULL ORDER BY path").fetchall()
    if not rows:
        yield Check("pdf text layers", "OK", "every indexed PDF page has a usable text layer (or is blank)")
        return
    pages = {path: json.loads(numbers) for path, numbers in rows}
    listed = "; ".join(f"{printable(path)}: pages {', '.join(map(str, numbers[:10]))}"
                       + (" …" if len(numbers) > 10 else "") for path, numbers in list(pages.items())[:SHOWN])
    more = f" (+{len(pages) - SHOWN} more documents)" if len(pages) > SHOWN else ""
    total = sum(len(numbers) for numbers in pages.values())
    from pinakes.extract.ocr_models import unread_pages_advice

    yield Check("pdf text layers", "WARN",
                f"{counted(total, 'page')} in {counted(len(pages), 'document')} {'has' if total == 1 else 'have'} no "
                f"text read (no usable text layer, and none found by OCR) and {'is' if total == 1 else 'are'} "
                f"not searchable: {listed}{more}", unread_pages_advice())
