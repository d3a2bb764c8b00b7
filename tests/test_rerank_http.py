"""The reranker behind an HTTP endpoint (search/rerank_remote.py) against a real HTTP server in the test
process (tests/fake_rerank_server.py), in both dialects: a KB searched through it (CLI, --json, MCP)
with the endpoint's order applied; the faults an endpoint can make (down, 5xx, 429 with Retry-After,
a body dripped past the deadline, answers that are not one score per text, a huge body), each of
which leaves results in fused order and a note, never a traceback; a priced endpoint in the budget
and stopped at its cap; the identity its first probe records, kept through float noise and lost to
another model; the key; the manifest's keys; doctor; and the confidence feature it adds."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any, cast

import pytest

from pinakes.cli import main
from pinakes.errors import ManifestError, RerankEndpointError
from pinakes.kb import KBPaths
from pinakes.manifest import parse_manifest
from pinakes.manifest.sections import RerankSection
from pinakes.search import rerank_remote
from pinakes.search.rerank import load_reranker
from tests.fake_rerank_server import FakeReranker, Reply
from tests.fakes import HashEmbedder, substitute_embedder
from tests.kb_helpers import Doc, build_kb

APIS = ("tei", "cohere")
MODEL = "fake/reranker"
CANARY = "rk-CANARY-77a1c0-rerank-never-print-me"
DOCS = [
    Doc("docs/harbour.md", "# Harbour\n\nThe lighthouse keeper logs every ship entering the harbour at night.\n"),
    Doc("docs/signals.md", "# Signals\n\nA ship entering the harbour at night shows a green light to starboard.\n"),
    Doc("docs/garden.md", "# Garden\n\nTomatoes need full sun; the keeper of the garden waters them at night.\n"),
    Doc("docs/kafka.md", "# Kafka\n\nConsumer groups rebalance when a partition leader moves to another broker.\n"),
]
QUERY = "ship entering the harbour at night"
MANIFEST = """\
[kb]
name = "rerank-http"
id = "01J9Z8Y7X6W5V4T3S2R1Q0P9N8"

[sources]
roots = ["docs"]

[embedding]
provider = "sentence-transformers"
model = "test/hash-bow"
dim = 64

[retrieval]
rerank = true

[rerank]
provider = "http"
model = "{model}"
base_url = "{url}"
api = "{api}"
timeout_s = {timeout}
{extra}
"""


@pytest.fixture
def server() -> Iterator[FakeReranker]:
    with FakeReranker() as fake:
        yield fake


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    """Backoffs and cool-downs of hundredths of a second: the retries are real, their waits are not the test."""
    monkeypatch.setattr(rerank_remote, "FIRST_BACKOFF_S", 0.01)
    monkeypatch.setattr(rerank_remote, "MAX_BACKOFF_S", 0.02)
    monkeypatch.setattr(rerank_remote, "COOLDOWN_S", 0.0)


@pytest.fixture
def embedder(monkeypatch: pytest.MonkeyPatch) -> HashEmbedder:
    """The manifest's embedding model, swapped for the deterministic test embedder."""
    fake = HashEmbedder()
    substitute_embedder(monkeypatch, lambda section, offline=None, threads=None: fake)
    return fake


def make_kb(root: Path, server: FakeReranker, embedder: HashEmbedder, api: str, *extra: str,
            timeout: int = 5) -> Path:
    text = MANIFEST.format(model=MODEL, url=server.url(api), api=api, timeout=timeout, extra="\n".join(extra))
    build_kb(root, DOCS, embedder, manifest=text)
    return root


