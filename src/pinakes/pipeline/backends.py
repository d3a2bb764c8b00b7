"""Extraction backends: the free and the paid way a sync turns a document into text, behind one
interface the pipeline calls at its declared points, and nowhere else.

    backend = backend_for(manifest, options)      # one per run: the PDF backend in effect (--extract, else
                                                  # [extraction] backend), holding the run's paid state
    backend.check()                               # before the lock: a combination it cannot honour is refused
    carry = backend.before_rebuild(previous)      # --rebuild, before the new database exists: what it must not lose
    backend.extend_plan(ctx, plan, walk)          # part of pairing's decision: the PDFs --force reaches
    backend.after_pair(ctx, plan, carry)          # when the pipeline starts, before its first write
    backend.prepare(ctx, plan)                    # then: a paid run is planned whole
    extracted = backend.extract(ctx, item)        # the extract stage, per document (pinakes.pipeline.extract)
    backend.finish(ctx, stopped)                  # after the pipeline, always (also when it raised)

Both backends keep paid extractions safe (spec §6.4): a free run never re-extracts a PDF its
sidecar records as paid for, `--force` with an explicit free `--extract` is the one override, and a
rebuild carries paid rows from the index it replaces whichever backend runs it. What differs is how
a PDF is extracted: `FreeExtraction` through the registry's free extractor (pypdfium2), and
`PaidExtraction` through claude-vision, priced as one run by the budget before call 0.

The paid rows themselves live in `pinakes.pipeline.paid_state`, `paid_planning`, `paid_extraction`
and `paid_carry` (not `pinakes.paid`, which holds the rules of one paid call); this module only
chooses and sequences them, so it imports no paid client and nothing heavy at module level.

Errors: every hook raises `PinakesError` to stop the sync. `extract` raises `PinakesError` for one
document's failure (the stage records it and the run goes on) and `RunStopped` (`pipeline.types`)
for an error that ends the whole run (a budget under `on_exceed = "abort"`). `finish` raises the fault of a store of
paid text that refused a write part-way, once the pipeline has committed what it held.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from pinakes.extract.registry import EXTRACTORS

if TYPE_CHECKING:
    from pinakes.manifest import Manifest
    from pinakes.pipeline.paid_carry import CarryPlan
    from pinakes.pipeline.paid_state import PaidState
    from pinakes.pipeline.pair import Plan
    from pinakes.pipeline.run import SyncContext, SyncOptions
    from pinakes.pipeline.types import DocWork, Extracted
    from pinakes.sources.walk import WalkResult


class ExtractionBackend(Protocol):
    """How one sync extracts its documents, with the paid rows' protect / carry / cost hooks."""

    @property
    def pdf_backend(self) -> str:
        """The registry name of the PDF extractor in effect (`pypdfium2`, `claude-vision`)."""
        ...

    def check(self) -> None:
        """Before the lock and the index: refuse what this backend cannot honour (a paid backend
        under `--index-only`)."""
        ...

    def before_rebuild(self, previous: sqlite3.Connection | None) -> CarryPlan:
        """`--rebuild`, before the new database is created: the paid extractions `previous` (the
        index being replaced, None when there is none) holds, which the rebuild must not lose."""
        ...

    def extend_plan(self, ctx: SyncContext, plan: Plan, walk: WalkResult) -> None:
        """Part of pairing's decision (collisions refused): `--force` adds the PDFs its overrides name
        to the plan's work, though their stored key is current."""
        ...

    def after_pair(self, ctx: SyncContext, plan: Plan, carry: CarryPlan | None) -> None:
        """When a pipeline with work starts (tombstones carried), before its first write: the stored
        keys of what `--force` reached are cleared, and a rebuild copies `carry`'s rows in from the
        index it replaces (`ctx.paths.index_db`, still the live one)."""
        ...

    def prepare(self, ctx: SyncContext, plan: Plan) -> None:
        """Before the pipeline writes anything: decide what each PDF of the plan needs and, when
        anything is to be paid for, price the whole run before call 0 (its refusal stops the sync)."""
        ...

    def extract(self, ctx: SyncContext, item: DocWork) -> Extracted | None:
        """What `item` is indexed from (its work item carrying the sidecar as this run left it), or
        None when there is nothing to index now (kept as the index holds it, or not reached within
        the budget)."""
        ...

    def finish(self, ctx: SyncContext, stopped: BaseException | None = None) -> None:
        """After the pipeline, also when it raised (`stopped`): say once what the paid rows did. A
        store fault that stopped the paying is raised, or, when `stopped` is another PinakesError,
        added to its details (the first error stays the one reported)."""
        ...


