"""Money is never spent twice (issue #24, items 1, 2, 9 and 14), end to end: `pnk sync
--extract=claude-vision` over scanned PDFs with the real `anthropic` client against the local Messages
API (tests/fake_anthropic.py), the real accountant and ledger, and real faults made while a request
is in flight (`chattr +i` on the extraction cache or the ledger: an immutable inode refuses writes
even to root).

- A paid result is never discarded once paid for: when the extraction cache cannot keep it, the run
  stops before its next paid call, the document paid for is indexed from the text in hand, and the
  next run pays only for what was never paid for.
- A reconciliation the ledger cannot take says the call WAS made, names its call id and
  `pnk budget --resolve`, and keeps the paid text.
- A request refused inside this process (a key holding a newline is an illegal header; any exception
  before the HTTP layer is handed the request) is void, never "lost its connection", on both paid
  paths (`pinakes.paid.paid_call` serves the extractor and `pnk ask --deep`).
- A document whose first call the budget refuses under on_exceed = partial was not reached: nothing
  of it was paid for, so nothing stopped "part-way through" it."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Generator, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any, cast

import pytest

pytest.importorskip("anthropic", reason="the [claude] extra is not installed: the paid path cannot run")
pytest.importorskip("pypdfium2", reason="the [pdf] extra is not installed: nothing renders pages")

from pinakes import paid
from pinakes.budget import CallShape, load_prices, to_eur
from pinakes.cli import main
from pinakes.errors import DeepAskFailedError, PaidCallError
from pinakes.extract import claude_vision
from pinakes.extract.cache import ExtractCache
from pinakes.kb import KBPaths
from tests.budget_helpers import TEST_MODEL, caps, open_accountant, set_budget
from tests.conftest import REPO_ROOT
from tests.fake_anthropic import (
    INPUT_TOKENS_PER_IMAGE,
    INPUT_TOKENS_PER_REQUEST,
    FakeAnthropic,
    Recorded,
    scanned_pdf,
)
from tests.paid_helpers import paid_kb, sync

KEY = "sk-ant-paid-faults-test-key"
PAGES = 2  # per PDF: one slice, so one call per document
PDFS = ("docs/a.pdf", "docs/b.pdf", "docs/c.pdf", "docs/d.pdf")


@pytest.fixture
def server() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture
def kb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: FakeAnthropic) -> Path:
    root = paid_kb(tmp_path / "kb", monkeypatch, server, key=KEY, name="paid-faults")
    for number, path in enumerate(PDFS):
        (root / path).write_bytes(scanned_pdf(PAGES, size=64 + number))  # four different files
    set_budget(root, confirm_above_eur="2.00")
    return root


@contextlib.contextmanager
def immutable_flags() -> Generator[list[Path], None, None]:
    """Paths the test flags immutable (`chattr +i`), cleared on the way out whatever happened."""
    flagged: list[Path] = []
    try:
        yield flagged
    finally:
        for path in flagged:
            subprocess.run(["chattr", "-i", str(path)], check=False, capture_output=True)


def make_immutable(path: Path, flagged: list[Path]) -> None:
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed: no immutable flag to make the fault with")
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"this filesystem or user cannot set the immutable flag: {done.stderr.strip()}")
    flagged.append(path)


def on_first_message(server: FakeAnthropic, action: Any) -> None:
    """Run `action` once, while the first Messages request is in flight (the client awaits its answer)."""
    done: list[bool] = []

    def hook(recorded: Recorded) -> None:
        if recorded.path == "/v1/messages" and not done:
            done.append(True)
            action()

    server.on_request = hook


def indexed_chunks(kb: Path, path: str) -> int:
    conn = sqlite3.connect(KBPaths(kb).index_db)
    try:
        return conn.execute("SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.doc_id "
                            "WHERE d.path = ? AND d.state = 'active'", (path,)).fetchone()[0]
    finally:
        conn.close()


def ledger_records(kb: Path) -> list[dict[str, Any]]:
    ledger = KBPaths(kb).ledger
    return [json.loads(line) for line in ledger.read_text(encoding="utf-8").splitlines()] if ledger.exists() else []


def budget_json(kb: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["-C", str(kb), "budget", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def assert_each_call_once(kb: Path, capsys: pytest.CaptureFixture[str], requests: int) -> None:
    """Every call in the ledger is reserved once and closed once, `pnk budget` counts each once, and
    there are as many as requests reached the API."""
    records = ledger_records(kb)
    reservations = [r["call_id"] for r in records if r["kind"] == "reservation"]
    closes = [r["call_id"] for r in records if r["kind"] != "reservation"]
    assert len(reservations) == len(set(reservations)) == requests
    assert sorted(closes) == sorted(reservations)
    report = budget_json(kb, capsys)
    assert report["unknown_outcomes"] == []
    assert sum(op["calls"] for op in report["by_operation"]) == requests


# --- item 1: the extraction cache refuses the paid text --------------------------------------------


@pytest.mark.heavy
def test_an_extraction_cache_made_immutable_mid_request_stops_the_run_and_nothing_paid_for_is_lost(
        kb: Path, server: FakeAnthropic, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's repro: four scanned PDFs, the cache directory made immutable while the first request
    is in flight. The run stops after that one call (exit 74, naming the cache, never calling it safe
    to delete), the document paid for is indexed, the other three are not paid for; with the flag
    removed the next run pays for those three only, and a third run for nothing."""
    cache_dir = KBPaths(kb).extract_cache
    with immutable_flags() as flagged:
        on_first_message(server, lambda: make_immutable(cache_dir, flagged))
        capsys.readouterr()

        code = sync(kb, "--extract=claude-vision")

        err = capsys.readouterr().err
        assert code == 74, err
        assert "Traceback" not in err and "pnk: error:" in err and "remedy:" in err
        assert "cannot write the extraction cache" in err and "stopped before its next paid call" in err
        assert "safe to delete" not in err and "holds paid extractions" in err
        assert "then run `pnk sync --extract=claude-vision`" in err
        assert "1 PDF paid for in this run is indexed" in err and "docs/a.pdf" in err
        assert "3 PDFs were not paid for after the fault" in err
        assert len(server.messages_requests()) == 1  # the run stopped before its next paid call
        assert [indexed_chunks(kb, path) > 0 for path in PDFS] == [True, False, False, False]
        assert [r["kind"] for r in ledger_records(kb)] == ["reservation", "reconciliation"]

    assert sync(kb, "--extract=claude-vision") == 0
    assert len(server.messages_requests()) == 4  # b, c and d; a.pdf is never paid for again
    assert all(indexed_chunks(kb, path) > 0 for path in PDFS)
    assert sync(kb, "--extract=claude-vision") == 0
    assert len(server.messages_requests()) == 4  # the third run spends nothing
    assert_each_call_once(kb, capsys, requests=4)


