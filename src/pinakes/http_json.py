"""One JSON POST to an endpoint the user runs or rents, under a total deadline and a response size
cap, and the rules every such request follows: which failures are worth another attempt, how long
to wait before it, and what each failure asks of the user. Both remote providers send through it:
the embedding endpoint (embed/plain_http.py dresses it in the openai client's errors for
embed/provider_openai.py) and the HTTP reranker (search/rerank_remote.py). Standard library only,
so neither needs an HTTP client library, and below every layer that sends.

The transport:

- `http.client` connections kept alive, one per request in flight, with TCP_NODELAY (http.client
  sets it: the body is sent apart from the headers, and under Nagle it would wait for the server's
  delayed ACK, up to 40 ms); an idle connection the server closed meanwhile is replaced, not failed;
  `https://` through `http.client`'s TLS with the trust store the caller passes (the system's by
  default);
- the deadline is one monotonic instant for the whole exchange: connecting, sending, the status
  line, the headers and every byte of the body each get only the time left, never a timeout per
  socket read, which a server dripping a byte a second would renew forever (`_DeadlineReader`);
- an answer whose Content-Length exceeds the cap is refused before its body is read, one without a
  length (chunked, or ended by closing) is read to at most the cap plus one byte, and one that ends
  before its Content-Length is a dropped connection, never a short body.

Failures are raised by where they happened, which is what a budget needs (was it sent?) and what
retries need (is another attempt worth it?): `Unreachable` (no connection: never sent; `timed_out`
when nothing answered in time rather than refusing), `TimedOut` (the deadline passed: it may have
been processed), `Dropped` (the connection broke after the request left: it may have been
processed), `TooLarge` (the answer is over the cap). An answer with an error status is an `Answer`
like any other: what it means is the caller's protocol.
"""

from __future__ import annotations

import datetime
import email.utils
import http.client
import io
import json
import os
import random
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

    from pinakes.errors import PinakesError

_READ_PIECE = 64 * 1024


class TransportError(Exception):
    """A request that got no usable HTTP answer. `sent`: it may have reached the server."""

    sent = True


class Unreachable(TransportError):
    """No connection was made (refused, no route, a TLS handshake refused, or nothing answered in
    time: `timed_out`). The request never left."""

    sent = False

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


class TimedOut(TransportError):
    pass


class Dropped(TransportError):
    pass


class TooLarge(TransportError):
    """The answer is longer than the request's cap: refused, its body left unread (the same request
    would bring the same answer, so it is not worth another attempt)."""

    def __init__(self, status: int, cap: int, declared: int | None) -> None:
        said = f"it declared {declared:,}" if declared is not None else "it sent more"
        super().__init__(f"its answer is larger than the {cap:,} bytes this request can bring back (its size cap; "
                         f"{said})")
        self.status = status
        self.cap = cap
        self.declared = declared


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Mapping[str, str]  # names in lower case
    body: bytes


class _Deadline:
    """The instant (time.monotonic) the current request must be done by."""

    def __init__(self) -> None:
        self.at = 0.0

    def left(self) -> float:
        left = self.at - time.monotonic()
        if left <= 0:
            raise TimeoutError("the deadline passed")
        return left


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

    # narrower than RawIOBase's buffer type: http.client hands it only these
    def readinto(self, buffer: memoryview | bytearray) -> int | None:  # pyright: ignore[reportIncompatibleMethodOverride]
        self._sock.settimeout(self._clock.left())
        return self._file.readinto(buffer)

    def close(self) -> None:
        self._file.close()
        super().close()


class _Socket:
    """The connection's socket as http.client uses it, its sends and reads bounded by the deadline."""

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
    """POST JSON under one base URL with fixed headers (a key among them, in memory only)."""

    def __init__(self, base_url: str, headers: Mapping[str, str], *, tls: ssl.SSLContext | None = None) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http:// or https:// URL: {base_url!r}")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.base_path = parts.path.rstrip("/")
        # One spelling per name, whatever case the caller used: a name twice is two headers.
        self._headers = {"content-type": "application/json", "accept": "application/json",
                         **{name.lower(): value for name, value in headers.items()}}
        self._context = (tls or ssl.create_default_context()) if parts.scheme == "https" else None
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never the headers: one of them may be the key
        return f"JSONEndpoint({self.scheme}://{self.host}:{self.port}{self.base_path})"

    def post(self, path: str, payload: object, *, deadline: float, cap: int | None) -> Answer:
        """POST `payload` as JSON to `path` under the base URL; the answer, whatever its status.
        `deadline` is a time.monotonic() instant; `cap` the most bytes of body accepted (None: any)."""
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        connection = self._connection(deadline)
        try:
            answer, reusable = self._exchange(connection, f"{self.base_path}/{path}", body, cap)
        except BaseException:
            connection.close()
            raise
        if reusable:
            with self._lock:
                self._idle.append(connection)
        else:
            connection.close()
        return answer

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    def _connection(self, deadline: float) -> _Connection:
        """A kept-alive connection the server has not closed meanwhile, or a new one."""
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
        except (OSError, http.client.HTTPException) as exc:
            connection.close()
            timed_out = isinstance(exc, TimeoutError)
            how = "timed out" if timed_out else _reason(exc)
            raise Unreachable(f"could not connect to {self.host}:{self.port} ({how})", timed_out=timed_out) from None
        return connection

    def _exchange(self, connection: _Connection, path: str, body: bytes, cap: int | None) -> tuple[Answer, bool]:
        """The answer, and whether the connection may be kept for the next request."""
        client = connection.http
        try:
            client.putrequest("POST", path, skip_accept_encoding=True)
            for name, value in self._headers.items():
                client.putheader(name, value)
            client.putheader("content-length", str(len(body)))
            client.endheaders(body)
            response = client.getresponse()
            headers = {name.lower(): value for name, value in response.getheaders()}
            data = _body(response, cap)
        except TimeoutError:
            raise TimedOut("no complete answer within the deadline") from None
        except (OSError, http.client.HTTPException) as exc:
            raise Dropped(f"the connection broke before the answer was complete ({_reason(exc)})") from None
        return Answer(response.status, headers, data), not response.will_close