@dataclass
class _KeepsPaidRows:
    """The hooks both backends share: paid rows carried across a rebuild, `--force`'s overrides,
    and the closing report. One per run: `paid` is what the run decides about its paid rows (made
    when first asked for: a sync that changes nothing never asks)."""

    manifest: Manifest
    options: SyncOptions
    pdf_backend: str
    _paid: PaidState | None = field(default=None, repr=False)

    @property
    def paid(self) -> PaidState:
        if self._paid is None:
            from pinakes.pipeline.paid_state import PaidState

            self._paid = PaidState.for_backend(self.pdf_backend)
        return self._paid

    def check(self) -> None:
        return None

    def before_rebuild(self, previous: sqlite3.Connection | None) -> CarryPlan:
        from pinakes.pipeline.paid_carry import paid_rows_to_carry

        return paid_rows_to_carry(previous, self.manifest)

    def extend_plan(self, ctx: SyncContext, plan: Plan, walk: WalkResult) -> None:
        from pinakes.pipeline.paid_planning import force_into_plan

        force_into_plan(ctx, self.paid, plan, walk)  # a no-op without --force, and on a rebuild

    def after_pair(self, ctx: SyncContext, plan: Plan, carry: CarryPlan | None) -> None:
        from pinakes.pipeline.paid_carry import carry_paid_rows
        from pinakes.pipeline.paid_planning import clear_forced_keys

        clear_forced_keys(ctx, self.paid)
        if carry is not None:
            carry_paid_rows(ctx, plan, carry, ctx.paths.index_db)

    def prepare(self, ctx: SyncContext, plan: Plan) -> None:
        return None

    def finish(self, ctx: SyncContext, stopped: BaseException | None = None) -> None:
        from pinakes.pipeline.paid_extraction import finish

        finish(ctx, self.paid, stopped)


@dataclass
class FreeExtraction(_KeepsPaidRows):
    """Every document through the registry's free extractor for its source type; a PDF whose
    sidecar records a paid extraction is kept as it was paid for (spec §6.4)."""

    def extract(self, ctx: SyncContext, item: DocWork) -> Extracted | None:
        return extract_free_document(ctx, self.paid, item)


@dataclass
class PaidExtraction(_KeepsPaidRows):
    """PDFs through the paid backend, the whole run priced by the budget before call 0; every other
    source type through its free extractor."""

    def check(self) -> None:
        from pinakes.pipeline.paid_planning import check_run

        check_run(self.manifest, self.options)

    def prepare(self, ctx: SyncContext, plan: Plan) -> None:
        from pinakes.pipeline.paid_planning import prepare

        prepare(ctx, self.paid, plan)

    def extract(self, ctx: SyncContext, item: DocWork) -> Extracted | None:
        if not EXTRACTORS[ctx.keys.extractor_backends[item.source_type]].paid:
            return extract_free_document(ctx, self.paid, item)
        from pinakes.pipeline.paid_extraction import extract_paid_document

        return extract_paid_document(ctx, self.paid, item)


def backend_for(manifest: Manifest, options: SyncOptions) -> ExtractionBackend:
    """The backend a sync with `manifest` and `options` extracts through (a new one, holding a new
    run's paid state): `--extract` names the PDF backend for this run, else `[extraction] backend`."""
    pdf_backend = options.extract_backend or manifest.extraction.backend
    spec = EXTRACTORS.get(pdf_backend)
    backend = PaidExtraction if spec is not None and spec.paid else FreeExtraction
    return backend(manifest, options, pdf_backend)


def extract_free_document(ctx: SyncContext, state: PaidState, item: DocWork) -> Extracted | None:
    """`item` through the free extractor of its source type; a PDF recorded as paid for is
    protected: kept (None), re-indexed from its paid text, or failed with the paid run's remedy."""
    from pinakes.pipeline.extract import run_extractor
    from pinakes.pipeline.paid_state import PaidDoc
    from pinakes.pipeline.types import Extracted

    doc = PaidDoc(ctx, item)
    if item.source_type == "pdf":  # a free run never re-extracts a paid extraction (spec §6.4)
        from pinakes.pipeline.paid_extraction import protect

        action, paid_text = protect(ctx, state, doc)
        if action == "keep":
            return None
        if paid_text is not None:
            return Extracted(doc.work, paid_text)
    text = run_extractor(ctx, EXTRACTORS[ctx.keys.extractor_backends[item.source_type]], doc.work)
    if item.source_type == "pdf":
        from pinakes.pipeline.paid_extraction import after_free_extraction

        after_free_extraction(ctx, state, doc)  # --force with a free --extract: drop the paid record
    return Extracted(doc.work, text)