@pytest.mark.heavy
def test_a_cache_that_cannot_take_a_write_refuses_a_paid_run_before_its_first_call(
        kb: Path, server: FakeAnthropic, capsys: pytest.CaptureFixture[str]) -> None:
    cache_dir = KBPaths(kb).extract_cache
    cache_dir.mkdir(parents=True)
    with immutable_flags() as flagged:
        make_immutable(cache_dir, flagged)
        capsys.readouterr()

        code = sync(kb, "--extract=claude-vision")

        err = capsys.readouterr().err
        assert code == 74, err
        assert "cannot write the extraction cache" in err and "nothing was paid for" in err
        assert "safe to delete" not in err
        assert "then run `pnk sync --extract=claude-vision`" in err  # what was asked, not a bare `pnk sync`
        assert server.requests == [] and ledger_records(kb) == []


def test_no_message_calls_a_store_of_paid_results_safe_to_delete() -> None:
    """The extraction cache holds paid text and the ledger its cost: no remedy may invite deleting
    them (the issue's item 1 found "the cache is safe to delete")."""
    offenders = [f"{path.relative_to(REPO_ROOT)}:{number}" for path in sorted((REPO_ROOT / "src").rglob("*.py"))
                 for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
                 if re.search(r"safe to (delete|remove)", line)]
    assert offenders == []


# --- item 2: the ledger refuses the reconciliation -------------------------------------------------


