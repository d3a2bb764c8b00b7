"""A reconciliation above its reservation is an overrun, never accepted silently (issue #40, item 3).

A reservation is what its request allows: the `max_tokens` it is sent with, and the input what it
sends can amount to. An answer reporting more is recorded *as reported* (the user is never told less
than they may be billed), listed by `pnk budget`, warned about by `pnk doctor`, and stops every paid
call — this run's next, and any later run's first — until `pnk budget --resolve CALL_ID --actual EUR`
closes it. The accountant's own arithmetic first, then `pnk budget` and `pnk doctor`, then each paid
path against a real loopback fake reporting the impossible usage: claude-vision extraction and
`pnk ask --deep` (tests/fake_anthropic.py) and a priced remote embedding endpoint
(tests/fake_openai_embeddings.py). Also the issue's two display minors that live here: money shown
exactly (never a worst case that reads below the cap it breaches) and a search note kept whole.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pinakes.budget import BudgetOverrunError, BudgetRefusedError, CallShape, UnknownCallError
from pinakes.budget.errors import BlockedWindow
from pinakes.budget.money import format_eur
from pinakes.cli import main
from pinakes.doctor import DoctorContext
from pinakes.doctor.checks_budget import checks
from pinakes.init import init_kb
from pinakes.kb import KBPaths
from tests.budget_helpers import TEST_MODEL, caps, eur_shape, open_accountant, spend
from tests.fakes import FakeEmbedder, substitute_embedder


def ledger_lines(kb: Path) -> list[dict[str, Any]]:
    ledger = KBPaths(kb).ledger
    return [json.loads(line) for line in ledger.read_text(encoding="utf-8").splitlines()] if ledger.exists() else []


def doctor(kb: Path) -> dict[str, tuple[str, str]]:
    return {check.name: (check.status, check.detail) for check in checks(DoctorContext(kb))}


def run(kb: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["-C", str(kb), *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


# -- the accountant ---------------------------------------------------------------------------------

SHAPE = CallShape(TEST_MODEL, max_input_tokens=1_000, max_output_tokens=100)  # $1/M each way, 1 USD/EUR


def test_output_beyond_max_tokens_is_recorded_as_reported_and_refuses_every_later_call(tmp_path: Path) -> None:
    accountant = open_accountant(tmp_path, caps())
    plan = accountant.plan("extract", [SHAPE, SHAPE], interactive=False)
    with plan.call(SHAPE) as call:
        billed = call.reconcile(input_tokens=900, output_tokens=35_400)  # 354x what max_tokens allowed

    # Recorded as reported, never cut to the bound: 36,300 tokens at $1/M.
    assert billed == Decimal("0.0363") and call.reserved_eur == Decimal("0.0011")
    reservation, reconciliation = ledger_lines(tmp_path)
    assert (reservation["kind"], reservation["output_tokens"]) == ("reservation", 100)
    assert (reconciliation["kind"], reconciliation["output_tokens"], reconciliation["cost_usd"]) == \
        ("reconciliation", 35_400, "0.036300")
    assert call.overrun is not None and plan.overruns == [call.overrun]
    assert call.overrun.beyond_request == ("35,400 output tokens where its max_tokens allowed 100",)

    before = KBPaths(tmp_path).ledger.read_bytes()
    with pytest.raises(BudgetOverrunError) as refused, plan.call(SHAPE):
        pytest.fail("the run's next call must not be made")
    assert KBPaths(tmp_path).ledger.read_bytes() == before  # not even reserved
    assert f"call {call.call_id}" in refused.value.message and "no paid call is made" in refused.value.message
    assert f"pnk budget --resolve {call.call_id} --actual EUR" in refused.value.message
    assert refused.value.remedy is not None and "--actual 0.036300" in refused.value.remedy
    with pytest.raises(BudgetOverrunError):  # another run, another process: refused before its first call
        open_accountant(tmp_path, caps()).plan("ask", [SHAPE], interactive=False)

    report = accountant.report()
    assert [o.call_id for o in report.overruns] == [call.call_id]
    assert report.windows[1].spent == Decimal("0.0363")  # the window counts what was reported

    # The console says it billed €0.0011: the resolution supersedes the reconciliation, once.
    accountant.resolve(call.call_id, Decimal("0.0011"))
    report = accountant.report()
    assert report.overruns == () and report.windows[1].spent == Decimal("0.0011")
    with pytest.raises(UnknownCallError, match="already closed"):
        accountant.resolve(call.call_id, Decimal("0.0011"))
    again = open_accountant(tmp_path, caps()).plan("ask", [SHAPE], interactive=False)
    with again.call(SHAPE) as fine:
        fine.reconcile(input_tokens=1_000, output_tokens=100)  # at its bound exactly: no overrun
    assert fine.overrun is None and accountant.report().overruns == ()


def test_input_beyond_what_was_sent_is_an_overrun_even_when_the_amount_is_within_the_reservation(
        tmp_path: Path) -> None:
    accountant = open_accountant(tmp_path, caps())
    plan = accountant.plan("extract", [SHAPE], interactive=False)
    with plan.call(SHAPE) as call:
        call.reconcile(input_tokens=1_050, output_tokens=0)  # €0.00105 < €0.0011 reserved, but impossible
    assert call.overrun is not None
    assert call.overrun.beyond_request == ("1,050 input tokens where what was sent bounds them at 1,000",)
    assert accountant.calls()[call.call_id].status == "overrun"


def test_a_call_closed_within_its_reservation_is_still_never_reopened(tmp_path: Path) -> None:
    call_id = spend(tmp_path, "0.10")
    with pytest.raises(UnknownCallError, match="already closed"):
        open_accountant(tmp_path, caps()).resolve(call_id, Decimal("0.05"))


# -- money, shown ----------------------------------------------------------------------------------

def test_a_worst_case_just_above_a_cap_reads_above_it(tmp_path: Path) -> None:
    """The issue's "€0.1468 worst case > cap €0.15": a cap and a worst case one micro-euro apart in
    the fourth place are both shown exactly."""
    with pytest.raises(BudgetRefusedError) as refused:
        open_accountant(tmp_path, caps(per_operation_eur="0.1467")).plan(
            "extract", [eur_shape("0.146756")], interactive=False)
    assert "€0.146756 worst case > cap €0.1467;" in refused.value.message
    assert "this extract run's worst case is €0.146756" in refused.value.message


MICRO = st.integers(min_value=0, max_value=10**9).map(lambda n: Decimal(n).scaleb(-6))
_AMOUNTS = re.compile(r"€(\d+\.\d+)")


@given(cap=MICRO, spent=MICRO, requested=MICRO)
def test_every_refusal_line_states_a_true_inequality(cap: Decimal, spent: Decimal, requested: Decimal) -> None:
    window = BlockedWindow("daily_eur", "2026-12-01", cap, spent, requested, spent + requested)
    shown = [Decimal(amount) for amount in _AMOUNTS.findall(window.describe())]
    *added, shown_cap = shown
    assert shown_cap == cap and sum(added, Decimal(0)) == spent + requested  # exact, as enforced
    assert (sum(added, Decimal(0)) > shown_cap) == (spent + requested > cap)


def test_money_is_shown_to_the_micro_euro_spends_up_and_headroom_down() -> None:
    assert format_eur(Decimal("0.5")) == "€0.5000" and format_eur(Decimal("2"), 2) == "€2.00"
    assert format_eur(Decimal("0.1467"), 2) == "€0.1467"  # never €0.15
    assert format_eur(Decimal("0.0000001")) == "€0.000001"
    assert format_eur(Decimal("0.0000019"), headroom=True) == "€0.000001"


# -- pnk budget and pnk doctor ----------------------------------------------------------------------


@pytest.fixture
def kb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    substitute_embedder(monkeypatch, lambda section, offline=None, threads=None: FakeEmbedder())
    root = tmp_path / "kb"
    init_kb(root, name="overrun")
    return root


def overran(kb: Path) -> str:
    """A call whose answer reported 354x the output its request allowed (the issue's figure)."""
    from datetime import UTC, datetime

    from tests.budget_helpers import Clock

    accountant = open_accountant(kb, caps(), Clock(datetime.now(UTC)))
    plan = accountant.plan("extract", [SHAPE], interactive=False)
    with plan.call(SHAPE) as call:
        call.reconcile(input_tokens=1_000, output_tokens=35_400)
    return call.call_id


def test_budget_and_doctor_show_the_overrun_and_resolve_closes_it(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "overruns" not in doctor(kb)  # a KB that never spent has nothing to say about them
    spend(kb, "0.10")
    assert doctor(kb)["overruns"][0] == "OK"
    call_id = overran(kb)

    code, out, _err = run(kb, capsys, "budget")
    assert code == 0
    assert "OVERRUNS: 1 call reported usage above its reservation, counted as reported" in out
    line = next(line for line in out.splitlines() if line.startswith(f"  {call_id}"))
    assert "reserved €0.0011" in line and "recorded €0.0364" in line
    assert "35,400 output tokens where its max_tokens allowed 100" in line
    code, out, _err = run(kb, capsys, "budget", "--json")
    (listed,) = json.loads(out)["overruns"]
    assert listed["call_id"] == call_id and listed["reserved_eur"] == "0.001100" and listed["billed_eur"] == "0.036400"
    assert listed["reported_tokens"] == {"input": 1_000, "output": 35_400}

    status, detail = doctor(kb)["overruns"]
    assert status == "WARN" and call_id in detail and "no paid call runs until it is resolved" in detail
    assert doctor(kb)["spending ledger"][0] == "OK"  # every line intact: the overrun is the ledger's truth

    code, out, _err = run(kb, capsys, "budget", "--resolve", call_id, "--actual", "0.0011")
    assert code == 0 and f"resolved {call_id} at €0.0011" in out
    code, out, _err = run(kb, capsys, "budget", "--json")
    assert json.loads(out)["overruns"] == [] and doctor(kb)["overruns"][0] == "OK"
    assert [line["kind"] for line in ledger_lines(kb)][-3:] == ["reservation", "reconciliation", "resolution"]


# -- claude-vision extraction against the local Messages API ---------------------------------------


@pytest.mark.heavy
def test_a_paid_sync_stops_after_the_page_slice_that_overran_and_keeps_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("anthropic", reason="the [claude] extra is not installed")
    pytest.importorskip("pypdfium2", reason="the [pdf] extra is not installed")
    from tests.fake_anthropic import FakeAnthropic, Reply, scanned_pdf
    from tests.paid_helpers import paid_kb

    with FakeAnthropic() as server:
        kb = paid_kb(tmp_path / "kb", monkeypatch, server, key="sk-ant-overrun-test", name="overrun")
        for number, path in enumerate(("docs/a.pdf", "docs/b.pdf")):
            (kb / path).write_bytes(scanned_pdf(2, size=64 + number))  # one slice each: max_tokens 4,096
        server.queue(Reply(usage={"output_tokens": 4_096 * 354}))

        code, out, err = run(kb, capsys, "sync", "--extract=claude-vision")

        assert code == 65, out + err
        assert len(server.messages_requests()) == 1  # the second document's call was never made
        reservation, reconciliation = ledger_lines(kb)
        assert reconciliation["output_tokens"] == 4_096 * 354 and reservation["output_tokens"] == 4_096
        call_id = reconciliation["call_id"]
        assert Decimal(reconciliation["cost_usd"]) > 100 * Decimal(reservation["cost_usd"])
        assert "Traceback" not in err and f"call {call_id}" in err
        assert "1,449,984 output tokens where its max_tokens allowed 4,096" in err
        assert f"pnk budget --resolve {call_id} --actual EUR" in err
        assert "1 PDF was not paid for after the fault" in err  # the other, held back
        code, out, _err = run(kb, capsys, "search", "Text of page 1", "--json")  # its text was paid for: kept
        assert code == 0 and json.loads(out)["passages"], "the document whose call overran is indexed"

        code, out, err = run(kb, capsys, "sync", "--extract=claude-vision")  # a later run: refused at once
        assert code == 65 and len(server.messages_requests()) == 1 and f"call {call_id}" in err

        assert run(kb, capsys, "budget", "--resolve", call_id, "--actual", "0.05")[0] == 0
        code, out, err = run(kb, capsys, "sync", "--extract=claude-vision")
        assert code == 0, out + err
        assert len(server.messages_requests()) == 2  # only the document never paid for


# -- pnk ask --deep against the local Messages API -------------------------------------------------


def test_ask_deep_stops_after_the_call_that_overran_and_keeps_its_result(
        tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("anthropic", reason="the [claude] extra is not installed")
    from tests.budget_helpers import set_budget
    from tests.deep_helpers import HOP_QUESTION, KEY, DeepFake, decompose, demo_copy, synced_demo

    class Overreporting(DeepFake):
        """The loop's server, reporting `output_tokens` on its first answer whatever it wrote."""

        output_tokens: int | None = None

        def answer(self, path: str, body: dict[str, Any] | None) -> tuple[int, dict[str, str], bytes, float]:
            status, headers, data, delay = super().answer(path, body)
            if path == "/v1/messages" and status == 200 and self.output_tokens is not None:
                message = json.loads(data)
                message["usage"]["output_tokens"], self.output_tokens = self.output_tokens, None
                data = json.dumps(message).encode()
            return status, headers, data, delay

    demo = demo_copy(synced_demo(tmp_path_factory.mktemp("overrun-deep")), tmp_path_factory.mktemp("copy"),
                     monkeypatch)
    set_budget(demo, confirm_above_eur="10.00", per_operation_eur="10.00", daily_eur="20.00", monthly_eur="50.00")
    with Overreporting() as fake:
        monkeypatch.setenv("PINAKES_ANTHROPIC_API_KEY", KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        fake.reply_with(decompose("courier approver", "approver extension"))
        fake.output_tokens = 4_096 * 354

        code, out, err = run(demo, capsys, "ask", "--deep", HOP_QUESTION)

        assert code == 65, out + err
        assert len(fake.messages_requests()) == 1  # the round's answer call was never made
        call_id = ledger_lines(demo)[-1]["call_id"]
        assert "Ended by overrun" in out and "Cost:" in out  # the result it paid for, printed
        assert "Traceback" not in err and f"call {call_id}" in err
        assert "1,449,984 output tokens where its max_tokens allowed 4,096" in err
        assert "is kept: printed above" in err

        code, _out, err = run(demo, capsys, "ask", "--deep", "--json", HOP_QUESTION)  # the next run
        assert code == 65 and len(fake.messages_requests()) == 1
        assert f"pnk budget --resolve {call_id} --actual EUR" in err + _out


# -- a priced remote embedding endpoint ----------------------------------------------------------


@pytest.fixture
def embeddings() -> Iterator[Any]:
    pytest.importorskip("openai", reason="the [remote] extra (openai) is not installed")
    from tests.fake_openai_embeddings import FakeEmbeddings

    class Overreporting(FakeEmbeddings):
        """The endpoint, reporting `prompt_tokens` input tokens on its next answer whatever it was sent."""

        prompt_tokens: int | None = None

        def answer(self, path: str, body: dict[str, Any] | None) -> tuple[int, dict[str, str], bytes, float]:
            status, headers, data, delay = super().answer(path, body)
            if status == 200 and self.prompt_tokens is not None:
                payload = json.loads(data)
                payload["usage"] = {"prompt_tokens": self.prompt_tokens, "total_tokens": self.prompt_tokens}
                self.prompt_tokens = None
                data = json.dumps(payload).encode()
            return status, headers, data, delay

    with Overreporting(dim=64) as server:
        yield server


def priced_kb(root: Path, server: Any) -> Path:
    from tests.test_embed_openai import make_kb

    return make_kb(root, server, 'input_usd_per_mtok = "0.02"')  # OpenAI's small model's price


def test_an_embedding_request_reporting_more_input_than_was_sent_stops_the_sync_and_every_search(
        tmp_path: Path, embeddings: Any, capsys: pytest.CaptureFixture[str]) -> None:
    kb = priced_kb(tmp_path / "kb", embeddings)
    assert run(kb, capsys, "sync")[0] == 0
    (kb / "docs" / "more.md").write_text("# More\n\nA lighthouse keeper's log of ships.\n", encoding="utf-8")
    embeddings.prompt_tokens = 4_310_000_000  # the issue's €86.21 at $0.02 per million tokens

    code, out, err = run(kb, capsys, "sync")

    assert code == 65, out + err
    reconciliation = [line for line in ledger_lines(kb) if line["kind"] == "reconciliation"][-1]
    assert reconciliation["input_tokens"] == 4_310_000_000 and reconciliation["cost_usd"] == "86.200000"
    call_id = reconciliation["call_id"]
    assert "Traceback" not in err and f"call {call_id} (embed, fake-embed)" in err
    assert re.search(r"4,310,000,000 input tokens where what was sent bounds them at \d+", err)
    assert "recorded at €74.310345 as reported" in err

    requests = len(embeddings.requests)
    code, out, err = run(kb, capsys, "search", "lighthouse ship", "--json")
    assert code == 0, err
    (note,) = [n for n in json.loads(out)["notes"] if n.startswith("keyword results only")]
    assert f"pnk budget --resolve {call_id} --actual EUR" in note  # the note is whole, remedy included
    assert len(embeddings.requests) == requests  # the search sent nothing to the priced endpoint
    code, out, _err = run(kb, capsys, "budget", "--json")
    assert [o["call_id"] for o in json.loads(out)["overruns"]] == [call_id]

    assert run(kb, capsys, "budget", "--resolve", call_id, "--actual", "0.000001")[0] == 0
    assert run(kb, capsys, "sync")[0] == 0
    code, out, _err = run(kb, capsys, "search", "lighthouse ship", "--json")
    assert json.loads(out)["mode"] == "hybrid"


def test_the_budget_exhausted_search_note_is_whole(tmp_path: Path, embeddings: Any,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """It was cut at the refusal's first line, mid-sentence ("...would admit the whole units that fit):")."""
    from tests.budget_helpers import set_budget

    kb = priced_kb(tmp_path / "kb", embeddings)
    assert run(kb, capsys, "sync")[0] == 0
    spent = sum(Decimal(op["eur"]) for op in json.loads(run(kb, capsys, "budget", "--json")[1])["by_operation"])
    set_budget(kb, daily_eur=str(spent))  # not a micro-euro left today

    code, out, err = run(kb, capsys, "search", "lighthouse ship", "--json")

    assert code == 0, err
    (note,) = [n for n in json.loads(out)["notes"] if n.startswith("keyword results only")]
    assert "would breach 1 window" in note and "\n" not in note
    assert re.search(r'daily_eur \(\d{4}-\d\d-\d\d\): €[\d.]+ already counted \+ €[\d.]+ worst case > cap '
                     r'€[\d.]+; admit it with \[budget\] daily_eur = "[\d.]+" \(was "[\d.]+"\)\)$', note), note
