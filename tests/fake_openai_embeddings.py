"""A local stand-in for an OpenAI-compatible embeddings endpoint, for tests and the bench that run
the real `openai` client against it.

A real HTTP server in a thread of the test process (`http.server`, loopback only) speaking
`POST /v1/embeddings` with spec-shaped JSON (`{"object": "list", "data": [{"object": "embedding",
"index": i, "embedding": [...]}], "model": ..., "usage": {"prompt_tokens": n, "total_tokens": n}}`),
the shape Ollama, vLLM, TEI and OpenAI answer with. Point a client at it with `base_url=server.url`.

Vectors are deterministic: a hashed bag of words seeded by `model_seed`, so texts sharing words are
close, and changing `model_seed` is the same model name serving other weights (a swapped model).
Usage counts one token per word (`\\w+`) plus two per input, as a WordPiece model's [CLS]/[SEP]
would (`word_tokenizer_json` writes a tokenizer file that counts the same way).

A test scripts anything else by queueing `Reply` objects, consumed one per request in order: a
status with headers (429 with Retry-After, 500), a delay longer than the client's timeout, vectors
of the wrong dimension, fewer vectors than inputs, a NaN, all zeros, usage that shows a truncation; and faults
of the wire: the whole answer dripped a few bytes at a time ("drip"), a body of `body_bytes`
streamed without end in sight ("huge", declared in Content-Length or chunked), the connection cut
halfway through the body ("cut"). Every request is recorded (path, headers, parsed body), and the
bytes each answer put on the wire are counted (`bytes_sent`). `response_delay_s` delays every
answer (the bench's stand-in for a model's compute time); `noise_sigma` adds Gaussian noise of that
standard deviation to every component of every vector answered, fresh each request, as a server's
float noise does (another batch shape, another GPU kernel), best with `dense` vectors (every
component a different real number, as a model's). Standard library only.
"""

from __future__ import annotations

import array
import base64
import json
import math
import random
import re
import socket
import sys
import threading
import time
import zlib
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast

WORD = re.compile(r"\w+", re.UNICODE)
SPECIAL_TOKENS = 2


@dataclass
class Reply:
    """One scripted answer. `kind`: "ok", "status", "delay", "wrong-dim", "fewer", "nan", "zeros", "truncated",
    or a fault of the wire: "drip" (the whole answer, status line included, `drip_bytes_per_s`),
    "huge" (`body_bytes` of body; `chunked` without a Content-Length), "cut" (half the body, then
    the connection closed)."""

    kind: str = "ok"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict[str, str])
    delay_s: float = 0.0
    drip_bytes_per_s: int = 256
    body_bytes: int = 300 * 1024 * 1024
    chunked: bool = False


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    at: float


