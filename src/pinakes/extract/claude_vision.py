"""The paid Claude-vision PDF extractor (the `[claude]` extra): page images in, per-page text out.

One of the two modules allowed to import a paid client (`.paid-path-allowlist`); nothing on the free
path imports it. A PDF is cut into fixed-size page slices (`pages_per_request`, spec §5: a slice,
never a whole document and never a single page). Each slice's pages are rendered with pypdfium2 to
grayscale PNGs no longer than `MAX_EDGE_PX` on either side and sent in one Messages request with
structured output: a JSON object holding one `{"page", "text"}` entry per page. Every call goes
through `pinakes.paid.paid_call`, inside the budget accountant's reservation of its worst case (on
disk before the request leaves, spec §5): the response's own usage reconciles it, an error status
voids it (an error response is not billed), and no answer leaves it an unknown outcome (a timeout
may or may not have billed). The rules shared with `pnk ask --deep` live in `pinakes.paid`.

Whatever shapes the text (slice size, model, image size, prompt, schema) is declared in the
registry (`EXTRACTORS["claude-vision"].constants`), so it is part of the fingerprint: a change
re-extracts, which on this backend means paying again, so change them deliberately. The model is
also a setting (`[extraction] model`, a priced model; `MODEL` is the default): the caller passes it,
and the fingerprint stamped on the text is the one with that model.

A refusal (stop_reason "refusal"), a truncation ("max_tokens") and an answer that is not the pages
asked for are document failures: the document is all or nothing (spec §5), and a half-extracted
document writes no cache entry.

The API key is `pinakes.paid.read_api_key`'s (`PINAKES_ANTHROPIC_API_KEY`, or a file the user
names; never the generic `ANTHROPIC_API_KEY`), handed to the client and nowhere else.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import math
import re
import struct
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from pinakes import paid
from pinakes.budget.errors import BudgetError, UnrecordedOutcomeError
from pinakes.errors import (
    MissingExtraError,
    PaidCallError,
    PaidExtractionFailedError,
    PinakesError,
    SourceError,
)
from pinakes.extract.registry import EXTRACTORS
from pinakes.extract.types import ExtractedText
from pinakes.faults import faultpoint
from pinakes.paid import ApiKey
from pinakes.wording import counted

if TYPE_CHECKING:
    from pypdfium2 import PdfDocument

    from pinakes.budget import CallShape, Plan

T = TypeVar("T")
BACKEND = "claude-vision"
_SPEC = EXTRACTORS[BACKEND]
PAGES_PER_REQUEST = int(_SPEC.constants["pages_per_request"])
MODEL = str(_SPEC.constants["model"])
MAX_EDGE_PX = int(_SPEC.constants["max_edge_px"])
PAGE_SEPARATOR = "\n\n"  # as the free path: a page's text never runs into the next one's

# The reservation's bounds (spec §5: every constant behind a reservation is a bound, not an estimate).
# An image costs about width * height / 750 input tokens and the API only ever scales an image down,
# so a page rendered inside MAX_EDGE_PX x MAX_EDGE_PX costs at most this many:
IMAGE_TOKENS_BOUND = math.ceil(MAX_EDGE_PX * MAX_EDGE_PX / 750)
# The prompt, the page-range line and the structured-output schema the API adds, per request
# (measured at about 600 on the fake's tokenizer-free count; bounded well above it).
REQUEST_OVERHEAD_TOKENS = 2_000
# A dense page of prose is about 1,000 output tokens; a table or code page more. max_tokens truncates
# rather than bills, so this bound is what a page may produce before the document fails as truncated.
OUTPUT_TOKENS_PER_PAGE = 2_048

# Network behaviour (pinakes.paid: the SDK's own retries are off, every attempt its own reservation).
REQUEST_TIMEOUT_S = paid.REQUEST_TIMEOUT_S
_RETRY = "run `pnk sync` again to retry the document"

PROMPT = (
    "Transcribe the text of each page image exactly as it reads, in reading order: every word, "
    "number and heading, columns read one after another, table rows one per line with cells "
    "separated by ' | '. Do not summarise, translate, correct or describe images. A page with no "
    "text gets an empty string. Answer with one entry per page, in page order, numbered as given."
)
OUTPUT_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {
        "pages": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"page": {"type": "integer"}, "text": {"type": "string"}},
                "required": ["page", "text"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["pages"],
    "additionalProperties": False,
}
_NOISE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ufffe\uffff]")
_TRAILING_SPACE = re.compile(r"[ \t]+$", re.MULTILINE)


# --- the client ----------------------------------------------------------------------------------


def make_client(key: ApiKey, *, base_url: str | None = None) -> paid.Client:
    """The SDK client under `pinakes.paid`'s rules (the key passed explicitly, the SDK's retries off,
    a bounded timeout). `base_url` defaults to the SDK's own (`ANTHROPIC_BASE_URL`, else the
    vendor's endpoint)."""
    return paid.make_client(_sdk(), key, base_url=base_url, timeout=REQUEST_TIMEOUT_S)


