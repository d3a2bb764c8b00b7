"""One JSON POST to an endpoint the user runs, under a total deadline and a response size cap
(the HTTP reranker's requests: search/rerank_remote.py).

Why not embed/plain_http.py: that transport borrows the openai client's configuration and error
classes, and a reranker needs neither (a TEI server is not an OpenAI API, and the provider must work
without the [remote] extra); and a search waits on this request, so its bound must be the whole
exchange, not each socket read. When plain_http gains a total deadline and a size cap (issue #40),
both may share one transport; until then this one is standard library only:

- `http.client` connections kept alive, one per request in flight, with TCP_NODELAY as http.client
  sets it (the body is sent apart from the headers; under Nagle it would wait for the server's
  delayed ACK, up to 40 ms);
  `https://` through `http.client`'s TLS with the system's trust store;
- the deadline is a monotonic instant for the whole exchange: connecting, sending, the status line,
  the headers and every byte of the body each get only the time left, so a server dripping a byte
  a second cannot hold a search past it (each socket read of `_DeadlineReader` is given the time
  left, not a fresh timeout);
- an answer whose Content-Length exceeds the cap is refused before its body is read, and one without
  a length is read to at most the cap plus one byte.

Failures are raised by where they happened, which is what the budget needs (was it sent?) and what
the retries need (is it worth another try?): `Unreachable` (no connection: never sent), `TimedOut`
(the deadline passed: may have been processed), `Dropped` (the connection broke after the request
left: may have been processed), `TooLarge` (the answer is over the cap).
"""

from __future__ import annotations

import http.client
import io
import json
import select
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from collections.abc import Mapping

_READ_PIECE = 64 * 1024


class TransportError(Exception):
    """A request that got no usable HTTP answer. `sent`: it may have reached the server."""

    sent = True


class Unreachable(TransportError):
    sent = False


class TimedOut(TransportError):
    pass


class Dropped(TransportError):
    pass


class TooLarge(TransportError):
    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Mapping[str, str]  # names in lower case
    body: bytes


class _DeadlineReader(io.RawIOBase):
    """A socket's reads, each given only the time left before the connection's deadline. It reads
    through the socket's own unbuffered file, which keeps the socket open while the response reads
    (http.client closes its connection's socket as soon as an answer says it will close)."""

    def __init__(self, sock: socket.socket, clock: _Deadline) -> None:
        self._sock = sock
        self._file = sock.makefile("rb", buffering=0)
        self._clock = clock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview | bytearray) -> int | None:  # pyright: ignore[reportIncompatibleMethodOverride]
        self._sock.settimeout(self._clock.left())
        return self._file.readinto(buffer)

    def close(self) -> None:
        self._file.close()
        super().close()


class _Deadline:
    """The instant (time.monotonic) the current request must be done by."""

    def __init__(self) -> None:
        self.at = 0.0

    def left(self) -> float:
        left = self.at - time.monotonic()
        if left <= 0:
            raise TimeoutError("the deadline passed")
        return left


class _Socket:
    """The connection's socket as http.client uses it, its reads bounded by the deadline."""

    def __init__(self, sock: socket.socket, clock: _Deadline) -> None:
        self.raw = sock
        self._clock = clock

    def sendall(self, data: bytes) -> None:
        self.raw.settimeout(self._clock.left())  # sendall's timeout bounds the whole call
        self.raw.sendall(data)

    def makefile(self, mode: str, *args: object, **kwargs: object) -> io.BufferedReader:
        del args, kwargs
        assert "r" in mode
        return io.BufferedReader(_DeadlineReader(self.raw, self._clock))

    def settimeout(self, value: float | None) -> None:
        self.raw.settimeout(value)

    def close(self) -> None:
        self.raw.close()

    def fileno(self) -> int:
        return self.raw.fileno()


