"""The paid rows of a sync (spec §5, §6.3, §6.4): plan the whole run before call 0, extract through
claude-vision, and keep every paid extraction safe from a free run.

`prepare(ctx)` runs after pairing and before the pipeline. On a paid backend it decides, for each
PDF the plan must (re)build, whether a call is needed at all: an extraction cache hit, or a native
text layer the free extractor finds healthy (every page above the fitted text-yield floor; paying
for it anyway takes `--force`), needs none. Everything left is priced as one run by the accountant
before the first request (every blocked window named at once, the confirm prompt, no terminal =
abort); the API key is read only then, so a run with nothing to pay for needs none.

`extract_paid_document` (the paid branch of `PaidExtraction.extract`, pinakes.pipeline.backends)
then extracts one document, all or nothing: its text goes to the cache with the operation_id and call_ids that join it to the ledger,
its completeness audit beside it, and `provenance.extraction` into its sidecar.

A paid result is never thrown away once paid for. A fault of a store that holds paid text or its
cost — the extraction cache refusing the entry (disk full, an unwritable or immutable directory),
the ledger refusing the reconciliation — is a stop, not a document failure: the document that was
paid for is still indexed from the text in hand (the index is where the next run finds it, without
paying), no further paid call is made in this run, and the sync ends with that fault's error
(`finish` raises it). Before call 0, `prepare` checks the cache takes a write at all.

`protect` (the free branch, PDFs only) applies §6.4's rows for a document whose sidecar records a
paid extraction: never re-extracted for free while the file is unchanged (the index row or the
cache supplies the text); a changed file is a failure pointing at the paid run; an unchanged file
whose text is nowhere on this machine is PaidExtractionUnavailableError, never "changed". Only
`--force` with an explicit free `--extract` overrides, and it names what it discarded.

The pipeline reaches all of this through its extraction backend (pinakes.pipeline.backends), never
directly; `pinakes.paid` is another thing, the rules of one paid call. This module imports no paid
client: `pinakes.extract.claude_vision` (allowlisted) is imported only
when a paid backend is in effect, and it imports the SDK only when it makes a call.
"""

from __future__ import annotations

import contextlib
import shlex
import sqlite3
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pinakes.budget.money import format_eur
from pinakes.errors import (
    FilesystemError,
    PaidExtractionFailedError,
    PaidExtractionUnavailableError,
    PinakesError,
    SidecarError,
    UsageError,
)
from pinakes.extract.registry import EXTRACTORS
from pinakes.pipeline.backends import RunStopped
from pinakes.wording import counted

if TYPE_CHECKING:
    from pinakes.budget import BudgetExceededError, Plan
    from pinakes.extract.audit import DocumentAudit
    from pinakes.extract.cache import ExtractCache
    from pinakes.extract.types import ExtractedText
    from pinakes.manifest import Manifest
    from pinakes.pipeline.pair import DocWork
    from pinakes.pipeline.run import SyncContext, SyncOptions
    from pinakes.sidecar import Sidecar

FREE_PDF_BACKEND = "pypdfium2"


@dataclass(frozen=True)
class Decision:
    kind: str  # "cached" | "free-healthy" | "pay" | "same-bytes" | "not-admitted" | "failed"
    pages: int = 0
    message: str = ""  # "failed": why; "same-bytes": the path of the document that pays for them
    pages_done: int = 0  # "pay": leading pages an earlier run paid for (kept in the cache), not asked again


@dataclass
class PaidState:
    """What one sync knows about paid extraction (also on a free run: the protected paths)."""

    backend: str
    paid: bool
    decisions: dict[str, Decision] = field(default_factory=dict[str, Decision])  # doc_id -> what to do
    plan: Plan | None = None
    client: Any = None
    stopped: PinakesError | None = None  # on_exceed = partial: the breach that ended the paying
    healthy: list[str] = field(default_factory=list[str])  # paid backend, free layer kept (no --force)
    not_reached: list[str] = field(default_factory=list[str])  # never paid for: cut by the budget
    protected: list[str] = field(default_factory=list[str])  # free run, paid extraction kept
    discarded: list[str] = field(default_factory=list[str])  # --force + free --extract overrode these
    audits: list[tuple[str, DocumentAudit]] = field(default_factory=list["tuple[str, DocumentAudit]"])
    discard_pending: set[str] = field(default_factory=set[str])  # doc_ids whose paid record goes on success
    # A store of paid text or its cost refused a write: no further paid call in this run (module docstring).
    store_fault: PinakesError | None = None
    paid_here: dict[str, ExtractedText] = field(default_factory=dict[str, "ExtractedText"])  # content hash -> text paid for in this run
    kept_uncached: list[str] = field(default_factory=list[str])  # paid for, indexed, but not in the cache
    held_back: list[str] = field(default_factory=list[str])  # not paid for because of the store fault


