"""The completeness audit of a paid extraction (spec §5): it reports, it never re-extracts.

Each page's `word_coverage` (pinakes.extract.quality: the native layer's significant words that the
paid text still has) is computed once, right after the paid extraction, and stored in its cache
entry; the sync report and `pnk doctor` read it back from there. Pages scoring below their own
document's median are named `path:page`. A page is exempt when there is nothing to measure: its
native layer yields less than the text-yield floor (a scan), or holds no significant word. Exempt
is reported as exempt with its denominator ("exempt 3 of 10"), never scored as a pass or a zero.

Pure and free: no network, no client, no extractor. Imported on the free path (doctor) as well.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from pinakes.jsontypes import is_dict, is_list
from pinakes.wording import counted

EXEMPT_NO_LAYER = "no native text layer"
EXEMPT_NO_WORDS = "no significant words in the native layer"


@dataclass(frozen=True)
class PageAudit:
    page: int  # 1-based
    covered: int  # significant native words the paid text has
    significant: int  # significant native words (the denominator)
    exempt: str | None = None

    @property
    def coverage(self) -> float | None:
        return None if self.exempt else self.covered / self.significant

    def to_dict(self) -> dict[str, object]:
        return {"page": self.page, "covered": self.covered, "significant": self.significant,
                "exempt": self.exempt}


@dataclass(frozen=True)
class DocumentAudit:
    pages: tuple[PageAudit, ...]

    @property
    def measured(self) -> list[PageAudit]:
        return [page for page in self.pages if page.exempt is None]

    @property
    def exempt(self) -> list[PageAudit]:
        return [page for page in self.pages if page.exempt is not None]

    @property
    def median(self) -> float | None:
        values = [page.coverage for page in self.measured if page.coverage is not None]
        return statistics.median(values) if values else None

    def below_median(self) -> list[PageAudit]:
        median = self.median
        if median is None:
            return []
        return [page for page in self.measured if page.coverage is not None and page.coverage < median]

    def to_dict(self) -> dict[str, object]:
        return {"metric": "word_coverage", "pages": [page.to_dict() for page in self.pages]}

    def lines(self, path: str) -> list[str]:
        """What the sync report and doctor say about this document."""
        total = len(self.pages)
        exempt = self.exempt
        median = self.median
        parts: list[str] = []
        if median is None:
            parts.append(f"{path}: no page could be measured against a native text layer "
                         f"(exempt {len(exempt)} of {total})")
            return parts
        low = self.below_median()
        head = f"{path}: word coverage median {median:.2f} over {counted(len(self.measured), 'measured page')}"
        if exempt:
            head += f"; exempt {len(exempt)} of {total}"
        parts.append(head)
        if low:
            parts.append("  below the median: " + ", ".join(
                f"{path}:{page.page} ({page.coverage:.2f})" for page in low if page.coverage is not None))
        return parts


def audit_pages(native_pages: Sequence[str], paid_pages: Sequence[str], *,
                text_yield_floor: float) -> DocumentAudit:
    """Each page's word_coverage of the native layer by the paid text; pages beyond the shorter
    list have no native layer to measure against."""
    from pinakes.extract.quality import word_coverage

    audits: list[PageAudit] = []
    for index, paid in enumerate(paid_pages):
        native = native_pages[index] if index < len(native_pages) else ""
        if sum(1 for ch in native if not ch.isspace()) < text_yield_floor:
            audits.append(PageAudit(index + 1, 0, 0, EXEMPT_NO_LAYER))
            continue
        ratio = word_coverage(native, paid)
        if not ratio.denominator:
            audits.append(PageAudit(index + 1, 0, 0, EXEMPT_NO_WORDS))
            continue
        audits.append(PageAudit(index + 1, ratio.numerator, ratio.denominator))
    return DocumentAudit(tuple(audits))


def audit_from_dict(payload: object) -> DocumentAudit | None:
    """An audit read back from a cache entry; None when absent or not recognisable."""
    if not is_dict(payload) or payload.get("metric") != "word_coverage":
        return None
    pages = payload.get("pages")
    if not is_list(pages):
        return None
    audits: list[PageAudit] = []
    for page in pages:
        if not is_dict(page):
            return None
        try:
            exempt = page.get("exempt")
            audits.append(PageAudit(_whole(page["page"]), _whole(page["covered"]), _whole(page["significant"]),
                                    str(exempt) if exempt is not None else None))
        except (KeyError, TypeError, ValueError):
            return None
    return DocumentAudit(tuple(audits))


def _whole(value: object) -> int:
    """`int(value)` for what a JSON number or numeral can be; a TypeError for anything else."""
    if isinstance(value, (int, float, str)):
        return int(value)
    raise TypeError(f"not a number: {value!r}")