def run(kb: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["-C", str(kb), *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def search_json(kb: Path, capsys: pytest.CaptureFixture[str], query: str = QUERY) -> dict[str, Any]:
    code, out, err = run(kb, capsys, "search", query, "--json")
    assert code == 0, err
    assert "Traceback" not in out + err
    return json.loads(out)


def not_reranked(result: dict[str, Any], *words: str) -> str:
    """The search answered in fused order with the note saying why; the note."""
    assert result["reranked"] is False and result["passages"]
    assert all(passage["scores"]["rerank"] is None for passage in result["passages"])
    notes = [note for note in result["notes"] if note.startswith("not reranked, passages are in fused order")]
    assert len(notes) == 1, result["notes"]
    for word in words:
        assert word in notes[0], notes[0]
    return notes[0]


def section(server: FakeReranker, api: str, **keys: Any) -> RerankSection:
    keys.setdefault("batch_size", 32)
    return RerankSection(provider="http", model=MODEL, base_url=server.url(api), api=api, **keys)


# --- a KB searched through the endpoint ------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_a_search_is_reranked_in_the_order_the_endpoint_scores(
        tmp_path: Path, server: FakeReranker, embedder: HashEmbedder, capsys: pytest.CaptureFixture[str],
        api: str) -> None:
    kb = make_kb(tmp_path / "kb", server, embedder, api)
    fused = search_json(kb, capsys, QUERY)  # first, the endpoint's own preference
    server.preferred = "garden"  # the endpoint now scores the garden passage above everything
    result = search_json(kb, capsys, QUERY)

    assert result["reranked"] is True and not any(note.startswith("not reranked") for note in result["notes"])
    assert fused["passages"][0]["path"] != "docs/garden.md"
    assert result["passages"][0]["path"] == "docs/garden.md"
    scores = [passage["scores"]["rerank"] for passage in result["passages"]]
    assert scores == sorted(scores, reverse=True) and scores[0] > 0.99
    expected = server.score(QUERY, result["passages"][0]["text"])
    assert scores[0] == pytest.approx(expected, abs=1e-6)  # the endpoint's score, not a transform of it

    posted = [r for r in server.rerank_requests() if r.body and r.body["query"] == QUERY]
    body = posted[-1].body or {}
    if api == "tei":
        assert posted[-1].path == "/rerank"
        assert set(body) == {"query", "texts", "truncate", "raw_scores", "return_text"} and body["raw_scores"] is False
    else:
        assert posted[-1].path == "/v1/rerank"
        assert set(body) == {"model", "query", "documents", "top_n"} and body["model"] == MODEL
        assert body["top_n"] == len(body["documents"])
    texts: list[Any] = body.get("texts") or body.get("documents") or []
    assert len(texts) == len(result["passages"])  # every fused passage scored (final_k >= the pool here)
    # The identity probe went first, once for the whole process, and was recorded.
    probes = [r for r in server.rerank_requests() if r.body and r.body["query"] == rerank_remote.PROBE_QUERY]
    assert len(probes) == 2  # one per CLI process (each `main` is a new searcher)
    record = json.loads((KBPaths(kb).state_dir / rerank_remote.IDENTITY_FILE).read_text(encoding="utf-8"))
    assert record["model"] == MODEL and len(record["probe"]) == len(rerank_remote.PROBE_TEXTS)
    assert not KBPaths(kb).ledger.exists()  # unpriced: the budget is never opened


def test_texts_beyond_batch_size_go_in_concurrent_requests_and_come_back_in_order(server: FakeReranker) -> None:
    reranker = load_reranker(section(server, "cohere", concurrency=3, batch_size=2))
    texts = [f"text {n} about the harbour" if n % 2 else f"text {n} about tomatoes" for n in range(7)]
    server.preferred = "tomatoes"
    scores = reranker.score("harbour tomatoes", texts)
    assert scores == pytest.approx([server.score("harbour tomatoes", text) for text in texts], abs=1e-9)
    batches = [len((r.body or {})["documents"]) for r in server.rerank_requests()
               if (r.body or {}).get("query") == "harbour tomatoes"]
    assert sorted(batches) == [1, 2, 2, 2]


def test_the_mcp_search_carries_the_note_when_the_endpoint_goes_down(
        tmp_path: Path, server: FakeReranker, embedder: HashEmbedder) -> None:
    from pinakes.serve.config import load_kb
    from pinakes.serve.tools import PinakesTools

    kb = make_kb(tmp_path / "kb", server, embedder, "tei")
    tools = PinakesTools([load_kb(kb)])
    try:
        live = tools.call("pinakes_search", {"query": QUERY})
        server.stop()
        down = tools.call("pinakes_search", {"query": QUERY})
    finally:
        tools.close()
    assert live["reranked"] is True
    assert down["reranked"] is False and down["passages"]
    notes = down["notes"]
    assert isinstance(notes, list)
    notes = cast("list[object]", notes)
    assert any(str(note).startswith("not reranked, passages are in fused order") and "could not be reached" in str(note)
               for note in notes)


# --- faults: results without rerank, and a note ------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_an_endpoint_that_is_down_gives_fused_results_and_a_note_in_json_and_text(
        tmp_path: Path, server: FakeReranker, embedder: HashEmbedder, capsys: pytest.CaptureFixture[str],
        api: str) -> None:
    kb = make_kb(tmp_path / "kb", server, embedder, api, timeout=30)
    server.stop()
    started = time.monotonic()
    note = not_reranked(search_json(kb, capsys), "could not be reached", f"start the reranker at {server.url(api)}")
    # Answered at once, not at the deadline: no request reaches a server to time from, so the deadline
    # is far enough that the whole search around it fits under any load.
    assert time.monotonic() - started < 10.0
    assert "rerank = false" in note
    code, out, err = run(kb, capsys, "search", QUERY)
    assert code == 0 and "note: not reranked, passages are in fused order" in out and "Traceback" not in out + err