def state_of(ctx: SyncContext) -> PaidState:
    if ctx.paid is None:
        backend = ctx.keys.extractor_backends.get("pdf", FREE_PDF_BACKEND)
        spec = EXTRACTORS.get(backend)
        ctx.paid = PaidState(backend, bool(spec and spec.paid))
    return ctx.paid


def paid_fingerprint(ctx: SyncContext) -> str:
    """The fingerprint this run's paid extractions are made, cached and indexed under: the backend's
    with the model `[extraction] model` names (another model's text is another extraction)."""
    return EXTRACTORS[state_of(ctx).backend].fingerprint(ctx.manifest.extraction.model)


def rerun_command(ctx: SyncContext) -> str:
    """The command that runs this sync again as it was asked for (a remedy names it: a paid backend
    chosen by `--extract` is not the one a bare `pnk sync` would use)."""
    command = "pnk sync"
    if ctx.options.extract_backend is not None:
        command += f" --extract={ctx.options.extract_backend}"
    if ctx.options.force:
        command += " --force"
    if ctx.options.api_key_file is not None:
        command += f" --api-key-file {shlex.quote(str(ctx.options.api_key_file))}"
    return command


def _cache(ctx: SyncContext) -> ExtractCache:
    from pinakes.extract.cache import ExtractCache

    return ExtractCache(ctx.paths.extract_cache, rerun=rerun_command(ctx))


# --- before the pipeline ---------------------------------------------------------------------------


def check_run(manifest: Manifest, options: SyncOptions) -> None:
    """Refuse, before anything runs, a combination the paid rows cannot honour."""
    backend = options.extract_backend or manifest.extraction.backend
    spec = EXTRACTORS.get(backend)
    if options.index_only and spec is not None and spec.paid:
        raise UsageError(f"--index-only never writes into the source tree, and a paid extraction records "
                         f"itself in the document's sidecar; backend {backend!r} cannot run under it",
                         remedy="run `pnk sync` (a deliberate paid run), or force the free backend: "
                                "`pnk sync --index-only --extract=pypdfium2`")


def force_into_plan(ctx: SyncContext) -> None:
    """`--force` reaches documents whose stored key is current (spec §6.3's two overrides): on a paid
    backend, PDFs indexed from their healthy free layer; with an explicit free `--extract`, PDFs
    indexed from a paid extraction. Their stored key is cleared first, so the steps see them as due
    (a run stopped after this re-processes them next time, which is harmless)."""
    state = state_of(ctx)
    explicit_free = ctx.options.extract_backend is not None and not state.paid
    if not ctx.options.force or ctx.rebuilding or not (state.paid or explicit_free):
        return
    from pinakes.index.schema import transaction
    from pinakes.pipeline.context import context_naming
    from pinakes.pipeline.pair import DocWork

    plan, walk, conn = ctx.require_plan(), ctx.require_walk(), ctx.writer()
    planned = {item.doc_id for item in plan.work}
    paid_backends = [name for name, spec in EXTRACTORS.items() if spec.paid]
    rows = conn.execute("SELECT id, path, extraction_backend, json_extract(metadata, '$.title') FROM documents "
                        "WHERE state = 'active' AND source_type = 'pdf'").fetchall()
    due = [(doc_id, path, title) for doc_id, path, backend, title in rows
           if doc_id not in planned and path in walk.docs and path in walk.sidecars
           and ((backend not in paid_backends) if state.paid else (backend in paid_backends))]
    if not due:
        return
    with transaction(conn):
        conn.executemany("UPDATE documents SET build_key = NULL WHERE id = ?", [(doc_id,) for doc_id, _, _ in due])
    for doc_id, path, title in due:  # not in the plan: its sidecar is as indexed, title included
        file = walk.docs[path]
        plan.work.append(DocWork(doc_id, path, "pdf", file, None, walk.sidecars[path].content_hash,
                                 ctx.keys.key(file.content_hash, "pdf", context_naming(title, path)), "rekeyed"))
    plan.work.sort(key=lambda item: item.path)


