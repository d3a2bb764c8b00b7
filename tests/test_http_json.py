"""The one transport both remote providers send through (pinakes/http_json.py), against real loopback
servers: the remote embedding provider and the HTTP reranker post through the same `JSONEndpoint`,
retry by the same rules (Retry-After in seconds or as a date, else a short backoff, never past a
deadline) and give the same remedy for the same fault (nothing listening, nothing answering, a
connection cut mid-answer); an answer shorter than its Content-Length is a dropped connection, never
a short body."""

from __future__ import annotations

import email.utils
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import pytest

from pinakes import http_json
from pinakes.errors import RerankEndpointError
from pinakes.http_json import Dropped, JSONEndpoint, retry_after_s
from pinakes.search import rerank_remote
from pinakes.search.rerank import RerankRequest
from tests.fake_rerank_server import FakeReranker
from tests.fake_rerank_server import Reply as RerankReply
from tests.raw_http_server import raw_server

openai = pytest.importorskip("openai", reason="the [remote] extra (openai) is not installed")

from pinakes.embed import provider_openai  # noqa: E402
from pinakes.embed.loader import load_embedder  # noqa: E402
from pinakes.errors import EmbeddingEndpointError  # noqa: E402
from pinakes.manifest.sections import EmbeddingSection, RerankSection  # noqa: E402
from tests.fake_openai_embeddings import FakeEmbeddings  # noqa: E402
from tests.fake_openai_embeddings import Reply as EmbedReply  # noqa: E402

DIM = 16


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in (provider_openai, rerank_remote):
        monkeypatch.setattr(module, "FIRST_BACKOFF_S", 0.01)
        monkeypatch.setattr(module, "MAX_BACKOFF_S", 0.02)
    monkeypatch.setattr(rerank_remote, "COOLDOWN_S", 0.0)


@pytest.fixture
def embeddings() -> Iterator[FakeEmbeddings]:
    with FakeEmbeddings(dim=DIM) as fake:
        yield fake


@pytest.fixture
def reranks() -> Iterator[FakeReranker]:
    with FakeReranker() as fake:
        yield fake


def embedding_section(url: str, **keys: Any) -> EmbeddingSection:
    return EmbeddingSection(provider="openai-compatible", model="fake-embed", dim=DIM, batch_size=4, base_url=url,
                            **keys)


def reranker(url: str, **keys: Any) -> rerank_remote.HTTPReranker:
    return rerank_remote.load(RerankSection(provider="http", model="fake/reranker", base_url=url, api="tei",
                                            batch_size=32, **keys), RerankRequest())


def test_both_remote_providers_send_through_the_one_transport(
        embeddings: FakeEmbeddings, reranks: FakeReranker, monkeypatch: pytest.MonkeyPatch) -> None:
    posted: list[tuple[str, str]] = []
    original = JSONEndpoint.post

    def recording(self: JSONEndpoint, path: str, payload: object, *, deadline: float,
                  cap: int | None) -> http_json.Answer:
        answer = original(self, path, payload, deadline=deadline, cap=cap)
        posted.append((f"{self.host}:{self.port}{self.base_path}/{path}", str(answer.status)))
        return answer

    monkeypatch.setattr(JSONEndpoint, "post", recording)
    embedder = load_embedder(embedding_section(embeddings.url))  # the probe
    embedder.embed_documents(["a harbour at night"])
    assert reranker(reranks.url("tei")).score("harbour", ["a harbour at night", "a garden"])  # probe, then this
    embed_at = embeddings.url.removeprefix("http://")
    rerank_at = reranks.url("tei").removeprefix("http://")
    assert posted == [(f"{embed_at}/embeddings", "200")] * 2 + [(f"{rerank_at}/rerank", "200")] * 2


def test_a_busy_answer_without_retry_after_waits_the_backoff_not_seconds(embeddings: FakeEmbeddings) -> None:
    """A 503 with no Retry-After: another attempt after the provider's backoff (patched to 10 ms
    here), as the reranker does, not a fixed two seconds per attempt."""
    embedder = load_embedder(embedding_section(embeddings.url))
    embeddings.queue(*[EmbedReply("status", 503)] * provider_openai.MAX_ATTEMPTS)
    started = time.monotonic()
    with pytest.raises(EmbeddingEndpointError, match=rf"HTTP 503.*\({provider_openai.MAX_ATTEMPTS} attempts\)"):
        embedder.embed_documents(["a harbour"])
    assert time.monotonic() - started < 2.0