@pytest.mark.parametrize("api", APIS)
def test_a_5xx_is_sent_again_and_the_search_is_reranked(
        tmp_path: Path, server: FakeReranker, embedder: HashEmbedder, capsys: pytest.CaptureFixture[str],
        api: str) -> None:
    kb = make_kb(tmp_path / "kb", server, embedder, api)
    server.queue(Reply(), Reply("status", 503))  # the probe answers; the search's first request is refused
    result = search_json(kb, capsys)
    assert result["reranked"] is True
    assert len(server.rerank_requests()) == 3  # probe, 503, the retry


def test_a_persistent_5xx_stops_after_the_bounded_attempts(
        tmp_path: Path, server: FakeReranker, embedder: HashEmbedder, capsys: pytest.CaptureFixture[str]) -> None:
    kb = make_kb(tmp_path / "kb", server, embedder, "cohere")
    server.queue(Reply(), *[Reply("status", 500)] * rerank_remote.MAX_ATTEMPTS)
    not_reranked(search_json(kb, capsys), "HTTP 500", f"({rerank_remote.MAX_ATTEMPTS} attempts)", "logs")
    assert len(server.rerank_requests()) == 1 + rerank_remote.MAX_ATTEMPTS


@pytest.mark.parametrize("api", APIS)
def test_a_429_is_sent_again_after_its_retry_after(
        tmp_path: Path, server: FakeReranker, embedder: HashEmbedder, capsys: pytest.CaptureFixture[str],
        api: str) -> None:
    kb = make_kb(tmp_path / "kb", server, embedder, api)
    server.queue(Reply(), Reply("status", 429, headers={"retry-after": "0.4"}))
    assert search_json(kb, capsys)["reranked"] is True
    _probe, refused, retried = server.rerank_requests()
    assert retried.at - refused.at >= 0.4  # its own Retry-After, not the test's 0.01 s backoff


