"""A local stand-in for the Anthropic Messages API, for tests that run the real `anthropic` client.

A real HTTP server in a thread of the test process (`http.server`, loopback only) that speaks
`POST /v1/messages` and `POST /v1/messages/count_tokens` with spec-shaped JSON, usage figures
included, so the SDK parses its answers exactly as it would parse the vendor's. Point a client at it
with `base_url=server.url` (or `ANTHROPIC_BASE_URL`).

By default a Messages request is answered as the Claude-vision extractor expects: structured output
(a JSON text block) holding one `{"page", "text"}` entry per image, the page numbers read from the
request's own "pages A to B" line, the text from `page_texts` (or `"Text of page N."`). A test scripts
anything else by queueing `Reply` objects, consumed one per request in order: a status with headers
(429/529 with retry-after), a delay longer than the client's timeout, a body that is not JSON, a
refusal (stop_reason "refusal") or a truncation (stop_reason "max_tokens", with the request's whole
`max_tokens` of output, as the API reports one). `Reply.usage` overrides the usage reported (an
answer claiming more tokens than the request allowed, or a truncation at fewer).

Every request is recorded (path, headers, parsed body) so a test can assert what was sent. A test
that needs something to happen while a request is in flight (another process spending through the
same ledger, a second sync meeting the lock) sets `on_request`: it runs in the server's thread after
the request is recorded and before it is answered, so the client is still waiting on its answer.

Run as a script, it is a rehearsal server for a person (docs/GUIDE.md, "Rehearsing a paid run"):

    python tests/fake_anthropic.py [--host 127.0.0.1] [--port 8765]

serves on loopback only until Ctrl-C, prints the two variables to export in the shell that runs
`pnk`, logs one line per request on stderr, and also answers `pnk ask --deep`'s two requests by
their schema (one new query; an answer citing the first passage shown). Standard library only, so any
Python 3.11 runs it.
"""

from __future__ import annotations

import base64
import json
import re
import sys
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self, cast

_PAGES_LINE = re.compile(r"pages (\d+) to (\d+)")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# What the fake charges per image and per request, so a reconciliation is checkable against a number.
INPUT_TOKENS_PER_IMAGE = 1200
INPUT_TOKENS_PER_REQUEST = 350


@dataclass
class Reply:
    """One scripted answer. `kind`: "ok" (the default answer), "status", "delay", "malformed",
    "refusal", "truncated", "wrong-pages"."""

    kind: str = "ok"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict[str, str])
    delay_s: float = 0.0
    body: dict[str, Any] | None = None
    usage: dict[str, int] | None = None  # replaces those usage figures of the default answer


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    raw: bytes


