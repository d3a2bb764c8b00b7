"""The budget stopping a multi-document paid sync (spec §5, issue #14's Done-when), end to end: `pnk sync
--extract=claude-vision` over several scanned PDFs with the real `anthropic` client against the local
Messages API, the real accountant and ledger. `on_exceed = "abort"` calls nothing beyond the cap and
fails naming the window; `"partial"` indexes whole documents up to the cap and reports the rest, never
part of one; a second process spending through the same KB's ledger while a call is in flight cannot
push a window past its cap; a second `pnk sync` meets the sync lock and says so."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

pytest.importorskip("anthropic", reason="the [claude] extra is not installed: the paid path cannot run")
pytest.importorskip("pypdfium2", reason="the [pdf] extra is not installed: nothing renders pages")

from pinakes.budget import load_prices, to_eur
from pinakes.cli import main
from pinakes.extract import claude_vision
from pinakes.extract.cache import ExtractCache
from pinakes.kb import KBPaths
from tests.budget_helpers import set_budget
from tests.conftest import REPO_ROOT
from tests.fake_anthropic import INPUT_TOKENS_PER_IMAGE, INPUT_TOKENS_PER_REQUEST, FakeAnthropic, scanned_pdf
from tests.paid_helpers import paid_kb, sync

if TYPE_CHECKING:
    from pinakes.budget.prices import ModelPrice

KEY = "sk-ant-budget-e2e-test-key"
PAGES = 2  # per PDF: one slice, so one call per document
PDFS = ("docs/a.pdf", "docs/b.pdf", "docs/c.pdf")


def eur(usd: Decimal) -> Decimal:
    return to_eur(usd, load_prices().usd_per_eur)


def worst_case_eur() -> Decimal:
    """What the accountant reserves for one document (its one slice), from the packaged prices."""
    (shape,) = claude_vision.document_shapes(PAGES, "unit")
    price = load_prices().price(shape.model)
    assert price is not None
    return eur(price.cost_usd(shape.max_input_tokens, shape.max_output_tokens))


def billed_eur(server: FakeAnthropic) -> Decimal:
    """What the fake bills for one document: the reconciliation, from its usage."""
    price = load_prices().price(claude_vision.MODEL)
    assert price is not None
    return eur(price.cost_usd(INPUT_TOKENS_PER_REQUEST + INPUT_TOKENS_PER_IMAGE * PAGES,
                              server.output_tokens_per_page * PAGES))


@pytest.fixture
def server() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture
def kb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: FakeAnthropic) -> Path:
    root = paid_kb(tmp_path / "kb", monkeypatch, server, key=KEY, name="budget-e2e")
    for number, path in enumerate(PDFS):
        (root / path).write_bytes(scanned_pdf(PAGES, size=64 + number))  # three different files
    return root





def indexed_chunks(kb: Path, path: str) -> int:
    conn = sqlite3.connect(KBPaths(kb).index_db)
    try:
        return conn.execute("SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.doc_id "
                            "WHERE d.path = ? AND d.state = 'active'", (path,)).fetchone()[0]
    finally:
        conn.close()


def ledger_kinds(kb: Path) -> list[str]:
    ledger = KBPaths(kb).ledger
    lines = ledger.read_text(encoding="utf-8").splitlines() if ledger.exists() else []
    return [json.loads(line)["kind"] for line in lines]


def budget_json(kb: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["-C", str(kb), "budget", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def window(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(w for w in report["windows"] if w["window"] == name)


def test_abort_refuses_the_whole_run_at_call_zero_naming_every_blocked_window(
        kb: Path, server: FakeAnthropic, capsys: pytest.CaptureFixture[str]) -> None:
    w = worst_case_eur()
    set_budget(kb, confirm_above_eur=f"{w}", per_operation_eur=f"{2 * w}", daily_eur=f"{w}")
    capsys.readouterr()

    assert sync(kb, "--extract=claude-vision") == 1

    err = capsys.readouterr().err
    assert "refused before the first call" in err
    assert "per_operation_eur" in err and "daily_eur" in err and "monthly_eur" not in err
    assert server.requests == [] and ledger_kinds(kb) == []  # nothing called, nothing reserved
    assert all(indexed_chunks(kb, path) == 0 for path in PDFS)


def test_partial_indexes_whole_documents_up_to_the_cap_and_reports_the_rest(
        kb: Path, server: FakeAnthropic, capsys: pytest.CaptureFixture[str]) -> None:
    w = worst_case_eur()
    # confirm_above_eur at the admitted worst case: a run at its threshold is not asked about.
    set_budget(kb, confirm_above_eur=f"{2 * w}", per_operation_eur=f"{2 * w}", on_exceed="partial")
    capsys.readouterr()

    code = sync(kb, "--extract=claude-vision")

    out = capsys.readouterr()
    assert code == 0, out.err
    assert "2 of 3 units admitted" in out.out
    assert "1 PDF was not extracted within the budget" in out.out and "docs/c.pdf" in out.out
    assert len(server.messages_requests()) == 2  # a whole document per call, and the third never sent
    assert [indexed_chunks(kb, path) > 0 for path in PDFS] == [True, True, False]
    assert ledger_kinds(kb) == ["reservation", "reconciliation"] * 2
    assert len(list(ExtractCache(KBPaths(kb).extract_cache).paid_entries())) == 2

    set_budget(kb, per_operation_eur="2.00")  # the next run picks the rest up
    assert sync(kb, "--extract=claude-vision") == 0
    assert len(server.messages_requests()) == 3 and indexed_chunks(kb, "docs/c.pdf") > 0


def test_partial_never_extracts_part_of_a_document(kb: Path, server: FakeAnthropic,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A 10-page PDF is two calls; a cap that fits one slice but not both admits neither."""
    for path in PDFS:
        (kb / path).unlink()
    (kb / "docs/long.pdf").write_bytes(scanned_pdf(10))
    # the packaged prices hold the shape's model (a None fails on .cost_usd, as before)
    first = sum((eur(cast("ModelPrice", load_prices().price(s.model)).cost_usd(s.max_input_tokens,
                                                                            s.max_output_tokens))
                 for s in claude_vision.document_shapes(10, "unit")[:1]), Decimal(0))
    set_budget(kb, confirm_above_eur=f"{first}", per_operation_eur=f"{first}", on_exceed="partial")
    capsys.readouterr()

    assert sync(kb, "--extract=claude-vision") == 1

    err = capsys.readouterr().err
    assert "refused before the first call" in err and "2 calls, 1 unit" in err and "per_operation_eur" in err
    assert server.requests == [] and ledger_kinds(kb) == []
    assert indexed_chunks(kb, "docs/long.pdf") == 0


