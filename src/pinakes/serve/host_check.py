"""The HTTP transport's Host check, by parsing: the host and the port a request names must be the ones
the server is bound to (127.0.0.1, or `localhost`, on its port).

The SDK's DNS-rebinding check matches `127.0.0.1:*` as a prefix, so `Host: 127.0.0.1:8799@evil.com`
passes it; a header is accepted here only when it parses as exactly `host[:port]` (no user info, path,
query or fragment; a port of digits only) and both parts equal the bound ones. Anything else is
refused with 421 Misdirected Request before the application sees it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # ASGI's own types, as the Starlette app the MCP SDK builds (and this wraps) declares them.
    from starlette.types import ASGIApp, Receive, Scope, Send

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost"})
_HOST_HEADER = re.compile(r"(?P<host>[A-Za-z0-9.\-]+)(?::(?P<port>[0-9]{1,5}))?")
_DEFAULT_HTTP_PORT = 80


def host_matches(header: str | None, port: int) -> bool:
    """Whether a Host header names this server: a loopback name and exactly `port` (absent only when
    `port` is HTTP's default, as a client then leaves it out)."""
    if header is None:
        return False
    parsed = _HOST_HEADER.fullmatch(header)
    if parsed is None or parsed["host"].lower() not in LOOPBACK_NAMES:
        return False
    named = int(parsed["port"]) if parsed["port"] is not None else _DEFAULT_HTTP_PORT
    return named == port


class HostCheck:
    """ASGI middleware: HTTP requests whose Host header does not name this server get a 421."""

    def __init__(self, app: ASGIApp, port: int) -> None:
        self._app = app
        self._port = port

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") == "http" and not host_matches(_header(scope, b"host"), self._port):
            await _refuse(send)
            return
        await self._app(scope, receive, send)


def _header(scope: Scope, name: bytes) -> str | None:
    values = [value for key, value in scope.get("headers", ()) if key.lower() == name]
    if len(values) != 1:  # none, or two that could disagree: not a request this server answers
        return None
    try:
        return values[0].decode("ascii")
    except UnicodeDecodeError:
        return None


async def _refuse(send: Send) -> None:
    body = b'{"error": "the Host header does not name this server (127.0.0.1 or localhost, on its port)"}'
    await send({"type": "http.response.start", "status": 421,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