class FakeAnthropic:
    """The server; use as a context manager (it stops its thread on exit)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.page_texts: dict[int, str] = {}
        self.script: deque[Reply] = deque()
        self.requests: list[Recorded] = []
        self.output_tokens_per_page = 40
        self.on_request: Callable[[Recorded], None] | None = None  # see the module docstring
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((host, port), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-anthropic", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://[{host!s}]:{port}" if ":" in str(host) else f"http://{host!s}:{port}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def queue(self, *replies: Reply) -> None:
        with self._lock:
            self.script.extend(replies)

    def messages_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.path == "/v1/messages"]

    # --- answering -----------------------------------------------------------------------------

    def _next_reply(self) -> Reply:
        with self._lock:
            return self.script.popleft() if self.script else Reply()

    def answer(self, path: str, body: dict[str, Any] | None) -> tuple[int, dict[str, str], bytes, float]:
        """(status, headers, body bytes, delay) for one request."""
        if body is None:
            return _error(400, "invalid_request_error", "the request body is not JSON")
        if path == "/v1/messages/count_tokens":
            images = sum(1 for block in _content_blocks(body) if block.get("type") == "image")
            tokens = INPUT_TOKENS_PER_REQUEST + INPUT_TOKENS_PER_IMAGE * images
            return 200, {}, json.dumps({"input_tokens": tokens}).encode(), 0.0
        if path != "/v1/messages":
            return _error(404, "not_found_error", f"no route {path}")
        reply = self._next_reply()
        if reply.kind == "status":
            status, headers, data, _ = _error(reply.status, _ERROR_TYPES.get(reply.status, "api_error"),
                                              f"scripted {reply.status}")
            return status, {**headers, **reply.headers}, data, reply.delay_s
        if reply.kind == "malformed":
            return 200, {}, b'{"id": "msg_torn", "type": "message", "content": [', reply.delay_s
        pages = _requested_pages(body)
        images = sum(1 for block in _content_blocks(body) if block.get("type") == "image")
        usage = {"input_tokens": INPUT_TOKENS_PER_REQUEST + INPUT_TOKENS_PER_IMAGE * images,
                 "output_tokens": self.output_tokens_per_page * max(len(pages), 1),
                 "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        if reply.kind == "wrong-pages":
            pages = pages[:-1]
        stop_reason = {"refusal": "refusal", "truncated": "max_tokens"}.get(reply.kind, "end_turn")
        if reply.kind == "refusal":
            text = ""
            usage["output_tokens"] = 3
        else:
            document = {"pages": [{"page": n, "text": self.page_texts.get(n, f"Text of page {n}.")}
                                  for n in pages]}
            text = json.dumps(document)
            if reply.kind == "truncated":
                text = text[: len(text) // 2]
                usage["output_tokens"] = int(body.get("max_tokens") or usage["output_tokens"])
        usage.update(reply.usage or {})
        message = reply.body or {
            "id": f"msg_fake{len(self.requests):04d}", "type": "message", "role": "assistant",
            "model": body.get("model", "unknown"), "content": [{"type": "text", "text": text}],
            "stop_reason": stop_reason, "stop_sequence": None, "usage": usage,
        }
        return 200, {}, json.dumps(message).encode(), reply.delay_s

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                path = self.path.split("?", 1)[0]
                recorded = Recorded(path, {k.lower(): v for k, v in self.headers.items()}, body, raw)
                with fake._lock:
                    fake.requests.append(recorded)
                if fake.on_request is not None:
                    fake.on_request(recorded)
                status, headers, data, delay = fake.answer(path, body)
                if delay:
                    time.sleep(delay)
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.send_header("request-id", f"req_fake{len(fake.requests):04d}")
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout)
                    pass

            def log_message(self, format: str, *args: object) -> None:  # quiet: pytest shows stderr
                return

        return Handler


_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error",
                500: "api_error", 529: "overloaded_error"}


def _error(status: int, kind: str, message: str) -> tuple[int, dict[str, str], bytes, float]:
    payload = {"type": "error", "error": {"type": kind, "message": message}}
    return status, {}, json.dumps(payload).encode(), 0.0


def _content_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = body.get("messages") or []
    for message in messages:
        content: object = message.get("content")
        if isinstance(content, list):
            blocks.extend(cast("dict[str, Any]", block) for block in cast("list[object]", content)
                          if isinstance(block, dict))
    return blocks


def _requested_pages(body: dict[str, Any]) -> list[int]:
    for block in _content_blocks(body):
        if block.get("type") == "text":
            match = _PAGES_LINE.search(block.get("text", ""))
            if match:
                return list(range(int(match.group(1)), int(match.group(2)) + 1))
    return []


def images_of(recorded: Recorded) -> list[bytes]:
    """The decoded image bytes a recorded Messages request carried, in order."""
    assert recorded.body is not None
    return [base64.b64decode(block["source"]["data"]) for block in _content_blocks(recorded.body)
            if block.get("type") == "image"]


def scanned_pdf(pages: int, native_text: dict[int, str] | None = None, size: int = 64) -> bytes:
    """A PDF whose every page is an image (a `size` x `size` grayscale pattern drawn over the page),
    as a scanner makes it: no text layer, unless `native_text` gives one for a 1-based page number
    (a text-layer twin, for the completeness audit). Written by hand so no imaging library is needed.
    """
    native_text = native_text or {}
    pixels = bytes((x * 7 + y * 13 + (x // 8 + y // 8) % 2 * 120) % 256 for y in range(size) for x in range(size))
    image = zlib.compress(pixels)
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>", b""]  # the page tree is filled in below
    font = None
    if native_text:
        objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
        font = len(objects)
    objects.append(b"<< /Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceGray "
                   b"/BitsPerComponent 8 /Filter /FlateDecode /Length %d >>\nstream\n" % (size, size, len(image))
                   + image + b"\nendstream")
    image_ref = len(objects)
    kids: list[int] = []
    for number in range(1, pages + 1):
        drawing = b"q 612 0 0 792 0 0 cm /Im1 Do Q"
        if number in native_text:
            escaped = native_text[number].replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
            drawing += b" BT /F1 12 Tf 72 720 Td (" + escaped.encode("latin-1") + b") Tj ET"
        objects.append(b"<< /Length %d >>\nstream\n" % len(drawing) + drawing + b"\nendstream")
        contents = len(objects)
        fonts = b" /Font << /F1 %d 0 R >>" % font if font else b""
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
                       b"/Resources << /XObject << /Im1 %d 0 R >>%s >> >>" % (contents, image_ref, fonts))
        kids.append(len(objects))
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % k for k in kids), pages)
    pdf = b"%PDF-1.4\n"
    offsets: list[int] = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(pdf))
        pdf += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref_at = len(pdf)
    pdf += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    pdf += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    pdf += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref_at)
    return pdf


# --- the rehearsal server: `python tests/fake_anthropic.py` ----------------------------------------

REHEARSAL_KEY = "rehearsal-not-a-key"  # the server reads no key; Pinakes refuses to run without one
REHEARSAL_ANSWER = "A rehearsal answer from the local test server: it cites the first passage shown [1]."


class RehearsalServer(FakeAnthropic):
    """The default answers, plus `pnk ask --deep`'s structured requests answered by their schema, and
    a line per request on stderr (what a person rehearsing a run wants to see go by)."""

    def answer(self, path: str, body: dict[str, Any] | None) -> tuple[int, dict[str, str], bytes, float]:
        answered = self._structured(path, body) or super().answer(path, body)
        images = sum(1 for block in _content_blocks(body) if block.get("type") == "image") if body else 0
        print(f"{time.strftime('%H:%M:%S')} POST {path} -> {answered[0]}"
              + (f" ({images} page image{'s' * (images != 1)})" if images else ""), file=sys.stderr, flush=True)
        return answered

    def _structured(self, path: str, body: dict[str, Any] | None) -> tuple[int, dict[str, str], bytes, float] | None:
        config: dict[str, Any] = (body or {}).get("output_config") or {}
        schema: dict[str, Any] = config.get("format", {}).get("schema") or {}
        properties: dict[str, Any] = schema.get("properties") or {}
        if path != "/v1/messages" or body is None:
            return None
        if "queries" in properties:  # one new query, so the loop goes on to an answer call
            payload: dict[str, Any] = {"queries": [_rehearsal_query(body)]}
        elif "answer" in properties and "citations" in properties:
            payload = {"answer": REHEARSAL_ANSWER, "citations": [1]}
        else:
            return None
        text = json.dumps(payload)
        sent = len(json.dumps(body).encode("utf-8"))
        message = {
            "id": f"msg_rehearsal{len(self.requests):04d}", "type": "message", "role": "assistant",
            "model": body.get("model", "unknown"), "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": sent // 4, "output_tokens": max(1, len(text) // 4),
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
        }
        return 200, {}, json.dumps(message).encode(), 0.0


def _rehearsal_query(body: dict[str, Any]) -> str:
    """A search the loop has not run yet: the question without its first word (its words still find
    the passages the question would)."""
    texts = [block.get("text", "") for block in _content_blocks(body) if block.get("type") == "text"]
    messages: list[dict[str, Any]] = body.get("messages") or []
    texts += [m["content"] for m in messages if isinstance(m.get("content"), str)]
    question = next((m.group(1) for m in map(re.compile(r"^Question: (.+)$", re.M).search, texts) if m), "")
    words = question.split()
    return " ".join(words[1:]) if len(words) > 1 else f"{question} overview"


def _is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM stops it as Ctrl-C does: the port is released on the way out


def main(argv: list[str] | None = None) -> int:
    import argparse
    import signal

    parser = argparse.ArgumentParser(
        prog="python tests/fake_anthropic.py",
        description="A local stand-in for the Anthropic Messages API, to rehearse a paid Pinakes run "
                    "(`pnk sync --extract=claude-vision`, `pnk ask --deep`) without a key or a bill.")
    parser.add_argument("--host", default="127.0.0.1", help="a loopback address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="the port (default 8765; 0 picks a free one)")
    args = parser.parse_args(argv)
    if not _is_loopback(args.host):
        print(f"error: --host {args.host} is not a loopback address; the rehearsal server listens on "
              "this machine only (use 127.0.0.1, ::1 or localhost)", file=sys.stderr)
        return 2
    try:
        server = RehearsalServer(args.host, args.port)
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}; "
              "choose another --port (0 picks a free one)", file=sys.stderr)
        return 1
    url = server.url
    signal.signal(signal.SIGTERM, _stop)
    with server:
        print(f"A local stand-in for the Anthropic Messages API is listening on {url} (loopback only).\n"
              "It bills nothing, but Pinakes' ledger records what it reports as spend: rehearse on a copy "
              "of the KB.\n"
              "In the shell that runs pnk, set:\n"
              f"export ANTHROPIC_BASE_URL={url}\n"
              f"export PINAKES_ANTHROPIC_API_KEY={REHEARSAL_KEY}\n"
              "then run e.g. `pnk sync --extract=claude-vision` or `pnk ask --deep \"...\"`. "
              "Ctrl-C stops it.", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