@pytest.mark.heavy
def test_a_ledger_that_refuses_the_reconciliation_says_the_call_was_made_and_keeps_its_text(
        kb: Path, server: FakeAnthropic, capsys: pytest.CaptureFixture[str]) -> None:
    ledger = KBPaths(kb).ledger
    with immutable_flags() as flagged:
        on_first_message(server, lambda: make_immutable(ledger, flagged))
        capsys.readouterr()

        code = sync(kb, "--extract=claude-vision")

        err = capsys.readouterr().err
        assert code == 74, err
        assert "Traceback" not in err and "no call was made" not in err
        found = re.search(r"`pnk budget --resolve (\S+) --actual (\S+)`", err)
        assert found is not None, err
        call_id, actual = found.groups()
        assert f"call {call_id} was made and billed" in err and "unknown outcome" in err
        assert len(server.messages_requests()) == 1
        assert indexed_chunks(kb, "docs/a.pdf") > 0  # the paid text is indexed ...
        cached = list(ExtractCache(KBPaths(kb).extract_cache).paid_entries())
        assert [entry.call_ids for _, entry in cached] == [(call_id,)]  # ... and kept in the cache
        assert [r["kind"] for r in ledger_records(kb)] == ["reservation"]

    report = budget_json(kb, capsys)
    assert [u["call_id"] for u in report["unknown_outcomes"]] == [call_id]
    price = load_prices().price(claude_vision.MODEL)
    assert price is not None
    billed = to_eur(price.cost_usd(INPUT_TOKENS_PER_REQUEST + INPUT_TOKENS_PER_IMAGE * PAGES,
                                   server.output_tokens_per_page * PAGES), load_prices().usd_per_eur)
    assert Decimal(actual) == billed  # the remedy names the amount the response's usage billed
    assert main(["-C", str(kb), "budget", "--resolve", call_id, "--actual", actual]) == 0
    assert sync(kb, "--extract=claude-vision") == 0
    assert len(server.messages_requests()) == 4  # a.pdf is not paid for again
    assert_each_call_once(kb, capsys, requests=4)


# --- item 9: a request refused before it left the process is void ---------------------------------


@pytest.fixture
def sdk() -> paid.SDK:
    module = pytest.importorskip("anthropic", reason="the [claude] extra is not installed: no client to test")
    return cast(paid.SDK, module)  # the module is the SDK the protocol describes


def shape() -> CallShape:
    return CallShape(TEST_MODEL, max_input_tokens=20_000, max_output_tokens=500)


REQUEST = {"model": TEST_MODEL, "messages": [{"role": "user", "content": "a question"}]}
NEWLINE_KEY = "sk-ant-first-half\nsecond-half"


def test_a_key_holding_a_newline_is_refused_by_the_http_library_and_the_call_is_void(
        sdk: paid.SDK, server: FakeAnthropic, tmp_path: Path) -> None:
    accountant = open_accountant(tmp_path, caps())
    plan = accountant.plan("extract", [shape()], interactive=False)
    client = paid.make_client(sdk, paid.ApiKey(NEWLINE_KEY), base_url=server.url)
    with pytest.raises(PaidCallError) as caught:
        paid.paid_call(sdk, client, plan, shape(), REQUEST)
    failure = caught.value
    assert failure.outcome == "void" and "lost its connection" not in failure.message
    assert "before it was sent" in failure.message and "nothing was billed" in failure.message
    assert "API key" in (failure.remedy or "") and "console" not in (failure.remedy or "")
    assert "first-half" not in failure.render() and "second-half" not in failure.render()
    assert server.requests == []  # nothing reached the API
    assert not accountant.report().unknown  # nothing reserved stays held
    assert [r.kind for r in accountant.ledger.records] == ["reservation", "void"]


def test_the_deep_ask_path_voids_a_request_refused_before_it_left(
        sdk: paid.SDK, server: FakeAnthropic, tmp_path: Path) -> None:
    from pinakes.deep import calls

    accountant = open_accountant(tmp_path, caps())
    plan = accountant.plan("ask", [shape()], interactive=False)
    client = paid.make_client(sdk, paid.ApiKey(NEWLINE_KEY), base_url=server.url)
    with pytest.raises(DeepAskFailedError) as caught:
        calls.send(client, plan, shape(), dict(REQUEST), what="first-round")
    assert "before it was sent" in caught.value.message and "--resolve" not in (caught.value.remedy or "")
    assert server.requests == [] and not accountant.report().unknown


def test_an_exception_before_the_http_layer_is_handed_the_request_voids_its_reservation(
        sdk: paid.SDK, server: FakeAnthropic, tmp_path: Path) -> None:
    """A request the SDK cannot even build (a body that is not JSON) never left: the exception still
    reaches the caller, and the reservation is closed at zero rather than held as possibly billed."""
    accountant = open_accountant(tmp_path, caps())
    plan = accountant.plan("extract", [shape()], interactive=False)
    client = paid.make_client(sdk, paid.ApiKey(KEY), base_url=server.url)
    unbuildable = {"model": TEST_MODEL, "messages": [{"role": "user", "content": object()}]}
    with pytest.raises(Exception) as caught:
        paid.paid_call(sdk, client, plan, shape(), unbuildable)
    assert not isinstance(caught.value, PaidCallError)
    assert server.requests == [] and not accountant.report().unknown


