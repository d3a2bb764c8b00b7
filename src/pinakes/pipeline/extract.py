"""The extract stage's core: turn one changed document into its indexed text.

The run's extraction backend (`pinakes.pipeline.backends`) decides how: the registry's free
extractor for the document's source type, or, for PDFs on a paid backend, claude-vision through the
budget, with a paid extraction protected from a free run either way. The extractor is chosen by
source type (PDFs by `[extraction] backend` or `--extract`) from the registry, which declares its
fingerprint without importing it; its module is imported by that name only when it runs.

A failure is recorded against the document and the run goes on: one broken file never blocks the
corpus. A file no sync can extract (`UNEXTRACTABLE`) keeps no sidecar this run minted for it
(`pinakes.pipeline.unextractable`). Only an error the backend says ends the run (`RunStopped`) is
raised. The stage's output is `Extracted` (or `Failed`), which the doit glue holds for the chunk
stage, one group of documents at a time. A Markdown document whose front matter declares nothing because it is not YAML is indexed,
and the run warns, naming the file and the line (`FrontMatter.warning`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, cast

from pinakes.errors import PinakesError
from pinakes.pipeline.types import DocWork, Extracted, Failed, RunStopped

if TYPE_CHECKING:
    from pathlib import Path

    from pinakes.extract.registry import ExtractorSpec
    from pinakes.extract.types import ExtractedText
    from pinakes.pipeline.run import SyncContext

# How the run's extraction backend extracts one document (`ExtractionBackend.extract`).
ExtractWith = Callable[["SyncContext", DocWork], "Extracted | None"]


class ExtractorModule(Protocol):
    """What every module the extractor registry names provides (`ExtractorSpec.module`)."""

    def extract(self, path: Path, source_type: str) -> ExtractedText: ...


def extract(ctx: SyncContext, item: DocWork, extract_with: ExtractWith) -> Extracted | Failed | None:
    """What `item` is indexed from, through the run's backend (`extract_with`); `Failed` when it
    failed (recorded); None when there is nothing to index now (the backend kept what the index
    holds, or the budget did not reach it). Raises the error of a `RunStopped`."""
    ctx.progress.document(item.path, phase="extracting")
    from pinakes.extract.ocr import listening

    try:
        with listening(ctx.progress.ocr_pages):  # a scan's pages/s and pages left, page by page
            extracted = extract_with(ctx, item)
    except RunStopped as stop:
        raise stop.error from None
    except PinakesError as exc:
        return _fail(ctx, item, failure_stage(exc), exc.render())
    except Exception as exc:  # a crash inside one extractor must not end the run
        return _fail(ctx, item, failure_stage(exc), f"{type(exc).__name__}: {exc}")
    if extracted is None:
        return None
    text = extracted.text
    if item.source_type == "markdown":  # front matter that declares nothing for a reason is said, not dropped
        from pinakes.extract.front_matter import document_front_matter

        declared = document_front_matter(text.text, item.source_type, ctx.paths.root / item.path)
        warning = declared.warning(item.path)
        if warning is not None:
            ctx.report.warnings.append(warning)
    if text.pages_without_text:
        ctx.report.pages_without_text[item.path] = list(text.pages_without_text)
    return extracted


def run_extractor(ctx: SyncContext, spec: ExtractorSpec, item: DocWork) -> ExtractedText:
    """`item` through the extractor `spec` declares (by its cached result, when it has one)."""
    extracted = _cached(ctx, spec, item)
    if extracted is None:
        module = cast("ExtractorModule", importlib.import_module(spec.module))  # a name from the registry's data
        extracted = module.extract(ctx.paths.root / item.path, item.source_type)
        _store(ctx, spec, item, extracted)
    if spec.ocr is not None and extracted.pages_without_text:  # scanned pages: read by OCR when installed
        from pinakes.extract.cache import ExtractCache
        from pinakes.extract.ocr_pdf import complete_with_ocr

        extracted = complete_with_ocr(extracted, ctx.paths.root / item.path, item.file.content_hash,
                                      ExtractCache(ctx.paths.extract_cache), label=item.path)
    return extracted


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


def _fail(ctx: SyncContext, item: DocWork, stage: str, message: str) -> Failed:
    from pinakes.pipeline.report import UNEXTRACTABLE
    from pinakes.pipeline.unextractable import take_back_minted_sidecar

    ctx.report.fail(item.path, stage, message)
    if stage == UNEXTRACTABLE:
        take_back_minted_sidecar(ctx, item)
    return Failed(item)


def _cached(ctx: SyncContext, spec: ExtractorSpec, item: DocWork) -> ExtractedText | None:
    """Every extractor but the text one goes through the cache (`ExtractorSpec.cached`): re-decoding
    a text file costs less than reading a cache entry for it, and the file is its own indexed text."""
    if not spec.cached:
        return None
    from pinakes.extract.cache import ExtractCache

    hit = ExtractCache(ctx.paths.extract_cache).get(item.file.content_hash, spec.fingerprint())
    return hit.extracted if hit is not None else None


def _store(ctx: SyncContext, spec: ExtractorSpec, item: DocWork, extracted: ExtractedText) -> None:
    if not spec.cached:
        return
    from pinakes.extract.cache import ExtractCache

    ExtractCache(ctx.paths.extract_cache).put(item.file.content_hash, extracted, paid=spec.paid)
