"""A loopback listener that answers every request with the same bytes, written as they are, then
closes the connection without saying so: for the transport's faults no well-behaved server makes
(an idle kept-alive connection closed under the client, a body shorter than its Content-Length).
Standard library only."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Generator
from dataclasses import dataclass, field


@dataclass
class RawServer:
    port: int
    accepted: list[int] = field(default_factory=list[int])  # one entry per connection accepted
    closed: threading.Event = field(default_factory=threading.Event)  # set after each answer's close


@contextlib.contextmanager
def raw_server(answer: bytes) -> Generator[RawServer, None, None]:
    """Reads each request whole (its headers and its Content-Length of body), writes `answer`, closes."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)  # accept() wakes to see `stop` (closing the socket does not wake it)
    server, stop = RawServer(listener.getsockname()[1]), threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            connection.settimeout(5)
            with connection:
                server.accepted.append(1)
                request = b""
                while b"\r\n\r\n" not in request:
                    request += connection.recv(65536)
                head, _, body = request.partition(b"\r\n\r\n")
                length = int(next((line.split(b":")[1] for line in head.split(b"\r\n")
                                   if line.lower().startswith(b"content-length")), b"0"))
                while len(body) < length:
                    body += connection.recv(65536)
                connection.sendall(answer)
            server.closed.set()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()