def _body(response: http.client.HTTPResponse, cap: int | None) -> bytes:
    """The answer's body, refused past `cap` bytes: at once when its Content-Length says so, else as
    soon as what arrived passes it. One shorter than its Content-Length raises IncompleteRead."""
    declared = response.length if not response.chunked else None
    if declared is not None or cap is None:
        if cap is not None and declared is not None and declared > cap:
            raise TooLarge(response.status, cap, declared)
        return response.read()
    data = bytearray()
    while piece := response.read(min(_READ_PIECE, cap + 1 - len(data))):
        data += piece
        if len(data) > cap:
            raise TooLarge(response.status, cap, None)
    return bytes(data)


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:200]


# -- another attempt ------------------------------------------------------------------------------


def transient(status: int) -> bool:
    """An error status worth another attempt: the server is busy, overloaded or failing for now
    (408 timeout, 409 a lock it could not take, 429 rate limit, any 5xx). Refusals of the request
    itself (400, 401, 404, 413, 422, ...) answer the same the next time."""
    return status in (408, 409, 429) or status >= 500


def retry_after_s(header: str | None) -> float | None:
    """A Retry-After header in seconds: a number or an HTTP date; None when absent or unreadable."""
    if not header:
        return None
    try:
        return max(0.0, float(header))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(header)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return max(0.0, (when - datetime.datetime.now(datetime.UTC)).total_seconds())


def backoff_s(attempt: int, first_s: float, most_s: float) -> float:
    """The wait after failed attempt `attempt` (1, 2, ...) when the server asked for none:
    doubling from `first_s` up to `most_s`, less up to a quarter at random (clients that failed
    together do not all come back together)."""
    return min(first_s * 2 ** (attempt - 1), most_s) * (1 - 0.25 * random.random())


def past(deadline: float | None, wait: float = 0.0) -> bool:
    """Whether waiting `wait` seconds from now would reach `deadline` (None: there is none)."""
    return deadline is not None and time.monotonic() + wait >= deadline


# -- what a failure asks of the user ----------------------------------------------------------------


@dataclass(frozen=True)
class Endpoint:
    """Whom a remedy speaks of: the server in words ("the embedding server"), the manifest table its
    keys are in ("embedding"), its URL, the variable its key is read from, and what the user does
    once the server is fixed ("then run the command again")."""

    server: str
    table: str
    url: str
    api_key_env: str | None
    then: str


# The ways a request fails that mean the same to every endpoint (a status is its own kind).
REFUSED = "refused"  # no connection: nothing listens there
NO_ANSWER = "unreachable"  # no connection: nothing answered in time
CUT = "cut"  # the connection broke in the middle of the answer


def remedy(endpoint: Endpoint, kind: str, status: int | None = None, detail: str = "") -> str | None:
    """The remedy of a failure every endpoint shares, or None for one only the caller knows (a 404
    names the caller's path, a timeout its own keys). `kind`: REFUSED, NO_ANSWER or CUT for a
    transport failure, anything else with `status` for an answer refused with that status;
    `detail`: the server's own message with it."""
    url, table, then = endpoint.url, endpoint.table, endpoint.then
    if status in (401, 403):
        return (f"check the key in ${endpoint.api_key_env}" if endpoint.api_key_env else
                f"the endpoint wants a key: name its variable in [{table}] api_key_env")
    if status is not None and transient(status):
        return f"the server at {url} is failing or rate-limiting (HTTP {status}): check its logs, or wait; {then}"
    if status is not None:
        said = f": {detail}" if detail else ""
        return f"the server refused the request (HTTP {status}{said}): check [{table}] and the server's logs; {then}"
    if kind == REFUSED:
        return f"start {endpoint.server} at {url}, or check [{table}] base_url; {then}"
    if kind == NO_ANSWER:
        host = urlsplit(url).netloc or url
        return (f"nothing answered at {host} in time: check that the machine is up and reachable from here (a "
                f"firewall, a VPN, the port) and [{table}] base_url; {then}")
    if kind == CUT:
        return (f"the server at {url} closed the connection in the middle of its answer: check its logs for a "
                f"crash or a restart, or a proxy in between that cuts long answers; {then}")
    return None


def quoted(message: str, limit: int = 160) -> str:
    """A server's own message, fit to quote in one line: printable characters only, shortened."""
    line = "".join(char if char.isprintable() else "?" for char in " ".join(message.split()))
    return line if len(line) <= limit else line[: limit - 1] + "…"


def key_from_environment(variable: str, table: str, error: type[PinakesError]) -> str:
    """The key in the environment variable `[table] api_key_env` names, refused (as `error`) when
    the variable is unset or the key could not travel in a header (a pasted newline, a space)."""
    value = os.environ.get(variable, "").strip()
    if not value:
        raise error(f"[{table}] api_key_env names {variable}, which is not set in this environment",
                    remedy=f"export {variable}=<your key> in the shell that runs pnk, or delete "
                           "api_key_env for a server that needs no key")
    if not (value.isascii() and value.isprintable()) or " " in value:
        raise error(f"the key in ${variable} holds a space, a control character or a non-ASCII character, "
                    "which an HTTP header cannot carry", remedy=f"set {variable} to the key alone")
    return value
