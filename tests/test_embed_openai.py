"""The remote embedding provider against a real HTTP server in the test process, through the real
`openai` client (tests/fake_openai_embeddings.py): a KB synced and searched through it, the faults
a server can make (429 with Retry-After, 500, timeouts, wrong dimension, fewer vectors than inputs,
NaN, a truncation its usage shows), a model swapped behind the same name, the endpoint down at
search time (CLI and MCP), a priced endpoint in the budget and stopped at its cap, and the key."""

from __future__ import annotations

import json
import re
import sqlite3
import sys
from collections.abc import Iterator
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("openai", reason="the [remote] extra (openai) is not installed: the remote provider "
                                     "cannot run here; CI installs it")

from pinakes.cli import main
from pinakes.embed import provider_openai
from pinakes.embed.loader import load_embedder
from pinakes.embed.settings import EmbeddingSection, RemoteEmbedding
from pinakes.errors import EmbeddingEndpointError, ManifestError, MissingExtraError
from pinakes.kb import KBPaths
from pinakes.manifest import load_manifest, parse_manifest
from tests.fake_openai_embeddings import FakeEmbeddings, Reply, word_tokenizer_json
from tests.test_serve_helpers import call_tool

DIM = 64
MODEL = "fake-embed"
DOCS = {
    "harbour.md": "# Harbour\n\nThe lighthouse keeper logs every ship entering the harbour at night.\n",
    "garden.md": "# Garden\n\nTomatoes need full sun and regular watering; prune the suckers.\n",
    "kafka.md": "# Kafka\n\nConsumer groups rebalance when a partition leader moves to another broker.\n",
}
# A canary: if this string reaches any file, log or output, the key leaked.
CANARY = "sk-CANARY-3b9e1f-remote-embed-never-print-me"


