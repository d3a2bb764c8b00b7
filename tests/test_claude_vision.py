"""The Claude-vision extractor against the local Messages API (tests/fake_anthropic.py), through the
real `anthropic` client: slicing, rendering, the structured-output request, and how each kind of
answer closes its budget reservation (reconciled, voided, or left an unknown outcome)."""

from __future__ import annotations

import contextlib
import json
import struct
import zlib
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytest.importorskip("anthropic", reason="the [claude] extra is not installed: no client to test")
pytest.importorskip("pypdfium2", reason="the [pdf] extra is not installed: nothing renders pages")

from pinakes import paid
from pinakes.budget.accountant import CallShape
from pinakes.errors import PaidExtractionFailedError
from pinakes.extract import claude_vision as cv
from pinakes.paid import ApiKey
from tests.fake_anthropic import (
    INPUT_TOKENS_PER_IMAGE,
    INPUT_TOKENS_PER_REQUEST,
    PNG_SIGNATURE,
    FakeAnthropic,
    Reply,
    images_of,
    scanned_pdf,
)

KEY = "sk-ant-test-not-a-real-key"


@dataclass
class RecordingCall:
    call_id: str
    unit: str
    outcome: str = "unknown"  # until reconciled or voided, as the ledger would count it
    tokens: tuple[int, int] | None = None
    overrun: None = None  # the accountant's Call says here whether the usage overran its reservation

    def reconcile(self, *, input_tokens: int, output_tokens: int) -> None:
        self.outcome, self.tokens = "reconciled", (input_tokens, output_tokens)

    def void(self, reason: str) -> None:
        self.outcome = f"void: {reason}"


@dataclass
class RecordingPlan:
    """Stands in for the accountant's Plan where the test is about the extractor's side of a call."""

    calls: list[RecordingCall] = field(default_factory=list[RecordingCall])
    shapes: list[CallShape] = field(default_factory=list[CallShape])

    @contextlib.contextmanager
    def call(self, shape: CallShape, *, unit: str) -> Generator[RecordingCall, None, None]:
        self.shapes.append(shape)
        call = RecordingCall(f"call-{len(self.calls)}", unit)
        self.calls.append(call)
        yield call

    def overrun_error(self) -> None:
        return None  # no call of a recording plan overruns (the accountant's own tests cover that)


@pytest.fixture
def server() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture
def client(server: FakeAnthropic) -> paid.Client:
    return cv.make_client(ApiKey(KEY), base_url=server.url)


def pdf(tmp_path: Path, pages: int) -> Path:
    path = tmp_path / "scan.pdf"
    path.write_bytes(scanned_pdf(pages))
    return path


def extract(path: Path, client: paid.Client, plan: RecordingPlan) -> cv.PaidExtraction:
    return cv.extract_paid(path, client=client, plan=plan,  # pyright: ignore[reportArgumentType]  # a stand-in Plan
                           unit="docs/scan.pdf", sleep=lambda _s: None)


def test_a_scanned_pdf_is_sent_in_fixed_slices_and_comes_back_page_by_page(
        tmp_path: Path, server: FakeAnthropic, client: paid.Client) -> None:
    server.page_texts = {n: f"Scanned page {n} says {n * 11}." for n in range(1, 11)}
    plan = RecordingPlan()

    result = extract(pdf(tmp_path, 10), client, plan)

    requests = server.messages_requests()
    assert [len(images_of(r)) for r in requests] == [8, 2]  # pages_per_request, never a whole document
    assert all(image.startswith(PNG_SIGNATURE) for r in requests for image in images_of(r))
    first = requests[0].body
    assert first is not None
    assert first["max_tokens"] == 8 * cv.OUTPUT_TOKENS_PER_PAGE
    assert first["output_config"]["format"] == {"type": "json_schema", "schema": cv.OUTPUT_SCHEMA}
    assert first["model"] == cv.MODEL
    sent = requests[0].headers
    assert sent.get("x-api-key") == KEY or sent.get("authorization") == f"Bearer {KEY}"
    assert [r.headers.get("x-stainless-retry-count", "0") for r in requests] == ["0", "0"]

    pages = [result.extracted.text[a:b] for a, b in result.extracted.pages or ()]
    assert pages == [server.page_texts[n] for n in range(1, 11)]
    assert result.extracted.backend == "claude-vision"
    assert result.call_ids == ("call-0", "call-1")
    assert [c.unit for c in plan.calls] == ["docs/scan.pdf#slice-0", "docs/scan.pdf#slice-1"]
    assert [c.tokens for c in plan.calls] == [
        (INPUT_TOKENS_PER_REQUEST + 8 * INPUT_TOKENS_PER_IMAGE, 8 * server.output_tokens_per_page),
        (INPUT_TOKENS_PER_REQUEST + 2 * INPUT_TOKENS_PER_IMAGE, 2 * server.output_tokens_per_page),
    ]