def prepare(ctx: SyncContext) -> None:
    """Decide what each PDF of the plan needs and, when anything needs paying for, check the whole
    run with the accountant before the first call (raising its refusal, which stops the sync)."""
    state = state_of(ctx)
    if not state.paid:
        return
    pdfs = [item for item in ctx.require_plan().work if item.source_type == "pdf"]
    if not pdfs:
        return
    from pinakes.extract import claude_vision

    cache = _cache(ctx)
    fingerprint = paid_fingerprint(ctx)
    to_pay: list[DocWork] = []
    paying: dict[str, DocWork] = {}  # content hash -> the document of this run that pays for those bytes
    for item in pdfs:
        if _indexed_as(ctx, item, state.backend, fingerprint):
            continue  # this index holds it already (a rebuild carried it): kept, never paid for again
        if cache.get(item.file.content_hash, fingerprint) is not None:
            state.decisions[item.doc_id] = Decision("cached")
            continue
        first = paying.get(item.file.content_hash)
        if first is not None:  # the extraction cache is keyed by bytes: one payment serves both
            state.decisions[item.doc_id] = Decision("same-bytes", message=first.path)
            continue
        try:
            native = _native(ctx, cache, item)
        except PinakesError as exc:
            state.decisions[item.doc_id] = Decision("failed", message=exc.render())
            continue
        pages = len(native.pages or ())
        if pages and not native.pages_without_text and not ctx.options.force:
            state.decisions[item.doc_id] = Decision("free-healthy", pages)
            continue
        if not pages:
            state.decisions[item.doc_id] = Decision("failed", message="the PDF has no pages; nothing to extract")
            continue
        resume, _ = _paid_before(cache, item, fingerprint, pages)
        state.decisions[item.doc_id] = Decision("pay", pages, pages_done=len(resume))
        to_pay.append(item)
        paying[item.file.content_hash] = item
    if not to_pay:
        return
    cache.check_writable()  # every extraction paid for is kept there: refuse before paying, not after

    from pinakes.budget import Accountant
    from pinakes.paid import read_api_key

    key = read_api_key(ctx.options.api_key_file)
    accountant = Accountant.open(ctx.paths.root, ctx.manifest.budget, kb_id=ctx.kb_id)
    shapes = [shape for item in to_pay for shape in claude_vision.document_shapes(
        state.decisions[item.doc_id].pages, item.path, model=ctx.manifest.extraction.model,
        pages_done=state.decisions[item.doc_id].pages_done)]
    ctx.progress.close()  # a confirmation prompt must not share the line with a progress bar
    plan = accountant.plan(operation="extract", calls=shapes, interactive=sys.stdin.isatty(),
                           force=ctx.options.force)
    cut = {item.file.content_hash for item in to_pay[plan.admitted_units:]}
    for item in pdfs:
        if item.file.content_hash in cut and state.decisions.get(item.doc_id, Decision("")).kind in ("pay",
                                                                                                   "same-bytes"):
            state.decisions[item.doc_id] = Decision("not-admitted")
    state.plan = plan
    state.client = claude_vision.make_client(key)
    ctx.report.notes.append(f"paid extraction: {plan.describe()}")


def _native(ctx: SyncContext, cache: ExtractCache, item: DocWork) -> ExtractedText:
    """The free extraction of `item` (cached, else extracted and cached): the health check's input
    and the completeness audit's witness."""
    spec = EXTRACTORS[FREE_PDF_BACKEND]
    hit = cache.get(item.file.content_hash, spec.fingerprint())
    if hit is not None:
        return hit.extracted
    from pinakes.extract.pdf import extract

    extracted = extract(ctx.paths.root / item.path, "pdf")
    with contextlib.suppress(FilesystemError):  # free text, re-extracted next time: no reason to stop
        cache.put(item.file.content_hash, extracted, paid=False)
    return extracted


# --- the paid branch of the extract step -----------------------------------------------------------


def extract_paid_document(ctx: SyncContext, item: DocWork) -> ExtractedText | None:
    """The text `item` is indexed from on a paid backend, or None when there is nothing to index
    now (kept as indexed, or not reached within the budget). Raises PinakesError for a document
    failure, and RunStopped with the budget's error when it stops the run (on_exceed = abort)."""
    state = state_of(ctx)
    fingerprint = paid_fingerprint(ctx)
    renamed = _renamed_paid_text(ctx, item, fingerprint)
    if renamed is not None:
        return renamed
    if _keep_indexed_row(ctx, item, state.backend, fingerprint):
        return None
    decision = state.decisions.get(item.doc_id, Decision("failed", message="not planned (a Pinakes bug)"))
    cache = _cache(ctx)
    if decision.kind == "failed":
        raise PinakesError(decision.message)
    if decision.kind == "cached":
        hit = cache.get(item.file.content_hash, fingerprint)
        if hit is None:
            raise PaidExtractionUnavailableError("the paid extraction this run planned to reuse left the "
                                                 "cache during the run", remedy=f"run `{rerun_command(ctx)}` again")
        _record_provenance(ctx, item, state.backend, fingerprint, only_if_missing=True)
        return hit.extracted
    if decision.kind == "free-healthy":
        state.healthy.append(item.path)
        return _native(ctx, cache, item)
    if decision.kind == "same-bytes":
        return _same_bytes(ctx, state, item, cache, fingerprint, decision.message)
    if state.store_fault is not None:
        state.held_back.append(item.path)
        return None
    if decision.kind == "not-admitted" or state.stopped is not None:
        state.not_reached.append(item.path)
        return None
    return _pay(ctx, state, item, cache, fingerprint)


