"""Doctor: paid extractions and their completeness audit (spec §5), read back from the cache.

The audit was computed once, when the extraction was paid for, and stored in its cache entry; this
reads it and re-extracts nothing, spends nothing and imports no paid client. Pages below their
document's median word coverage are named path:page; exempt pages (no native text layer to measure
against) are reported as exempt with their denominator, never as passes.
"""

from __future__ import annotations

from collections.abc import Iterator

from pinakes.doctor import Check, DoctorContext
from pinakes.doctor.index_reading import readable_index
from pinakes.kb import KBPaths
from pinakes.wording import counted, noun_for

# Lines of per-document detail before "and N more".
SHOWN_DOCUMENTS = 5


def checks(ctx: DoctorContext) -> Iterator[Check]:
    from pinakes.extract.audit import audit_from_dict
    from pinakes.extract.cache import ExtractCache

    assert ctx.kb_root is not None
    paths = KBPaths(ctx.kb_root)
    if not paths.extract_cache.is_dir():
        return
    entries = list(ExtractCache(paths.extract_cache).paid_entries())
    if not entries:
        return
    names = _active_paths(paths)
    lines: list[str] = []
    unaudited: list[str] = []
    measured = exempt = total = 0
    for _file, entry in entries:
        path = names.get(entry.content_hash)
        if path is None or entry.partial:
            continue  # an orphan (the index checks report paid orphans), or pages kept to resume from
        audit = audit_from_dict(entry.audit)
        if audit is None:
            unaudited.append(path)
            continue
        total += len(audit.pages)
        measured += len(audit.measured)
        exempt += len(audit.exempt)
        lines.extend(audit.lines(path))
    if lines:
        shown = lines[: SHOWN_DOCUMENTS * 2]
        more = f"\n  … {len(lines) - len(shown)} more {noun_for(len(lines) - len(shown), 'line')}" \
            if len(lines) > len(shown) else ""
        yield Check("paid extraction audit", "OK",
                    f"word coverage against the native layer: {counted(measured, 'page')} measured, exempt {exempt} "
                    f"of {total} (no native layer to measure against)\n  " + "\n  ".join(shown) + more)
    if unaudited:
        yield Check("paid extraction audit", "WARN",
                    f"{counted(len(unaudited), 'paid extraction')} {'carries' if len(unaudited) == 1 else 'carry'} "
                    f"no completeness audit: {', '.join(unaudited[:5])}",
                    "nothing to fix: they were written before the audit existed; the text is still used")


def _active_paths(paths: KBPaths) -> dict[str, str]:
    """content_hash -> path of the active documents (empty without a readable index)."""
    with readable_index(paths.index_db) as conn:
        if conn is None:
            return {}
        return {content_hash: path for content_hash, path in conn.execute(
            "SELECT content_hash, path FROM documents WHERE state = 'active'")}
