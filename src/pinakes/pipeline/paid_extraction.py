"""The paid rows of the extract step (spec §5, §6.3, §6.4): extract through claude-vision, keep every
paid extraction safe from a free run, and say once what they did.

The run is planned whole before call 0 (`pipeline.paid_planning.prepare`). `extract_paid_document` (the paid branch of `PaidExtraction.extract`, pinakes.pipeline.backends)
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

from collections.abc import Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING

from pinakes.budget.money import format_eur
from pinakes.errors import (
    FilesystemError,
    PaidExtractionFailedError,
    PaidExtractionUnavailableError,
    PinakesError,
    SidecarError,
)
from pinakes.extract.registry import EXTRACTORS
from pinakes.pipeline.paid_state import (
    FREE_PDF_BACKEND,
    Decision,
    PaidDoc,
    PaidState,
    extract_cache,
    keep_indexed_row,
    names,
    native_text,
    paid_before,
    paid_fingerprint,
    renamed_paid_text,
    rerun_command,
)
from pinakes.pipeline.types import Extracted, RunStopped
from pinakes.wording import counted

if TYPE_CHECKING:
    from pinakes.budget import BudgetExceededError
    from pinakes.extract.audit import DocumentAudit
    from pinakes.extract.cache import ExtractCache
    from pinakes.extract.types import ExtractedText
    from pinakes.pipeline.run import SyncContext
    from pinakes.pipeline.types import DocWork


# --- the paid branch of the extract step -----------------------------------------------------------


def extract_paid_document(ctx: SyncContext, state: PaidState, item: DocWork) -> Extracted | None:
    """What `item` is indexed from on a paid backend (carrying its sidecar as this run left it), or
    None when there is nothing to index now (kept as indexed, or not reached within the budget).
    Raises PinakesError for a document failure, and RunStopped with the budget's error when it stops
    the run (on_exceed = abort)."""
    doc = PaidDoc(ctx, item)
    text = _paid_text(ctx, state, doc)
    return None if text is None else Extracted(doc.work, text)


def _paid_text(ctx: SyncContext, state: PaidState, doc: PaidDoc) -> ExtractedText | None:
    item = doc.work
    fingerprint = paid_fingerprint(ctx, state)
    renamed = renamed_paid_text(ctx, item, fingerprint)
    if renamed is not None:
        return renamed
    if keep_indexed_row(ctx, doc, state.backend, fingerprint):
        return None
    decision = state.decisions.get(item.doc_id, Decision("failed", message="not planned (a Pinakes bug)"))
    cache = extract_cache(ctx)
    if decision.kind == "failed":
        raise PinakesError(decision.message)
    if decision.kind == "cached":
        hit = cache.get(item.file.content_hash, fingerprint)
        if hit is None:
            raise PaidExtractionUnavailableError("the paid extraction this run planned to reuse left the "
                                                 "cache during the run", remedy=f"run `{rerun_command(ctx)}` again")
        _record_provenance(ctx, doc, state.backend, fingerprint, only_if_missing=True)
        return hit.extracted
    if decision.kind == "free-healthy":
        state.healthy.append(item.path)
        return native_text(ctx, cache, item)
    if decision.kind == "same-bytes":
        return _same_bytes(ctx, state, doc, cache, fingerprint, decision.message)
    if state.store_fault is not None:
        state.held_back.append(item.path)
        return None
    if decision.kind == "not-admitted" or state.stopped is not None:
        state.not_reached.append(item.path)
        return None
    return _pay(ctx, state, doc, cache, fingerprint)


def _same_bytes(ctx: SyncContext, state: PaidState, doc: PaidDoc, cache: ExtractCache, fingerprint: str,
                payer: str) -> ExtractedText | None:
    """What `payer` (earlier in this run, the same bytes) was extracted to: never paid for twice."""
    item = doc.work
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
    _record_provenance(ctx, doc, state.backend, fingerprint, only_if_missing=False)
    return extracted


def _pay(ctx: SyncContext, state: PaidState, doc: PaidDoc, cache: ExtractCache,
         fingerprint: str) -> ExtractedText | None:
    """Pay for `item` and keep what was paid for: in the cache, else (a store fault, which stops the
    paying) indexed from the text in hand."""
    from pinakes.budget import BudgetExceededError, UnrecordedOutcomeError
    from pinakes.extract import claude_vision
    from pinakes.extract.cache import partial_fingerprint
    from pinakes.extract.types import ExtractedText

    item = doc.work
    plan, client = state.plan, state.client
    assert plan is not None and client is not None  # both made by paid_planning.prepare before any paid extraction
    calls_before = len(plan.call_ids)
    pages = state.decisions[item.doc_id].pages
    resume, resume_call_ids = paid_before(cache, item, fingerprint, pages)

    def keep_slices(texts: Sequence[str], call_ids: Sequence[str]) -> None:
        cache.put(item.file.content_hash, ExtractedText.from_pages(
            texts, claude_vision.PAGE_SEPARATOR, backend=state.backend, fingerprint=partial_fingerprint(fingerprint)),
            paid=True, operation_id=plan.operation_id, call_ids=call_ids)

    try:
        result = claude_vision.extract_paid(ctx.paths.root / item.path, client=client, plan=plan,
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
    _record_provenance(ctx, doc, state.backend, fingerprint, only_if_missing=False)
    return result.extracted


def _audit(ctx: SyncContext, cache: ExtractCache, item: DocWork, page_texts: tuple[str, ...]) -> DocumentAudit | None:
    """The completeness audit of a paid extraction against the free text layer, or None when the
    free layer cannot be read now: an audit is a report, never a reason to lose paid text."""
    from pinakes.extract.audit import audit_pages
    from pinakes.extract.floors import load_floors

    try:
        native = native_text(ctx, cache, item)
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


def _record_provenance(ctx: SyncContext, doc: PaidDoc, backend: str, fingerprint: str, *,
                       only_if_missing: bool) -> None:
    """`provenance.extraction` in the sidecar (spec §2.2): the one sidecar rewrite a sync makes."""
    from pinakes.sidecar import sidecar_path_for, update_sidecar

    item = doc.work
    path = sidecar_path_for(ctx.paths.root / item.path)
    if only_if_missing:
        recorded = doc.sidecar().extraction or {}
        if (recorded.get("backend"), recorded.get("fingerprint"), recorded.get("content_hash")) == \
                (backend, fingerprint, item.file.content_hash):
            return
    record = {"backend": backend, "fingerprint": fingerprint,
              "extracted": datetime.now(UTC).isoformat(timespec="seconds"),
              "content_hash": item.file.content_hash}
    doc.rewrote(update_sidecar(path, kb_id=ctx.kb_id, provenance_extraction=record))


# --- the free branch: protecting paid extractions --------------------------------------------------


def protect(ctx: SyncContext, state: PaidState, doc: PaidDoc) -> tuple[str, ExtractedText | None]:
    """§6.4's paid rows on a free run: ("extract", None) to extract for free as usual,
    ("use", text) to index the paid text again, ("keep", None) when the index already holds it.
    Raises for the failure rows."""
    item = doc.work
    try:
        recorded = doc.sidecar().extraction
    except SidecarError:
        return "extract", None  # the write step reports the broken sidecar
    spec = EXTRACTORS.get(str((recorded or {}).get("backend")))
    if recorded is None or spec is None or not spec.paid:
        return "extract", None
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
    renamed = renamed_paid_text(ctx, item, fingerprint)
    if renamed is not None:
        state.protected.append(item.path)
        return "use", renamed
    if keep_indexed_row(ctx, doc, spec.name, fingerprint):
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


def after_free_extraction(ctx: SyncContext, state: PaidState, doc: PaidDoc) -> None:
    """`--force` with a free `--extract` replaced a paid extraction: drop the record, name it."""
    item = doc.work
    if item.doc_id not in state.discard_pending:
        return
    from pinakes.sidecar import sidecar_path_for, update_sidecar

    recorded = doc.sidecar().extraction or {}
    doc.rewrote(update_sidecar(sidecar_path_for(ctx.paths.root / item.path), kb_id=ctx.kb_id,
                                  provenance_extraction=None))
    state.discarded.append(f"{item.path} ({recorded.get('backend')}, extracted {recorded.get('extracted')})")


# --- after the pipeline ----------------------------------------------------------------------------


def finish(ctx: SyncContext, state: PaidState, stopped: BaseException | None = None) -> None:
    """Say once what the paid rows did: protected, discarded, kept free, not reached, the audit and
    what was spent. Runs after the pipeline, also when it raised (`stopped`): a store fault that
    stopped the paying then ends the sync (`_stop_the_run`)."""
    report = ctx.report
    if state.protected:
        report.notes.append(f"{counted(len(state.protected), 'paid extraction')} kept; a free run never re-extracts "
                            f"them: {names(state.protected)}")
    if state.discarded:
        report.notes.append(f"--force discarded {counted(len(state.discarded), 'paid extraction')} for the free "
                            f"text: {names(state.discarded)}")
    if state.healthy:
        report.notes.append(f"{counted(len(state.healthy), 'PDF')} {'has' if len(state.healthy) == 1 else 'have'} "
                            f"a healthy free text layer and {'was' if len(state.healthy) == 1 else 'were'} not paid "
                            f"for (pay anyway with --force): {names(state.healthy)}")
    if state.not_reached:
        report.notes.append(f"{counted(len(state.not_reached), 'PDF')} {'was' if len(state.not_reached) == 1 else 'were'} "
                            "not extracted within the budget "
                            f"(on_exceed = partial; the next run picks them up): {names(state.not_reached)}")
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
                             f"index without paying: {names(state.kept_uncached)}")
    if state.held_back:
        fault.details.append(f"{counted(len(state.held_back), 'PDF')} {'was' if len(state.held_back) == 1 else 'were'} "
                             "not paid for after the fault (the next run "
                             f"picks them up): {names(state.held_back)}")
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