def _same_bytes(ctx: SyncContext, state: PaidState, item: DocWork, cache: ExtractCache, fingerprint: str,
                payer: str) -> ExtractedText | None:
    """What `payer` (earlier in this run, the same bytes) was extracted to: never paid for twice."""
    extracted = state.paid_here.get(item.file.content_hash)
    hit = cache.get(item.file.content_hash, fingerprint) if extracted is None else None
    if extracted is None and hit is not None:
        extracted = hit.extracted
    if extracted is None:
        if state.store_fault is not None:
            state.held_back.append(item.path)
            return None
        if state.stopped is not None:
            state.not_reached.append(item.path)
            return None
        raise PaidExtractionFailedError(
            f"this file has the same bytes as {payer}, whose paid extraction did not complete in this run; "
            "it is not paid for twice", remedy=f"see the failure reported for that file, then run `{rerun_command(ctx)}` again")
    _record_provenance(ctx, item, state.backend, fingerprint, only_if_missing=False)
    return extracted


def _pay(ctx: SyncContext, state: PaidState, item: DocWork, cache: ExtractCache,
         fingerprint: str) -> ExtractedText | None:
    """Pay for `item` and keep what was paid for: in the cache, else (a store fault, which stops the
    paying) indexed from the text in hand."""
    from pinakes.budget import BudgetExceededError, UnrecordedOutcomeError
    from pinakes.extract import claude_vision
    from pinakes.extract.cache import partial_fingerprint
    from pinakes.extract.types import ExtractedText

    plan = state.plan
    assert plan is not None
    calls_before = len(plan.call_ids)
    pages = state.decisions[item.doc_id].pages
    resume, resume_call_ids = _paid_before(cache, item, fingerprint, pages)

    def keep_slices(texts: Sequence[str], call_ids: Sequence[str]) -> None:
        cache.put(item.file.content_hash, ExtractedText.from_pages(
            texts, claude_vision.PAGE_SEPARATOR, backend=state.backend, fingerprint=partial_fingerprint(fingerprint)),
            paid=True, operation_id=plan.operation_id, call_ids=call_ids)

    try:
        result = claude_vision.extract_paid(ctx.paths.root / item.path, client=state.client, plan=plan,
                                            unit=item.path, model=ctx.manifest.extraction.model,
                                            retry=f"run `{rerun_command(ctx)}` again to retry the document",
                                            resume=resume, resume_call_ids=resume_call_ids,
                                            keep_slices=keep_slices)
    except BudgetExceededError as exc:
        return _budget_stopped(ctx, state, item, exc, calls_made=len(plan.call_ids) - calls_before)
    except UnrecordedOutcomeError as exc:  # nothing whole came back to keep; the fault still stops the run
        _stop_paying(state, exc)
        raise PaidExtractionFailedError(f"not indexed: the ledger refused the outcome of call {exc.call_id} "
                                        "(the run stops before its next paid call; its error follows)",
                                        remedy=exc.remedy) from None
    except FilesystemError as exc:  # the ledger or the cache refused a write part-way through the document
        _stop_paying(state, exc)
        raise PaidExtractionFailedError("not indexed: a store of paid text or its cost refused a write (the run "
                                        "stops before its next paid call; its error follows)",
                                        remedy=exc.remedy) from None
    state.paid_here[item.file.content_hash] = result.extracted
    if result.unrecorded is not None:
        _stop_paying(state, result.unrecorded)
    audit = _audit(ctx, cache, item, result.page_texts)
    try:
        cache.put(item.file.content_hash, result.extracted, paid=True, operation_id=plan.operation_id,
                  call_ids=result.call_ids, audit=audit.to_dict() if audit is not None else None)
    except FilesystemError as exc:
        state.kept_uncached.append(item.path)
        exc.message = (f"{exc.message}; the run stopped before its next paid call, so nothing more is paid "
                       "for that could not be kept")
        _stop_paying(state, exc)
    else:
        cache.remove(item.file.content_hash, partial_fingerprint(fingerprint))  # superseded by the whole
    if audit is not None:
        state.audits.append((item.path, audit))
    _record_provenance(ctx, item, state.backend, fingerprint, only_if_missing=False)
    return result.extracted