class _Connection:
    """One kept-alive connection and its deadline."""

    def __init__(self, scheme: str, host: str, port: int, context: ssl.SSLContext | None) -> None:
        self.clock = _Deadline()
        self.http = (http.client.HTTPSConnection(host, port, context=context) if scheme == "https"
                     else http.client.HTTPConnection(host, port))

    def connect(self) -> None:
        self.http.timeout = self.clock.left()
        self.http.connect()  # TCP (http.client sets TCP_NODELAY), and TLS for https
        self.http.sock = _Socket(self.http.sock, self.clock)

    def stale(self) -> bool:
        """An idle connection the server has closed meanwhile (it reads as ready: EOF)."""
        sock = self.http.sock
        if sock is None:
            return True
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(sock.fileno(), select.POLLIN)
            return bool(poller.poll(0))
        return bool(select.select([sock.fileno()], [], [], 0)[0])

    def close(self) -> None:
        self.http.close()


class JSONEndpoint:
    """POST JSON under one base URL with fixed headers (the key among them, in memory only)."""

    def __init__(self, base_url: str, headers: Mapping[str, str]) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http:// or https:// URL: {base_url!r}")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.base_path = parts.path.rstrip("/")
        self._headers = {"Content-Type": "application/json", "Accept": "application/json", **headers}
        self._context = ssl.create_default_context() if parts.scheme == "https" else None
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never the headers: one of them may be the key
        return f"JSONEndpoint({self.scheme}://{self.host}:{self.port}{self.base_path})"

    def post(self, path: str, payload: object, *, deadline: float, cap: int) -> Answer:
        """POST `payload` as JSON to `path` under the base URL; the answer, whatever its status.
        `deadline` is a time.monotonic() instant; `cap` the most bytes of body accepted."""
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        connection = self._connection(deadline)
        try:
            answer = self._exchange(connection, f"{self.base_path}/{path}", body, cap)
        except BaseException:
            connection.close()
            raise
        if answer[1]:
            with self._lock:
                self._idle.append(connection)
        else:
            connection.close()
        return answer[0]

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    def _connection(self, deadline: float) -> _Connection:
        while True:
            with self._lock:
                connection = self._idle.pop() if self._idle else None
            if connection is None:
                break
            if not connection.stale():
                connection.clock.at = deadline
                return connection
            connection.close()
        connection = _Connection(self.scheme, self.host, self.port, self._context)
        connection.clock.at = deadline
        try:
            connection.connect()
        except (TimeoutError, OSError, http.client.HTTPException) as exc:
            connection.close()
            how = "timed out" if isinstance(exc, TimeoutError) else _reason(exc)
            raise Unreachable(f"could not connect to {self.host}:{self.port} ({how})") from None
        return connection

    def _exchange(self, connection: _Connection, path: str, body: bytes, cap: int) -> tuple[Answer, bool]:
        """The answer, and whether the connection may be kept for the next request."""
        client = connection.http
        try:
            client.putrequest("POST", path, skip_accept_encoding=True)
            for name, value in self._headers.items():
                client.putheader(name, value)
            client.putheader("Content-Length", str(len(body)))
            client.endheaders(body)
            response = client.getresponse()
            headers = {name.lower(): value for name, value in response.getheaders()}
            length = headers.get("content-length", "")
            if length.isdigit() and int(length) > cap:
                raise TooLarge(f"its answer announces {int(length):,} bytes, over the {cap:,}-byte cap",
                               response.status)
            data = bytearray()
            while True:
                piece = response.read(min(_READ_PIECE, cap + 1 - len(data)))
                if not piece:
                    break
                data += piece
                if len(data) > cap:
                    raise TooLarge(f"its answer ran past the {cap:,}-byte cap", response.status)
        except TimeoutError:
            raise TimedOut("no complete answer within the deadline") from None
        except (OSError, http.client.HTTPException) as exc:
            raise Dropped(f"the connection broke before the answer was complete ({_reason(exc)})") from None
        return Answer(response.status, headers, bytes(data)), not response.will_close


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:200]
