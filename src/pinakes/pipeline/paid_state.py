"""What one sync's paid rows share (spec §5, §6.3, §6.4): the run's paid state, the fingerprint its
paid extractions are made under, the command a remedy names, and the checks both the paid and the
free branch make of one document (is it indexed as paid for? kept? renamed?).

The paid rows themselves: planning before the pipeline (`pipeline.paid_planning`), the extract
step's paid and free branches and the closing report (`pipeline.paid_extraction`), and what a
`--rebuild` carries across (`pipeline.paid_carry`).
"""

from __future__ import annotations

import contextlib
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pinakes.errors import FilesystemError, PinakesError, SidecarError
from pinakes.extract.registry import EXTRACTORS

if TYPE_CHECKING:
    from pinakes.budget import Plan
    from pinakes.extract.audit import DocumentAudit
    from pinakes.extract.cache import ExtractCache
    from pinakes.extract.types import ExtractedText
    from pinakes.paid import Client
    from pinakes.pipeline.run import SyncContext
    from pinakes.pipeline.types import DocWork
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
    """What one sync knows about paid extraction (also on a free run: the protected paths). Its
    extraction backend holds it (`pipeline.backends`), one per run."""

    backend: str
    paid: bool
    decisions: dict[str, Decision] = field(default_factory=dict[str, Decision])  # doc_id -> what to do
    plan: Plan | None = None
    client: Client | None = None  # the SDK client, made once the run's paid plan is confirmed
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
    forced: list[str] = field(default_factory=list[str])  # doc_ids `--force` put in the plan (keys cleared at start)

    @classmethod
    def for_backend(cls, backend: str) -> PaidState:
        """The state of a run whose PDFs go through `backend` (a registry name)."""
        spec = EXTRACTORS.get(backend)
        return cls(backend, bool(spec and spec.paid))


def paid_fingerprint(ctx: SyncContext, state: PaidState) -> str:
    """The fingerprint this run's paid extractions are made, cached and indexed under: the backend's
    with the model `[extraction] model` names (another model's text is another extraction)."""
    return EXTRACTORS[state.backend].fingerprint(ctx.manifest.extraction.model)


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


def extract_cache(ctx: SyncContext) -> ExtractCache:
    """The extraction cache, its remedies naming this run's command."""
    from pinakes.extract.cache import ExtractCache

    return ExtractCache(ctx.paths.extract_cache, rerun=rerun_command(ctx))


def native_text(ctx: SyncContext, cache: ExtractCache, item: DocWork) -> ExtractedText:
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


def paid_before(cache: ExtractCache, item: DocWork, fingerprint: str,
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


class PaidDoc:
    """One document while the paid rows extract or protect it: its work item, whose sidecar is read
    once, when first needed, and replaced when this sync rewrites it (its provenance), so the row
    written beside the chunks carries the sidecar as it then is on disk."""

    def __init__(self, ctx: SyncContext, work: DocWork) -> None:
        self.ctx = ctx
        self.work = work

    def sidecar(self) -> Sidecar:
        if self.work.sidecar is None:
            from pinakes.sidecar import read_sidecar, sidecar_path_for

            self.rewrote(read_sidecar(sidecar_path_for(self.ctx.paths.root / self.work.path), kb_id=self.ctx.kb_id))
        assert self.work.sidecar is not None
        return self.work.sidecar

    def rewrote(self, sidecar: Sidecar) -> None:
        self.work = self.work.with_sidecar(sidecar)


def indexed_as(ctx: SyncContext, item: DocWork, backend: str, fingerprint: str) -> bool:
    """Whether this sync's index holds `item` at its path, its current content, extracted by
    (backend, fingerprint)."""
    row = ctx.writer().execute("SELECT content_hash, extraction_backend, extraction_fingerprint FROM documents "
                               "WHERE id = ? AND state = 'active' AND path = ?", (item.doc_id, item.path)).fetchone()
    return row is not None and tuple(row) == (item.file.content_hash, backend, fingerprint)


def renamed_paid_text(ctx: SyncContext, item: DocWork, fingerprint: str) -> ExtractedText | None:
    """The cached paid text of a document whose title or file name's words changed (its chunks'
    context with them), so it is chunked again under its new context for free; None otherwise, or
    when the cache no longer has it (then its indexed row is kept, context and all)."""
    if not item.context_renamed or not fingerprint.isalnum():
        return None
    hit = extract_cache(ctx).get(item.file.content_hash, fingerprint)
    return hit.extracted if hit is not None else None


def keep_indexed_row(ctx: SyncContext, doc: PaidDoc, backend: str, fingerprint: str) -> bool:
    """When this index already holds `doc` extracted by (backend, fingerprint) at its current
    content, re-point its build key instead of re-chunking and re-embedding: the stored text is the
    extraction. The sidecar's metadata is refreshed in the same transaction."""
    from pinakes.index.schema import transaction
    from pinakes.links.store import write_links

    item = doc.work
    if not indexed_as(ctx, item, backend, fingerprint):
        return False
    conn = ctx.writer()
    try:
        sidecar = doc.sidecar()
    except SidecarError:
        return False  # rebuilt normally, where the broken sidecar is reported
    with transaction(conn):
        conn.execute("UPDATE documents SET build_key = ?, sidecar_hash = ?, metadata = ?, "
                     "title = COALESCE(?, title) WHERE id = ?",
                     (item.key, sidecar.raw_hash, sidecar.metadata_json(), sidecar.title, item.doc_id))
        write_links(conn, ctx.kb_id, item.doc_id, sidecar.links)
    return True


def names(paths: list[str], shown: int = 5) -> str:
    text = ", ".join(paths[:shown])  # the report escapes notes when it prints them
    return text + (f" and {len(paths) - shown} more" if len(paths) > shown else "")