def _paid_before(cache: ExtractCache, item: DocWork, fingerprint: str,
                 pages: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(page texts, call_ids) of the leading slices of `item` an earlier run paid for and kept,
    when they can be resumed from; else two empty tuples."""
    from pinakes.extract import claude_vision
    from pinakes.extract.cache import partial_fingerprint

    hit = cache.get(item.file.content_hash, partial_fingerprint(fingerprint))
    if hit is None:
        return (), ()
    texts = claude_vision.resumable([hit.extracted.text[start:end] for start, end in hit.extracted.pages or ()],
                                    pages)
    return (texts, hit.call_ids or ()) if texts else ((), ())


def _audit(ctx: SyncContext, cache: ExtractCache, item: DocWork, page_texts: tuple[str, ...]) -> DocumentAudit | None:
    """The completeness audit of a paid extraction against the free text layer, or None when the
    free layer cannot be read now: an audit is a report, never a reason to lose paid text."""
    from pinakes.extract.audit import audit_pages
    from pinakes.extract.floors import load_floors

    try:
        native = _native(ctx, cache, item)
    except PinakesError:
        return None
    native_pages = [native.text[start:end] for start, end in native.pages or ()]
    return audit_pages(native_pages, list(page_texts), text_yield_floor=load_floors().text_yield_floor)


def _stop_paying(state: PaidState, fault: PinakesError) -> None:
    """No paid call after this one in this run (the first fault is the one reported)."""
    if state.store_fault is None:
        state.store_fault = fault


def _budget_stopped(ctx: SyncContext, state: PaidState, item: DocWork, exc: BudgetExceededError, *,
                    calls_made: int) -> ExtractedText | None:
    """The budget refused a call of `item` (`calls_made` of its calls were made before it)."""
    if ctx.manifest.budget.on_exceed == "abort" or exc.stops_every_run:  # an open overrun: partial too
        exc.details = [f"the budget stopped the run at {item.path}; documents extracted before it "
                       "are kept in the extraction cache and the ledger"]
        raise RunStopped(exc)
    state.stopped = exc
    if calls_made == 0:  # nothing of it was paid for: not reached, like every document after it
        state.not_reached.append(item.path)
        return None
    raise PaidExtractionFailedError(
        f"the budget stopped the run part-way through this document, after {counted(calls_made, 'paid call')} for it "
        "(on_exceed = partial keeps whole documents only); it is not indexed in part, and the pages paid for "
        f"are kept in the extraction cache, so the next run pays only for the rest: {exc.message}",
        remedy=exc.remedy) from None


def _record_provenance(ctx: SyncContext, item: DocWork, backend: str, fingerprint: str, *,
                       only_if_missing: bool) -> None:
    """`provenance.extraction` in the sidecar (spec §2.2): the one sidecar rewrite a sync makes."""
    from pinakes.sidecar import sidecar_path_for, update_sidecar

    path = sidecar_path_for(ctx.paths.root / item.path)
    if only_if_missing:
        recorded = _sidecar(ctx, item).extraction or {}
        if (recorded.get("backend"), recorded.get("fingerprint"), recorded.get("content_hash")) == \
                (backend, fingerprint, item.file.content_hash):
            return
    record = {"backend": backend, "fingerprint": fingerprint,
              "extracted": datetime.now(UTC).isoformat(timespec="seconds"),
              "content_hash": item.file.content_hash}
    _written(item, update_sidecar(path, kb_id=ctx.kb_id, provenance_extraction=record))


def _written(item: DocWork, sidecar: Sidecar) -> None:
    """The row written beside the chunks carries the sidecar as it now is on disk."""
    item.sidecar = sidecar
    item.sidecar_hash = sidecar.raw_hash


# --- the free branch: protecting paid extractions --------------------------------------------------


def protect(ctx: SyncContext, item: DocWork) -> tuple[str, ExtractedText | None]:
    """§6.4's paid rows on a free run: ("extract", None) to extract for free as usual,
    ("use", text) to index the paid text again, ("keep", None) when the index already holds it.
    Raises for the failure rows."""
    try:
        recorded = _sidecar(ctx, item).extraction
    except SidecarError:
        return "extract", None  # the write step reports the broken sidecar
    spec = EXTRACTORS.get(str((recorded or {}).get("backend")))
    if recorded is None or spec is None or not spec.paid:
        return "extract", None
    state = state_of(ctx)
    explicit_free = ctx.options.extract_backend is not None and not EXTRACTORS[ctx.options.extract_backend].paid
    if ctx.options.force and explicit_free:
        state.discard_pending.add(item.doc_id)
        return "extract", None
    extracted_on = recorded.get("extracted", "an earlier run")
    if recorded.get("content_hash") != item.file.content_hash:
        raise PinakesError(
            f"this PDF changed since its paid {spec.name} extraction ({extracted_on}); a free run never "
            "overwrites a paid extraction, so it stays indexed as it was",
            remedy=f"pay for the new version: `pnk sync --extract={spec.name}`; or replace it with the free "
                   f"text: `pnk sync --force --extract={FREE_PDF_BACKEND}`")
    fingerprint = str(recorded.get("fingerprint"))
    renamed = _renamed_paid_text(ctx, item, fingerprint)
    if renamed is not None:
        state.protected.append(item.path)
        return "use", renamed
    if _keep_indexed_row(ctx, item, spec.name, fingerprint):
        state.protected.append(item.path)
        return "keep", None
    from pinakes.extract.cache import ExtractCache

    hit = ExtractCache(ctx.paths.extract_cache).get(item.file.content_hash, fingerprint) \
        if fingerprint.isalnum() else None
    if hit is not None:
        state.protected.append(item.path)
        return "use", hit.extracted
    raise PaidExtractionUnavailableError(
        f"this PDF is unchanged since its paid {spec.name} extraction ({extracted_on}), but the extracted "
        "text is on no store on this machine (no extraction cache entry, no index row) — typically the "
        "first sync of a fresh clone; it is not indexed rather than re-extracted for free",
        remedy=f"pay for it again here: `pnk sync --extract={spec.name}`; or index the free text instead: "
               f"`pnk sync --force --extract={FREE_PDF_BACKEND}`")


def after_free_extraction(ctx: SyncContext, item: DocWork) -> None:
    """`--force` with a free `--extract` replaced a paid extraction: drop the record, name it."""
    state = state_of(ctx)
    if item.doc_id not in state.discard_pending:
        return
    from pinakes.sidecar import sidecar_path_for, update_sidecar

    recorded = _sidecar(ctx, item).extraction or {}
    _written(item, update_sidecar(sidecar_path_for(ctx.paths.root / item.path), kb_id=ctx.kb_id,
                                  provenance_extraction=None))
    state.discarded.append(f"{item.path} ({recorded.get('backend')}, extracted {recorded.get('extracted')})")


# --- shared ----------------------------------------------------------------------------------------


def _sidecar(ctx: SyncContext, item: DocWork) -> Sidecar:
    if item.sidecar is None:
        from pinakes.sidecar import read_sidecar, sidecar_path_for

        _written(item, read_sidecar(sidecar_path_for(ctx.paths.root / item.path), kb_id=ctx.kb_id))
    assert item.sidecar is not None
    return item.sidecar


def _indexed_as(ctx: SyncContext, item: DocWork, backend: str, fingerprint: str) -> bool:
    """Whether this sync's index holds `item` at its path, its current content, extracted by
    (backend, fingerprint)."""
    row = ctx.writer().execute("SELECT content_hash, extraction_backend, extraction_fingerprint FROM documents "
                               "WHERE id = ? AND state = 'active' AND path = ?", (item.doc_id, item.path)).fetchone()
    return row is not None and tuple(row) == (item.file.content_hash, backend, fingerprint)


def _renamed_paid_text(ctx: SyncContext, item: DocWork, fingerprint: str) -> ExtractedText | None:
    """The cached paid text of a document whose title or file name's words changed (its chunks'
    context with them), so it is chunked again under its new context for free; None otherwise, or
    when the cache no longer has it (then its indexed row is kept, context and all)."""
    if not item.context_renamed or not fingerprint.isalnum():
        return None
    hit = _cache(ctx).get(item.file.content_hash, fingerprint)
    return hit.extracted if hit is not None else None


def _keep_indexed_row(ctx: SyncContext, item: DocWork, backend: str, fingerprint: str) -> bool:
    """When this index already holds `item` extracted by (backend, fingerprint) at its current
    content, re-point its build key instead of re-chunking and re-embedding: the stored text is the
    extraction. The sidecar's metadata is refreshed in the same transaction."""
    from pinakes.index.schema import transaction
    from pinakes.links.store import write_links

    if not _indexed_as(ctx, item, backend, fingerprint):
        return False
    conn = ctx.writer()
    try:
        sidecar = _sidecar(ctx, item)
    except SidecarError:
        return False  # rebuilt normally, where the broken sidecar is reported
    with transaction(conn):
        conn.execute("UPDATE documents SET build_key = ?, sidecar_hash = ?, metadata = ?, "
                     "title = COALESCE(?, title) WHERE id = ?",
                     (item.key, sidecar.raw_hash, sidecar.metadata_json(), sidecar.title, item.doc_id))
        write_links(conn, ctx.kb_id, item.doc_id, sidecar.links)
    return True


