"""The HTTP transport's Host check parses the header (#24 item 13): host and port must be the bound
ones. A real server on loopback gets real requests with forged Host headers over a raw socket (an
HTTP library would normalise or refuse some of them before sending)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pinakes.serve.host_check import host_matches
from tests.test_serve_cli import free_port, wait_for_port
from tests.test_serve_helpers import make_kb, offline_env, sync_kb

INITIALIZE = (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
              b'"capabilities":{},"clientInfo":{"name":"test","version":"1"}}}')


@pytest.mark.parametrize(("header", "ok"), [
    ("127.0.0.1:8799", True), ("localhost:8799", True), ("LOCALHOST:8799", True),
    ("127.0.0.1:8799@evil.com", False), ("evil.com@127.0.0.1:8799", False), ("127.0.0.1:8799.evil.com", False),
    ("127.0.0.1:87990", False), ("127.0.0.1:879", False), ("127.0.0.1", False), ("127.0.0.1:", False),
    ("127.0.0.1:8799/path", False), ("127.0.0.1:8799 ", False), ("127.0.0.1.evil.com:8799", False),
    ("attacker.example:8799", False), ("[::1]:8799", False), ("127.0.0.1:+8799", False), ("", False), (None, False),
])
def test_a_host_header_names_this_server_only_when_host_and_port_are_the_bound_ones(header: str | None, ok: bool) -> None:
    assert host_matches(header, 8799) is ok


def test_a_host_without_a_port_names_the_default_http_port_only() -> None:
    assert host_matches("localhost", 80) and not host_matches("localhost:8080", 80)


def raw_post(port: int, host: str) -> int:
    """POST an MCP initialize with this exact Host header; the response's status code."""
    request = (f"POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
               f"Accept: application/json, text/event-stream\r\nContent-Length: {len(INITIALIZE)}\r\n"
               "Connection: close\r\n\r\n").encode() + INITIALIZE
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        connection.sendall(request)
        status_line = connection.makefile("rb").readline().decode("latin-1")
    return int(status_line.split()[1])


def test_a_forged_host_header_is_refused_by_the_running_server(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "kb", "notes", {"a.md": "# A\n\nAlpha.\n"})
    sync_kb(kb)
    port = free_port()
    errlog = tmp_path / "stderr.log"
    with open(errlog, "w", encoding="utf-8") as stderr:
        process = subprocess.Popen([sys.executable, "-m", "pinakes", "serve", "--kb", str(kb), "--http",
                                    "--port", str(port)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=stderr, env=offline_env(tmp_path))
    try:
        wait_for_port(port, process, errlog)
        for forged in (f"127.0.0.1:{port}@evil.com", f"localhost:{port}.evil.com", f"127.0.0.1:{port + 1}",
                       "127.0.0.1", f"evil.com:{port}"):
            assert raw_post(port, forged) == 421, forged
        # The same request naming the server as it is bound is answered.
        assert raw_post(port, f"127.0.0.1:{port}") == 200
        assert raw_post(port, f"localhost:{port}") == 200
    finally:
        process.terminate()
        process.wait(timeout=30)