def _sdk() -> paid.SDK:
    try:
        import anthropic
    except ImportError as exc:
        raise MissingExtraError("claude", "paid PDF extraction", missing_module="anthropic") from exc
    return anthropic


# --- slices and their worst case -------------------------------------------------------------------


def slices(page_count: int, size: int = PAGES_PER_REQUEST) -> list[range]:
    """0-based page ranges of at most `size` pages, in order."""
    return [range(start, min(start + size, page_count)) for start in range(0, page_count, size)]


def call_shape(pages: int, *, unit: str, model: str = MODEL) -> CallShape:
    """The worst case one request of `pages` page images can cost, as the accountant prices it."""
    from pinakes.budget import CallShape

    return CallShape(model, max_input_tokens=REQUEST_OVERHEAD_TOKENS + IMAGE_TOKENS_BOUND * pages,
                     max_output_tokens=OUTPUT_TOKENS_PER_PAGE * pages, unit=unit)


def document_shapes(page_count: int, unit: str, model: str = MODEL, *, pages_done: int = 0) -> list[CallShape]:
    """Every call one document still needs (past the first `pages_done` pages, already paid for),
    each labelled with the document (the accountant's whole unit)."""
    return [call_shape(len(pages), unit=unit, model=model) for pages in slices(page_count)
            if pages.start >= pages_done]


def resumable(page_texts: Sequence[str], page_count: int) -> tuple[str, ...]:
    """The leading pages of an interrupted paid extraction that a new run may start from: whole
    slices only, and fewer than the document holds (else nothing: the slicing is in the fingerprint,
    so a mismatch means a damaged record, not another slicing)."""
    done = len(page_texts)
    if 0 < done < page_count and done % PAGES_PER_REQUEST == 0:
        return tuple(page_texts)
    return ()


def page_count(path: Path) -> int:
    """The PDF's page count, read in the isolated child (see `render_pages`)."""
    return _isolated(page_count_in_process, path)


def page_count_in_process(path: Path) -> int:
    document = _open(path)
    try:
        return len(document)
    finally:
        document.close()


# --- rendering -------------------------------------------------------------------------------------


def render_pages(path: Path, pages: Sequence[int]) -> list[bytes]:
    """PNG bytes of the given 0-based pages, grayscale, the longer side at most MAX_EDGE_PX.

    Rendered in the free extractor's isolated child (`pinakes.extract.isolation`, issue #13), under
    the same limits: pdfium rendering a hostile or broken page can crash, hang or balloon, and on
    this path that would take down a sync holding open reservations. One slice's images come back at
    a time (a few megabytes, far below the isolation's output limit). A crash fails the document as
    an IsolationError before that slice's request is reserved or sent (a slice before it is already
    in the ledger, as after any other failure part-way through a document).
    """
    return _isolated(render_pages_in_process, path, list(pages))


def render_pages_in_process(path: Path, pages: Sequence[int]) -> list[bytes]:
    """`render_pages` in the calling process: what the isolated child runs."""
    faultpoint("extract.claude_vision.render")  # a planted renderer crash, for the isolation test
    document = _open(path)
    from pypdfium2 import PdfiumError  # `_open` has imported it

    try:
        images: list[bytes] = []
        for index in pages:
            page = document[index]
            try:
                width, height = page.get_size()
                scale = min(MAX_EDGE_PX / max(width, height, 1.0), 300 / 72)
                bitmap = page.render(scale=scale, grayscale=True)
                try:
                    pixels = bitmap.to_numpy()
                    images.append(encode_png_gray(pixels.tobytes() if pixels.ndim == 2 else
                                                  pixels[..., 0].tobytes(),
                                                  pixels.shape[1], pixels.shape[0]))
                finally:
                    bitmap.close()
            finally:
                page.close()
        return images
    except PdfiumError as exc:
        raise SourceError(f"pdfium failed to render a page: {exc}; not indexed", path=path) from exc
    finally:
        document.close()