def test_a_retry_after_past_the_deadline_is_not_waited_for(
        tmp_path: Path, server: FakeReranker, embedder: HashEmbedder, capsys: pytest.CaptureFixture[str]) -> None:
    kb = make_kb(tmp_path / "kb", server, embedder, "tei", timeout=10)
    server.queue(Reply(), Reply("status", 429, headers={"retry-after": "30"}))
    started = time.monotonic()
    not_reranked(search_json(kb, capsys), "HTTP 429", "asking to wait 30 s", "timeout_s = 10 s")
    answered = time.monotonic()
    _probe, refused = server.rerank_requests()  # the probe and the refused request; no retry
    # Given up at the refusal, not at the deadline 10 s on (timed from the refusal's arrival: how long a
    # loaded machine takes to search before it is not what is tested), and the whole search within it.
    assert answered - refused.at < 5.0 and answered - started < 10.0, (answered - refused.at, answered - started)


@pytest.mark.parametrize("api", APIS)
def test_an_answer_dripped_past_the_deadline_is_abandoned_at_the_deadline(
        tmp_path: Path, server: FakeReranker, embedder: HashEmbedder, capsys: pytest.CaptureFixture[str],
        api: str) -> None:
    """Four bytes every 0.2 s: each read gets data well within any per-read timeout, and the whole
    answer would take far longer than timeout_s."""
    kb = make_kb(tmp_path / "kb", server, embedder, api, timeout=1)
    server.queue(Reply(), Reply("drip", delay_s=0.2))
    started = time.monotonic()
    not_reranked(search_json(kb, capsys), "no complete answer within timeout_s = 1 s", "raise [rerank] timeout_s")
    answered = time.monotonic()
    dripped = server.rerank_requests()[1]
    # Not before the deadline; at it, not at the drip's end: timed from the dripped request's arrival
    # (how long a loaded machine takes to search before it is not the deadline's).
    assert answered - started > 0.9 and answered - dripped.at < 2.5, (answered - started, answered - dripped.at)


def test_a_slow_answer_is_abandoned_at_the_deadline(
        tmp_path: Path, server: FakeReranker, embedder: HashEmbedder, capsys: pytest.CaptureFixture[str]) -> None:
    kb = make_kb(tmp_path / "kb", server, embedder, "cohere", timeout=1)
    server.queue(Reply(), Reply("delay", delay_s=3.0))
    not_reranked(search_json(kb, capsys), "no complete answer within timeout_s = 1 s")
    # Timed from the slow request's arrival: the search before it takes what the machine's load makes it.
    assert time.monotonic() - server.rerank_requests()[1].at < 2.5


def test_the_first_searchs_identity_probe_and_its_rerank_share_one_deadline(
        tmp_path: Path, server: FakeReranker, embedder: HashEmbedder, capsys: pytest.CaptureFixture[str]) -> None:
    kb = make_kb(tmp_path / "kb", server, embedder, "tei", timeout=1)
    server.queue(Reply("delay", delay_s=0.7), Reply("delay", delay_s=0.7))  # each alone within timeout_s
    not_reranked(search_json(kb, capsys), "no complete answer within timeout_s = 1 s")
    # Timed from the probe's arrival (the deadline began before it): the search before the probe takes
    # what the machine's load makes it.
    assert time.monotonic() - server.rerank_requests()[0].at < 1.6


def test_a_connection_cut_without_an_answer_is_sent_again(
        tmp_path: Path, server: FakeReranker, embedder: HashEmbedder, capsys: pytest.CaptureFixture[str]) -> None:
    kb = make_kb(tmp_path / "kb", server, embedder, "tei")
    server.queue(Reply(), Reply("drop"))
    assert search_json(kb, capsys)["reranked"] is True
    assert len(server.rerank_requests()) == 3


