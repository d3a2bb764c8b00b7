"""`pnk budget`, doctor's budget checks, and the ledger surviving `pnk sync --rebuild` / `--clear-cache`."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import replace
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import pytest

import pinakes.budget
from pinakes.cli import main
from pinakes.doctor import DoctorContext
from pinakes.doctor.checks_budget import checks
from pinakes.extract.cache import ExtractCache
from pinakes.extract.types import ExtractedText
from pinakes.init import init_kb
from tests.budget_helpers import Clock, spend
from tests.fakes import FakeEmbedder, substitute_embedder


@pytest.fixture
def kb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    substitute_embedder(monkeypatch, lambda section, offline=None, threads=None: FakeEmbedder())
    root = tmp_path / "kb"
    init_kb(root, name="budget")
    (root / "docs/a.md").write_text("# A\n\nText.\n", encoding="utf-8")
    return root


def now_clock() -> Clock:
    return Clock(datetime.now(UTC))


def budget_checks(kb: Path) -> dict[str, tuple[str, str]]:
    return {check.name: (check.status, check.detail) for check in checks(DoctorContext(kb))}


def set_manifest(kb: Path, key: str, value: str) -> None:
    """Rewrite `key = ...` in the KB's manifest (the template writes every [budget] key)."""
    manifest = kb / "pinakes.toml"
    text, count = re.subn(rf"(?m)^{key} = \S+", f"{key} = {value}", manifest.read_text(encoding="utf-8"))
    assert count == 1, key
    manifest.write_text(text, encoding="utf-8")


