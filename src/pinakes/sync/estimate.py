"""`pnk sync --estimate-only`: what the next paid sync would cost, measured rather than only bounded.

It plans the run as `pnk sync` would (the same read-only walk and pair `pnk status` uses, the same
cache and healthy-layer decisions the paid run makes) and then builds the real first-slice request
of the first PDF to be paid for and measures it with the vendor's token counter (spec §6.3). The
measured input per page is extrapolated over every page to be paid for; output has no counter
before it is generated, so it stays at its reservation bound. It is a network call that generates
nothing and bills nothing — and therefore needs a key. On a free backend it refuses rather than
printing €0.00: "nothing to estimate" is not "this run costs nothing".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import ROUND_CEILING, Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes.budget.money import format_eur
from pinakes.errors import UsageError
from pinakes.extract.registry import EXTRACTORS
from pinakes.wording import counted

if TYPE_CHECKING:
    from pinakes.budget import CallShape


@dataclass
class Estimate:
    backend: str
    model: str
    documents: int = 0  # PDFs a paid run would pay for
    pages: int = 0
    calls: int = 0
    skipped: dict[str, int] = field(default_factory=dict[str, int])  # reason -> documents needing no call
    measured_path: str | None = None
    measured_pages: int = 0
    measured_input_tokens: int = 0
    input_tokens: int = 0  # extrapolated over every page
    output_tokens_bound: int = 0
    input_tokens_bound: int = 0
    estimate_eur: Decimal | None = None  # measured input + bounded output
    reserved_eur: Decimal | None = None  # what the run reserves before its calls (the worst case)

    def to_dict(self) -> dict[str, object]:
        data = {key: value for key, value in self.__dict__.items()}
        for key in ("estimate_eur", "reserved_eur"):
            data[key] = str(data[key]) if data[key] is not None else None
        return data

    def render_text(self) -> str:
        if not self.documents:
            reasons = ", ".join(f"{count} {reason}" for reason, count in self.skipped.items()) or "no PDF to extract"
            return f"estimate ({self.backend}): nothing to pay for in the next sync ({reasons})"
        lines = [f"estimate ({self.backend}, {self.model}): {counted(self.documents, 'PDF')}, "
                 f"{counted(self.pages, 'page')}, {counted(self.calls, 'request')}",
                 f"  measured: the first request of {self.measured_path} ({counted(self.measured_pages, 'page')}) "
                 f"counts {self.measured_input_tokens:,} input tokens",
                 f"  input: about {self.input_tokens:,} tokens in all (bound {self.input_tokens_bound:,})",
                 f"  output: at most {self.output_tokens_bound:,} tokens (not countable before it is generated)"]
        if self.estimate_eur is not None and self.reserved_eur is not None:
            lines.append(f"  cost: at most {format_eur(self.estimate_eur)} with the measured input; the run reserves "
                         f"{format_eur(self.reserved_eur)} before its calls (every bound at its worst case)")
        if self.skipped:
            lines.append("  no call needed: " + ", ".join(f"{count} {reason}" for reason, count in self.skipped.items()))
        lines.append("  nothing was generated or billed; `pnk sync` runs it (within [budget])")
        return "\n".join(lines)


def estimate_paid_run(start: Path | str | None = None, *, extract_backend: str | None = None,
                      force: bool = False, api_key_file: Path | None = None) -> Estimate:
    from pinakes.extract.registry import PDF_BACKENDS
    from pinakes.kb import find_kb_root
    from pinakes.pipeline import pair
    from pinakes.pipeline.keys import build_keys
    from pinakes.sources import walk
    from pinakes.sync.loader import inspection_context

    if extract_backend is not None and extract_backend not in PDF_BACKENDS:
        raise UsageError(f"unknown extraction backend {extract_backend!r}", remedy=f"use one of: {', '.join(PDF_BACKENDS)}")
    root = find_kb_root(start)
    ctx = inspection_context(root, mode="estimate")
    backend = extract_backend or ctx.manifest.extraction.backend
    if not EXTRACTORS[backend].paid:
        if ctx.conn is not None:
            ctx.conn.close()
        raise UsageError(f"--estimate-only prices a paid extraction, and backend {backend!r} is free: there is "
                         "nothing to estimate (which is not the same as a run that costs nothing)",
                         remedy="name the paid backend: `pnk sync --estimate-only --extract=claude-vision`")
    from pinakes.extract import claude_vision
    from pinakes.extract.cache import ExtractCache
    from pinakes.paid import read_api_key
    from pinakes.pipeline.paid_state import FREE_PDF_BACKEND

    ctx.keys = build_keys(ctx.manifest, backend)
    try:
        found = walk.walk(ctx.paths.root, ctx.manifest.sources, walk.load_walk_cache(ctx.conn),
                          racy_after=walk.racy_after_ns(ctx.conn))
        plan = pair.compute_plan(ctx, found, ctx.conn)
    finally:
        if ctx.conn is not None:
            ctx.conn.close()
    model = ctx.manifest.extraction.model
    estimate = Estimate(backend, model)
    cache = ExtractCache(ctx.paths.extract_cache)
    paid_fp, free_fp = EXTRACTORS[backend].fingerprint(model), EXTRACTORS[FREE_PDF_BACKEND].fingerprint()
    to_pay: list[tuple[str, int]] = []
    paying: set[str] = set()  # content hashes: a run pays once for the same bytes (pipeline/paid_planning.py)
    for item in plan.work:
        if item.source_type != "pdf":
            continue
        if cache.get(item.file.content_hash, paid_fp) is not None:
            estimate.skipped["already extracted (cache)"] = estimate.skipped.get("already extracted (cache)", 0) + 1
            continue
        if item.file.content_hash in paying:
            reason = "with the same bytes as another file of the run (paid for once)"
            estimate.skipped[reason] = estimate.skipped.get(reason, 0) + 1
            continue
        free = cache.get(item.file.content_hash, free_fp)
        if free is not None and free.extracted.pages and not free.extracted.pages_without_text and not force:
            reason = "with a healthy free text layer (--force pays for them)"
            estimate.skipped[reason] = estimate.skipped.get(reason, 0) + 1
            continue
        to_pay.append((item.path, claude_vision.page_count(ctx.paths.root / item.path)))
        paying.add(item.file.content_hash)
    to_pay = [(path, pages) for path, pages in to_pay if pages]
    if not to_pay:
        return estimate
    shapes = [shape for path, pages in to_pay for shape in claude_vision.document_shapes(pages, path, model)]
    estimate.documents = len(to_pay)
    estimate.pages = sum(pages for _path, pages in to_pay)
    estimate.calls = len(shapes)
    estimate.input_tokens_bound = sum(shape.max_input_tokens for shape in shapes)
    estimate.output_tokens_bound = sum(shape.max_output_tokens for shape in shapes)

    client = claude_vision.make_client(read_api_key(api_key_file))
    first_path = to_pay[0][0]
    counted, counted_pages = claude_vision.count_first_slice(ctx.paths.root / first_path, client=client, model=model)
    estimate.measured_path, estimate.measured_pages, estimate.measured_input_tokens = first_path, counted_pages, counted
    # Per request, the measured count is its overhead plus its pages: scale each request by its pages.
    per_page = Decimal(counted) / Decimal(counted_pages)
    estimate.input_tokens = -(-counted * estimate.pages // counted_pages)  # rounded up, exactly
    _price(estimate, shapes, per_page)
    return estimate


def _price(estimate: Estimate, shapes: list[CallShape], input_per_page: Decimal) -> None:
    """EUR at the packaged price table, call by call (a price can depend on one call's prompt
    length); left None when the model or the table cannot price it."""
    from pinakes.budget import load_prices, to_eur
    from pinakes.errors import PinakesError
    from pinakes.extract.claude_vision import OUTPUT_TOKENS_PER_PAGE

    try:
        table = load_prices()
    except PinakesError:
        return
    price = table.price(estimate.model)
    if price is None:
        return
    rate = table.usd_per_eur
    estimate.reserved_eur = sum((to_eur(price.cost_usd(s.max_input_tokens, s.max_output_tokens), rate)
                                 for s in shapes), Decimal(0))
    estimated = Decimal(0)
    for shape in shapes:
        pages = shape.max_output_tokens // OUTPUT_TOKENS_PER_PAGE
        tokens = int((input_per_page * pages).to_integral_value(rounding=ROUND_CEILING))  # never below
        estimated += to_eur(price.cost_usd(tokens, shape.max_output_tokens), rate)
    estimate.estimate_eur = estimated