# --- --rebuild: paid extractions carried across from the index being replaced ----------------------


@dataclass(frozen=True)
class CarryPlan:
    """What the old index holds that a rebuild must not lose: every active, paid-extracted document,
    keyed on doc_id (spec §6.4). `skipped` says why nothing can be carried, when nothing can."""

    doc_ids: tuple[str, ...] = ()
    skipped: str | None = None


def paid_rows_to_carry(previous: sqlite3.Connection | None, manifest: Manifest) -> CarryPlan:
    """Read, before the new database is created, which documents the old index holds from a paid
    extraction. Keyed on doc_id alone: the one identifier a renamed sidecar still carries, and unique
    (a content_hash key would let a later document with the same bytes inherit another's chunks).

    Vectors from two embedding models cannot be mixed, so after a model change nothing is carried:
    those documents come back from the extraction cache, or fail as PaidExtractionUnavailableError."""
    if previous is None:
        return CarryPlan()
    from pinakes.embed.coherence import check_manifest_coherence
    from pinakes.errors import ModelMismatchError

    paid_backends = [name for name, spec in EXTRACTORS.items() if spec.paid]
    try:
        rows = previous.execute(
            f"SELECT id FROM documents WHERE state = 'active' AND extraction_backend IN "
            f"({', '.join('?' * len(paid_backends))}) ORDER BY id", paid_backends).fetchall()
        if not rows:
            return CarryPlan()
        meta = dict(previous.execute("SELECT key, value FROM meta").fetchall())
    except sqlite3.Error:
        return CarryPlan()  # an old index too damaged to read: identities come from the sidecars
    try:
        check_manifest_coherence(meta, manifest.embedding)
    except ModelMismatchError:
        return CarryPlan(skipped=f"{counted(len(rows), 'paid extraction')} {'was' if len(rows) == 1 else 'were'} "
                                 "not carried across the rebuild: the "
                                 "embedding model changed, and their old vectors cannot be mixed with the "
                                 "new ones (they are re-embedded from the extraction cache where it has them)")
    return CarryPlan(tuple(row[0] for row in rows))