@pytest.fixture
def server() -> Iterator[FakeEmbeddings]:
    with FakeEmbeddings(dim=DIM) as fake:
        yield fake


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Backoff waits of a hundredth of a second: the retries are real, their waits are not the test."""
    monkeypatch.setattr(provider_openai, "FIRST_BACKOFF_S", 0.01)
    monkeypatch.setattr(provider_openai, "MAX_BACKOFF_S", 0.02)


def make_kb(root: Path, server: FakeEmbeddings, *extra: str, docs: dict[str, str] | None = None) -> Path:
    """`pnk init --embedding openai-compatible` at `root` (dim read from the endpoint), `extra` lines
    added to [embedding], the documents written."""
    assert main(["init", str(root), "--embedding", "openai-compatible", "--base-url", server.url,
                 "--model", MODEL]) == 0
    if extra:
        manifest = root / "pinakes.toml"
        text = manifest.read_text(encoding="utf-8")
        manifest.write_text(text.replace(f"dim = {DIM}\n", f"dim = {DIM}\n" + "".join(f"{line}\n" for line in extra), 1),
                            encoding="utf-8")
    for name, text in (DOCS if docs is None else docs).items():
        (root / "docs" / name).write_text(text, encoding="utf-8")
    return root


def run(kb: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["-C", str(kb), *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def search_json(kb: Path, capsys: pytest.CaptureFixture[str], query: str) -> dict[str, Any]:
    code, out, err = run(kb, capsys, "search", query, "--json")
    assert code == 0, err
    return json.loads(out)


def section(server: FakeEmbeddings, **remote: Any) -> EmbeddingSection:
    return EmbeddingSection(provider="openai-compatible", model=MODEL, dim=DIM, batch_size=4,
                            base_url=server.url, **remote)


def index_meta(kb: Path) -> dict[str, str]:
    conn = sqlite3.connect(KBPaths(kb).index_db)
    try:
        return dict(conn.execute("SELECT key, value FROM meta").fetchall())
    finally:
        conn.close()


# --- a KB through the endpoint -------------------------------------------------------------------


def test_a_kb_synced_through_the_endpoint_searches_with_citations(
        tmp_path: Path, server: FakeEmbeddings, capsys: pytest.CaptureFixture[str]) -> None:
    kb = make_kb(tmp_path / "kb", server)
    manifest = (kb / "pinakes.toml").read_text(encoding="utf-8")
    assert 'provider = "openai-compatible"' in manifest and f"dim = {DIM}" in manifest  # read from the endpoint
    load_manifest(kb / "pinakes.toml")  # what init wrote loads

    code, _out, err = run(kb, capsys, "sync")
    assert code == 0, err
    result = search_json(kb, capsys, "lighthouse ship")
    top = result["passages"][0]
    assert result["mode"] == "hybrid"
    assert top["path"] == "docs/harbour.md" and top["citation"].startswith("docs/harbour.md:")
    assert top["scores"]["vector_rank"] == 1 and top["scores"]["cosine"] > 0.2

    meta = index_meta(kb)
    assert meta["embedding_provider"] == "openai-compatible" and meta["embedding_model"] == MODEL
    assert meta["embedding_sha256"].startswith("probe:")
    # Every request went to /v1/embeddings with the model the manifest names.
    assert {(r.path, (r.body or {}).get("model")) for r in server.requests} == {("/v1/embeddings", MODEL)}


def test_documents_are_embedded_in_batches_with_requests_in_flight_together(server: FakeEmbeddings) -> None:
    embedder = load_embedder(section(server, concurrency=4))
    server.response_delay_s = 0.5  # long enough that four requests overlap on a loaded machine
    texts = [f"document number {n} about ships" for n in range(16)]  # four batches of four
    probe_requests = len(server.requests)
    vectors = embedder.embed_documents(texts)

    assert vectors.shape == (16, DIM) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    expected = np.asarray([server.vector(text) for text in texts], dtype=np.float32)
    assert np.allclose(vectors, expected, atol=1e-6)  # in input order, whatever order they came back in
    batches = server.requests[probe_requests:]
    assert [len((r.body or {})["input"]) for r in batches] == [4, 4, 4, 4]
    assert server.max_in_flight == 4, "the four requests were not in flight together"


@pytest.mark.parametrize("base64", ["ignore", "refuse"])
def test_a_server_that_answers_only_floats_is_read_as_well(server: FakeEmbeddings, base64: str) -> None:
    """base64 is asked for (a quarter of the bytes); a server that ignores the ask answers floats, and
    one that refuses it with a 400 is asked for floats from then on."""
    server.base64 = base64
    embedder = load_embedder(section(server))
    vectors = embedder.embed_documents(["lighthouse ship", "garden tomato"])
    expected = np.asarray([server.vector("lighthouse ship"), server.vector("garden tomato")], dtype=np.float32)
    assert np.allclose(vectors, expected, atol=1e-6)
    asked = [(r.body or {}).get("encoding_format") for r in server.requests]
    assert asked == (["base64"] * 2 if base64 == "ignore" else ["base64", "float", "float"])


def test_the_fingerprint_is_the_same_whichever_encoding_the_server_answers(server: FakeEmbeddings) -> None:
    answered = load_embedder(section(server)).identity.weights_sha256
    server.base64 = "ignore"
    assert load_embedder(section(server)).identity.weights_sha256 == answered


# --- faults --------------------------------------------------------------------------------------


def test_a_429_is_retried_after_the_wait_its_retry_after_asks(server: FakeEmbeddings) -> None:
    embedder = load_embedder(section(server))
    server.queue(Reply("status", 429, headers={"retry-after": "0.4"}))
    before = len(server.requests)
    vector = embedder.embed_documents(["lighthouse"])
    first, second = server.requests[before:]
    assert second.at - first.at >= 0.4  # its own Retry-After, not the test's 0.01 s backoff
    assert np.allclose(vector[0], server.vector("lighthouse"), atol=1e-6)


def test_a_500_is_retried_and_a_persistent_one_fails_the_batch_after_bounded_attempts(server: FakeEmbeddings) -> None:
    embedder = load_embedder(section(server))
    server.queue(Reply("status", 500))
    assert embedder.embed_documents(["one"]).shape == (1, DIM)

    server.queue(*[Reply("status", 503)] * provider_openai.MAX_ATTEMPTS)
    before = len(server.requests)
    with pytest.raises(EmbeddingEndpointError, match=rf"HTTP 503.*\({provider_openai.MAX_ATTEMPTS} attempts\)"):
        embedder.embed_documents(["two"])
    assert len(server.requests) - before == provider_openai.MAX_ATTEMPTS


def test_a_request_past_timeout_s_is_retried_then_fails_clearly(server: FakeEmbeddings) -> None:
    embedder = load_embedder(section(server, timeout_s=1))
    server.queue(Reply("delay", delay_s=1.5))
    assert embedder.embed_documents(["slow"]).shape == (1, DIM)  # the retry answered in time

    server.queue(*[Reply("delay", delay_s=1.5)] * provider_openai.MAX_ATTEMPTS)
    with pytest.raises(EmbeddingEndpointError, match="timed out"):
        embedder.embed_documents(["slower"])


@pytest.mark.parametrize(("reply", "message"), [
    ("wrong-dim", rf"returned {DIM + 1}-dimensional vectors .* dim = {DIM}"),
    ("fewer", r"returned 1 vectors for 2 inputs"),
    ("nan", r"NaN"),
])
def test_a_response_that_cannot_be_used_fails_the_batch(server: FakeEmbeddings, reply: str, message: str) -> None:
    embedder = load_embedder(section(server))
    server.queue(Reply(reply))
    with pytest.raises(EmbeddingEndpointError, match=message):
        embedder.embed_documents(["first text", "second text"])


def test_usage_that_shows_a_truncation_fails_the_batch(tmp_path: Path, server: FakeEmbeddings) -> None:
    tokenizer = word_tokenizer_json(tmp_path / "tokenizer.json")
    embedder = load_embedder(section(server, tokenizer=str(tokenizer), max_input_tokens=64))
    assert embedder.count_tokens("three words here") == 3  # the named tokenizer counts, not bytes
    assert embedder.embed_documents(["a whole sentence of words"]).shape == (1, DIM)
    server.queue(Reply("truncated"))
    with pytest.raises(EmbeddingEndpointError, match="truncated"):
        embedder.embed_documents(["a whole sentence of words"])


def test_a_named_tokenizer_without_the_tokenizers_library_names_the_remote_extra(
        tmp_path: Path, server: FakeEmbeddings, monkeypatch: pytest.MonkeyPatch) -> None:
    tokenizer = word_tokenizer_json(tmp_path / "tokenizer.json")
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # what an install without the library sees
    with pytest.raises(MissingExtraError, match=r"needs the \[remote\] extra \(tokenizers is not importable\)") as caught:
        load_embedder(section(server, tokenizer=str(tokenizer)))
    assert caught.value.extra == "remote"


def test_a_query_past_the_input_limit_is_cut_to_its_head_before_it_is_sent(tmp_path: Path, server: FakeEmbeddings) -> None:
    tokenizer = word_tokenizer_json(tmp_path / "tokenizer.json")
    embedder = load_embedder(section(server, tokenizer=str(tokenizer), max_input_tokens=4))
    vector = embedder.embed_query("lighthouse keeper logs ships entering harbour")  # six words
    assert (server.requests[-1].body or {})["input"] == ["lighthouse keeper logs ships"]
    assert np.allclose(vector, server.vector("lighthouse keeper logs ships"), atol=1e-6)
    bytes_bound = load_embedder(section(server, max_input_tokens=10))
    bytes_bound.embed_query("lighthouse keeper")
    assert (server.requests[-1].body or {})["input"] == ["lighthouse"]


def test_without_a_tokenizer_utf8_bytes_bound_the_tokens_and_a_longer_text_is_refused(server: FakeEmbeddings) -> None:
    embedder = load_embedder(section(server, max_input_tokens=16))
    assert embedder.count_tokens("αβγ") == 6  # two bytes a letter: never fewer tokens than a model makes
    with pytest.raises(ValueError, match="exceed the model's 16-token input"):
        embedder.embed_documents(["seventeen bytes!!"])


def test_a_wrong_dim_stops_the_first_sync_with_the_remedy_and_writes_nothing(
        tmp_path: Path, server: FakeEmbeddings, capsys: pytest.CaptureFixture[str]) -> None:
    kb = make_kb(tmp_path / "kb", server)
    server.dim = DIM + 8  # the server now serves a model of another width
    code, _out, err = run(kb, capsys, "sync")
    assert code == 69 and f"returned {DIM + 8}-dimensional vectors" in err and f"dim = {DIM + 8}" in err
    assert "Traceback" not in err and not KBPaths(kb).index_db.exists()


def test_an_endpoint_down_at_sync_start_stops_it_before_anything_is_written(
        tmp_path: Path, server: FakeEmbeddings, capsys: pytest.CaptureFixture[str]) -> None:
    kb = make_kb(tmp_path / "kb", server)
    assert run(kb, capsys, "sync")[0] == 0
    (kb / "docs" / "new.md").write_text("# New\n\nA document added while the server is down.\n", encoding="utf-8")
    index = KBPaths(kb).index_db
    before = index.read_bytes()
    server.stop()
    code, _out, err = run(kb, capsys, "sync")
    assert code == 69 and "could not connect" in err and f"start the embedding server at {server.url}" in err
    assert "Traceback" not in err and index.read_bytes() == before


@pytest.mark.parametrize("flags", [("--executor", "ray"), ("--ray-address", "127.0.0.1:6379")])
def test_a_ray_executor_asked_for_on_the_command_line_is_refused_not_ignored(
        tmp_path: Path, server: FakeEmbeddings, capsys: pytest.CaptureFixture[str], flags: tuple[str, str]) -> None:
    kb = make_kb(tmp_path / "kb", server)
    asked_before = len(server.embedding_requests())  # init read the dimension from one request
    code, _out, err = run(kb, capsys, "sync", *flags)
    assert code == 2 and "--executor ray" in err and "already embeds on its server" in err
    assert "drop --executor ray" in err and "Traceback" not in err
    assert len(server.embedding_requests()) == asked_before and not KBPaths(kb).index_db.exists()


# --- identity --------------------------------------------------------------------------------------


def test_a_model_swapped_behind_the_same_name_is_a_model_change(
        tmp_path: Path, server: FakeEmbeddings, capsys: pytest.CaptureFixture[str]) -> None:
    kb = make_kb(tmp_path / "kb", server)
    assert run(kb, capsys, "sync")[0] == 0
    recorded = index_meta(kb)["embedding_sha256"]
    code, _out, _err = run(kb, capsys, "sync")  # the same model: the fingerprint holds, nothing rebuilt
    assert code == 0 and index_meta(kb)["embedding_sha256"] == recorded

    server.model_seed = 1  # other weights, same model name
    # A search answers from keywords, saying why (never exit 65, never the new model's neighbours).
    result = search_json(kb, capsys, "lighthouse ship")
    assert result["mode"] == "bm25" and result["passages"][0]["path"] == "docs/harbour.md"
    assert any(note.startswith("keyword results only (mode bm25, asked for hybrid)")
               and "the model behind the same name was swapped" in note and "`pnk sync` rebuilds" in note
               for note in result["notes"])

    code, out, err = run(kb, capsys, "sync", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["mode"] == "rebuild"
    assert any("model behind the same name was swapped" in note for note in report["notes"])
    assert index_meta(kb)["embedding_sha256"] not in (recorded, "")
    assert search_json(kb, capsys, "lighthouse ship")["passages"][0]["path"] == "docs/harbour.md"


# --- the endpoint down at search time --------------------------------------------------------------


def test_the_endpoint_down_at_search_time_gives_keyword_results_with_a_note_in_the_cli(
        tmp_path: Path, server: FakeEmbeddings, capsys: pytest.CaptureFixture[str]) -> None:
    kb = make_kb(tmp_path / "kb", server)
    assert run(kb, capsys, "sync")[0] == 0
    server.stop()
    result = search_json(kb, capsys, "lighthouse ship")
    assert result["mode"] == "bm25" and result["passages"][0]["path"] == "docs/harbour.md"
    assert any(note.startswith("keyword results only (mode bm25, asked for hybrid)") and "could not connect" in note
               for note in result["notes"])
    # It does not suggest switching back to the search that just failed.
    assert "combine both retrievers" not in json.dumps(result["suggested_next"])
    code, out, err = run(kb, capsys, "search", "lighthouse ship")
    assert code == 0 and "note: keyword results only" in out and "Traceback" not in out + err


def test_the_endpoint_down_gives_keyword_results_with_the_note_over_mcp(
        tmp_path: Path, server: FakeEmbeddings, capsys: pytest.CaptureFixture[str]) -> None:
    from pinakes.serve.config import load_kb
    from pinakes.serve.tools import PinakesTools

    kb = make_kb(tmp_path / "kb", server)
    assert run(kb, capsys, "sync")[0] == 0
    tools = PinakesTools([load_kb(kb)])
    try:
        live = call_tool(tools, "pinakes_search", {"query": "lighthouse ship"})
        assert live["mode"] == "hybrid"
        server.stop()  # down after the model was loaded: the query's own request fails
        down = call_tool(tools, "pinakes_search", {"query": "lighthouse ship"})
    finally:
        tools.close()
    assert down["mode"] == "bm25" and down["passages"] and "harbour" in json.dumps(down["passages"][0])
    assert any("keyword results only" in note for note in down["notes"])


# --- cost ----------------------------------------------------------------------------------------


def set_caps(kb: Path, **caps: str) -> None:
    manifest = kb / "pinakes.toml"
    text = manifest.read_text(encoding="utf-8")
    for key, value in caps.items():
        text, count = re.subn(rf"^{key} = .*$", f'{key} = "{value}"', text, count=1, flags=re.M)
        assert count == 1
    manifest.write_text(text, encoding="utf-8")


def test_a_priced_endpoint_is_in_the_budget_and_stops_at_the_cap(
        tmp_path: Path, server: FakeEmbeddings, capsys: pytest.CaptureFixture[str]) -> None:
    # $1000 per million tokens: a request of a few dozen tokens reserves a few cents.
    kb = make_kb(tmp_path / "kb", server, 'input_usd_per_mtok = "1000"')
    after_init = len(server.requests)  # init asked the endpoint for the dimension before any price was set
    code, _out, err = run(kb, capsys, "sync")
    assert code == 0, err
    code, out, _err = run(kb, capsys, "budget", "--json")
    report = json.loads(out)
    embeds = [op for op in report["by_operation"] if op["operation"] == "embed"]
    assert embeds and Decimal(embeds[0]["eur"]) > 0 and not report["unknown_outcomes"]
    ledger = [json.loads(line) for line in KBPaths(kb).ledger.read_text(encoding="utf-8").splitlines()]
    reconciled = [r for r in ledger if r["kind"] == "reconciliation"]
    # Every request of the sync reconciled at the usage the endpoint reported (the probe's included).
    assert len(reconciled) == len(server.requests) - after_init and all(r["model"] == MODEL for r in reconciled)

    spent = sum(Decimal(op["eur"]) for op in report["by_operation"])
    # Room for the next probe (~200 bytes bound its tokens: at most €0.21), not for the new document (~€0.8).
    set_caps(kb, daily_eur=str(spent + Decimal("0.30")))
    (kb / "docs" / "more.md").write_text("# More\n\n" + "words of a longer document " * 30 + "\n", encoding="utf-8")
    requests = len(server.requests)
    code, _out, err = run(kb, capsys, "sync")
    assert code != 0 and "the call was not made" in err and "daily_eur" in err and "Traceback" not in err
    assert len(server.requests) == requests + 1  # the probe fitted; the document's request was never sent


def test_a_price_without_a_budget_to_spend_it_through_is_refused(server: FakeEmbeddings) -> None:
    with pytest.raises(ManifestError, match="no budget to spend it through"):
        load_embedder(section(server, input_usd_per_mtok=Decimal("0.02")))


# --- the key ---------------------------------------------------------------------------------------


def test_the_key_reaches_the_endpoint_and_nothing_else(
        tmp_path: Path, server: FakeEmbeddings, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("DEBUG")
    monkeypatch.setenv("PNK_TEST_EMBED_KEY", CANARY)
    kb = make_kb(tmp_path / "kb", server, 'api_key_env = "PNK_TEST_EMBED_KEY"')
    after_init = len(server.requests)  # init was run without --api-key-env
    outputs = [run(kb, capsys, "sync"), run(kb, capsys, "search", "lighthouse", "--json")]
    assert all(code == 0 for code, _, _ in outputs)
    keyed = server.requests[after_init:]
    assert keyed and all(r.headers.get("authorization") == f"Bearer {CANARY}" for r in keyed)
    leaks = [p for p in tmp_path.rglob("*") if p.is_file() and CANARY.encode() in p.read_bytes()]
    assert leaks == []
    assert CANARY not in "".join(out + err for _, out, err in outputs) + caplog.text

    monkeypatch.delenv("PNK_TEST_EMBED_KEY")
    code, _out, err = run(kb, capsys, "sync")
    assert code == 69 and "PNK_TEST_EMBED_KEY, which is not set" in err


# --- the manifest ----------------------------------------------------------------------------------


MANIFEST = """
[kb]
name = "remote"
id = "01J9ZX7K3M4N5P6Q7R8S9T0VWX"
[sources]
roots = ["docs"]
[embedding]
{embedding}
"""


def problems(embedding: str) -> str:
    from pinakes.errors import ManifestError as Error

    with pytest.raises(Error) as caught:
        parse_manifest(MANIFEST.format(embedding=embedding), path=Path("pinakes.toml"))
    return caught.value.render() + "\n".join(caught.value.details)


def test_the_manifest_refuses_remote_keys_without_the_remote_provider_and_a_key_in_place_of_its_name() -> None:
    local = 'provider = "fastembed"\nmodel = "m"\ndim = 8\nbase_url = "http://127.0.0.1:1/v1"'
    assert 'only applies to provider = "openai-compatible"' in problems(local)
    key = 'provider = "openai-compatible"\nmodel = "m"\ndim = 8\nbase_url = "http://x/v1"\napi_key_env = "sk-abc123-xyz"'
    assert "is not an environment variable's name" in problems(key)
    assert "base_url" in problems('provider = "openai-compatible"\nmodel = "m"\ndim = 8')

    loaded = parse_manifest(MANIFEST.format(embedding='provider = "openai-compatible"\nmodel = "m"\ndim = 8\n'
                                                      'base_url = "http://127.0.0.1:11434/v1"'),
                            path=Path("pinakes.toml"))
    assert loaded.embedding.remote == RemoteEmbedding(base_url="http://127.0.0.1:11434/v1")
    assert loaded.rerank.provider == "fastembed"  # the reranker still runs in process
    assert replace(loaded.embedding, provider="fastembed").remote is None


# --- doctor ----------------------------------------------------------------------------------------


def test_doctor_reports_the_remote_model_without_calling_the_endpoint(
        tmp_path: Path, server: FakeEmbeddings, capsys: pytest.CaptureFixture[str]) -> None:
    kb = make_kb(tmp_path / "kb", server, "max_input_tokens = 100")
    assert run(kb, capsys, "sync")[0] != 0  # [chunking] max_tokens = 250 does not fit 100: sync refuses
    requests = len(server.requests)
    _code, out, _err = run(kb, capsys, "doctor", "--json")
    model = {check["name"]: check for check in json.loads(out)["checks"] if check["name"].startswith("model.")}
    assert model["model.provider"]["status"] == "OK" and "[remote] extra" in model["model.provider"]["detail"]
    assert model["model.weights"]["status"] == "OK" and server.url in model["model.weights"]["detail"]
    assert model["model.tokens"]["status"] == "FAIL" and "max_tokens to 100 or less" in model["model.tokens"]["remedy"]
    assert len(server.requests) == requests  # doctor spends nothing and needs no network


def test_a_batch_that_fails_mid_sync_stops_it_clearly_and_the_next_sync_completes(
        tmp_path: Path, server: FakeEmbeddings, capsys: pytest.CaptureFixture[str]) -> None:
    kb = make_kb(tmp_path / "kb", server)
    server.queue(Reply(), Reply("nan"))  # the probe answers; the documents' batch holds a NaN
    code, out, err = run(kb, capsys, "sync")
    assert code != 0 and "NaN" in out + err and "check its logs and the model it serves" in out + err
    assert "Traceback" not in out + err
    code, _out, err = run(kb, capsys, "sync")
    assert code == 0, err
    assert search_json(kb, capsys, "lighthouse ship")["passages"][0]["path"] == "docs/harbour.md"


def test_init_refuses_remote_flags_without_the_remote_provider_and_a_remote_provider_without_its_model(
        tmp_path: Path, server: FakeEmbeddings, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", str(tmp_path / "a"), "--base-url", server.url]) == 2
    assert "--base-url only applies with --embedding openai-compatible" in capsys.readouterr().err
    assert main(["init", str(tmp_path / "b"), "--embedding", "openai-compatible", "--base-url", server.url]) == 2
    assert "needs --base-url and --model" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    assert server.requests == []
