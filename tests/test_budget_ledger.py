"""The ledger (spec §5): one O_APPEND write per sub-4 KB record, a CRC on every line so a torn or
edited line is reported by number and never summed, and nothing in it but accounting."""

from __future__ import annotations

import json
import os
from decimal import Decimal
from pathlib import Path

import pytest

from pinakes.budget import Accountant, LedgerDamagedError
from pinakes.budget.ledger import MAX_RECORD_BYTES, Ledger
from pinakes.cli import main
from pinakes.init import init_kb
from tests.budget_helpers import PRICES, Clock, caps, eur_shape, open_accountant, spend

# Every key a record may hold (spec §5: "nothing more"), and the CRC.
RECORD_KEYS = ["v", "ts", "kind", "operation", "operation_id", "call_id", "model", "input_tokens",
               "output_tokens", "cost_usd", "usd_per_eur", "prices_as_of", "rate_as_of", "kb_id", "crc"]


def ledger_path(kb: Path) -> Path:
    return kb / ".pinakes" / "ledger.jsonl"


def test_a_record_holds_accounting_and_nothing_of_the_documents_or_questions(tmp_path: Path) -> None:
    accountant = open_accountant(tmp_path, caps())
    shape = eur_shape("0.10", unit="docs/Confidential merger memo.pdf")
    plan = accountant.plan("ask", [shape], interactive=False)
    with plan.call(shape, unit="What did the board decide about the merger?") as call:
        call.reconcile(input_tokens=100, output_tokens=10)
    data = ledger_path(tmp_path).read_bytes()
    assert b"merger" not in data and b"Confidential" not in data and b"board" not in data
    for line in data.splitlines():
        assert list(json.loads(line)) == RECORD_KEYS
        assert len(line) + 1 < MAX_RECORD_BYTES


def test_each_record_is_one_write_of_the_whole_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writes: list[bytes] = []
    real_write = os.write

    def recording_write(fd: int, data: bytes) -> int:
        writes.append(bytes(data))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", recording_write)
    spend(tmp_path, "0.10")
    assert [w.endswith(b"\n") and w.count(b"\n") == 1 for w in writes] == [True, True]
    assert b"".join(writes) == ledger_path(tmp_path).read_bytes()


def test_an_edited_line_is_reported_by_number_never_summed_and_stops_spending(tmp_path: Path) -> None:
    spend(tmp_path, "0.10")
    spend(tmp_path, "0.20")
    lines = ledger_path(tmp_path).read_bytes().splitlines(keepends=True)
    lines[3] = lines[3].replace(b'"cost_usd":"0.200000"', b'"cost_usd":"0.000001"')  # a lowered bill
    ledger_path(tmp_path).write_bytes(b"".join(lines))

    report = Accountant.for_report(tmp_path, caps(), prices=PRICES, clock=Clock()).report()
    assert [(d.number, "CRC mismatch" in d.reason) for d in report.damaged] == [(4, True)]
    # Line 4 is not summed: the call it closed falls back to its reservation (0.20), never 0.000001.
    assert report.windows[1].spent == Decimal("0.30")
    with pytest.raises(LedgerDamagedError) as refused:
        open_accountant(tmp_path, caps())
    assert refused.value.lines == (4,) and "line 4" in refused.value.message


def test_a_line_that_does_not_parse_is_damaged_too(tmp_path: Path) -> None:
    spend(tmp_path, "0.10")
    with open(ledger_path(tmp_path), "ab") as handle:
        handle.write(b"this is not a record\n")
    spend_blocked = pytest.raises(LedgerDamagedError)
    with spend_blocked:
        spend(tmp_path, "0.10")


def test_a_torn_tail_is_never_summed_and_the_next_writer_sets_it_aside(tmp_path: Path) -> None:
    spend(tmp_path, "0.10")
    intact = ledger_path(tmp_path).read_bytes()
    torn = intact.splitlines()[0][:57]  # an interrupted write: a prefix, no newline
    with open(ledger_path(tmp_path), "ab") as handle:
        handle.write(torn)
    report = Accountant.for_report(tmp_path, caps(), prices=PRICES, clock=Clock()).report()
    assert report.torn_tail is not None and report.torn_tail.number == 3 and report.damaged == ()
    assert report.windows[1].spent == Decimal("0.10")

    spend(tmp_path, "0.20")  # seals the tail under the lock, then appends
    data = ledger_path(tmp_path).read_bytes()
    assert data.startswith(intact) and data[len(intact):].count(b"\n") == 2  # the two new records
    assert (tmp_path / ".pinakes" / "ledger.torn").read_bytes() == torn + b"\n"
    ledger = Ledger(ledger_path(tmp_path))
    ledger.refresh()
    assert ledger.damaged == [] and ledger.torn_tail is None and len(ledger.records) == 4


def test_a_whole_record_missing_only_its_newline_is_kept_and_counted(tmp_path: Path) -> None:
    spend(tmp_path, "0.10")
    ledger_path(tmp_path).write_bytes(ledger_path(tmp_path).read_bytes().rstrip(b"\n"))
    spend(tmp_path, "0.20")
    report = Accountant.for_report(tmp_path, caps(), prices=PRICES, clock=Clock()).report()
    assert report.damaged == () and report.windows[1].spent == Decimal("0.30")


def test_pnk_budget_reports_damaged_lines_and_exits_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kb = tmp_path / "kb"
    init_kb(kb, name="ledger")
    spend(kb, "0.10")
    data = ledger_path(kb).read_bytes()
    ledger_path(kb).write_bytes(data.replace(b'"input_tokens":99999', b'"input_tokens":99998', 1))
    assert main(["-C", str(kb), "budget"]) == 1
    out = capsys.readouterr().out
    assert "DAMAGED LINES" in out and "line 1: CRC mismatch" in out
    assert main(["-C", str(kb), "budget", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["damaged_lines"][0]["line"] == 1