def carry_paid_rows(ctx: SyncContext, carry: CarryPlan, old_index: Path) -> None:
    """Copy each carried document's row, chunks, vectors and authored links from `old_index` into
    the rebuild's new database with ATTACH DATABASE — at the old content_hash, never re-extracted —
    for every one the walk still finds as a PDF (at its current path: a rename keeps its doc_id).

    The row's build key is cleared, so the extract step still meets it: on a free run `protect`
    keeps it when the sidecar says the file is unchanged since its paid extraction, and records the
    failure pointing at the paid run when it changed (the old text stays searchable); on a paid run
    an unchanged document is kept rather than paid for again. Independent of the extraction cache,
    so `--clear-cache` and `--rebuild` compose in either order."""
    if carry.skipped:
        ctx.report.notes.append(carry.skipped)
    if not carry.doc_ids:
        return
    from pinakes.index.schema import transaction
    from pinakes.links.text_edges import carry_text_links

    current = {item.doc_id: item.path for item in ctx.require_plan().work if item.source_type == "pdf"}
    moves = [(doc_id, current[doc_id]) for doc_id in carry.doc_ids if doc_id in current]
    if not moves:
        return
    conn = ctx.writer()
    conn.execute("ATTACH DATABASE ? AS carried", (str(old_index),))
    try:
        with transaction(conn):
            conn.execute("CREATE TEMP TABLE carry_moves (id TEXT PRIMARY KEY, path TEXT NOT NULL)")
            conn.executemany("INSERT INTO carry_moves (id, path) VALUES (?, ?)", moves)
            columns = _shared_columns(conn, "documents", exclude={"id", "path", "build_key", "state"})
            conn.execute(f"INSERT INTO main.documents (id, path, build_key, state, {columns}) "
                         f"SELECT d.id, m.path, NULL, 'active', {_qualified('d', columns)} "
                         "FROM carried.documents d JOIN carry_moves m ON m.id = d.id")
            columns = _shared_columns(conn, "chunks", exclude=set())
            conn.execute(f"INSERT INTO main.chunks ({columns}) SELECT {_qualified('c', columns)} "
                         "FROM carried.chunks c JOIN carry_moves m ON m.id = c.doc_id")
            columns = _shared_columns(conn, "embeddings", exclude=set())  # text_key too, where it has one
            conn.execute(f"INSERT INTO main.embeddings ({columns}) SELECT {_qualified('e', columns)} "
                         "FROM carried.embeddings e JOIN carried.chunks c ON c.id = e.chunk_id "
                         "JOIN carry_moves m ON m.id = c.doc_id")
            conn.execute("INSERT OR IGNORE INTO main.links (src_kb_id, src_doc_id, dst_kb_id, dst_doc_id, rel, "
                         "origin) SELECT l.src_kb_id, l.src_doc_id, l.dst_kb_id, l.dst_doc_id, l.rel, l.origin "
                         "FROM carried.links l JOIN carry_moves m ON m.id = l.src_doc_id "
                         "WHERE l.origin = 'sidecar'")
            carry_text_links(conn)
            conn.execute("DROP TABLE temp.carry_moves")
    finally:
        conn.execute("DETACH DATABASE carried")
    ctx.report.notes.append(f"carried {counted(len(moves), 'paid extraction')} across the rebuild from the index it "
                            "replaces (never re-extracted): " + _names([path for _doc_id, path in moves]))