def test_pnk_sync_refuses_a_key_holding_a_newline_before_anything_is_planned(
        kb: Path, server: FakeAnthropic, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PINAKES_ANTHROPIC_API_KEY", NEWLINE_KEY)
    capsys.readouterr()

    assert sync(kb, "--extract=claude-vision") == 2

    captured = capsys.readouterr()
    assert "control character" in captured.err and "Traceback" not in captured.err
    assert "first-half" not in captured.err + captured.out
    assert server.requests == [] and ledger_records(kb) == []


# --- item 14: a budget stop before a document's first call is "not reached" ------------------------

SPENDER = """
import sys
from pathlib import Path
from pinakes.budget import Accountant, CallShape
from pinakes.manifest import load_manifest

kb, tokens = Path(sys.argv[1]), int(sys.argv[2])
manifest = load_manifest(kb / "pinakes.toml")
accountant = Accountant.open(kb, manifest.budget, kb_id=manifest.kb.id)
shape = CallShape("claude-haiku-4-5", max_input_tokens=tokens, max_output_tokens=1)
plan = accountant.plan("ask", [shape], interactive=False)
with plan.call(shape) as call:
    call.reconcile(input_tokens=tokens, output_tokens=1)
"""


def worst_case_eur(pages: int) -> Decimal:
    prices = load_prices()
    total = Decimal(0)
    for one in claude_vision.document_shapes(pages, "unit"):
        price = prices.price(one.model)
        assert price is not None
        total += to_eur(price.cost_usd(one.max_input_tokens, one.max_output_tokens), prices.usd_per_eur)
    return total


def test_a_single_slice_pdf_the_budget_stops_is_not_reached_never_stopped_part_way(
        kb: Path, server: FakeAnthropic, capsys: pytest.CaptureFixture[str]) -> None:
    """on_exceed = partial admits both documents; while the first request is in flight another process
    spends through the same ledger, so the second document's one call is refused. Nothing of it was
    paid for: it is reported as not reached, not as stopped part-way through."""
    for path in PDFS[2:]:
        (kb / path).unlink()
    w = worst_case_eur(PAGES)
    cap = 2 * w + Decimal("0.05")
    set_budget(kb, confirm_above_eur="2.00", daily_eur=f"{cap}", on_exceed="partial")
    spend = w + Decimal("0.045")
    tokens = int(spend * load_prices().usd_per_eur * 1_000_000)  # haiku-4-5 input is $1 per million tokens
    on_first_message(server, lambda: subprocess.run([sys.executable, "-c", SPENDER, str(kb), str(tokens)],
                                                    cwd=REPO_ROOT, capture_output=True, timeout=120, check=True))
    capsys.readouterr()

    code = sync(kb, "--extract=claude-vision")

    out = capsys.readouterr()
    assert code == 0, out.err
    assert "part-way" not in out.out + out.err
    assert "1 PDF was not extracted within the budget" in out.out and "docs/b.pdf" in out.out
    assert len(server.messages_requests()) == 1
    assert [indexed_chunks(kb, path) > 0 for path in PDFS[:2]] == [True, False]


# --- a document stopped part-way keeps the pages paid for -----------------------------------------

LONG = 10  # pages: two slices (8 + 2), two calls


def spend_in_the_same_ledger(kb: Path, eur: Decimal) -> None:
    """Another spender on the KB's ledger (as `pnk ask --deep` in another shell would), under its own
    generous caps, reconciled at its worst case."""
    from pinakes.budget import Accountant

    tokens = int(eur * load_prices().usd_per_eur * 1_000_000) + 1  # haiku-4-5 input is $1 per million tokens
    accountant = Accountant.open(kb, caps())
    one = CallShape("claude-haiku-4-5", max_input_tokens=tokens, max_output_tokens=1)
    plan = accountant.plan("ask", [one], interactive=False)
    with plan.call(one) as call:
        call.reconcile(input_tokens=tokens, output_tokens=1)


def pages_asked(server: FakeAnthropic) -> list[list[int]]:
    asked: list[list[int]] = []
    for recorded in server.messages_requests():
        found = re.search(r"pages (\d+) to (\d+)", json.dumps(recorded.body))
        assert found is not None
        asked.append(list(range(int(found.group(1)), int(found.group(2)) + 1)))
    return asked


def test_a_document_the_budget_stops_part_way_keeps_its_paid_pages_and_the_next_run_pays_only_the_rest(
        kb: Path, server: FakeAnthropic, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    for path in PDFS:
        (kb / path).unlink()
    (kb / "docs/long.pdf").write_bytes(scanned_pdf(LONG))
    whole = worst_case_eur(LONG)
    set_budget(kb, confirm_above_eur="2.00", daily_eur=f"{whole + Decimal('0.01')}", on_exceed="partial")
    renders: list[int] = []
    real_render = claude_vision.render_pages

    def render_then_spend(path: Path, pages: Any) -> list[bytes]:
        renders.append(1)
        if len(renders) == 2:  # between the first slice's answer and the second's reservation
            spend_in_the_same_ledger(kb, whole)
        return real_render(path, pages)

    monkeypatch.setattr(claude_vision, "render_pages", render_then_spend)
    capsys.readouterr()

    assert sync(kb, "--extract=claude-vision") == 1  # a document stopped part-way is a failure

    out = capsys.readouterr()
    assert "part-way through this document, after 1 paid call for it" in out.out + out.err
    assert "pages paid for are kept" in out.out + out.err
    assert "exclude =" not in out.out + out.err  # the next run finishes it: never offered for exclusion
    assert main(["-C", str(kb), "status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["exclusion"] is None
    assert pages_asked(server) == [list(range(1, 9))]
    assert indexed_chunks(kb, "docs/long.pdf") == 0  # never indexed in part

    set_budget(kb, daily_eur="5.00", monthly_eur="50.00")
    monkeypatch.setattr(claude_vision, "render_pages", real_render)
    assert sync(kb, "--extract=claude-vision") == 0
    assert pages_asked(server) == [list(range(1, 9)), [9, 10]]  # only the pages never paid for
    assert indexed_chunks(kb, "docs/long.pdf") > 0
    cache = ExtractCache(KBPaths(kb).extract_cache)
    (entry,) = [entry for _, entry in cache.paid_entries()]  # the whole document; the partial one is gone
    assert not entry.partial and len(entry.extracted.pages or ()) == LONG
    assert entry.call_ids is not None and len(entry.call_ids) == 2  # both calls, joined to the ledger


@pytest.mark.heavy
def test_a_ledger_fault_on_an_early_slice_keeps_its_pages_for_the_next_run(
        kb: Path, server: FakeAnthropic, capsys: pytest.CaptureFixture[str]) -> None:
    for path in PDFS:
        (kb / path).unlink()
    (kb / "docs/long.pdf").write_bytes(scanned_pdf(LONG))
    ledger = KBPaths(kb).ledger
    with immutable_flags() as flagged:
        on_first_message(server, lambda: make_immutable(ledger, flagged))
        capsys.readouterr()

        assert sync(kb, "--extract=claude-vision") == 74

        err = capsys.readouterr().err
        assert "pages 1-8 of 10 came back and are kept for the next run" in err
        found = re.search(r"`pnk budget --resolve (\S+) --actual (\S+)`", err)
        assert found is not None, err
        assert pages_asked(server) == [list(range(1, 9))]

    assert main(["-C", str(kb), "budget", "--resolve", found.group(1), "--actual", found.group(2)]) == 0
    assert sync(kb, "--extract=claude-vision") == 0
    assert pages_asked(server) == [list(range(1, 9)), [9, 10]]
    assert indexed_chunks(kb, "docs/long.pdf") > 0
    assert_each_call_once(kb, capsys, requests=2)


@pytest.mark.heavy
def test_a_full_disk_under_the_extraction_cache_mid_request_stops_the_run_and_keeps_the_paid_text(
        kb: Path, server: FakeAnthropic, capsys: pytest.CaptureFixture[str]) -> None:
    """The same promise on ENOSPC: a small tmpfs mounted at `.pinakes/cache/extract` alone (the index
    beside it stays writable) is filled while the first request is in flight."""
    from tests.test_faults_io import fill

    cache_dir = KBPaths(kb).extract_cache
    cache_dir.mkdir(parents=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(cache_dir)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        on_first_message(server, lambda: fill(cache_dir))
        capsys.readouterr()

        code = sync(kb, "--extract=claude-vision")

        err = capsys.readouterr().err
        assert code == 74, err
        assert "No space left on device" in err and "stopped before its next paid call" in err
        assert "safe to delete" not in err and "Traceback" not in err
        assert len(server.messages_requests()) == 1
        assert [indexed_chunks(kb, path) > 0 for path in PDFS] == [True, False, False, False]
        (cache_dir / "filler.bin").unlink()
        assert sync(kb, "--extract=claude-vision") == 0
        assert len(server.messages_requests()) == 4  # a.pdf is never paid for again
        assert_each_call_once(kb, capsys, requests=4)
    finally:
        subprocess.run(["umount", "-l", str(cache_dir)], check=False)
