"""The paid rows before the pipeline (spec §5, §6.3): refuse what they cannot honour, let `--force`
reach the PDFs its overrides name, and plan a paid run whole before call 0.

`prepare` runs after pairing and before the pipeline. On a paid backend it decides, for each
PDF the plan must (re)build, whether a call is needed at all: an extraction cache hit, or a native
text layer the free extractor finds healthy (every page above the fitted text-yield floor; paying
for it anyway takes `--force`), needs none. Everything left is priced as one run by the accountant
before the first request (every blocked window named at once, the confirm prompt, no terminal =
abort); the API key is read only then, so a run with nothing to pay for needs none.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from pinakes.errors import PinakesError, UsageError
from pinakes.extract.registry import EXTRACTORS
from pinakes.pipeline.paid_state import (
    Decision,
    PaidState,
    extract_cache,
    indexed_as,
    native_text,
    paid_before,
    paid_fingerprint,
)

if TYPE_CHECKING:
    from pinakes.manifest import Manifest
    from pinakes.pipeline.pair import Plan
    from pinakes.pipeline.run import SyncContext, SyncOptions
    from pinakes.pipeline.types import DocWork
    from pinakes.sources.walk import WalkResult


def check_run(manifest: Manifest, options: SyncOptions) -> None:
    """Refuse, before anything runs, a combination the paid rows cannot honour."""
    backend = options.extract_backend or manifest.extraction.backend
    spec = EXTRACTORS.get(backend)
    if options.index_only and spec is not None and spec.paid:
        raise UsageError(f"--index-only never writes into the source tree, and a paid extraction records "
                         f"itself in the document's sidecar; backend {backend!r} cannot run under it",
                         remedy="run `pnk sync` (a deliberate paid run), or force the free backend: "
                                "`pnk sync --index-only --extract=pypdfium2`")


def force_into_plan(ctx: SyncContext, state: PaidState, plan: Plan, walk: WalkResult) -> None:
    """`--force` reaches documents whose stored key is current (spec §6.3's two overrides): on a paid
    backend, PDFs indexed from their healthy free layer; with an explicit free `--extract`, PDFs
    indexed from a paid extraction. They join the plan's work here, as pairing decides; their stored
    key is cleared when the pipeline starts (`clear_forced_keys`), so the steps see them as due (a run
    stopped after that re-processes them next time, which is harmless)."""
    explicit_free = ctx.options.extract_backend is not None and not state.paid
    if not ctx.options.force or ctx.rebuilding or ctx.conn is None or not (state.paid or explicit_free):
        return
    from pinakes.pipeline.context import context_naming
    from pinakes.pipeline.types import DocWork

    paid_backends = [name for name, spec in EXTRACTORS.items() if spec.paid]
    rows = ctx.conn.execute("SELECT id, path, extraction_backend, json_extract(metadata, '$.title') FROM documents "
                            "WHERE state = 'active' AND source_type = 'pdf'").fetchall()
    if not rows:  # a first sync (or no PDF indexed): nothing to reach, and no set of the plan's IDs to build
        return
    planned = {item.doc_id for item in plan.work}
    due = [(doc_id, path, title) for doc_id, path, backend, title in rows
           if doc_id not in planned and path in walk.docs and path in walk.sidecars
           and ((backend not in paid_backends) if state.paid else (backend in paid_backends))]
    if not due:
        return
    state.forced = [doc_id for doc_id, _, _ in due]
    for doc_id, path, title in due:  # not in the plan: its sidecar is as indexed, title included
        file = walk.docs[path]
        plan.work_list.append(DocWork(doc_id, path, "pdf", file, None, walk.sidecars[path].content_hash,
                                      ctx.keys.key(file.content_hash, "pdf", context_naming(title, path)), "rekeyed"))
    plan.work_list.sort(key=lambda item: item.path)


def clear_forced_keys(ctx: SyncContext, state: PaidState) -> None:
    """Before the pipeline's first write: the stored keys of what `--force` reached are cleared."""
    if not state.forced:
        return
    from pinakes.index.schema import transaction

    conn = ctx.writer()
    with transaction(conn):
        conn.executemany("UPDATE documents SET build_key = NULL WHERE id = ?", [(doc_id,) for doc_id in state.forced])


def prepare(ctx: SyncContext, state: PaidState, plan: Plan) -> None:
    """Decide what each PDF of the plan needs and, when anything needs paying for, check the whole
    run with the accountant before the first call (raising its refusal, which stops the sync)."""
    if not state.paid:
        return
    pdfs = [item for item in plan.work if item.source_type == "pdf"]
    if not pdfs:
        return
    from pinakes.extract import claude_vision

    cache = extract_cache(ctx)
    fingerprint = paid_fingerprint(ctx, state)
    to_pay: list[DocWork] = []
    paying: dict[str, DocWork] = {}  # content hash -> the document of this run that pays for those bytes
    for item in pdfs:
        if indexed_as(ctx, item, state.backend, fingerprint):
            continue  # this index holds it already (a rebuild carried it): kept, never paid for again
        if cache.get(item.file.content_hash, fingerprint) is not None:
            state.decisions[item.doc_id] = Decision("cached")
            continue
        first = paying.get(item.file.content_hash)
        if first is not None:  # the extraction cache is keyed by bytes: one payment serves both
            state.decisions[item.doc_id] = Decision("same-bytes", message=first.path)
            continue
        try:
            native = native_text(ctx, cache, item)
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
        resume, _ = paid_before(cache, item, fingerprint, pages)
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
    budget = accountant.plan(operation="extract", calls=shapes, interactive=sys.stdin.isatty(),
                             force=ctx.options.force)
    cut = {item.file.content_hash for item in to_pay[budget.admitted_units:]}
    for item in pdfs:
        if item.file.content_hash in cut and state.decisions.get(item.doc_id, Decision("")).kind in ("pay",
                                                                                                   "same-bytes"):
            state.decisions[item.doc_id] = Decision("not-admitted")
    state.plan = budget
    state.client = claude_vision.make_client(key)
    ctx.report.notes.append(f"paid extraction: {budget.describe()}")
