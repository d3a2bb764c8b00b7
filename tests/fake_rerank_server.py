"""A local stand-in for a reranker endpoint, for tests and the bench that run the HTTP reranker
(search/rerank_remote.py) against it.

A real HTTP server in a thread of the test process (`http.server`, loopback only) speaking both
dialects of search/rerank_api.py: `POST /rerank` answered as text-embeddings-inference answers (a
list of `{"index", "score"}`, best first) when the body carries `texts`, and as the
Cohere/Jina-compatible API answers (`{"model", "results": [{"index", "relevance_score"}], "usage"}`)
when it carries `documents`. `url("tei")` is the server's root, `url("cohere")` its `/v1` (as vLLM's).

Scores are deterministic: the sigmoid of the share of the query's words a text holds, shifted by
`model_seed` (changing it is another model answering under the same name), plus Gaussian `noise`
(a server's float noise). Texts holding `preferred` score highest, so a test can make the
reranker's order differ from the fused one. `billing` says what the answer reports: "tokens"
(`usage.total_tokens`, one per word plus two per pair), "search_units" (`meta.billed_units`,
Cohere's) or None.

A test scripts anything else by queueing `Reply` objects, consumed one per request in order: a
status with headers (429 with Retry-After, 503), a delay, a body dripped a few bytes at a time, an
answer that is not JSON, fewer scores than texts, a NaN, an index out of range, a huge body (with or
without a Content-Length), a connection closed without an answer. Every request is recorded (path,
headers, parsed body, time). `response_delay_s` delays every answer (the bench's model compute).
Standard library only.
"""

from __future__ import annotations

import json
import math
import random
import re
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

WORD = re.compile(r"\w+", re.UNICODE)


@dataclass
class Reply:
    """One scripted answer. `kind`: "ok", "status", "delay", "drip", "garbage", "fewer", "nan",
    "bad-index", "huge", "huge-unsized", "drop"."""

    kind: str = "ok"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict[str, str])
    delay_s: float = 0.0
    size: int = 0  # "huge": the body's bytes; "drip": seconds between pieces is delay_s


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    at: float