def test_the_reservation_bounds_what_the_fake_bills(tmp_path: Path, server: FakeAnthropic,
                                                    client: paid.Client) -> None:
    plan = RecordingPlan()
    extract(pdf(tmp_path, 9), client, plan)
    for shape, call in zip(plan.shapes, plan.calls, strict=True):
        assert call.tokens is not None
        assert call.tokens[0] <= shape.max_input_tokens
        assert call.tokens[1] <= shape.max_output_tokens


@pytest.mark.parametrize("status", [429, 529])
def test_a_busy_api_is_voided_and_retried_after_its_retry_after(
        tmp_path: Path, server: FakeAnthropic, client: paid.Client, status: int) -> None:
    server.queue(Reply("status", status, headers={"retry-after": "7"}))
    waits: list[float] = []
    plan = RecordingPlan()

    result = cv.extract_paid(pdf(tmp_path, 3), client=client,
                             plan=plan,  # pyright: ignore[reportArgumentType]  # a stand-in Plan
                             unit="docs/scan.pdf", sleep=waits.append)

    assert waits == [7.0]
    kind = {429: "rate_limit_error", 529: "overloaded_error"}[status]
    assert [c.outcome for c in plan.calls] == [f"void: HTTP {status} ({kind})", "reconciled"]
    assert result.call_ids == ("call-0", "call-1")  # both joined to the cache entry; one costs zero


def test_a_busy_api_gives_up_after_the_last_attempt_and_bills_nothing(
        tmp_path: Path, server: FakeAnthropic, client: paid.Client) -> None:
    server.queue(*[Reply("status", 529, headers={"retry-after": "0"})] * paid.MAX_ATTEMPTS)
    plan = RecordingPlan()
    with pytest.raises(PaidExtractionFailedError, match=r"^the request for pages 1-2 was refused with HTTP 529 "
                                                         r"\(overloaded_error\) after 3 attempts; nothing was billed$"):
        extract(pdf(tmp_path, 2), client, plan)
    assert [c.outcome for c in plan.calls] == ["void: HTTP 529 (overloaded_error)"] * paid.MAX_ATTEMPTS


def test_a_bad_key_is_refused_without_naming_it(tmp_path: Path, server: FakeAnthropic,
                                                client: paid.Client) -> None:
    server.queue(Reply("status", 401))
    plan = RecordingPlan()
    with pytest.raises(PaidExtractionFailedError) as caught:
        extract(pdf(tmp_path, 2), client, plan)
    assert "API key" in (caught.value.remedy or "") and KEY not in caught.value.render()
    assert [c.outcome for c in plan.calls] == ["void: HTTP 401 (authentication_error)"]  # a 401 is not retried


def test_a_timeout_leaves_the_call_an_unknown_outcome(tmp_path: Path, server: FakeAnthropic,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cv, "REQUEST_TIMEOUT_S", 0.3)
    client = cv.make_client(ApiKey(KEY), base_url=server.url)
    server.queue(Reply("ok", delay_s=1.5))
    plan = RecordingPlan()
    with pytest.raises(PaidExtractionFailedError) as caught:
        extract(pdf(tmp_path, 2), client, plan)
    assert [c.outcome for c in plan.calls] == ["unknown"]  # counted at its reservation
    assert caught.value.message.startswith("the request for pages 1-2 timed out; whether it billed is unknown")
    assert "pnk budget --resolve call-0 --actual" in (caught.value.remedy or "")
    assert len(server.messages_requests()) == 1  # never retried: it may have billed


def test_an_unreadable_body_leaves_the_call_an_unknown_outcome(tmp_path: Path, server: FakeAnthropic,
                                                              client: paid.Client) -> None:
    server.queue(Reply("malformed"))
    plan = RecordingPlan()
    with pytest.raises(PaidExtractionFailedError, match="unreadable"):
        extract(pdf(tmp_path, 2), client, plan)
    assert [c.outcome for c in plan.calls] == ["unknown"]


@pytest.mark.parametrize("kind, fragment", [
    ("refusal", "refused pages 1-8"),
    ("truncated", "cut off at its max_tokens (stop_reason max_tokens): 16,384 output tokens"),
    ("wrong-pages", "holds pages [1, 2, 3, 4, 5, 6, 7], not [1, 2, 3, 4, 5, 6, 7, 8]"),
])
def test_a_billed_answer_without_the_pages_fails_the_whole_document(
        tmp_path: Path, server: FakeAnthropic, client: paid.Client, kind: str, fragment: str) -> None:
    server.queue(Reply(kind))
    plan = RecordingPlan()
    with pytest.raises(PaidExtractionFailedError) as caught:
        extract(pdf(tmp_path, 12), client, plan)
    assert fragment in caught.value.message
    assert [c.outcome for c in plan.calls] == ["reconciled"]  # billed, so it is in the ledger
    assert len(server.messages_requests()) == 1  # the rest of the document is never sent


