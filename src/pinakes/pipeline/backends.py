"""Extraction backends: the free and the paid way a sync turns a document into text, behind one
interface the pipeline calls at its declared points, and nowhere else.

    backend = backend_for(manifest, options)      # the PDF backend in effect: --extract, else [extraction] backend
    backend.check()                               # before the lock: a combination it cannot honour is refused
    carry = backend.before_rebuild(previous)      # --rebuild, before the new database exists: what it must not lose
    backend.after_pair(ctx, carry)                # after pairing (and the collision check), before the plan is used
    backend.prepare(ctx)                          # before the pipeline's first write: a paid run is planned whole
    text = backend.extract(ctx, item)             # the extract stage, per document (pinakes.pipeline.extract)
    backend.finish(ctx, stopped)                  # after the pipeline, always (also when it raised)

Both backends keep paid extractions safe (spec §6.4): a free run never re-extracts a PDF its
sidecar records as paid for, `--force` with an explicit free `--extract` is the one override, and a
rebuild carries paid rows from the index it replaces whichever backend runs it. What differs is how
a PDF is extracted: `FreeExtraction` through the registry's free extractor (pypdfium2), and
`PaidExtraction` through claude-vision, priced as one run by the budget before call 0.

The paid rows themselves live in `pinakes.pipeline.paid_extraction` (not `pinakes.paid`, which holds
the rules of one paid call); this module only chooses and sequences them, so it imports no paid
client and nothing heavy at module level.

Errors: every hook raises `PinakesError` to stop the sync. `extract` raises `PinakesError` for one
document's failure (the stage records it and the run goes on) and `RunStopped` for an error that
ends the whole run (a budget under `on_exceed = "abort"`). `finish` raises the fault of a store of
paid text that refused a write part-way, once the pipeline has committed what it held.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pinakes.errors import PinakesError
from pinakes.extract.registry import EXTRACTORS

if TYPE_CHECKING:
    from pinakes.extract.types import ExtractedText
    from pinakes.manifest import Manifest
    from pinakes.pipeline.paid_extraction import CarryPlan
    from pinakes.pipeline.pair import DocWork
    from pinakes.pipeline.run import SyncContext, SyncOptions


class RunStopped(Exception):
    """Raised by `ExtractionBackend.extract` when `error` ends the whole sync rather than failing
    one document; the extract stage raises `error` past its per-document handling."""

    def __init__(self, error: PinakesError):
        super().__init__(error.message)
        self.error = error


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

    def after_pair(self, ctx: SyncContext, carry: CarryPlan | None) -> None:
        """After pairing (`ctx.plan` is set, collisions refused, tombstones carried), before the plan
        is counted: `--force` reaches the PDFs its overrides name, and a rebuild copies `carry`'s rows
        in from the index it replaces (`ctx.paths.index_db`, still the live one)."""
        ...

    def prepare(self, ctx: SyncContext) -> None:
        """Before the pipeline writes anything: decide what each PDF of the plan needs and, when
        anything is to be paid for, price the whole run before call 0 (its refusal stops the sync)."""
        ...

    def extract(self, ctx: SyncContext, item: DocWork) -> ExtractedText | None:
        """The text `item` is indexed from, or None when there is nothing to index now (kept as the
        index holds it, or not reached within the budget)."""
        ...

    def finish(self, ctx: SyncContext, stopped: BaseException | None = None) -> None:
        """After the pipeline, also when it raised (`stopped`): say once what the paid rows did. A
        store fault that stopped the paying is raised, or, when `stopped` is another PinakesError,
        added to its details (the first error stays the one reported)."""
        ...


@dataclass(frozen=True)
class _KeepsPaidRows:
    """The hooks both backends share: paid rows carried across a rebuild, `--force`'s overrides,
    and the closing report."""

    manifest: Manifest
    options: SyncOptions
    pdf_backend: str

    def check(self) -> None:
        return None

    def before_rebuild(self, previous: sqlite3.Connection | None) -> CarryPlan:
        from pinakes.pipeline.paid_extraction import paid_rows_to_carry

        return paid_rows_to_carry(previous, self.manifest)

    def after_pair(self, ctx: SyncContext, carry: CarryPlan | None) -> None:
        from pinakes.pipeline.paid_extraction import carry_paid_rows, force_into_plan

        force_into_plan(ctx)  # a no-op without --force, and on a rebuild (everything is due there)
        if carry is not None:
            carry_paid_rows(ctx, carry, ctx.paths.index_db)

    def prepare(self, ctx: SyncContext) -> None:
        return None

    def finish(self, ctx: SyncContext, stopped: BaseException | None = None) -> None:
        from pinakes.pipeline.paid_extraction import finish

        finish(ctx, stopped)


@dataclass(frozen=True)
class FreeExtraction(_KeepsPaidRows):
    """Every document through the registry's free extractor for its source type; a PDF whose
    sidecar records a paid extraction is kept as it was paid for (spec §6.4)."""

    def extract(self, ctx: SyncContext, item: DocWork) -> ExtractedText | None:
        return extract_free_document(ctx, item)


@dataclass(frozen=True)
class PaidExtraction(_KeepsPaidRows):
    """PDFs through the paid backend, the whole run priced by the budget before call 0; every other
    source type through its free extractor."""

    def check(self) -> None:
        from pinakes.pipeline.paid_extraction import check_run

        check_run(self.manifest, self.options)

    def prepare(self, ctx: SyncContext) -> None:
        from pinakes.pipeline.paid_extraction import prepare

        prepare(ctx)

    def extract(self, ctx: SyncContext, item: DocWork) -> ExtractedText | None:
        if not EXTRACTORS[ctx.keys.extractor_backends[item.source_type]].paid:
            return extract_free_document(ctx, item)
        from pinakes.pipeline.paid_extraction import extract_paid_document

        return extract_paid_document(ctx, item)


def backend_for(manifest: Manifest, options: SyncOptions) -> ExtractionBackend:
    """The backend a sync with `manifest` and `options` extracts through: `--extract` names the PDF
    backend for this run, else `[extraction] backend` does."""
    pdf_backend = options.extract_backend or manifest.extraction.backend
    spec = EXTRACTORS.get(pdf_backend)
    backend = PaidExtraction if spec is not None and spec.paid else FreeExtraction
    return backend(manifest, options, pdf_backend)


def backend_of(ctx: SyncContext) -> ExtractionBackend:
    """The backend of the run `ctx` belongs to (backends hold no state of their own: what one run
    decides about its paid rows is `ctx.paid`)."""
    return backend_for(ctx.manifest, ctx.options)


def extract_free_document(ctx: SyncContext, item: DocWork) -> ExtractedText | None:
    """`item` through the free extractor of its source type; a PDF recorded as paid for is
    protected: kept (None), re-indexed from its paid text, or failed with the paid run's remedy."""
    from pinakes.pipeline.extract import run_extractor

    if item.source_type == "pdf":  # a free run never re-extracts a paid extraction (spec §6.4)
        from pinakes.pipeline.paid_extraction import protect

        action, paid_text = protect(ctx, item)
        if action == "keep":
            return None
        if paid_text is not None:
            return paid_text
    extracted = run_extractor(ctx, EXTRACTORS[ctx.keys.extractor_backends[item.source_type]], item)
    if item.source_type == "pdf":
        from pinakes.pipeline.paid_extraction import after_free_extraction

        after_free_extraction(ctx, item)  # --force with a free --extract: drop the paid record
    return extracted
