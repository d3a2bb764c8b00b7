"""One reader for every amount of money a user types (issue #24, item 10): the `[budget]` caps of
`pinakes.toml` and `pnk budget --resolve CALL_ID --actual EUR` both go through
`pinakes.budget.money.parse_amount`: plain ASCII decimal notation, finite, non-negative, at most the
ledger's six places. Anything else is a clear error naming the rule it broke, never decimal's own
exception or a traceback."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from pinakes.budget.money import MONEY_QUANTUM, AmountError, parse_amount
from pinakes.cli import main
from pinakes.init import init_kb
from pinakes.manifest import InvalidManifestError, load_manifest
from tests.budget_helpers import caps, open_accountant, set_budget, spend
from tests.fakes import FakeEmbedder, substitute_embedder

ACCEPTED = [("0", "0"), ("0.0312", "0.0312"), ("12", "12"), (" 2.50 ", "2.50"), ("0.000001", "0.000001"),
            ("999999999999.999999", "999999999999.999999")]
# (typed, a fragment of the reason)
REFUSED = [
    ("1e9999", "plain decimal notation"),  # decimal.Decimal reads it, and quantising it raised InvalidOperation
    ("1E3", "plain decimal notation"),
    ("NaN", "finite"),
    ("inf", "finite"),
    ("Infinity", "finite"),
    ("-0", "without a sign"),  # was accepted and written as -0.000000
    ("-1", ">= 0"),
    ("+1", "without a sign"),
    ("1_000", "plain decimal notation"),  # Decimal accepts PEP 515 underscores
    ("١٠٠", "ASCII digits"),  # Arabic-Indic digits, which Decimal also accepts
    ("１０", "ASCII digits"),  # full-width digits
    ("0.0000001", "six decimal places"),
    ("1234567890123", "too large"),
    ("1,5", "plain decimal notation"),
    (".5", "plain decimal notation"),
    ("", "empty"),
]


@pytest.mark.parametrize("typed, expected", ACCEPTED)
def test_plain_decimal_amounts_are_read_exactly(typed: str, expected: str) -> None:
    amount = parse_amount(typed)
    assert amount == Decimal(expected) and str(amount) == expected and not amount.is_signed()
    assert amount.quantize(MONEY_QUANTUM) == amount  # never more places than the ledger keeps


@pytest.mark.parametrize("typed, reason", REFUSED)
def test_every_other_form_is_refused_naming_the_rule(typed: str, reason: str) -> None:
    with pytest.raises(AmountError) as caught:
        parse_amount(typed)
    assert reason in str(caught.value) and "not an amount in EUR" in str(caught.value)


@pytest.fixture
def kb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    substitute_embedder(monkeypatch, lambda section, offline=None, threads=None: FakeEmbedder())
    root = tmp_path / "kb"
    init_kb(root, name="money")
    return root


@pytest.mark.parametrize("typed, reason", [row for row in REFUSED if row[0]])
def test_pnk_budget_actual_refuses_what_the_parser_refuses_without_a_traceback(
        kb: Path, capsys: pytest.CaptureFixture[str], typed: str, reason: str) -> None:
    call_id = spend(kb, "0.40", reconcile=False)
    ledger = kb / ".pinakes" / "ledger.jsonl"
    before = ledger.read_bytes()
    capsys.readouterr()

    assert main(["-C", str(kb), "budget", "--resolve", call_id, "--actual", typed]) == 2

    err = capsys.readouterr().err
    assert "Traceback" not in err and "InvalidOperation" not in err
    assert "pnk: error: --actual" in err and reason in err and "remedy:" in err
    assert ledger.read_bytes() == before  # nothing was resolved


def test_pnk_budget_actual_accepts_the_amount_an_unrecorded_reconciliation_names(
        kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    call_id = spend(kb, "0.40", reconcile=False)
    assert main(["-C", str(kb), "budget", "--resolve", call_id, "--actual", "0.000000"]) == 0
    assert f"resolved {call_id} at €0.0000" in capsys.readouterr().out


def test_the_accountant_refuses_a_negative_zero_even_from_code(kb: Path) -> None:
    from pinakes.errors import UsageError

    call_id = spend(kb, "0.40", reconcile=False)
    with pytest.raises(UsageError):
        open_accountant(kb, caps()).resolve(call_id, Decimal("-0"))


@pytest.mark.parametrize("value", ['"1e9999"', '"-0"', '"1_000"', '"١٠"', '"NaN"', "1e400", '"0.0000001"'])
def test_a_manifest_cap_refuses_what_the_parser_refuses(kb: Path, value: str) -> None:
    manifest = kb / "pinakes.toml"
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(text.replace('daily_eur = "5.00"', f"daily_eur = {value}"), encoding="utf-8")
    assert f"daily_eur = {value}" in manifest.read_text(encoding="utf-8")
    with pytest.raises(InvalidManifestError) as caught:
        load_manifest(manifest)
    (problem,) = caught.value.problems
    assert problem.key == "budget.daily_eur" and "not an amount in EUR" in problem.problem and problem.remedy


def test_a_manifest_cap_reads_a_plain_amount_as_typed(kb: Path) -> None:
    set_budget(kb, daily_eur="3.25")
    assert load_manifest(kb / "pinakes.toml").budget.daily_eur == Decimal("3.25")