@pytest.mark.parametrize("stop, fragment, remedy", [
    ("max_tokens", "ended with stop_reason max_tokens after 40 output tokens, though its max_tokens allowed "
                   "16,384", "run `pnk sync` again"),
    ("model_context_window_exceeded", "was cut off after 40 output tokens: the request reached the model's "
                                      "context window", "split the PDF"),
])
def test_a_length_stop_says_what_the_answer_used_not_the_allowance_as_if_reached(
        tmp_path: Path, server: FakeAnthropic, client: paid.Client, stop: str, fragment: str, remedy: str) -> None:
    """The issue's "cut off at 2,048 output tokens" when the usage was 40 (issue #40, minor)."""
    server.queue(Reply("truncated", usage={"output_tokens": 40}))
    if stop != "max_tokens":
        server.script[0].body = _answer_body(stop)
    plan = RecordingPlan()
    with pytest.raises(PaidExtractionFailedError) as caught:
        extract(pdf(tmp_path, 12), client, plan)
    assert fragment in caught.value.message and "2,048" not in caught.value.message
    assert caught.value.remedy is not None and caught.value.remedy.startswith(remedy)


def _answer_body(stop: str) -> dict[str, object]:
    """A Messages answer cut short with `stop` after 40 output tokens (the page list half-written)."""
    return {"id": "msg_cut", "type": "message", "role": "assistant", "model": cv.MODEL,
            "content": [{"type": "text", "text": '{"pages": [{"page": 1, "te'}], "stop_reason": stop,
            "stop_sequence": None, "usage": {"input_tokens": 10_000, "output_tokens": 40}}


def test_slices_are_fixed_size_and_the_worst_case_is_per_slice() -> None:
    assert [len(s) for s in cv.slices(17)] == [8, 8, 1]
    assert cv.slices(0) == []
    pytest.importorskip("pinakes.budget.accountant", reason="the accountant is not built in this tree")
    shapes = cv.document_shapes(17, "docs/a.pdf")
    assert [s.max_output_tokens for s in shapes] == [8 * cv.OUTPUT_TOKENS_PER_PAGE] * 2 + [cv.OUTPUT_TOKENS_PER_PAGE]
    assert shapes[2].max_input_tokens == cv.REQUEST_OVERHEAD_TOKENS + cv.IMAGE_TOKENS_BOUND
    assert {s.unit for s in shapes} == {"docs/a.pdf"}  # one document is one whole unit


def test_the_png_encoder_writes_what_a_decoder_reads_back() -> None:
    width, height = 5, 3
    pixels = bytes(range(width * height))
    png = cv.encode_png_gray(pixels, width, height)
    assert png.startswith(PNG_SIGNATURE)
    length = struct.unpack(">I", png[8:12])[0]
    assert png[12:16] == b"IHDR" and struct.unpack(">II", png[16:24]) == (width, height)
    idat = png.index(b"IDAT")
    size = struct.unpack(">I", png[idat - 4:idat])[0]
    rows = zlib.decompress(png[idat + 4:idat + 4 + size])
    assert b"".join(rows[r * (width + 1) + 1:(r + 1) * (width + 1)] for r in range(height)) == pixels
    assert length == 13
    with pytest.raises(ValueError):
        cv.encode_png_gray(b"\x00", 2, 2)


def test_a_rendered_page_fits_the_image_bound(tmp_path: Path) -> None:
    images = cv.render_pages(pdf(tmp_path, 1), [0])
    width, height = struct.unpack(">II", images[0][16:24])
    assert max(width, height) <= cv.MAX_EDGE_PX
    assert width * height / 750 <= cv.IMAGE_TOKENS_BOUND


def test_count_tokens_measures_the_real_first_slice(tmp_path: Path, server: FakeAnthropic,
                                                    client: paid.Client) -> None:
    tokens, pages = cv.count_first_slice(pdf(tmp_path, 11), client=client)
    assert (tokens, pages) == (INPUT_TOKENS_PER_REQUEST + 8 * INPUT_TOKENS_PER_IMAGE, 8)
    counted = [r for r in server.requests if r.path == "/v1/messages/count_tokens"]
    assert len(counted) == 1 and not server.messages_requests()  # nothing generated, nothing billed
    assert counted[0].body is not None and "max_tokens" not in counted[0].body
    assert json.dumps(counted[0].body["output_config"]) == json.dumps(
        {"format": {"type": "json_schema", "schema": cv.OUTPUT_SCHEMA}})
