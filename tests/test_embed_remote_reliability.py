"""The remote embedding provider under a hostile or imperfect server (issue 40: items 1, 5, 9 and the
remote minors), against a real HTTP server in the test process (tests/fake_openai_embeddings.py):

- float noise on every answer is not a model swap: plain syncs re-embed and pay for nothing, searches
  stay hybrid, a `--rebuild` reuses every vector; a real swap under the same noise is still one;
- a long-running searcher (the MCP tools) catches a swap on its recheck cadence and after a failed
  request, answering keyword results with a note, and follows the rebuild that fixes it;
- every request has one deadline (a dripping server), a search one for all it waits (a 429 asking
  for a minute), an answer a size cap (300 MB, declared or chunked), a cut mid-answer is retried;
- each failure's remedy matches it; `pnk status` says the next sync rebuilds after a swap.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

openai = pytest.importorskip("openai", reason="the [remote] extra (openai) is not installed: the remote "
                                              "provider cannot run here; CI installs it")

from pinakes.embed import provider_openai  # noqa: E402
from pinakes.embed.loader import load_embedder  # noqa: E402
from pinakes.embed.remote_identity import (  # noqa: E402
    MIN_PROBE_COSINE,
    PROBE_META_KEY,
    PROBE_TEXTS,
    decode_probe,
    probe_agreement,
)
from pinakes.errors import EmbeddingEndpointError  # noqa: E402
from pinakes.kb import KBPaths  # noqa: E402
from tests.fake_openai_embeddings import FakeEmbeddings, Reply, self_signed_tls  # noqa: E402
from tests.test_embed_openai import DIM, index_meta, make_kb, run, search_json, section  # noqa: E402

NOISE = 1e-5  # the done-when's noise: ten times what the issue saw flip the old fingerprint


@pytest.fixture
def server() -> Iterator[FakeEmbeddings]:
    with FakeEmbeddings(dim=DIM) as fake:
        fake.dense = True  # components everywhere, some near any rounding edge, as a model's
        yield fake


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(provider_openai, "FIRST_BACKOFF_S", 0.01)
    monkeypatch.setattr(provider_openai, "MAX_BACKOFF_S", 0.02)


def sync_report(kb: Path, capsys: pytest.CaptureFixture[str], *flags: str) -> dict[str, Any]:
    code, out, err = run(kb, capsys, "sync", "--json", *flags)
    assert code == 0, err
    return json.loads(out)


def ledger(kb: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in KBPaths(kb).ledger.read_text(encoding="utf-8").splitlines()]


def search_tool(tools: Any, query: str) -> dict[str, Any]:
    """`pinakes_search` through the MCP tools, as a long-running `pnk serve` answers it."""
    return cast(dict[str, Any], tools.call("pinakes_search", {"query": query}))


def vector_rows(kb: Path) -> set[tuple[int, bytes]]:
    conn = sqlite3.connect(KBPaths(kb).index_db)
    try:
        return {(int(chunk_id), bytes(vector)) for chunk_id, vector in conn.execute("SELECT chunk_id, vector FROM embeddings")}
    finally:
        conn.close()


def probe_tokens() -> int:
    """What the fake bills for the probe: a token per word plus two per input."""
    import re

    return sum(len(re.findall(r"\w+", text)) + 2 for text in PROBE_TEXTS)


# --- item 1: noise is not a model swap ---------------------------------------------------------------


def test_ten_plain_syncs_against_a_noisy_priced_endpoint_re_embed_nothing_and_pay_only_the_probe(
        tmp_path: Path, server: FakeEmbeddings, capsys: pytest.CaptureFixture[str]) -> None:
    server.noise_sigma = NOISE
    kb = make_kb(tmp_path / "kb", server, 'input_usd_per_mtok = "1000"')
    first = sync_report(kb, capsys)
    assert first["chunks_embedded"] > 0
    meta = index_meta(kb)
    requests, lines = len(server.requests), len(ledger(kb))

    for _ in range(10):
        report = sync_report(kb, capsys)
        assert report["mode"] != "rebuild" and report["chunks_embedded"] == 0, report["notes"]
    # Each sync asked for the probe and nothing else: no document was sent again.
    asked = server.requests[requests:]
    assert [len((r.body or {})["input"]) for r in asked] == [len(PROBE_TEXTS)] * 10
    # The ledger proves it: ten reconciled requests, each billed the probe's tokens, and nothing else.
    reconciled = [r for r in ledger(kb)[lines:] if r["kind"] == "reconciliation"]
    assert len(reconciled) == 10
    assert {r["input_tokens"] for r in reconciled} == {probe_tokens()}
    assert index_meta(kb)["embedding_sha256"] == meta["embedding_sha256"]
    assert index_meta(kb).get(PROBE_META_KEY) == meta.get(PROBE_META_KEY)  # compared with, never re-recorded

    result = search_json(kb, capsys, "lighthouse ship")  # a search under the same noise: hybrid
    assert result["mode"] == "hybrid" and result["passages"][0]["path"] == "docs/harbour.md"


def test_a_rebuild_under_noise_reuses_every_vector(
        tmp_path: Path, server: FakeEmbeddings, capsys: pytest.CaptureFixture[str]) -> None:
    kb = make_kb(tmp_path / "kb", server)
    built = sync_report(kb, capsys)
    server.noise_sigma = NOISE
    requests = len(server.requests)
    rebuilt = sync_report(kb, capsys, "--rebuild")
    assert rebuilt["chunks_embedded"] == 0 and rebuilt["chunks_reused"] == built["chunks_embedded"]
    assert [len((r.body or {})["input"]) for r in server.requests[requests:]] == [len(PROBE_TEXTS)]


def test_a_swap_under_the_same_noise_is_still_a_swap(
        tmp_path: Path, server: FakeEmbeddings, capsys: pytest.CaptureFixture[str]) -> None:
    server.noise_sigma = NOISE
    kb = make_kb(tmp_path / "kb", server)
    sync_report(kb, capsys)
    recorded = index_meta(kb)
    server.model_seed = 1
    report = sync_report(kb, capsys)
    assert report["mode"] == "rebuild" and report["chunks_embedded"] > 0
    assert any("model behind the same name was swapped" in note and f"below {MIN_PROBE_COSINE}" in note
               for note in report["notes"])
    assert index_meta(kb)["embedding_sha256"] != recorded["embedding_sha256"]
    assert index_meta(kb)[PROBE_META_KEY] != recorded[PROBE_META_KEY]


def test_a_first_sync_killed_after_its_first_document_leaves_the_probe_recorded(
        tmp_path: Path, server: FakeEmbeddings, capsys: pytest.CaptureFixture[str]) -> None:
    """kill -9 right after a first sync committed its first document: the index it leaves already
    records the probe vectors beside the fingerprint (they are written with the first vectors), so
    the next sync under noise compares by cosine, keeps that document's vectors, and rebuilds nothing."""
    server.noise_sigma = NOISE
    kb = make_kb(tmp_path / "kb", server)
    env = {**os.environ, "PNK_FAULT": "sync.after-document-write"}
    killed = subprocess.run([sys.executable, "-m", "pinakes", "-C", str(kb), "sync"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    meta = index_meta(kb)
    assert meta["embedding_sha256"].startswith("probe:") and "last_sync_at" not in meta  # a first sync, cut short
    recorded = decode_probe(meta.get(PROBE_META_KEY), DIM)
    assert recorded is not None, "the interrupted index has the fingerprint but not the probe vectors"
    expected = np.asarray([server.vector(text) for text in PROBE_TEXTS], dtype=np.float32)
    assert probe_agreement(recorded, expected) > MIN_PROBE_COSINE
    kept = vector_rows(kb)
    assert kept

    report = sync_report(kb, capsys)
    assert report["mode"] != "rebuild", report["notes"]
    assert not any("swapped" in note for note in report["notes"])
    assert kept <= vector_rows(kb)  # the killed run's vectors stand as they were, noise or not
    assert index_meta(kb)["embedding_sha256"] == meta["embedding_sha256"]


def test_an_index_from_before_the_probe_was_recorded_gets_it_without_re_embedding(
        tmp_path: Path, server: FakeEmbeddings, capsys: pytest.CaptureFixture[str]) -> None:
    kb = make_kb(tmp_path / "kb", server)
    sync_report(kb, capsys)
    with sqlite3.connect(KBPaths(kb).index_db) as conn:  # what an index written by 0.x holds
        conn.execute("DELETE FROM meta WHERE key = ?", (PROBE_META_KEY,))
    report = sync_report(kb, capsys)
    assert report["mode"] != "rebuild" and report["chunks_embedded"] == 0
    assert index_meta(kb)[PROBE_META_KEY].startswith("f32le:")
    server.noise_sigma = NOISE  # from now on noise is compared by cosine
    assert sync_report(kb, capsys)["chunks_embedded"] == 0


# --- item 5: a long-running searcher ---------------------------------------------------------------


def test_a_long_running_searcher_catches_a_swap_on_its_cadence_and_follows_the_rebuild(
        tmp_path: Path, server: FakeEmbeddings, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from pinakes.serve.config import load_kb
    from pinakes.serve.tools import PinakesTools

    monkeypatch.setattr(provider_openai, "RECHECK_INTERVAL_S", 0.5)
    kb = make_kb(tmp_path / "kb", server)
    sync_report(kb, capsys)
    tools = PinakesTools([load_kb(kb)])
    try:
        assert search_tool(tools, "lighthouse ship")["mode"] == "hybrid"
        server.model_seed = 1  # swapped behind the same name while the server runs
        time.sleep(0.6)
        swapped = search_tool(tools, "lighthouse ship")
        assert swapped["mode"] == "bm25" and "harbour" in json.dumps(swapped["passages"][0])
        assert any("model behind the same name was swapped" in note and "`pnk sync` rebuilds" in note
                   for note in swapped["notes"])
        # Every search until the rebuild says so, without asking the endpoint each time. The next
        # probe is made not due, whatever time a loaded machine took since this one (0.5 s could pass).
        monkeypatch.setattr(provider_openai, "RECHECK_INTERVAL_S", 60.0)
        requests = len(server.requests)
        assert search_tool(tools, "garden")["mode"] == "bm25"
        assert len(server.requests) == requests
        assert sync_report(kb, capsys)["mode"] == "rebuild"
        assert search_tool(tools, "lighthouse ship")["mode"] == "hybrid"
    finally:
        tools.close()


def test_a_failed_request_makes_the_next_search_ask_for_the_probe_first(
        tmp_path: Path, server: FakeEmbeddings, capsys: pytest.CaptureFixture[str]) -> None:
    """A server restarted with another model is first a failed request: the next search rechecks
    at once, not a minute later."""
    from pinakes.serve.config import load_kb
    from pinakes.serve.tools import PinakesTools

    kb = make_kb(tmp_path / "kb", server)
    sync_report(kb, capsys)
    tools = PinakesTools([load_kb(kb)])
    try:
        assert search_tool(tools, "lighthouse ship")["mode"] == "hybrid"
        server.queue(Reply("status", 503), Reply("status", 503))  # the restart: the query fails
        down = search_tool(tools, "lighthouse ship")
        assert down["mode"] == "bm25" and any("HTTP 503" in note for note in down["notes"])
        server.model_seed = 1  # it came back with another model
        back = search_tool(tools, "lighthouse ship")
        assert back["mode"] == "bm25"
        assert any("model behind the same name was swapped" in note for note in back["notes"])
    finally:
        tools.close()


# --- item 9: deadlines and the size cap ---------------------------------------------------------------


def test_a_dripping_server_holds_a_search_no_longer_than_search_timeout_s(
        tmp_path: Path, server: FakeEmbeddings, capsys: pytest.CaptureFixture[str]) -> None:
    kb = make_kb(tmp_path / "kb", server, "search_timeout_s = 2")
    sync_report(kb, capsys)
    # The probe answers; the query's answer drips at 64 bytes/s (~10 s for its ~600 bytes), and so
    # would its retry: each read returns well within any per-read timeout.
    server.queue(Reply(), *[Reply("drip", drip_bytes_per_s=64)] * 2)
    asked_before = len(server.requests)
    result = search_json(kb, capsys, "lighthouse ship")
    # Timed from the probe's arrival (the deadline began before it): the search before the probe takes
    # what the machine's load makes it.
    elapsed = time.monotonic() - server.requests[asked_before].at
    assert result["mode"] == "bm25" and result["passages"][0]["path"] == "docs/harbour.md"
    assert any("timed out" in note for note in result["notes"])
    assert elapsed < 4.0, f"the search waited {elapsed:.1f} s on a 2 s deadline"


def test_a_long_retry_after_is_not_waited_by_a_search(
        tmp_path: Path, server: FakeEmbeddings, capsys: pytest.CaptureFixture[str]) -> None:
    kb = make_kb(tmp_path / "kb", server)
    sync_report(kb, capsys)
    server.queue(Reply(), Reply("status", 429, headers={"retry-after": "60"}))
    asked_before = len(server.requests)
    result = search_json(kb, capsys, "lighthouse ship")
    assert time.monotonic() - server.requests[asked_before].at < 3.0  # from the probe's arrival, as above
    assert result["mode"] == "bm25"
    assert any("HTTP 429" in note and "would wait 60 s more" in note and "search_timeout_s" in note
               for note in result["notes"])


@pytest.mark.parametrize(("fault", "mode"), [("zeros", "hybrid"), ("zeros", "vector"), ("nan", "hybrid")])
def test_a_query_vector_that_ranks_nothing_gives_keyword_results_and_a_note(
        tmp_path: Path, server: FakeEmbeddings, capsys: pytest.CaptureFixture[str], fault: str, mode: str) -> None:
    """The endpoint answers the query with an all-zero (or NaN) vector: as for a down endpoint, the
    search answers with keyword results and says why, never empty vector results without a word."""
    kb = make_kb(tmp_path / "kb", server)
    sync_report(kb, capsys)
    server.queue(Reply(), Reply(fault))  # the probe answers as recorded; the query's vector is the fault
    code, out, err = run(kb, capsys, "search", "lighthouse ship", "--json", "--mode", mode)
    assert code == 0, err
    result = json.loads(out)
    assert result["mode"] == "bm25" and result["passages"][0]["path"] == "docs/harbour.md"
    said = "it is all zeros" if fault == "zeros" else "NaN or infinity"
    assert any(note.startswith(f"keyword results only (mode bm25, asked for {mode})") and said in note
               for note in result["notes"]), result["notes"]
    assert search_json(kb, capsys, "lighthouse ship")["mode"] == "hybrid"  # the next answer is a vector again


def test_a_request_has_one_deadline_not_one_per_read(server: FakeEmbeddings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(provider_openai, "MAX_ATTEMPTS", 2)
    embedder = load_embedder(section(server, timeout_s=1))
    server.queue(*[Reply("drip", drip_bytes_per_s=64)] * provider_openai.MAX_ATTEMPTS)
    started = time.monotonic()
    with pytest.raises(EmbeddingEndpointError, match="timed out") as caught:
        embedder.embed_documents(["a harbour at night"])
    elapsed = time.monotonic() - started
    # Two attempts of one second each (and the short backoff), not two ~10 s drips.
    assert elapsed < 2 * 1.0 + 1.5, elapsed
    assert "timeout_s = 1 s (the whole request)" in (caught.value.remedy or "")


@pytest.mark.parametrize("chunked", [False, True], ids=["declared", "chunked"])
def test_a_300_mb_answer_is_refused_without_being_read(server: FakeEmbeddings, chunked: bool) -> None:
    embedder = load_embedder(section(server))
    server.queue(Reply("huge", chunked=chunked))
    requests = len(server.requests)
    tracemalloc.start()
    try:
        started = time.monotonic()
        with pytest.raises(EmbeddingEndpointError, match=r"larger than the .* bytes this request can bring back"):
            embedder.embed_documents(["a harbour at night"])
        elapsed = time.monotonic() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(server.requests) == requests + 1  # not retried: the same request brings the same answer
    assert elapsed < 5.0 and peak < 16 * 1024 * 1024, (elapsed, peak)
    deadline = time.monotonic() + 5
    while len(server.bytes_sent) < requests + 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    # The server stopped when the client closed: nowhere near its 300 MB went out.
    assert server.bytes_sent[-1] < 32 * 1024 * 1024


def test_a_connection_cut_mid_answer_is_retried_and_a_persistent_cut_says_so(server: FakeEmbeddings) -> None:
    embedder = load_embedder(section(server))
    server.queue(Reply("cut"))
    requests = len(server.requests)
    vectors = embedder.embed_documents(["a harbour at night"])
    assert len(server.requests) == requests + 2
    assert np.allclose(vectors[0], server.vector("a harbour at night"), atol=1e-6)

    server.queue(*[Reply("cut")] * provider_openai.MAX_ATTEMPTS)
    with pytest.raises(EmbeddingEndpointError, match=rf"lost its connection \({provider_openai.MAX_ATTEMPTS} attempts\)") \
            as caught:
        embedder.embed_documents(["a harbour at night"])
    assert "closed the connection in the middle of its answer" in (caught.value.remedy or "")
    assert "start the embedding server" not in (caught.value.remedy or "")


def test_an_https_endpoint_answers_within_the_same_deadline_and_cap(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The https:// path (OpenAI, hosted APIs) reads its answer itself: it used to hand back an
    unread stream (httpx2.ResponseNotRead on every request)."""
    monkeypatch.setattr(provider_openai, "MAX_ATTEMPTS", 2)
    cert, key = self_signed_tls(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    with FakeEmbeddings(dim=DIM, tls=(cert, key)) as server:
        embedder = load_embedder(section(server, timeout_s=1))
        assert server.url.startswith("https://")
        vectors = embedder.embed_documents(["a harbour at night"])
        assert np.allclose(vectors[0], server.vector("a harbour at night"), atol=1e-6)
        server.queue(Reply("huge", chunked=True))
        with pytest.raises(EmbeddingEndpointError, match="larger than"):
            embedder.embed_documents(["a harbour"])
        server.queue(*[Reply("drip", drip_bytes_per_s=64)] * provider_openai.MAX_ATTEMPTS)
        started = time.monotonic()
        with pytest.raises(EmbeddingEndpointError, match="timed out"):
            embedder.embed_documents(["a harbour at night"])
        assert time.monotonic() - started < 2 * 1.0 + 1.5


# --- remedies ---------------------------------------------------------------------------------------


def test_each_failure_gets_the_remedy_it_needs(server: FakeEmbeddings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(provider_openai, "MAX_ATTEMPTS", 2)
    embedder = load_embedder(section(server, timeout_s=1))
    remedies: dict[str, str] = {}
    for name, replies in {
        "400": [Reply("status", 400)] * 2,  # the second after the switch to floats
        "413": [Reply("status", 413)],
        "timeout": [Reply("delay", delay_s=1.5)] * provider_openai.MAX_ATTEMPTS,
        "cut": [Reply("cut")] * provider_openai.MAX_ATTEMPTS,
    }.items():
        server.queue(*replies)
        with pytest.raises(EmbeddingEndpointError) as caught:
            embedder.embed_documents(["a harbour at night"])
        remedies[name] = caught.value.remedy or ""
    server.stop()
    with pytest.raises(EmbeddingEndpointError) as caught:
        embedder.embed_documents(["a harbour at night"])
    remedies["down"] = caught.value.remedy or ""

    assert "refused the request (HTTP 400: scripted 400)" in remedies["400"] and "embedding model" in remedies["400"]
    assert "lower [embedding] batch_size" in remedies["413"]
    assert "timeout_s = 1 s" in remedies["timeout"] and "overloaded" in remedies["timeout"]
    assert "in the middle of its answer" in remedies["cut"]
    assert f"start the embedding server at {server.url}" in remedies["down"]
    assert len(set(remedies.values())) == len(remedies)  # five faults, five remedies


# --- pnk status ------------------------------------------------------------------------------------


def test_status_says_the_next_sync_rebuilds_after_a_swap_and_is_up_to_date_under_noise(
        tmp_path: Path, server: FakeEmbeddings, capsys: pytest.CaptureFixture[str]) -> None:
    kb = make_kb(tmp_path / "kb", server)
    sync_report(kb, capsys)
    server.noise_sigma = NOISE
    code, out, _err = run(kb, capsys, "status")
    assert code == 0 and "up to date" in out

    server.model_seed = 1
    code, out, _err = run(kb, capsys, "status")
    assert code == 0 and "up to date" not in out
    assert "the model behind the same name was swapped: the next sync rebuilds the whole index" in out
    code, out, _err = run(kb, capsys, "status", "--json")
    status = json.loads(out)
    assert status["model_changed"] is True and status["up_to_date"] is False
    assert "swapped" in status["model_change"]

    server.stop()
    code, out, _err = run(kb, capsys, "status")
    assert code == 0 and "whether the embedding model behind the endpoint changed is unknown" in out

