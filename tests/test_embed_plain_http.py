"""The remote provider's request path (embed/plain_http.py) against real loopback servers: it must
answer and fail exactly as the openai client would, since the provider's retries and
`pinakes.paid.classify_failure` read its exceptions."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

openai = pytest.importorskip("openai", reason="the [remote] extra (openai) is not installed: the remote "
                                              "provider's request path cannot be exercised")

from pinakes.embed.provider_openai import _client  # noqa: E402  # pyright: ignore[reportPrivateUsage]  # the test pins the private client
from pinakes.embed.settings import RemoteEmbedding  # noqa: E402
from pinakes.paid import classify_failure  # noqa: E402
from tests.fake_openai_embeddings import FakeEmbeddings, Reply  # noqa: E402
from tests.raw_http_server import raw_server  # noqa: E402

BODY: dict[str, object] = {"input": ["a harbour at night"], "model": "stub-embed", "encoding_format": "base64"}


@pytest.fixture
def server() -> Iterator[FakeEmbeddings]:
    with FakeEmbeddings(dim=8) as fake:
        yield fake


def test_the_request_carries_the_key_and_the_clients_headers_but_not_its_runtime_ones(
        server: FakeEmbeddings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PNK_TEST_EMBED_KEY", "sk-test-123")
    endpoint = _client(openai, RemoteEmbedding(base_url=server.url, api_key_env="PNK_TEST_EMBED_KEY"))
    answer = endpoint.post("embeddings", BODY)
    assert answer.status_code == 200 and len(answer.json()["data"]) == 1
    headers = server.embedding_requests()[-1].headers
    assert headers["authorization"] == "Bearer sk-test-123"
    assert headers["content-type"] == "application/json"
    assert not [name for name in headers if name.startswith("x-stainless-")]


def test_a_rate_limit_is_the_clients_own_error_with_its_retry_after(server: FakeEmbeddings) -> None:
    server.queue(Reply(kind="status", status=429, headers={"Retry-After": "3"}))
    endpoint = _client(openai, RemoteEmbedding(base_url=server.url))
    with pytest.raises(openai.RateLimitError) as raised:
        endpoint.post("embeddings", BODY)
    assert raised.value.status_code == 429 and "scripted 429" in str(raised.value)
    failure = classify_failure(openai, raised.value)
    assert failure is not None and (failure.status, failure.retry_after_s) == (429, 3.0)


def test_nothing_listening_is_a_connection_that_never_left(server: FakeEmbeddings) -> None:
    with socket.socket() as probe:  # a port that was free a moment ago, now closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    endpoint = _client(openai, RemoteEmbedding(base_url=f"http://127.0.0.1:{port}/v1"))
    with pytest.raises(openai.APIConnectionError) as raised:
        endpoint.post("embeddings", BODY)
    failure = classify_failure(openai, raised.value)
    assert failure is not None and (failure.outcome, failure.status) == ("void", None)
    assert failure.happened == "could not connect"


def test_a_kept_alive_connection_the_server_closed_while_idle_is_replaced_not_failed() -> None:
    """A server that closes every connection after one answer (no `Connection: close` said): the
    next request must notice the closed idle connection and open another, not fail."""
    answer = (b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 24\r\n\r\n'
              b'{"object":"list","x":[]}')
    with raw_server(answer) as server:
        endpoint = _client(openai, RemoteEmbedding(base_url=f"http://127.0.0.1:{server.port}/v1"))
        first = endpoint.post("embeddings", BODY)
        assert server.closed.wait(5)
        time.sleep(0.05)  # the server's FIN crosses loopback: the connection now sits idle, closed
        second = endpoint.post("embeddings", BODY)
        assert first.json() == second.json() == {"object": "list", "x": []}
        assert len(server.accepted) == 2