def in_two_seconds() -> str:
    return email.utils.formatdate(time.time() + 2.0, usegmt=True)  # whole seconds: 1 to 2 s from now


class Timed(Protocol):
    at: float  # when the server received it (both fakes record it)


def gap(requests: Sequence[Timed], before: int, ask: Callable[[], object]) -> float:
    """Seconds between the first request `ask` makes and the one after it."""
    ask()
    first, second = requests[before:before + 2]
    return second.at - first.at


def test_retry_after_as_an_http_date_is_waited_for_by_both_providers(
        embeddings: FakeEmbeddings, reranks: FakeReranker) -> None:
    embedder = load_embedder(embedding_section(embeddings.url))
    embeddings.queue(EmbedReply("status", 429, headers={"Retry-After": in_two_seconds()}))
    assert gap(embeddings.requests, len(embeddings.requests), lambda: embedder.embed_documents(["a harbour"])) >= 0.9
    model = reranker(reranks.url("tei"))
    model.score("harbour", ["a harbour"])  # the identity probe, out of the way
    reranks.queue(RerankReply("status", 429, headers={"Retry-After": in_two_seconds()}))
    assert gap(reranks.requests, len(reranks.requests), lambda: model.score("harbour", ["a harbour"])) >= 0.9


def test_a_listener_that_never_answers_and_a_cut_mid_answer_get_their_own_remedies(
        reranks: FakeReranker) -> None:
    """The reranker's remedies come from the same table as the embedding provider's: nothing
    answering in time is a network matter, a cut a crash or a proxy; neither is "start the server"."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    filler = socket.create_connection(("127.0.0.1", port))  # the one pending slot taken: SYNs are dropped
    try:
        silent = reranker(f"http://127.0.0.1:{port}", timeout_s=1)
        with pytest.raises(RerankEndpointError) as caught:
            silent.score("harbour", ["a harbour"])
        assert f"nothing answered at 127.0.0.1:{port} in time" in (caught.value.remedy or "")
        assert "start the reranker" not in (caught.value.remedy or "")
    finally:
        filler.close()
        listener.close()

    model = reranker(reranks.url("tei"))
    model.score("harbour", ["a harbour"])
    reranks.queue(*[RerankReply("drop")] * rerank_remote.MAX_ATTEMPTS)
    with pytest.raises(RerankEndpointError) as caught:
        model.score("harbour", ["a harbour"])
    assert "in the middle of its answer" in (caught.value.remedy or "")
    assert "rerank = false" in (caught.value.remedy or "")


def test_an_answer_shorter_than_its_content_length_is_a_dropped_connection() -> None:
    short = b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"a": 1, "'
    with raw_server(short) as server:  # 10 bytes of a promised 100, then the connection closes
        endpoint = JSONEndpoint(f"http://127.0.0.1:{server.port}", {})
        with pytest.raises(Dropped):
            endpoint.post("rerank", {"query": "q"}, deadline=time.monotonic() + 5, cap=1 << 20)
        with pytest.raises(RerankEndpointError, match=r"connection broke.*\(3 attempts\)"):  # a cut: sent again
            reranker(f"http://127.0.0.1:{server.port}").score("harbour", ["a harbour"])


def test_retry_after_reads_seconds_and_dates_and_nothing_else() -> None:
    assert retry_after_s("3") == 3.0 and retry_after_s("0.4") == 0.4 and retry_after_s("-5") == 0.0
    assert retry_after_s(None) is None and retry_after_s("soon") is None
    later = retry_after_s(email.utils.formatdate(time.time() + 30, usegmt=True))
    assert later is not None and 28 <= later <= 31
    assert retry_after_s(email.utils.formatdate(time.time() - 30, usegmt=True)) == 0.0


def test_an_embedding_key_a_header_cannot_carry_is_refused_before_anything_is_sent(
        embeddings: FakeEmbeddings, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PNK_TEST_EMBED_KEY", "sk-one\nsk-two")  # two lines pasted
    with pytest.raises(EmbeddingEndpointError, match="PNK_TEST_EMBED_KEY holds a space, a control character") as caught:
        load_embedder(embedding_section(embeddings.url, api_key_env="PNK_TEST_EMBED_KEY"))
    assert caught.value.remedy == "set PNK_TEST_EMBED_KEY to the key alone"
    assert not embeddings.requests and "sk-one" not in str(caught.value)