@pytest.mark.parametrize(("reply", "words"), [
    ("garbage", "its answer is not JSON"),
    ("fewer", "it scored"),
    ("nan", "is not a finite number"),
    ("bad-index", "index is not one of"),
])
@pytest.mark.parametrize("api", APIS)
def test_an_answer_that_is_not_one_score_per_text_is_refused_whole(
        tmp_path: Path, server: FakeReranker, embedder: HashEmbedder, capsys: pytest.CaptureFixture[str],
        api: str, reply: str, words: str) -> None:
    kb = make_kb(tmp_path / "kb", server, embedder, api)
    server.queue(Reply(), Reply(reply))
    note = not_reranked(search_json(kb, capsys), words)
    assert f'api = "{api}"' in note  # the remedy: is the dialect the server's?


@pytest.mark.parametrize("kind", ["huge", "huge-unsized"])
def test_a_huge_answer_is_refused_at_the_cap_without_reading_it(
        tmp_path: Path, server: FakeReranker, embedder: HashEmbedder, capsys: pytest.CaptureFixture[str],
        kind: str) -> None:
    import resource

    kb = make_kb(tmp_path / "kb", server, embedder, "tei")
    server.queue(Reply(), Reply(kind, size=200 * 1024 * 1024))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    not_reranked(search_json(kb, capsys), "cap")
    assert time.monotonic() - server.rerank_requests()[1].at < 3.0  # from the huge answer's request
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before  # Linux: KiB
    assert grown_kib < 50 * 1024, grown_kib


class _ClockAhead:
    """`time` as rerank_remote reads it: the real clock, `ahead` seconds later. Its deadlines, handed
    to the HTTP layer's real clock, only grow by as much."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.ahead

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def test_a_failed_endpoint_is_not_asked_again_during_the_cooldown_then_is(
        server: FakeReranker, monkeypatch: pytest.MonkeyPatch) -> None:
    """A long-running searcher (MCP): after a failure the next searches answer at once without
    rerank; after the cool-down the identity is probed again before the endpoint is trusted. The
    cool-down is its own 30 s, passed by moving the module's clock: a short one patched in could end
    on a loaded machine before the next search, which must still find it."""
    clock = _ClockAhead()
    monkeypatch.setattr(rerank_remote, "time", clock)
    monkeypatch.setattr(rerank_remote, "COOLDOWN_S", 30.0)
    reranker = load_reranker(section(server, "tei"))
    assert len(reranker.score("harbour", ["a harbour", "a garden"])) == 2
    server.queue(*[Reply("status", 503)] * rerank_remote.MAX_ATTEMPTS)
    with pytest.raises(RerankEndpointError, match="HTTP 503"):
        reranker.score("harbour", ["a harbour"])
    asked = len(server.requests)
    with pytest.raises(RerankEndpointError, match=r"not asked again for \d+ s"):
        reranker.score("harbour", ["a harbour"])
    assert len(server.requests) == asked
    clock.ahead = 31.0
    assert len(reranker.score("harbour", ["a harbour"])) == 1
    queries = [(r.body or {}).get("query") for r in server.requests[asked:]]
    assert queries == [rerank_remote.PROBE_QUERY, "harbour"]


# --- identity ----------------------------------------------------------------------------------------


def test_float_noise_keeps_the_identity_and_another_model_loses_it(
        tmp_path: Path, server: FakeReranker, embedder: HashEmbedder, capsys: pytest.CaptureFixture[str]) -> None:
    kb = make_kb(tmp_path / "kb", server, embedder, "cohere")
    assert search_json(kb, capsys)["reranked"] is True  # the first search records the identity
    record = KBPaths(kb).state_dir / rerank_remote.IDENTITY_FILE
    recorded = record.read_bytes()

    server.noise = 2e-3  # a server's float noise, well above what fp16 kernels move a score by
    for _ in range(4):
        assert search_json(kb, capsys)["reranked"] is True
    assert record.read_bytes() == recorded  # kept, not rewritten

    server.noise, server.model_seed = 0.0, 1  # another model under the same name
    note = not_reranked(search_json(kb, capsys), "scores the identity probe differently",
                        "another model answers under the name", rerank_remote.IDENTITY_FILE,
                        "pnk eval --fit-confidence --write")
    assert "when this KB first used it" in note
    probes = [r for r in server.rerank_requests() if (r.body or {}).get("query") == QUERY]
    assert len(probes) == 5  # the changed model's search request was never sent

    record.unlink()  # the change accepted: the next search records the model that now answers
    assert search_json(kb, capsys)["reranked"] is True
    assert record.read_bytes() != recorded


def test_a_model_swapped_under_a_long_running_searcher_is_caught_at_its_recheck(
        server: FakeReranker, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a KB to record in (a read-only one keeps no record), the process's own first probe is
    the identity; the recheck after RECHECK_S compares against it."""
    monkeypatch.setattr(rerank_remote, "RECHECK_S", 0.0)
    reranker = load_reranker(section(server, "tei"))
    reranker.score("harbour", ["a harbour"])
    server.model_seed = 1
    with pytest.raises(rerank_remote.RerankerChangedError, match="earlier in this process"):
        reranker.score("harbour", ["a harbour"])