def test_budget_on_a_kb_that_never_spent(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-C", str(kb), "budget"]) == 0
    out = capsys.readouterr().out
    assert "No paid calls recorded." in out and "daily_eur" in out and "Prices: as of" in out
    assert not (kb / ".pinakes" / "ledger.jsonl").exists()  # reading writes nothing


def test_budget_shows_unknown_outcomes_and_resolve_closes_them(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spend(kb, "0.10", now_clock())
    call_id = spend(kb, "0.40", now_clock(), reconcile=False)
    assert main(["-C", str(kb), "budget"]) == 0
    out = capsys.readouterr().out
    assert "UNKNOWN OUTCOMES: 1 call counted at its reserved amount" in out and call_id in out and "€0.4000" in out

    before = (kb / ".pinakes" / "ledger.jsonl").read_bytes()
    assert main(["-C", str(kb), "budget", "--resolve", call_id, "--actual", "0.0312"]) == 0
    assert f"resolved {call_id} at €0.0312" in capsys.readouterr().out
    assert (kb / ".pinakes" / "ledger.jsonl").read_bytes().startswith(before)

    assert main(["-C", str(kb), "budget", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True and report["unknown_outcomes"] == []
    daily = report["windows"][1]
    assert daily["window"] == "daily_eur" and Decimal(daily["spent_eur"]) == Decimal("0.1312")
    assert daily["rates"] == ["1 USD/EUR (rate as of 2026-12-01, prices as of 2026-12-01)"]
    assert [op["calls"] for op in report["by_operation"]] == [1, 1]


@pytest.mark.parametrize("argv, fragment", [
    (["budget", "--resolve", "01J9ZX7K3M4N5P6Q7R8S9T0VWX"], "go together"),
    (["budget", "--resolve", "01J9ZX7K3M4N5P6Q7R8S9T0VWX", "--actual", "lots"], "not an amount"),
    (["budget", "--resolve", "01J9ZX7K3M4N5P6Q7R8S9T0VWX", "--actual", "0.1"], "no reservation"),
])
def test_budget_usage_errors_exit_two(kb: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                                      fragment: str) -> None:
    assert main(["-C", str(kb), *argv]) == 2
    err = capsys.readouterr().err
    assert fragment in err and "remedy:" in err and "Traceback" not in err


def test_rebuild_and_clear_cache_never_touch_the_ledger(kb: Path) -> None:
    assert main(["-C", str(kb), "sync", "--quiet"]) == 0
    spend(kb, "0.10", now_clock())
    spend(kb, "0.20", now_clock(), reconcile=False)
    ledger = kb / ".pinakes" / "ledger.jsonl"
    before = ledger.read_bytes()
    for argv in (["sync", "--rebuild", "--quiet"], ["sync", "--clear-cache", "--yes", "--quiet"],
                 ["sync", "--clear-cache=paid", "--yes", "--quiet"], ["sync", "--rebuild", "--clear-cache=paid",
                                                                      "--yes", "--quiet"]):
        assert main(["-C", str(kb), *argv]) == 0, argv
        assert ledger.read_bytes() == before, argv


# -- doctor ----------------------------------------------------------------------------------------


def test_doctor_warns_when_unknown_outcomes_pass_a_quarter_of_a_window(kb: Path) -> None:
    set_manifest(kb, "daily_eur", '"1.00"')
    spend(kb, "0.25", now_clock(), reconcile=False)  # exactly a quarter: not past it
    assert budget_checks(kb)["unknown outcomes"][0] == "OK"
    spend(kb, "0.01", now_clock(), reconcile=False)
    status, detail = budget_checks(kb)["unknown outcomes"]
    assert status == "WARN" and "past a quarter of daily_eur" in detail


def test_doctor_fails_on_a_damaged_ledger_line(kb: Path) -> None:
    spend(kb, "0.10", now_clock())
    ledger = kb / ".pinakes" / "ledger.jsonl"
    ledger.write_bytes(ledger.read_bytes().replace(b'"kind":"reconciliation"', b'"kind":"void"'))
    status, detail = budget_checks(kb)["spending ledger"]
    assert status == "FAIL" and "line 2" in detail


def test_doctor_warns_on_a_stale_price_table_only_where_something_spends(
        kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.budget_helpers import PRICES

    old = replace(PRICES, as_of=date(2020, 1, 1))
    monkeypatch.setattr(pinakes.budget, "load_prices", lambda: old)
    status, detail = budget_checks(kb)["price table"]
    assert status == "OK" and "stale, but nothing here spends" in detail  # free backend
    set_manifest(kb, "backend", '"claude-vision"')
    status, detail = budget_checks(kb)["price table"]
    assert status == "WARN" and "claude-vision extraction refuses" in detail


def test_doctor_prices_paid_orphans_from_the_ledger(kb: Path) -> None:
    assert main(["-C", str(kb), "sync", "--quiet"]) == 0
    call_ids = [spend(kb, "0.10", now_clock()), spend(kb, "0.05", now_clock())]
    cache = ExtractCache(kb / ".pinakes" / "cache" / "extract")
    extracted = ExtractedText(text="scanned", pages=((0, 7),), backend="claude-vision", fingerprint="abc123")
    cache.put("0123456789abcdef", extracted, paid=True, operation_id="op", call_ids=call_ids)
    status, detail = budget_checks(kb)["paid orphans"]
    assert status == "WARN" and "1 paid extraction belongs to no active document" in detail and "worth €0.1500" in detail
    from pinakes.doctor import run_checks

    everything = list(run_checks(DoctorContext(kb)))
    warned = [check.name for check in everything if check.status != "OK" and "paid" in check.detail]
    assert warned == ["paid orphans"]  # said once, priced; the cache check only counts them


def test_doctor_reports_the_hook_and_paid_backend_split(kb: Path) -> None:
    set_manifest(kb, "backend", '"claude-vision"')
    assert "hooks and paid backend" in budget_checks(kb)  # not a git repository: said as such
    subprocess.run(["git", "init", "-q", str(kb)], check=True)
    assert main(["-C", str(kb), "install-hooks"]) == 0
    status, detail = budget_checks(kb)["hooks and paid backend"]
    assert status == "OK" and "force the free extractor" in detail
    hook = Path(subprocess.run(["git", "rev-parse", "--git-path", "hooks/post-commit"], cwd=kb,
                               capture_output=True, text=True, check=True).stdout.strip())
    hook = hook if hook.is_absolute() else kb / hook
    hook.write_text("#!/bin/sh\npnk sync --index-only --quiet\n", encoding="utf-8")
    status, detail = budget_checks(kb)["hooks and paid backend"]
    assert status == "FAIL" and "post-commit" in detail