class FakeReranker:
    """The server; use as a context manager (it stops its thread on exit)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.model_seed = 0
        self.noise = 0.0
        self.preferred: str | None = None
        self.billing: str | None = "tokens"
        self.response_delay_s = 0.0
        self.script: deque[Reply] = deque()
        self.requests: list[Recorded] = []
        self.down = False
        self._random = random.Random(7)
        self._lock = threading.Lock()
        self._server = _QuietServer((host, port), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-reranker", daemon=True)

    def url(self, api: str) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}" + ("/v1" if api == "cohere" else "")

    def __enter__(self) -> FakeReranker:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def serve_until_stopped(self) -> None:
        """Block while the server runs (the script's main thread)."""
        self._thread.join()

    def stop(self) -> None:
        """Down as a crashed server is: nothing listens, and a kept-alive connection is dropped."""
        if self.down:
            return
        self.down = True
        self._server.shutdown()
        self._server.server_close()

    def queue(self, *replies: Reply) -> None:
        with self._lock:
            self.script.extend(replies)

    def rerank_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.path.endswith("/rerank")]

    def score(self, query: str, text: str) -> float:
        asked = {word for word in WORD.findall(query.lower())}
        held = {word for word in WORD.findall(text.lower())}
        share = len(asked & held) / len(asked) if asked else 0.0
        logit = 6.0 * share - 3.0 + 1.5 * self.model_seed
        if self.preferred is not None and self.preferred in text.lower():
            logit += 8.0
        value = 1.0 / (1.0 + math.exp(-logit))
        if self.noise:
            with self._lock:
                value += self._random.gauss(0.0, self.noise)
        return value

    # --- answering -----------------------------------------------------------------------------

    def _next_reply(self) -> Reply:
        with self._lock:
            return self.script.popleft() if self.script else Reply()

    def answer(self, path: str, body: dict[str, Any] | None) -> tuple[Reply, int, dict[str, str], bytes]:
        reply = self._next_reply()
        if not path.endswith("/rerank"):
            return reply, *_error(404, f"no route {path}")
        texts: object = body.get("texts", body.get("documents")) if isinstance(body, dict) else None
        if not isinstance(body, dict) or not isinstance(texts, list) or "query" not in body:
            return reply, *_error(422, "the request body is not a rerank request")
        texts = cast("list[object]", texts)
        if reply.kind == "status":
            status, headers, data = _error(reply.status, f"scripted {reply.status}")
            return reply, status, {**headers, **reply.headers}, data
        if reply.kind == "garbage":
            return reply, 200, {}, b"<html>not json</html>"
        if reply.kind in ("huge", "huge-unsized"):
            return reply, 200, {}, b""
        scores = [self.score(str(body["query"]), str(text)) for text in texts]
        ranked = sorted(range(len(scores)), key=lambda index: -scores[index])
        if reply.kind == "fewer":
            ranked = ranked[:-1]
        tei = "texts" in body
        key = "score" if tei else "relevance_score"
        items: list[dict[str, Any]] = [{"index": index, key: scores[index]} for index in ranked]
        if reply.kind == "nan":
            items[0][key] = math.nan
        elif reply.kind == "bad-index":
            items[0]["index"] = len(texts) + 3
        if tei:
            return reply, 200, {}, json.dumps(items, allow_nan=True).encode()
        payload: dict[str, Any] = {"id": "fake", "model": body.get("model"), "results": items}
        tokens = sum(len(WORD.findall(str(body["query"]))) + len(WORD.findall(str(text))) + 2 for text in texts)
        if self.billing == "tokens":
            payload["usage"] = {"prompt_tokens": tokens, "total_tokens": tokens}
        elif self.billing == "search_units":
            payload["meta"] = {"billed_units": {"search_units": max(1, math.ceil(len(texts) / 100))}}
        return reply, 200, {}, json.dumps(payload, allow_nan=True).encode()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # one write per answer, sent at once (see fake_openai_embeddings)
            wbufsize = -1

            def do_POST(self) -> None:
                if fake.down:
                    self.close_connection = True
                    return
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                path = self.path.split("?", 1)[0]
                with fake._lock:
                    fake.requests.append(Recorded(path, {k.lower(): v for k, v in self.headers.items()},
                                                  body, time.monotonic()))
                reply, status, headers, data = fake.answer(path, body)
                delay = reply.delay_s if reply.kind == "delay" else 0.0
                if delay + fake.response_delay_s:
                    time.sleep(delay + fake.response_delay_s)
                try:
                    if reply.kind == "drop":
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    if reply.kind == "huge-unsized":
                        self._stream_unsized(reply.size)
                        return
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(reply.size if reply.kind == "huge" else len(data)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    if reply.kind == "huge":
                        self._stream(reply.size)
                    elif reply.kind == "drip":
                        self.wfile.flush()
                        for start in range(0, len(data), 4):
                            self.wfile.write(data[start:start + 4])
                            self.wfile.flush()
                            time.sleep(reply.delay_s)
                    else:
                        self.wfile.write(data)
                    self.wfile.flush()
                except OSError:  # the client gave up (a cap, a deadline): a broken pipe, a reset
                    self.close_connection = True

            def _stream(self, size: int) -> None:
                block = b" " * 65536
                sent = 0
                while sent < size:
                    piece = block[: min(len(block), size - sent)]
                    self.wfile.write(piece)
                    sent += len(piece)

            def _stream_unsized(self, size: int) -> None:
                """No Content-Length: the body ends when the connection closes."""
                self.close_connection = True
                self.wfile.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n")
                self._stream(size)
                self.wfile.flush()

            def log_message(self, format: str, *args: object) -> None:  # quiet: pytest shows stderr
                return

        return Handler


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        """A client that hung up mid-answer is what several tests do; nothing to print."""
        return


def _error(status: int, message: str) -> tuple[int, dict[str, str], bytes]:
    return status, {}, json.dumps({"error": message, "error_type": "scripted"}).encode()


def main() -> None:
    """Serve on loopback until killed (bench/bench_rerank_http.py runs the stub in its own process,
    so the client's work and the server's never share a GIL): prints the server's root on one line."""
    import argparse

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--delay-ms", type=float, default=0.0, help="added to every answer (the model's compute)")
    args = parser.parse_args()
    fake = FakeReranker(port=args.port)
    fake.response_delay_s = args.delay_ms / 1000.0
    fake.__enter__()
    print(fake.url("tei"), flush=True)
    try:
        fake.serve_until_stopped()
    except KeyboardInterrupt:
        fake.stop()


if __name__ == "__main__":
    main()