# --- cost -----------------------------------------------------------------------------------------


def set_caps(kb: Path, **caps: str) -> None:
    manifest = kb / "pinakes.toml"
    text = manifest.read_text(encoding="utf-8")
    text += "\n[budget]\n" + "".join(f'{key} = "{value}"\n' for key, value in caps.items())
    manifest.write_text(text, encoding="utf-8")


def ledger(kb: Path) -> list[dict[str, Any]]:
    path = KBPaths(kb).ledger
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


@pytest.mark.parametrize(("price", "billing", "model"), [
    ('input_usd_per_mtok = "1000"', "tokens", MODEL),
    ('usd_per_1k_search_units = "200"', "search_units", f"{MODEL} [search units]"),
])
def test_a_priced_endpoint_spends_through_the_budget_and_stops_at_the_cap(
        tmp_path: Path, server: FakeReranker, embedder: HashEmbedder, capsys: pytest.CaptureFixture[str],
        price: str, billing: str, model: str) -> None:
    server.billing = billing
    kb = make_kb(tmp_path / "kb", server, embedder, "cohere", price)
    assert search_json(kb, capsys)["reranked"] is True
    records = ledger(kb)
    assert {r["operation"] for r in records} == {"rerank"} and {r["model"] for r in records} == {model}
    reservations = [r for r in records if r["kind"] == "reservation"]
    reconciled = [r for r in records if r["kind"] == "reconciliation"]
    assert len(reservations) == len(reconciled) == len(server.rerank_requests()) == 2  # the probe, the search
    if billing == "search_units":
        assert all(r["input_tokens"] == 1 for r in reconciled)  # the units the answer reported
    else:  # the tokens the answer reported, within what was reserved
        assert all(0 < c["input_tokens"] <= r["input_tokens"] for c, r in zip(reconciled, reservations, strict=True))
    code, out, _err = run(kb, capsys, "budget", "--json")
    spent = sum(Decimal(op["eur"]) for op in json.loads(out)["by_operation"] if op["operation"] == "rerank")
    assert code == 0 and spent > 0

    set_caps(kb, daily_eur=str(spent + Decimal("0.0001")), confirm_above_eur="0.0001",
             per_operation_eur="2.00")
    sent = len(server.rerank_requests())
    note = not_reranked(search_json(kb, capsys), "the budget admits no rerank request now", "daily_eur")
    assert "Traceback" not in note
    assert len(server.rerank_requests()) == sent  # refused before anything was sent


def test_a_price_without_a_budget_to_spend_it_through_is_refused(server: FakeReranker) -> None:
    with pytest.raises(ManifestError, match="no budget to spend it through"):
        load_reranker(section(server, "tei", input_usd_per_mtok=Decimal("0.02")))


# --- the key -----------------------------------------------------------------------------------------


