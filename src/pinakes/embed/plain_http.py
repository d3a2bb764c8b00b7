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
"""

from __future__ import annotations

import contextlib
import http.client
import json
import select
import socket
import threading
from typing import Any

import httpx2

_NO_DELAY = (socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class PlainHTTPTransport(httpx2.BaseTransport):
    """`http.client` connections for `http://` URLs; httpx2's transport for anything else."""

    def __init__(self) -> None:
        self._idle: dict[tuple[str, int], list[http.client.HTTPConnection]] = {}
        self._lock = threading.Lock()
        self._tls = httpx2.HTTPTransport(socket_options=[_NO_DELAY])

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.url.scheme != "http":
            return self._tls.handle_request(request)
        timeouts = request.extensions.get("timeout") or {}
        body = request.read()
        address = (request.url.host, request.url.port or 80)
        connection = self._connection(request, address, timeouts.get("connect"))
        try:
            connection.sock.settimeout(timeouts.get("write"))
            connection.putrequest(request.method, request.url.raw_path.decode("ascii"),
                                  skip_host=True, skip_accept_encoding=True)  # httpx2 set both
            for name, value in request.headers.raw:
                connection.putheader(name, value)
            connection.endheaders(body)
            connection.sock.settimeout(timeouts.get("read"))
            answer = connection.getresponse()
            content = answer.read()
        except TimeoutError as exc:
            connection.close()
            raise httpx2.ReadTimeout(f"no answer within the timeout ({exc})", request=request) from exc
        except (OSError, http.client.HTTPException) as exc:
            connection.close()
            raise httpx2.RemoteProtocolError(f"the server dropped the connection ({exc!r})",
                                             request=request) from exc
        if answer.will_close:
            connection.close()
        else:
            with self._lock:
                self._idle.setdefault(address, []).append(connection)
        return httpx2.Response(answer.status, headers=answer.getheaders(), content=content, request=request)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                connection.close()
        self._tls.close()

    def _connection(self, request: httpx2.Request, address: tuple[str, int],
                    timeout: float | None) -> http.client.HTTPConnection:
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
        connection = http.client.HTTPConnection(*address, timeout=timeout)
        try:
            connection.connect()
        except TimeoutError as exc:
            raise httpx2.ConnectTimeout(f"connecting to {address[0]}:{address[1]} timed out",
                                        request=request) from exc
        except OSError as exc:
            raise httpx2.ConnectError(f"cannot connect to {address[0]}:{address[1]} ({exc})",
                                      request=request) from exc
        connection.sock.setsockopt(*_NO_DELAY)
        return connection


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
        self._timeout = dict.fromkeys(("connect", "read", "write", "pool"), timeout_s)
        self._transport = PlainHTTPTransport()

    def post(self, path: str, body: dict[str, Any]) -> httpx2.Response:
        url = self._urls.get(path) or self._urls.setdefault(path, httpx2.URL(self._base_url + path))
        request = httpx2.Request("POST", url, headers=self._headers, content=json.dumps(body).encode(),
                                 extensions={"timeout": self._timeout})
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