def _shared_columns(conn: sqlite3.Connection, table: str, *, exclude: set[str]) -> str:
    """The columns `table` has in both the new index and the carried one (an older schema version
    lacks the newer columns, which then take their defaults), in the new table's order."""
    new = [row[1] for row in conn.execute(f"PRAGMA main.table_info({table})")]
    old = {row[1] for row in conn.execute(f"PRAGMA carried.table_info({table})")}
    return ", ".join(name for name in new if name in old and name not in exclude)


def _qualified(alias: str, columns: str) -> str:
    return ", ".join(f"{alias}.{name}" for name in columns.split(", "))


# --- after the pipeline ----------------------------------------------------------------------------


def finish(ctx: SyncContext, stopped: BaseException | None = None) -> None:
    """Say once what the paid rows did: protected, discarded, kept free, not reached, the audit and
    what was spent. Runs after the pipeline, also when it raised (`stopped`): a store fault that
    stopped the paying then ends the sync (`_stop_the_run`)."""
    state = ctx.paid
    if state is None:
        return
    report = ctx.report
    if state.protected:
        report.notes.append(f"{counted(len(state.protected), 'paid extraction')} kept; a free run never re-extracts "
                            f"them: {_names(state.protected)}")
    if state.discarded:
        report.notes.append(f"--force discarded {counted(len(state.discarded), 'paid extraction')} for the free "
                            f"text: {_names(state.discarded)}")
    if state.healthy:
        report.notes.append(f"{counted(len(state.healthy), 'PDF')} {'has' if len(state.healthy) == 1 else 'have'} "
                            f"a healthy free text layer and {'was' if len(state.healthy) == 1 else 'were'} not paid "
                            f"for (pay anyway with --force): {_names(state.healthy)}")
    if state.not_reached:
        report.notes.append(f"{counted(len(state.not_reached), 'PDF')} {'was' if len(state.not_reached) == 1 else 'were'} "
                            "not extracted within the budget "
                            f"(on_exceed = partial; the next run picks them up): {_names(state.not_reached)}")
    paid: dict[str, object] = {"backend": state.backend}
    if state.plan is not None:
        paid.update(state.plan.to_dict())
        spent = _spent_eur(ctx, state.plan.call_ids)
        if spent is not None:
            paid["spent_eur"] = str(spent)
            report.notes.append(f"paid extraction spent {format_eur(spent)} over {counted(len(state.plan.call_ids), 'call')} "
                                f"(operation {state.plan.operation_id}; `pnk budget` has the detail)")
    audits = {path: audit.to_dict() for path, audit in state.audits}
    for path, audit in state.audits:
        report.notes.extend(f"completeness audit: {line}" for line in audit.lines(path))
    if state.plan is not None or audits or state.protected or state.discarded:
        paid.update(audits=audits, protected=state.protected, discarded=state.discarded,
                    healthy_free_layer=state.healthy, not_reached=state.not_reached)
        report.paid = paid
    if state.store_fault is not None:
        _stop_the_run(state, state.store_fault, stopped)


def _stop_the_run(state: PaidState, fault: PinakesError, stopped: BaseException | None) -> None:
    """End the sync with the store fault, saying what the paid documents became (once the pipeline
    has committed what it held: the paid text in hand is indexed by then). When another error
    already ends it (`stopped`), that one stays the one reported and carries the fault."""
    if state.kept_uncached:
        fault.details.append(f"{counted(len(state.kept_uncached), 'PDF')} paid for in this run "
                             f"{'is' if len(state.kept_uncached) == 1 else 'are'} indexed although "
                             "the extraction cache could not keep them; the next run reuses them from the "
                             f"index without paying: {_names(state.kept_uncached)}")
    if state.held_back:
        fault.details.append(f"{counted(len(state.held_back), 'PDF')} {'was' if len(state.held_back) == 1 else 'were'} "
                             "not paid for after the fault (the next run "
                             f"picks them up): {_names(state.held_back)}")
    if stopped is None:
        raise fault
    if isinstance(stopped, PinakesError) and stopped is not fault:
        stopped.details.append(fault.render())


def _spent_eur(ctx: SyncContext, call_ids: list[str]) -> Decimal | None:
    try:  # a report is a courtesy; the ledger already holds it
        from pinakes.budget import Accountant
        report = Accountant.for_report(ctx.paths.root, ctx.manifest.budget).report()
    except (PinakesError, AttributeError):
        return None
    return report.cost_of_calls(call_ids) if call_ids else None


def _names(paths: list[str], shown: int = 5) -> str:
    text = ", ".join(paths[:shown])  # the report escapes notes when it prints them
    return text + (f" and {len(paths) - shown} more" if len(paths) > shown else "")
