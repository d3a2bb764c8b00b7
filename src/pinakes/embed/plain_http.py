"""The remote embedding provider's requests: one POST of JSON, answered as the openai client answers.

Why not the client's own `post`: it costs ~1.7 ms of client CPU per request of 64 texts over a bare
`http.client` request of the same body (its options and header machinery ~0.7 ms, httpx2's
client ~0.3 ms, httpcore2 and h11 ~0.7 ms; bench/bench_remote_embed.py, docs/perf/embedding.md):
against a local server answering in ~40 ms that is 4 to 5% by itself, the whole 5% the provider
may add, before one vector is decoded. So the openai client is built as before and still supplies
what it is for (the key, organisation and project from the environment, its headers, the base URL,
its error classes), once; each request is then an httpx2 `Request` handed straight to a transport:

- `PlainHTTPTransport`: `http://` (Ollama, vLLM, TEI, llama.cpp on this machine or the LAN) over
  `http.client` kept-alive connections, one per request in flight, with TCP_NODELAY (it writes
  a request's headers and body in two sends: under Nagle the body would wait for the server's
  delayed ACK of the headers, up to 40 ms). `https://` (OpenAI, hosted APIs, where TLS and the
  network dwarf this cost) goes through httpx2's own transport unchanged;
- `EmbeddingsEndpoint.post` raises what the client raises in the same situation (`APITimeoutError`,
  `APIConnectionError` over the transport's `ConnectError`/`ReadTimeout`/..., `APIStatusError` and
  its per-status classes with the answer's error body), so `pinakes.paid.classify_failure` and the
  provider's retries read them unchanged.

Every request has one deadline for the whole of it, connect to last byte, never a timeout per
socket read (which a server dripping a byte a second would renew forever): over `http://`, each
blocking call of the connection's socket waits only the time left (`_DeadlineSocket`); over
`https://`, httpx2's timeouts are set to the time left and the clock is read between body reads.
And an answer has a size cap, from what the request can legitimately bring back: one declared
longer is refused before its body is read, and one that streams past the cap is cut off there
(`AnswerTooLarge`), so a hostile or broken server cannot make this process hold its answer.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import select
import socket
import threading
import time
from typing import Any

import httpx2

_NO_DELAY = (socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
# The request extensions this transport reads besides httpx2's "timeout": the monotonic time by
# which the whole exchange must be over, and the most bytes the answer's body may have.
DEADLINE = "pinakes.deadline"
MAX_BYTES = "pinakes.max_bytes"
_READ_SIZE = 65536


class AnswerTooLarge(Exception):
    """The server's answer is longer than the request's cap: refused, its body left unread.
    Not a transport error (it must not be retried: the same request brings the same answer)."""

    def __init__(self, status: int, limit: int, declared: int | None) -> None:
        self.status = status
        self.limit = limit
        self.declared = declared
        said = f"it declared {declared:,} bytes" if declared is not None else "it sent more"
        super().__init__(f"its answer is larger than the {limit:,} bytes this request can bring back ({said})")


class _DeadlineSocket(socket.socket):
    """A socket whose blocking calls (send, receive) each wait only the time left before `deadline`:
    the whole exchange ends by it, however slowly the server drips its answer."""

    deadline = math.inf

    def _time_left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request's deadline passed")
        return left

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        super().settimeout(self._time_left())
        return super().recv_into(buffer, nbytes, flags)

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        super().settimeout(self._time_left())
        return super().recv(bufsize, flags)

    def sendall(self, data: Any, flags: int = 0) -> None:
        super().settimeout(self._time_left())  # since 3.5 the timeout bounds the whole sendall
        super().sendall(data, flags)


class _DeadlineConnection(http.client.HTTPConnection):
    """An HTTP connection over a `_DeadlineSocket` (`socket.create_connection`'s loop, that class)."""

    def connect(self) -> None:
        error: OSError | None = None
        for family, kind, proto, _name, target in socket.getaddrinfo(self.host, self.port, 0, socket.SOCK_STREAM):
            sock = _DeadlineSocket(family, kind, proto)
            try:
                sock.settimeout(self.timeout)
                sock.connect(target)
            except OSError as exc:
                sock.close()
                error = exc
                continue
            sock.setsockopt(*_NO_DELAY)
            self.sock = sock
            return
        raise error or OSError(f"no address found for {self.host}")


class PlainHTTPTransport(httpx2.BaseTransport):
    """`http.client` connections for `http://` URLs; httpx2's transport for anything else."""

    def __init__(self) -> None:
        self._idle: dict[tuple[str, int], list[http.client.HTTPConnection]] = {}
        self._lock = threading.Lock()
        self._tls = httpx2.HTTPTransport(socket_options=[_NO_DELAY])

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        deadline = float(request.extensions.get(DEADLINE, math.inf))
        limit = int(request.extensions.get(MAX_BYTES) or 0) or None
        if request.url.scheme != "http":
            return self._tls_request(request, deadline, limit)
        body = request.read()
        address = (request.url.host, request.url.port or 80)
        connection = self._connection(request, address, deadline)
        sock = connection.sock
        assert isinstance(sock, _DeadlineSocket)
        sock.deadline = deadline
        try:
            connection.putrequest(request.method, request.url.raw_path.decode("ascii"),
                                  skip_host=True, skip_accept_encoding=True)  # httpx2 set both
            for name, value in request.headers.raw:
                connection.putheader(name, value)
            connection.endheaders(body)
            answer = connection.getresponse()
            content = _read_answer(answer, limit)
        except TimeoutError as exc:
            connection.close()
            raise httpx2.ReadTimeout(f"no whole answer before the request's deadline ({exc})", request=request) from exc
        except AnswerTooLarge:
            connection.close()
            raise
        except (OSError, http.client.HTTPException) as exc:
            connection.close()
            raise httpx2.RemoteProtocolError(f"the server dropped the connection ({exc!r})",
                                             request=request) from exc
        sock.deadline = math.inf
        if answer.will_close:
            connection.close()
        else:
            with self._lock:
                self._idle.setdefault(address, []).append(connection)
        return httpx2.Response(answer.status, headers=answer.getheaders(), content=content, request=request)

    def _tls_request(self, request: httpx2.Request, deadline: float, limit: int | None) -> httpx2.Response:
        """httpx2's own transport, its timeouts cut to the time left and the body read here, the
        clock and the cap checked between reads."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise httpx2.ReadTimeout("the request's deadline passed before it was sent", request=request)
        if math.isfinite(left):
            request.extensions = {**request.extensions,
                                  "timeout": dict.fromkeys(("connect", "read", "write", "pool"), left)}
        response = self._tls.handle_request(request)
        try:
            declared = _declared_length(response.headers.get("content-length"))
            if limit is not None and declared is not None and declared > limit:
                raise AnswerTooLarge(response.status_code, limit, declared)
            parts: list[bytes] = []
            size = 0
            for part in response.iter_raw():
                size += len(part)
                if limit is not None and size > limit:
                    raise AnswerTooLarge(response.status_code, limit, None)
                parts.append(part)
                if time.monotonic() > deadline:
                    raise httpx2.ReadTimeout("no whole answer before the request's deadline", request=request)
        finally:
            response.close()
        return httpx2.Response(response.status_code, headers=response.headers, content=b"".join(parts),
                               request=request)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                connection.close()
        self._tls.close()

    def _connection(self, request: httpx2.Request, address: tuple[str, int],
                    deadline: float) -> http.client.HTTPConnection:
        """A kept-alive connection to `address` the server has not closed meanwhile, or a new one."""
        while True:
            with self._lock:
                idle = self._idle.get(address)
                connection = idle.pop() if idle else None
            if connection is None:
                break
            if connection.sock is not None and not _readable(connection.sock):
                return connection
            connection.close()  # an idle connection is readable only once the server closed it
        left = deadline - time.monotonic()
        if left <= 0:
            raise httpx2.ConnectTimeout("the request's deadline passed before it connected", request=request)
        connection = _DeadlineConnection(*address, timeout=left if math.isfinite(left) else None)
        try:
            connection.connect()
        except TimeoutError as exc:
            raise httpx2.ConnectTimeout(f"connecting to {address[0]}:{address[1]} timed out",
                                        request=request) from exc
        except OSError as exc:
            raise httpx2.ConnectError(f"cannot connect to {address[0]}:{address[1]} ({exc})",
                                      request=request) from exc
        return connection


def _read_answer(answer: http.client.HTTPResponse, limit: int | None) -> bytes:
    """The answer's body, refused past `limit` bytes: at once when its Content-Length says so, else
    as soon as what arrived passes it (a chunked answer of unknown length)."""
    declared = answer.length if not answer.chunked else None
    if limit is None:
        return answer.read()
    if declared is not None:
        if declared > limit:
            raise AnswerTooLarge(answer.status, limit, declared)
        return answer.read()  # IncompleteRead when the server closes before its Content-Length
    content = bytearray()
    while part := answer.read1(_READ_SIZE):
        content += part
        if len(content) > limit:
            raise AnswerTooLarge(answer.status, limit, None)
    return bytes(content)


def _declared_length(header: str | None) -> int | None:
    try:
        return int(header) if header is not None else None
    except ValueError:
        return None


def _readable(sock: socket.socket) -> bool:
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([sock], [], [], 0)[0])


class EmbeddingsEndpoint:
    """POST JSON under one base URL with the openai client's headers; 2xx answers are returned, the
    rest raised as the client's own exceptions."""

    def __init__(self, sdk: Any, client: Any, timeout_s: float) -> None:
        self._sdk = sdk
        self._base_url = str(client.base_url).rstrip("/") + "/"
        headers = {**client.default_headers, **client.auth_headers}
        # Parsed once: httpx2 would otherwise parse the URL and normalise every header per request.
        # Not the X-Stainless-* ones: they describe the SDK's own request path to OpenAI's servers,
        # which this is not (and every one is parsed again by the server).
        self._headers = httpx2.Headers({name: value for name, value in headers.items()
                                        if isinstance(value, str) and not name.lower().startswith("x-stainless-")})
        self._urls: dict[str, httpx2.URL] = {}
        self.timeout_s = timeout_s
        self._transport = PlainHTTPTransport()

    def post(self, path: str, body: dict[str, Any], *, deadline: float | None = None,
             max_bytes: int | None = None) -> httpx2.Response:
        """One request, over by `deadline` (monotonic; default `timeout_s` from now) with an answer
        of at most `max_bytes` (AnswerTooLarge otherwise, raised as is)."""
        url = self._urls.get(path) or self._urls.setdefault(path, httpx2.URL(self._base_url + path))
        own = time.monotonic() + self.timeout_s
        extensions = {DEADLINE: own if deadline is None else min(deadline, own), MAX_BYTES: max_bytes}
        request = httpx2.Request("POST", url, headers=self._headers, content=json.dumps(body).encode(),
                                 extensions=extensions)
        try:
            response = self._transport.handle_request(request)
        except httpx2.TimeoutException as exc:
            raise self._sdk.APITimeoutError(request=request) from exc
        except httpx2.TransportError as exc:
            raise self._sdk.APIConnectionError(request=request) from exc
        if not 200 <= response.status_code < 300:
            raise self._status_error(response)
        return response

    def _status_error(self, response: httpx2.Response) -> Exception:
        """The client's exception for this status, its message and body as the client makes them."""
        message = f"Error code: {response.status_code}"
        body: object = response.text.strip()
        with contextlib.suppress(ValueError):
            body = json.loads(str(body))
        if isinstance(body, dict):
            body = body.get("error", body)
            detail = body.get("message") if isinstance(body, dict) else None
            if isinstance(detail, str) and detail:
                message += f" - {detail}"
        errors = self._sdk
        by_status = {400: errors.BadRequestError, 401: errors.AuthenticationError,
                     403: errors.PermissionDeniedError, 404: errors.NotFoundError, 409: errors.ConflictError,
                     422: errors.UnprocessableEntityError, 429: errors.RateLimitError}
        kind = by_status.get(response.status_code) or (
            errors.InternalServerError if response.status_code >= 500 else errors.APIStatusError)
        return kind(message, response=response, body=body)