def encode_png_gray(pixels: bytes, width: int, height: int) -> bytes:
    """An 8-bit grayscale PNG of `pixels` (row-major, one byte per pixel). Written here rather than
    through Pillow, which the [claude] extra does not otherwise need."""
    if len(pixels) != width * height:
        raise ValueError(f"{len(pixels)} bytes cannot be a {width}x{height} grayscale image")
    rows = b"".join(b"\x00" + pixels[row * width:(row + 1) * width] for row in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 6))
            + chunk(b"IEND", b""))


# --- the request -----------------------------------------------------------------------------------


def build_request(images: Sequence[bytes], first_page: int, total_pages: int, *,
                  model: str = MODEL) -> dict[str, object]:
    """The keyword arguments of one Messages request (1-based `first_page`), minus max_tokens."""
    last_page = first_page + len(images) - 1
    content: list[dict[str, object]] = [
        {"type": "text", "text": f"These are pages {first_page} to {last_page} of a {total_pages}-page "
                                 "PDF, one image per page, in order."},
    ]
    for image in images:
        content.append({"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                    "data": base64.b64encode(image).decode("ascii")}})
    content.append({"type": "text", "text": PROMPT})
    return {"model": model, "messages": [{"role": "user", "content": content}],
            "output_config": {"format": {"type": "json_schema", "schema": OUTPUT_SCHEMA}}}


# --- extraction ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PaidExtraction:
    extracted: ExtractedText
    call_ids: tuple[str, ...]
    page_texts: tuple[str, ...]
    # The last call billed but the ledger would not take its reconciliation (UnrecordedOutcomeError),
    # or its answer reported usage above its reservation (BudgetOverrunError): the text is whole and
    # paid for (keep it), and the caller stops before the next paid call.
    unrecorded: BudgetError | None = None


@dataclass(frozen=True)
class SliceAnswer:
    texts: list[str]
    input_tokens: int
    output_tokens: int


# Called after each slice but the last with every page text and call_id paid for so far, so the
# caller can keep them: a document stopped part-way (the budget, a failure of a later slice, a fault)
# resumes from there instead of paying for those pages again.
SliceKeeper = Callable[[Sequence[str], Sequence[str]], None]


def extract_paid(path: Path, *, client: paid.Client, plan: Plan, unit: str, model: str = MODEL, retry: str = _RETRY,
                 sleep: Callable[[float], None] = time.sleep, resume: Sequence[str] = (),
                 resume_call_ids: Sequence[str] = (), keep_slices: SliceKeeper | None = None) -> PaidExtraction:
    """Extract every page of `path`, one budgeted call per slice; all or nothing. `resume`: the
    texts of its first pages, paid for by an earlier run (`resumable`), which are not asked again.

    Raises PaidExtractionFailedError for a document failure, and lets the accountant's
    BudgetExceededError through untouched: the caller decides between abort and partial (a
    BudgetOverrunError, raised by the next slice's reservation after a slice overran, stops every
    run). A reconciliation the ledger would not take, or an overrun, on the last slice still returns
    the whole document (`unrecorded` set); on an earlier slice the UnrecordedOutcomeError is raised
    once its pages are kept (no further call can be reserved on that ledger, and a document is never
    indexed in part).
    `model`: the one `[extraction] model` names (it joins the fingerprint stamped on the text);
    `retry`: the command a failure's remedy names to try again.
    """
    total = page_count(path)
    texts: list[str] = list(resumable(resume, total))
    call_ids: list[str] = list(resume_call_ids) if texts else []
    cut = slices(total)
    unrecorded: UnrecordedOutcomeError | None = None
    for number, pages in enumerate(cut):
        if pages.start < len(texts):
            continue  # paid for by an earlier run
        images = render_pages(path, pages)
        request = build_request(images, pages.start + 1, total, model=model)
        del images
        answer, ids, unrecorded = _call_with_retries(client, plan, request, pages, unit=f"{unit}#slice-{number}",
                                                     model=model, retry=retry, sleep=sleep, path=path)
        call_ids.extend(ids)
        texts.extend(answer.texts)
        if number == len(cut) - 1:
            break
        kept = _keep(keep_slices, texts, call_ids, unrecorded)
        if unrecorded is not None:
            unrecorded.answer = None
            unrecorded.details.append(
                f"{path}: pages 1-{pages.stop} of {total} came back{' and are kept for the next run' if kept else ''}, "
                "but the rest cannot be paid for while the ledger refuses writes, and a document is never "
                "indexed in part")
            raise unrecorded
    extracted = ExtractedText.from_pages(texts, PAGE_SEPARATOR, backend=BACKEND, fingerprint=_SPEC.fingerprint(model))
    # An earlier slice's overrun was refused at the next slice's reservation; only the last one's is left.
    stop = unrecorded if unrecorded is not None else plan.overrun_error()
    return PaidExtraction(extracted, tuple(call_ids), tuple(texts), stop)


def _keep(keep_slices: SliceKeeper | None, texts: Sequence[str], call_ids: Sequence[str],
          unrecorded: UnrecordedOutcomeError | None) -> bool:
    """Hand the pages paid for so far to the caller's keeper; whether they were kept. The keeper's
    own fault propagates, unless the ledger's (which names the call to resolve) is already stopping."""
    if keep_slices is None:
        return False
    try:
        keep_slices(texts, call_ids)
    except PinakesError as fault:
        if unrecorded is None:
            raise
        unrecorded.details.append(fault.render())
        return False
    return True


def _call_with_retries(client: paid.Client, plan: Plan, request: dict[str, object], pages: range, *, unit: str,
                       model: str, retry: str, sleep: Callable[[float], None],
                       path: Path) -> tuple[SliceAnswer, list[str], UnrecordedOutcomeError | None]:
    """The slice's answer, its attempts' call_ids, and the ledger's refusal of its reconciliation
    when the call billed but could not be recorded (the answer is paid for, so it is still read)."""
    shape = call_shape(len(pages), unit=unit, model=model)
    where = f"pages {pages.start + 1}-{pages.stop}"
    try:
        answer, call_ids = paid.paid_call_retrying(_sdk(), client, plan, shape, request, unit=unit, retry=retry,
                                                   sleep=sleep)
    except PaidCallError as exc:
        attempts = f" after {exc.attempts} attempts" if exc.attempts > 1 else ""
        raise PaidExtractionFailedError(f"the request for {where} {exc.happened}{attempts}; {exc.billed}",
                                        remedy=exc.remedy, path=path) from None
    except UnrecordedOutcomeError as exc:
        if not isinstance(exc.answer, paid.PaidAnswer):
            raise
        try:
            return _answer(exc.answer.message, pages, where, path, retry), [exc.call_id], exc
        except PaidExtractionFailedError as failure:  # nothing to keep; the ledger's fault still stops the run
            exc.answer = None
            exc.details.append(failure.render())
            raise exc from None
    return _answer(answer.message, pages, where, path, retry), list(call_ids), None


def _answer(message: paid.Message, pages: range, where: str, path: Path, retry: str = _RETRY) -> SliceAnswer:
    """The slice's page texts from a billed answer, or PaidExtractionFailedError naming why not."""
    stop = message.stop_reason
    if stop == "refusal":
        raise PaidExtractionFailedError(f"the model refused {where}; the document is not indexed (the call "
                                   "was billed and is in the ledger)",
                                   remedy="use the free backend for this file (`pnk sync --extract=pypdfium2`), "
                                          "or exclude it in [sources]", path=path)
    if stop in ("max_tokens", "model_context_window_exceeded"):
        short = stop == "max_tokens" and not _reached_max_tokens(stop, message, len(pages))  # not what it says
        raise PaidExtractionFailedError(
            f"the answer for {where} {_cut_off(stop, message, len(pages))}; the document is not indexed "
            "rather than indexed in part", path=path,
            remedy=f"{retry}; if it recurs, use the free backend for this file" if short else
                   "split the PDF, or use the free backend for this file")
    raw = "".join(getattr(block, "text", "") for block in message.content if block.type == "text")
    try:
        document = json.loads(raw)
        entries = document["pages"]
        numbers = [int(entry["page"]) for entry in entries]
        texts = [entry["text"] for entry in entries]
    except (ValueError, KeyError, TypeError) as exc:
        raise PaidExtractionFailedError(f"the answer for {where} is not the structured page list asked for "
                                   f"({type(exc).__name__})", remedy=retry,
                                   path=path) from None
    expected = [index + 1 for index in pages]
    if numbers != expected or not all(isinstance(text, str) for text in texts):
        raise PaidExtractionFailedError(f"the answer for {where} holds pages {numbers}, not {expected}",
                                   remedy=retry, path=path)
    return SliceAnswer([_normalise(text) for text in texts], int(message.usage.input_tokens),
                       int(message.usage.output_tokens))


def _cut_off(stop: str, message: paid.Message, pages: int) -> str:
    """What ended a length-stopped answer, as the response says it: its own stop_reason and output
    usage against the max_tokens the request allowed (never the allowance alone, as if reached)."""
    allowed = OUTPUT_TOKENS_PER_PAGE * pages
    used = int(message.usage.output_tokens)
    if stop == "model_context_window_exceeded":
        return (f"was cut off after {used:,} output tokens: the request reached the model's context window "
                f"(stop_reason {stop})")
    if _reached_max_tokens(stop, message, pages):
        return (f"was cut off at its max_tokens (stop_reason max_tokens): {allowed:,} output tokens, "
                f"{OUTPUT_TOKENS_PER_PAGE:,} per page for {counted(pages, 'page')}")
    return (f"ended with stop_reason max_tokens after {used:,} output tokens, though its max_tokens allowed "
            f"{allowed:,}: the API marks it incomplete")


def _reached_max_tokens(stop: str, message: paid.Message, pages: int) -> bool:
    return stop == "max_tokens" and int(message.usage.output_tokens) >= OUTPUT_TOKENS_PER_PAGE * pages


def _normalise(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _TRAILING_SPACE.sub("", _NOISE.sub("", text)).strip("\n")


# --- token counting (pnk sync --estimate-only) -----------------------------------------------------


def count_first_slice(path: Path, *, client: paid.Client, model: str = MODEL) -> tuple[int, int]:
    """(input tokens of the real first-slice request, pages in it), measured by the vendor's own
    counter. A network call that generates nothing and bills nothing."""
    sdk = _sdk()
    total = page_count(path)
    first = slices(total)[0] if total else range(0)
    request = build_request(render_pages(path, first), 1, total, model=model)
    try:
        counted = client.messages.count_tokens(**request)
    except Exception as exc:
        failure = paid.classify_failure(sdk, exc)
        if failure is None:
            raise
        # Counting bills nothing whatever the outcome: there is no reservation to resolve.
        remedy = paid.failure_remedy(replace(failure, outcome="void"), "",
                                     retry="run `pnk sync --estimate-only` again")
        raise PinakesError(f"the token counter's request for the first slice {failure.what}",
                           remedy=remedy, path=path) from None
    return int(counted.input_tokens), len(first)


# --- helpers ---------------------------------------------------------------------------------------


def _isolated(function: Callable[..., T], path: Path, *args: object) -> T:
    if importlib.util.find_spec("pypdfium2") is None:  # said here: the child's error would say it less well
        raise MissingExtraError("claude", "paid PDF extraction", missing_module="pypdfium2")
    from pinakes.extract.isolation import Limits, run_isolated

    return run_isolated(function, Path(path), *args, limits=Limits.for_input(Path(path).stat().st_size),
                        what="the PDF page renderer", path=path,
                        remedy="if the PDF opens in a viewer, report this as a Pinakes bug; otherwise "
                               "re-export it, or exclude it in [sources]")


def _open(path: Path) -> PdfDocument:
    try:
        import pypdfium2 as pdfium
    except ImportError as exc:
        raise MissingExtraError("claude", "paid PDF extraction", missing_module="pypdfium2") from exc
    try:
        return pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as exc:
        reason = "encrypted (a password is required)" if "password" in str(exc).lower() else f"unreadable ({exc})"
        raise SourceError(f"the PDF is {reason}; not indexed",
                          remedy="export an unencrypted, valid PDF, or exclude it in [sources]", path=path) from exc


def iter_page_spans(extracted: ExtractedText) -> Iterator[str]:
    """Each page's text of an extraction (for the completeness audit)."""
    for start, end in extracted.pages or ():
        yield extracted.text[start:end]