def test_the_key_reaches_the_endpoint_and_nothing_else(
        tmp_path: Path, server: FakeReranker, embedder: HashEmbedder, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("DEBUG")
    monkeypatch.setenv("PNK_TEST_RERANK_KEY", CANARY)
    kb = make_kb(tmp_path / "kb", server, embedder, "cohere", 'api_key_env = "PNK_TEST_RERANK_KEY"')
    outputs = [run(kb, capsys, "search", QUERY, "--json"), run(kb, capsys, "search", QUERY),
               run(kb, capsys, "doctor", "--json")]
    server.queue(Reply("status", 401))  # a refusal's note and remedy do not carry it either
    outputs.append(run(kb, capsys, "search", QUERY, "--json"))
    assert all(r.headers.get("authorization") == f"Bearer {CANARY}" for r in server.requests)
    leaks = [p for p in tmp_path.rglob("*") if p.is_file() and CANARY.encode() in p.read_bytes()]
    assert leaks == []
    assert CANARY not in "".join(out + err for _, out, err in outputs) + caplog.text
    assert "PNK_TEST_RERANK_KEY" in json.loads(outputs[-1][1])["notes"][-1]  # the remedy names the variable

    monkeypatch.delenv("PNK_TEST_RERANK_KEY")
    not_reranked(search_json(kb, capsys), "PNK_TEST_RERANK_KEY, which is not set")


# --- the manifest --------------------------------------------------------------------------------------


BASE = """
[kb]
name = "m"
id = "01J9ZX7K3M4N5P6Q7R8S9T0VWX"
[sources]
roots = ["docs"]
[embedding]
provider = "fastembed"
model = "m"
dim = 8
[rerank]
{rerank}
"""


def problems(rerank: str) -> str:
    with pytest.raises(ManifestError) as caught:
        parse_manifest(BASE.format(rerank=rerank), path=Path("pinakes.toml"))
    return caught.value.render() + "\n".join(caught.value.details)


def test_the_manifest_reads_the_http_keys_and_refuses_what_cannot_work() -> None:
    loaded = parse_manifest(BASE.format(rerank='provider = "http"\nmodel = "BAAI/bge-reranker-v2-m3"\n'
                                               'base_url = "http://127.0.0.1:8080"\napi = "tei"'),
                            path=Path("pinakes.toml"))
    http = loaded.rerank.http
    assert http is not None and http.api == "tei" and http.timeout_s == 10.0 and http.input_usd_per_mtok is None
    assert loaded.rerank.batch_size == 32  # one request per search at the default fusion_top_k

    assert 'only applies to provider = "http"' in problems('provider = "fastembed"\nbase_url = "http://x"')
    assert "api" in problems('provider = "http"\nbase_url = "http://127.0.0.1:8080"')
    assert "base_url" in problems('provider = "http"\napi = "tei"')
    assert "not an http:// or https:// URL" in problems('provider = "http"\nbase_url = "127.0.0.1:8080"\napi = "tei"')
    assert "tei" in problems('provider = "http"\nbase_url = "http://x"\napi = "openai"')
    assert "is not an environment variable's name" in problems(
        'provider = "http"\nbase_url = "http://x"\napi = "tei"\napi_key_env = "sk-abc-123"')
    assert "a vendor bills one way" in problems(
        'provider = "http"\nbase_url = "http://x"\napi = "cohere"\ninput_usd_per_mtok = "0.02"\n'
        'usd_per_1k_search_units = "2"')
    assert "revision" in problems('provider = "http"\nbase_url = "http://x"\napi = "tei"\nrevision = "abc"')


# --- doctor ------------------------------------------------------------------------------------------


def doctor_rerank(kb: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    _code, out, _err = run(kb, capsys, "doctor", "--json")
    return next(check for check in json.loads(out)["checks"] if check["name"] == "model.rerank")


def test_doctor_checks_the_endpoint_without_sending_it_a_request(
        tmp_path: Path, server: FakeReranker, embedder: HashEmbedder, capsys: pytest.CaptureFixture[str]) -> None:
    kb = make_kb(tmp_path / "kb", server, embedder, "tei", 'input_usd_per_mtok = "0.05"')
    line = doctor_rerank(kb, capsys)
    assert line["status"] == "OK" and server.url("tei") in line["detail"]
    assert "$0.05 per million input tokens" in line["detail"] and "first search records" in line["detail"]
    assert server.requests == []  # a TCP connection, never a request: nothing spent

    search_json(kb, capsys)
    assert "recorded on" in doctor_rerank(kb, capsys)["detail"]
    server.stop()
    line = doctor_rerank(kb, capsys)
    assert line["status"] == "WARN" and "nothing answers" in line["detail"] and "rerank = false" in line["remedy"]


# --- the confidence feature ------------------------------------------------------------------------------


def test_a_reranked_search_carries_the_rerank_feature_and_a_fit_may_choose_it(
        tmp_path: Path, server: FakeReranker, embedder: HashEmbedder) -> None:
    from pinakes.eval.fitting import RERANK_FEATURE_SETS, fit_confidence
    from pinakes.eval.outcomes import Outcome
    from pinakes.manifest import load_manifest
    from pinakes.search.core import Searcher

    kb = make_kb(tmp_path / "kb", server, embedder, "tei")
    with Searcher.for_kb(kb, load_manifest(kb / "pinakes.toml")) as searcher:
        reranked = searcher.search(QUERY)
        plain = searcher.search(QUERY, rerank=False)
    assert reranked.confidence.features is not None and plain.confidence.features is not None
    assert reranked.confidence.features["rerank"] == reranked.passages[0].scores.rerank
    assert "rerank" not in plain.confidence.features

    def rows(with_rerank: bool) -> list[Outcome]:
        made: list[Outcome] = []
        for n in range(24):
            answerable = n % 2 == 0
            features = {"cosine": 0.5, "cosine_margin": 0.1, "cosine_spread": 0.2, "keyword_share": 0.5,
                        "bm25_ratio": 0.3, "agreement": 0.5, "csls": 0.1, "crowding": 0.4, "related_share": 0.5}
            if with_rerank:  # the reader separates the classes, where similarity cannot
                features["rerank"] = (0.8 if answerable else 0.1) + 0.01 * (n % 5)
            made.append(Outcome(id=f"q{n}", kind="lookup" if answerable else "no-answer",
                                hit=True if answerable else None, hit_rank=1 if answerable else None,
                                confidence="unknown", features=features))
        return made

    fit = fit_confidence(rows(True), "test + fake/reranker")
    assert fit.model is not None and "rerank" in fit.model.features
    assert fit.false_abstain.value == 0.0 and fit.false_confidence.value == 0.0
    fit = fit_confidence(rows(False), "test")  # no row carries it: the rerank sets are no candidates
    assert fit.model is not None and "rerank" not in fit.model.features
    assert any("rerank" in choice for choice in RERANK_FEATURE_SETS)


def test_a_fit_that_needs_the_rerank_feature_is_unknown_when_the_reranker_did_not_run() -> None:
    from pinakes.manifest.sections import ConfidenceSection
    from pinakes.search.confidence import UNKNOWN, assess

    block = ConfidenceSection(high=0.8, low=0.4, fitted_for="test/hash-bow + fake/reranker (evidence model, reranked)",
                              signal="model", features=("rerank", "keyword_share"), weights=(4.0, 1.0), bias=-2.0)
    confidence = assess(passage_count=3, rerank_top=None, best_cosine=0.5, thresholds=block, reranker_model=None,
                        embedding_model="test/hash-bow", features={"cosine": 0.5, "keyword_share": 0.4})
    assert confidence.level == UNKNOWN and re.search(r"needs rerank, which this search lacks", confidence.reason)
