"""extract: turn each changed document into its indexed text (one doit task per document).

The extractor is chosen by source type (PDFs by `[extraction] backend` or `--extract`) from the
registry, which declares its fingerprint without importing it. A failure is recorded against the
document and the run goes on: one broken file never blocks the corpus. Documents stream through in
groups: a group's extraction waits for the previous group's vectors to be committed, so only one
group's text is ever held.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pinakes.errors import PinakesError
from pinakes.extract.registry import ExtractorSpec
from pinakes.extract.types import ExtractedText
from pinakes.pipeline.keys import key_is_current
from pinakes.pipeline.pair import DocWork

if TYPE_CHECKING:
    from pinakes.pipeline.run import SyncContext


def tasks_extract(ctx: SyncContext, group: list[DocWork],
                  after: str | None) -> Iterator[dict[str, object]]:
    """One task per document of `group`; `after` is the task the group must wait for."""
    for item in group:
        yield {
            "basename": "extract",
            "name": item.doc_id,
            "doc": f"extract {item.path}",
            "actions": [(run_extract, [ctx, item])],
            "task_dep": [after] if after else [],
            "uptodate": [key_is_current(ctx.conn, item.doc_id, item.path, item.key)],
            "verbosity": 0,
        }


def run_extract(ctx: SyncContext, item: DocWork) -> bool:
    if item.doc_id in ctx.failed:
        return True
    from pinakes.extract.registry import EXTRACTORS

    ctx.progress.document(item.path, phase="extracting")
    backend = ctx.keys.extractor_backends[item.source_type]
    spec = EXTRACTORS[backend]
    try:
        if spec.paid:  # claude-vision, through the budget (sync/paid.py)
            from pinakes.sync.paid import extract_paid_document

            paid_text = extract_paid_document(ctx, item)
            if paid_text is None:  # kept as indexed, not reached within the budget, or the budget stopped the run
                return ctx.fatal is None
            ctx.extracted[item.doc_id] = paid_text
            return True
        if item.source_type == "pdf":  # a free run never re-extracts a paid extraction (spec §6.4)
            from pinakes.sync.paid import protect

            action, paid_text = protect(ctx, item)
            if action == "keep":
                return True
            if paid_text is not None:
                ctx.extracted[item.doc_id] = paid_text
                return True
        extracted = _cached(ctx, spec, item)
        if extracted is None:
            module = importlib.import_module(spec.module)
            extracted = module.extract(ctx.paths.root / item.path, item.source_type)
            _store(ctx, spec, item, extracted)
        if item.source_type == "pdf":
            from pinakes.sync.paid import after_free_extraction

            after_free_extraction(ctx, item)  # --force with a free --extract: drop the paid record
    except PinakesError as exc:
        _fail(ctx, item, failure_stage(exc), exc.render())
        return True
    except Exception as exc:  # a crash inside one extractor must not end the run
        _fail(ctx, item, failure_stage(exc), f"{type(exc).__name__}: {exc}")
        return True
    ctx.extracted[item.doc_id] = extracted
    if extracted.pages_without_text:
        ctx.report.pages_without_text[item.path] = list(extracted.pages_without_text)
    return True


def failure_stage(exc: Exception) -> str:
    """The stage a failed extraction is recorded under: `UNEXTRACTABLE` when no sync can extract
    the file while its bytes stay as they are, so its remedy is to leave it out; else "extract".

    Permanent: the extractor refused the bytes (`SourceError`: binary, invalid UTF-8, over the size
    cap, a PDF pdfium refuses) or the isolated parser hit a limit or crashed on them (the limits
    scale with the file's size). Not permanent, whatever the file: an OS error reading it, a parser
    killed from outside, timed out on a busy machine's wall clock or that could not start, a missing
    extra, anything of the paid path (a budget stop, a ledger or cache fault, paid text not on this
    machine), and a Pinakes bug."""
    from pinakes.errors import IsolationError, SourceError
    from pinakes.pipeline.report import UNEXTRACTABLE

    if isinstance(exc, IsolationError):
        return UNEXTRACTABLE if exc.kind in _PERMANENT_ISOLATION_KINDS else "extract"
    if isinstance(exc, SourceError) and not isinstance(exc.__cause__, OSError):
        return UNEXTRACTABLE
    return "extract"


# pinakes.extract.isolation.KINDS a rerun on the same bytes meets again: limits that scale with the
# file's size, a fatal signal of the parser's own, a result over the output cap.
_PERMANENT_ISOLATION_KINDS = frozenset({"memory", "cpu", "crash", "output"})


def _fail(ctx: SyncContext, item: DocWork, stage: str, message: str) -> None:
    ctx.report.fail(item.path, stage, message)
    ctx.failed.add(item.doc_id)


def _cached(ctx: SyncContext, spec: ExtractorSpec, item: DocWork) -> ExtractedText | None:
    """Only extractors that declare themselves expensive (PDFs) go through the cache: re-decoding a
    text file costs less than reading a cache entry for it."""
    if "pdf" not in spec.source_types:
        return None
    from pinakes.extract.cache import ExtractCache

    hit = ExtractCache(ctx.paths.extract_cache).get(item.file.content_hash, spec.fingerprint())
    return hit.extracted if hit is not None else None


def _store(ctx: SyncContext, spec: ExtractorSpec, item: DocWork, extracted: ExtractedText) -> None:
    if "pdf" not in spec.source_types:
        return
    from pinakes.extract.cache import ExtractCache

    ExtractCache(ctx.paths.extract_cache).put(item.file.content_hash, extracted, paid=spec.paid)