# A second process spending through the same KB's accountant (as `pnk ask --deep` would), at the
# worst case it reserves, reconciled at that worst case.
SPENDER = textwrap.dedent("""
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
    print(call.call_id)
""")


def test_another_process_spending_while_a_call_is_in_flight_stops_the_run_at_the_cap(
        kb: Path, server: FakeAnthropic, capsys: pytest.CaptureFixture[str]) -> None:
    """The run is admitted whole (two documents fit daily_eur); while its first request is in flight a
    second process spends through the same ledger. The first call's reconciliation then leaves too
    little room for the second document's reservation: under on_exceed = "abort" it is never sent, the
    run fails naming daily_eur, and the day's total stays within the cap."""
    (kb / PDFS[2]).unlink()
    w, billed = worst_case_eur(), billed_eur(server)
    cap = 2 * w + Decimal("0.05")
    set_budget(kb, confirm_above_eur="2.00", daily_eur=f"{cap}")
    # The spender must fit beside the in-flight reservation (w + spend <= cap) and, once that call is
    # reconciled at `billed`, leave no room for the next one (billed + spend + w > cap).
    spend = w + Decimal("0.045")
    assert w + spend <= cap < billed + spend + w
    usd_per_eur = load_prices().usd_per_eur
    tokens = int(spend * usd_per_eur * 1_000_000)  # haiku-4-5 input is $1 per million tokens
    spent_by_other: list[str] = []

    def spend_meanwhile(recorded: object) -> None:
        if spent_by_other:
            return
        done = subprocess.run([sys.executable, "-c", SPENDER, str(kb), str(tokens)], cwd=REPO_ROOT,
                              capture_output=True, text=True, timeout=120)
        spent_by_other.append(done.stdout.strip() or done.stderr)

    server.on_request = spend_meanwhile
    capsys.readouterr()

    assert sync(kb, "--extract=claude-vision") == 1

    err = capsys.readouterr().err
    assert re.fullmatch(r"[0-9A-Z]{26}", spent_by_other[0]), spent_by_other
    assert "daily_eur" in err and "the call was not made" in err
    assert len(server.messages_requests()) == 1  # the second document was never sent
    daily = window(budget_json(kb, capsys), "daily_eur")
    assert Decimal(daily["spent_eur"]) <= Decimal(daily["cap_eur"])
    assert Decimal(daily["spent_eur"]) > Decimal(daily["cap_eur"]) - w  # the cap, not a slack, stopped it
    assert ledger_kinds(kb).count("reservation") == 2  # the sync's one call and the other process's


def test_a_second_sync_meeting_the_lock_of_a_paid_sync_says_so_and_spends_nothing(
        kb: Path, server: FakeAnthropic) -> None:
    """One ledger is per KB and the sync lock serialises syncs of one KB: a second `pnk sync` started
    while a paid sync is mid-call reports the lock and makes no call and no reservation."""
    seen: dict[str, object] = {}

    def second_sync(recorded: object) -> None:
        if seen:
            return
        seen["requests_before"] = len(server.messages_requests())
        seen["ledger_before"] = ledger_kinds(kb)
        env = {**os.environ, "PINAKES_ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": server.url}
        done = subprocess.run([sys.executable, "-m", "pinakes", "-C", str(kb), "sync", "--extract=claude-vision"],
                              env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
        seen.update(code=done.returncode, output=done.stdout + done.stderr,
                    requests_after=len(server.messages_requests()), ledger_after=ledger_kinds(kb))

    server.on_request = second_sync
    set_budget(kb, confirm_above_eur="2.00")

    assert sync(kb, "--extract=claude-vision") == 0

    assert "another sync holds the lock" in str(seen["output"]), seen["output"]
    assert seen["code"] == 0  # skipped, not failed: the running sync does the work
    assert seen["requests_after"] == seen["requests_before"] == 1
    assert seen["ledger_after"] == seen["ledger_before"] == ["reservation"]
    assert len(server.messages_requests()) == 3 and all(indexed_chunks(kb, path) > 0 for path in PDFS)
