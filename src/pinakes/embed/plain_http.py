"""The remote embedding provider's requests: one POST of JSON through the shared transport
(pinakes/http_json.py: one deadline for the whole request, a cap on the answer's size), answered
and failing as the openai client would.

Why not the client's own `post`: it costs ~1.7 ms of client CPU per request of 64 texts over a bare
`http.client` request of the same body (its options and header machinery ~0.7 ms, httpx2's
client ~0.3 ms, httpcore2 and h11 ~0.7 ms; bench/bench_remote_embed.py, docs/perf/embedding.md):
against a local server answering in ~40 ms that is 4 to 5% by itself, the whole 5% the provider
may add, before one vector is decoded. So the openai client is built as before and still supplies
what it is for (the key, organisation and project from the environment, its headers, the base URL,
the trust store its https requests use, its error classes), once; each request then goes through
the transport the HTTP reranker uses too, and `EmbeddingsEndpoint.post` raises what the client
raises in the same situation (`APITimeoutError`, `APIConnectionError` over httpx2's
`ConnectError`/`ConnectTimeout`/`ReadTimeout`/..., `APIStatusError` and its per-status classes with
the answer's error body), so `pinakes.paid.classify_failure` and the provider's retries read them
unchanged. An answer over its cap raises the transport's `TooLarge` as it is (not worth another
attempt).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, cast

import httpx2

from pinakes.http_json import Dropped, JSONEndpoint, TimedOut, Unreachable

if TYPE_CHECKING:
    from pinakes.embed.untyped import OpenAIModule


class OpenAIClient(Protocol):
    """What is read of the openai client, once: where it posts and the headers it sends."""

    @property
    def base_url(self) -> object: ...

    @property
    def default_headers(self) -> Mapping[str, object]: ...

    @property
    def auth_headers(self) -> Mapping[str, str]: ...


class EmbeddingsEndpoint:
    """POST JSON under one base URL with the openai client's headers; 2xx answers are returned (as
    httpx2 responses), the rest raised as the client's own exceptions."""

    def __init__(self, sdk: OpenAIModule, client: OpenAIClient, timeout_s: float) -> None:
        self._sdk = sdk
        self._base_url = str(client.base_url).rstrip("/") + "/"
        headers = {**client.default_headers, **client.auth_headers}
        # Not the X-Stainless-* ones: they describe the SDK's own request path to OpenAI's servers,
        # which this is not (and every one is parsed again by the server).
        sent = {name: value for name, value in headers.items()
                if isinstance(value, str) and not name.lower().startswith("x-stainless-")}
        # The trust store the client's own https requests use (certifi, or SSL_CERT_FILE).
        self._transport = JSONEndpoint(self._base_url, sent, tls=httpx2.create_ssl_context()
                                       if self._base_url.startswith("https:") else None)
        self.timeout_s = timeout_s

    def post(self, path: str, body: dict[str, object], *, deadline: float | None = None,
             max_bytes: int | None = None) -> httpx2.Response:
        """One request, over by `deadline` (monotonic; default `timeout_s` from now) with an answer
        of at most `max_bytes` (the transport's TooLarge otherwise, raised as is)."""
        own = time.monotonic() + self.timeout_s
        try:
            answer = self._transport.post(path, body, deadline=own if deadline is None else min(deadline, own),
                                          cap=max_bytes)
        except (Unreachable, TimedOut, Dropped) as exc:
            cause = _as_httpx2(exc, self._request(path))
            raise self._failed(cause) from cause
        response = httpx2.Response(answer.status, headers=list(answer.headers.items()), content=answer.body,
                                   request=self._request(path) if not 200 <= answer.status < 300 else None)
        if not 200 <= answer.status < 300:
            raise self._status_error(response)
        return response

    def close(self) -> None:
        self._transport.close()

    def _request(self, path: str) -> httpx2.Request:
        """The request as the client's exceptions carry it (built only for one)."""
        return httpx2.Request("POST", self._base_url + path)

    def _failed(self, cause: httpx2.TransportError) -> Exception:
        """The client's exception for a transport failure (raised from httpx2's, which is what
        `classify_failure` reads to tell a connection never made from one that broke)."""
        if isinstance(cause, httpx2.TimeoutException):
            return self._sdk.APITimeoutError(request=cause.request)
        return self._sdk.APIConnectionError(request=cause.request)

    def _status_error(self, response: httpx2.Response) -> Exception:
        """The client's exception for this status, its message and body as the client makes them."""
        message = f"Error code: {response.status_code}"
        body: object = response.text.strip()
        with contextlib.suppress(ValueError):
            body = json.loads(str(body))
        if isinstance(body, dict):
            fields = cast("dict[str, object]", body)
            body = fields.get("error", fields)
            detail = cast("dict[str, object]", body).get("message") if isinstance(body, dict) else None
            if isinstance(detail, str) and detail:
                message += f" - {detail}"
        errors = self._sdk
        by_status = {400: errors.BadRequestError, 401: errors.AuthenticationError,
                     403: errors.PermissionDeniedError, 404: errors.NotFoundError, 409: errors.ConflictError,
                     422: errors.UnprocessableEntityError, 429: errors.RateLimitError}
        kind = by_status.get(response.status_code) or (
            errors.InternalServerError if response.status_code >= 500 else errors.APIStatusError)
        return kind(message, response=response, body=body)


def _as_httpx2(failure: Unreachable | TimedOut | Dropped, request: httpx2.Request) -> httpx2.TransportError:
    """The httpx2 exception the client's own transport raises where the shared one raised `failure`."""
    if isinstance(failure, Unreachable):
        kind = httpx2.ConnectTimeout if failure.timed_out else httpx2.ConnectError
    else:
        kind = httpx2.ReadTimeout if isinstance(failure, TimedOut) else httpx2.RemoteProtocolError
    return kind(str(failure), request=request)