class FakeEmbeddings:
    """The server; use as a context manager (it stops its thread on exit)."""

    def __init__(self, dim: int = 64, host: str = "127.0.0.1", port: int = 0,
                 tls: tuple[Path, Path] | None = None) -> None:
        """`tls`: (certificate, key) PEM files; the server then speaks https:// (`self_signed_tls`)."""
        self.dim = dim
        self.model_seed = 0
        self.response_delay_s = 0.0
        # encoding_format = "base64": "answer" (OpenAI, vLLM, TEI), "ignore" (floats whatever is
        # asked) or "refuse" (a 400, as a server that knows only floats may answer).
        self.base64 = "answer"
        self.script: deque[Reply] = deque()
        self.requests: list[Recorded] = []
        self.down = False
        self.noise_sigma = 0.0
        # Bag-of-words vectors take a few round values (1/sqrt(n)), far from any rounding edge;
        # `dense` adds a small text-seeded component to every axis, so they look like a model's.
        self.dense = False
        self._noise = random.Random(1)
        self.bytes_sent: list[int] = []  # per answer, what went on the wire (a wire fault's: until cut off)
        self._local = threading.local()  # the reply the handler thread is answering
        self.in_flight = 0
        self.max_in_flight = 0  # the most requests answered at once
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((host, port), self._handler_class())
        self._server.daemon_threads = True
        self.scheme = "https" if tls else "http"
        if tls:
            import ssl

            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-embeddings", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{self.scheme}://{host!s}:{port}/v1"

    def __enter__(self) -> FakeEmbeddings:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def serve_until_stopped(self) -> None:
        """Block while the server runs (the script's main thread)."""
        self._thread.join()

    def stop(self) -> None:
        """The server goes down as a crashed one does: nothing listens, and a connection a client
        kept alive is dropped at its next request, unanswered."""
        if self.down:
            return
        self.down = True
        self._server.shutdown()
        self._server.server_close()

    def queue(self, *replies: Reply) -> None:
        with self._lock:
            self.script.extend(replies)

    def embedding_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.path == "/v1/embeddings"]

    def vector(self, text: str) -> list[float]:
        values = [0.0] * self.dim
        for word in WORD.findall(text.lower()):
            values[zlib.crc32(f"{self.model_seed}:{word}".encode()) % self.dim] += 1.0
        if self.dense:  # every component a different real number, as a neural model's are
            shade = random.Random(zlib.crc32(f"{self.model_seed}:{text}".encode()))
            values = [value + 0.3 * shade.gauss(0.0, 1.0) for value in values]
        if not any(values):
            values[0] = 1.0
        norm = math.sqrt(sum(v * v for v in values))
        return [v / norm for v in values]

    # --- answering -----------------------------------------------------------------------------

    def _next_reply(self) -> Reply:
        with self._lock:
            reply = self.script.popleft() if self.script else Reply()
        self._local.reply = reply
        return reply

    def _noisy(self, vectors: list[list[float]]) -> list[list[float]]:
        if not self.noise_sigma:
            return vectors
        with self._lock:
            return [[value + self._noise.gauss(0.0, self.noise_sigma) for value in vector] for vector in vectors]

    def answer(self, path: str, body: dict[str, Any] | None) -> tuple[int, dict[str, str], bytes, float]:
        if path != "/v1/embeddings":
            return _error(404, f"no route {path}")
        if body is None or "input" not in body or "model" not in body:
            return _error(400, "the request body is not an embeddings request")
        reply = self._next_reply()
        delay = reply.delay_s + self.response_delay_s
        if reply.kind == "status":
            status, headers, data, _ = _error(reply.status, f"scripted {reply.status}")
            return status, {**headers, **reply.headers}, data, delay
        raw: object = body["input"]
        inputs = cast("list[object]", raw) if isinstance(raw, list) else [raw]
        vectors = self._noisy([self.vector(str(text)) for text in inputs])
        if reply.kind == "wrong-dim":
            vectors = [[*vector, 0.0] for vector in vectors]
        elif reply.kind == "fewer":
            vectors = vectors[:-1]
        elif reply.kind == "nan":
            vectors[0][0] = math.nan  # a NaN in JSON is the bare token; in base64, its float32 bits
        elif reply.kind == "zeros":
            vectors = [[0.0] * len(vector) for vector in vectors]
        tokens = sum(len(WORD.findall(str(text))) + SPECIAL_TOKENS for text in inputs)
        if reply.kind == "truncated":
            tokens = max(1, tokens // 2)
        if body.get("encoding_format") == "base64" and self.base64 == "refuse":
            return _error(400, "encoding_format: only 'float' is supported")
        encode = body.get("encoding_format") == "base64" and self.base64 == "answer"
        payload = {
            "object": "list", "model": body["model"],
            "data": [{"object": "embedding", "index": index,
                      "embedding": _base64_float32(vector) if encode else vector}
                     for index, vector in enumerate(vectors)],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
        # allow_nan: a NaN must reach the client as the bare token a broken server would send.
        return 200, {}, json.dumps(payload, allow_nan=True).encode(), delay

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # One write per answer, sent at once: with the status line, headers and body as separate
            # writes under Nagle, the body would wait for the client's delayed ACK (~40 ms), which is
            # no server's real behaviour and would swamp what the bench measures.
            disable_nagle_algorithm = True
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
                recorded = Recorded(path, {k.lower(): v for k, v in self.headers.items()}, body, time.monotonic())
                with fake._lock:
                    fake.requests.append(recorded)
                with fake._lock:
                    fake.in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                fake._local.reply = None
                try:
                    status, headers, data, delay = fake.answer(path, body)
                    if delay:
                        time.sleep(delay)
                finally:
                    with fake._lock:
                        fake.in_flight -= 1
                reply = fake._local.reply
                head = [f"HTTP/1.1 {status} {self.responses.get(status, ('',))[0]}", "content-type: application/json"]
                if reply is not None and reply.kind == "huge" and reply.chunked:
                    head.append("transfer-encoding: chunked")
                else:
                    size = reply.body_bytes if reply is not None and reply.kind == "huge" else len(data)
                    head.append(f"content-length: {size}")
                head.extend(f"{name}: {value}" for name, value in headers.items())
                raw_head = ("\r\n".join(head) + "\r\n\r\n").encode()
                sent = 0
                try:
                    if reply is None or reply.kind not in ("drip", "huge", "cut"):
                        self.wfile.write(raw_head + data)
                        sent = len(raw_head) + len(data)
                    elif reply.kind == "drip":
                        sent = self._drip(raw_head + data, reply.drip_bytes_per_s)
                    elif reply.kind == "cut":
                        self.wfile.write(raw_head + data[: len(data) // 2])
                        sent = len(raw_head) + len(data) // 2
                        self.wfile.flush()
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                    else:
                        sent = self._huge(raw_head, reply)
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError, OSError):  # the client gave up (a timeout, a cap)
                    self.close_connection = True
                with fake._lock:
                    fake.bytes_sent.append(sent)

            def _drip(self, raw: bytes, per_second: int) -> int:
                step = max(1, per_second // 16)
                sent = 0
                for start in range(0, len(raw), step):
                    self.wfile.write(raw[start:start + step])
                    self.wfile.flush()
                    sent += len(raw[start:start + step])
                    time.sleep(step / per_second)
                return sent

            def _huge(self, raw_head: bytes, reply: Reply) -> int:
                """`body_bytes` of a JSON string's inside, a block at a time: never held in memory."""
                def framed(part: bytes) -> bytes:
                    return f"{len(part):x}\r\n".encode() + part + b"\r\n" if reply.chunked else part

                start = framed(b'{"object": "list", "data": "')
                self.wfile.write(raw_head + start)
                sent = len(raw_head) + len(start)
                block = framed(b"A" * 65536)
                while sent < reply.body_bytes:
                    self.wfile.write(block)
                    sent += len(block)
                self.close_connection = True
                return sent

            def log_message(self, format: str, *args: object) -> None:  # quiet: pytest shows stderr
                return

        return Handler


def _error(status: int, message: str) -> tuple[int, dict[str, str], bytes, float]:
    payload = {"error": {"message": message, "type": "server_error" if status >= 500 else "invalid_request_error",
                         "code": status}}
    return status, {}, json.dumps(payload).encode(), 0.0


def _base64_float32(vector: list[float]) -> str:
    """Little-endian float32 bytes in base64, as the OpenAI API encodes them."""
    values = array.array("f", vector)
    if sys.byteorder == "big":
        values.byteswap()
    return base64.b64encode(values.tobytes()).decode("ascii")


def self_signed_tls(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, written under `directory` (PEM): the server's
    `tls`, and the file a client trusts (SSL_CERT_FILE)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                                  critical=False)
                   .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                   .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def word_tokenizer_json(path: Path) -> Path:
    """A tokenizer.json that counts as the fake's usage does: one token per word, [CLS]/[SEP] added."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0, "[CLS]": 1, "[SEP]": 2}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace()])
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 1), ("[SEP]", 2)])
    tokenizer.save(str(path))
    return path


def main() -> None:
    """Serve on loopback until killed (bench/bench_remote_embed.py runs the stub in its own process,
    so the client's work and the server's never share a GIL): prints the base URL on one line."""
    import argparse

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--delay-ms", type=float, default=0.0, help="added to every answer (the model's compute)")
    args = parser.parse_args()
    fake = FakeEmbeddings(dim=args.dim, port=args.port)
    fake.response_delay_s = args.delay_ms / 1000.0
    fake.__enter__()
    print(fake.url, flush=True)
    try:
        fake.serve_until_stopped()
    except KeyboardInterrupt:
        fake.stop()


if __name__ == "__main__":
    main()
