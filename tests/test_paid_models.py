"""A choice of model for each paid path (issue #26, item 11): `[extraction] model` and `[deep] model`.

Each is checked against the packaged price table when the manifest loads (a model the accountant
cannot price is a call it cannot cap), sent in every request of its path, priced in its reservations,
and recorded on every ledger line, which `pnk budget --json` shows per operation. The requests go
through the real `anthropic` client to the local Messages API (tests/fake_anthropic.py), which records
the model each one named.

The extraction's model joins its fingerprint (another model's text is another extraction): a paid
run after a model change pays for the PDFs again under the new key, the old entries stay in the
cache (paid, never swept), so switching back costs nothing; a query never calls an extraction made
with another priced model stale (a model is a setting, not an older version of the extractor).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("anthropic", reason="the [claude] extra is not installed: the paid path cannot run")
pytest.importorskip("pypdfium2", reason="the [pdf] extra is not installed: nothing renders pages")

from pinakes.budget import load_prices
from pinakes.cli import main
from pinakes.deep import shapes
from pinakes.extract import claude_vision
from pinakes.extract.registry import EXTRACTORS
from pinakes.manifest import (
    DEFAULT_DEEP_MODEL,
    DEFAULT_EXTRACTION_MODEL,
    InvalidManifestError,
    load_manifest,
)
from pinakes.sidecar import read_sidecar
from tests.budget_helpers import set_budget
from tests.deep_helpers import DeepFake, demo_copy, ledger_records, serving, synced_demo
from tests.fake_anthropic import FakeAnthropic, scanned_pdf
from tests.paid_helpers import paid_kb, sync

KEY = "sk-ant-paid-models-test-key"
EXTRACTION_MODEL = "claude-haiku-4-5"
DEEP_MODEL = "claude-sonnet-5"
QUESTION = "What is the Registrar's extension in the staff directory?"


def set_model(kb: Path, section: str, model: str) -> None:
    """`model = "..."` in `[section]` of the KB's manifest (the section added when absent)."""
    manifest = kb / "pinakes.toml"
    text = manifest.read_text(encoding="utf-8")
    line = f'model = "{model}"'
    header = f"[{section}]\n"
    if header in text:
        text = text.replace(header, header + line + "\n", 1)
    else:
        text += f"\n{header}{line}\n"
    manifest.write_text(text, encoding="utf-8")


def budget_json(kb: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["-C", str(kb), "budget", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# --- the manifest ----------------------------------------------------------------------------------


def test_the_defaults_are_the_models_each_path_called_before_the_keys_existed(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeAnthropic() as server:
        kb = paid_kb(tmp_path / "kb", monkeypatch, server, key=KEY, name="defaults")
    manifest = load_manifest(kb / "pinakes.toml")
    assert (manifest.extraction.model, manifest.deep.model) == (DEFAULT_EXTRACTION_MODEL, DEFAULT_DEEP_MODEL)
    assert DEFAULT_EXTRACTION_MODEL == claude_vision.MODEL and DEFAULT_DEEP_MODEL == shapes.MODEL
    assert {DEFAULT_EXTRACTION_MODEL, DEFAULT_DEEP_MODEL} <= set(load_prices().models)
    # A KB that never set the key keeps the fingerprint its paid PDFs were extracted under.
    spec = EXTRACTORS["claude-vision"]
    assert spec.fingerprint(DEFAULT_EXTRACTION_MODEL) == spec.fingerprint()
    assert spec.fingerprint(EXTRACTION_MODEL) != spec.fingerprint()
    # A priced model's extraction is current (a setting, not a version); any other fingerprint is not.
    assert spec.is_current(spec.fingerprint(EXTRACTION_MODEL)) and spec.is_current(spec.fingerprint())
    assert not spec.is_current(spec.fingerprint("claude-unpriced-1"))


@pytest.mark.parametrize("section", ["extraction", "deep"])
def test_an_unpriced_model_is_refused_at_load_naming_the_file_the_key_the_priced_models_and_the_fix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], section: str) -> None:
    with FakeAnthropic() as server:
        kb = paid_kb(tmp_path / "kb", monkeypatch, server, key=KEY, name="unpriced")
        set_model(kb, section, "claude-sonet-5")  # a typo of a priced model
        with pytest.raises(InvalidManifestError) as caught:
            load_manifest(kb / "pinakes.toml")
        problem = caught.value
        assert problem.path == kb / "pinakes.toml"
        assert [p.key for p in problem.problems] == [f"{section}.model"]
        assert "'claude-sonet-5' has no price in the packaged price table" in problem.message
        assert "did you mean 'claude-sonnet-5'" in problem.message
        assert all(model in (problem.remedy or "") for model in load_prices().models)

        capsys.readouterr()  # through a command that would spend: refused before anything is planned
        code = main(["-C", str(kb), "ask", "--deep", QUESTION] if section == "deep"
                    else ["-C", str(kb), "sync", "--extract=claude-vision"])
        err = capsys.readouterr().err
        assert code != 0 and "Traceback" not in err
        assert str(kb / "pinakes.toml") in err and f"{section}.model" in err and "remedy:" in err
        assert server.requests == []
    assert not (kb / ".pinakes" / "ledger.jsonl").exists()


# --- claude-vision extraction ----------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture
def scan_kb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: FakeAnthropic) -> Path:
    root = paid_kb(tmp_path / "kb", monkeypatch, server, key=KEY, name="models")
    (root / "docs/scan.pdf").write_bytes(scanned_pdf(2))
    set_budget(root, confirm_above_eur="2.00")
    return root


def recorded_fingerprint(kb: Path) -> object:
    kb_id = load_manifest(kb / "pinakes.toml").kb.id
    extraction = read_sidecar(kb / "docs/scan.pdf.pnk.yaml", kb_id=kb_id).extraction or {}
    return extraction.get("fingerprint")


def test_extraction_sends_reserves_and_records_the_model_the_manifest_names(
        scan_kb: Path, server: FakeAnthropic, capsys: pytest.CaptureFixture[str]) -> None:
    set_model(scan_kb, "extraction", EXTRACTION_MODEL)

    assert sync(scan_kb, "--extract=claude-vision") == 0

    assert [r.body["model"] for r in server.messages_requests() if r.body] == [EXTRACTION_MODEL]
    records = ledger_records(scan_kb)
    assert [(r["kind"], r["model"]) for r in records] == [("reservation", EXTRACTION_MODEL),
                                                          ("reconciliation", EXTRACTION_MODEL)]
    price = load_prices().price(EXTRACTION_MODEL)
    assert price is not None
    shape = claude_vision.call_shape(2, unit="docs/scan.pdf", model=EXTRACTION_MODEL)
    assert Decimal(records[0]["cost_usd"]) == price.cost_usd(shape.max_input_tokens, shape.max_output_tokens)
    report = budget_json(scan_kb, capsys)
    assert [op["models"] for op in report["by_operation"]] == [[{"model": EXTRACTION_MODEL, "calls": 1}]]
    assert recorded_fingerprint(scan_kb) == EXTRACTORS["claude-vision"].fingerprint(EXTRACTION_MODEL)

    capsys.readouterr()  # the text is served as current: a model is a setting, not an older extractor
    assert main(["-C", str(scan_kb), "search", "--json", "--mode", "bm25", "page"]) == 0
    passages = json.loads(capsys.readouterr().out)["passages"]
    assert passages and all(p["stale_extraction"] is None for p in passages)
    capsys.readouterr()
    assert main(["-C", str(scan_kb), "budget"]) == 0
    assert re.search(rf"extract .* 1 call .*{EXTRACTION_MODEL}", capsys.readouterr().out)


def test_the_estimate_counts_and_prices_the_request_the_chosen_model_would_get(
        scan_kb: Path, server: FakeAnthropic, capsys: pytest.CaptureFixture[str]) -> None:
    set_model(scan_kb, "extraction", EXTRACTION_MODEL)
    capsys.readouterr()
    assert sync(scan_kb, "--estimate-only", "--extract=claude-vision", "--json") == 0
    estimate = json.loads(capsys.readouterr().out)
    assert estimate["model"] == EXTRACTION_MODEL
    assert [(r.path, (r.body or {}).get("model")) for r in server.requests] == [
        ("/v1/messages/count_tokens", EXTRACTION_MODEL)]
    prices = load_prices()
    price = prices.price(EXTRACTION_MODEL)
    assert price is not None
    shape = claude_vision.call_shape(2, unit="docs/scan.pdf", model=EXTRACTION_MODEL)
    worst = price.cost_usd(shape.max_input_tokens, shape.max_output_tokens) / prices.usd_per_eur
    assert abs(Decimal(estimate["reserved_eur"]) - worst) < Decimal("0.000002")


def test_another_model_is_another_extraction_and_switching_back_costs_nothing(
        scan_kb: Path, server: FakeAnthropic) -> None:
    set_model(scan_kb, "extraction", EXTRACTION_MODEL)
    assert sync(scan_kb, "--extract=claude-vision") == 0
    haiku = recorded_fingerprint(scan_kb)

    manifest = scan_kb / "pinakes.toml"
    manifest.write_text(manifest.read_text(encoding="utf-8").replace(f'model = "{EXTRACTION_MODEL}"\n', ""),
                        encoding="utf-8")
    assert sync(scan_kb, "--extract=claude-vision") == 0  # the default model: paid for again, as its own entry
    assert [r.body["model"] for r in server.messages_requests() if r.body] == [EXTRACTION_MODEL,
                                                                               DEFAULT_EXTRACTION_MODEL]
    assert recorded_fingerprint(scan_kb) == EXTRACTORS["claude-vision"].fingerprint() != haiku

    set_model(scan_kb, "extraction", EXTRACTION_MODEL)
    assert sync(scan_kb, "--extract=claude-vision") == 0  # back: the cache still holds that extraction
    assert len(server.messages_requests()) == 2
    assert recorded_fingerprint(scan_kb) == haiku
    assert sync(scan_kb) == 0  # a free run keeps whichever paid extraction is recorded
    assert len(server.messages_requests()) == 2 and recorded_fingerprint(scan_kb) == haiku


# --- pnk ask --deep --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def synced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synced_demo(tmp_path_factory.mktemp("deep-models"))


@pytest.fixture
def demo(synced: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = demo_copy(synced, tmp_path, monkeypatch)
    set_budget(root, confirm_above_eur="10.00", per_operation_eur="10.00", daily_eur="20.00", monthly_eur="50.00")
    return root


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[DeepFake]:
    yield from serving(monkeypatch)


def test_deep_sends_reserves_and_records_the_model_the_manifest_names(
        demo: Path, fake: DeepFake, capsys: pytest.CaptureFixture[str]) -> None:
    set_model(demo, "deep", DEEP_MODEL)
    manifest = load_manifest(demo / "pinakes.toml")
    capsys.readouterr()
    assert main(["-C", str(demo), "ask", "--json", QUESTION]) == 0  # the free quote prices that model
    quote = json.loads(capsys.readouterr().out)
    worst, _calls = shapes.worst_case(manifest, quote["deep_branch"])
    assert Decimal(quote["deep_worst_case_eur"]) == worst
    as_default = replace(manifest, deep=replace(manifest.deep, model=DEFAULT_DEEP_MODEL))
    assert worst != shapes.worst_case(as_default, quote["deep_branch"])[0]  # sonnet's rates, not the default's

    assert main(["-C", str(demo), "ask", "--deep", "--json", QUESTION]) == 0
    result = json.loads(capsys.readouterr().out)
    assert {call["model"] for call in result["cost"]["calls"]} == {DEEP_MODEL}

    sent = [body["model"] for body in fake.bodies()]
    assert sent and set(sent) == {DEEP_MODEL}
    records = ledger_records(demo)
    assert {r["model"] for r in records} == {DEEP_MODEL}
    price = load_prices().price(DEEP_MODEL)
    assert price is not None
    shape = shapes.call_shape(manifest, unit="any")
    assert shape.model == DEEP_MODEL
    assert {Decimal(r["cost_usd"]) for r in records if r["kind"] == "reservation"} == {
        price.cost_usd(shape.max_input_tokens, shape.max_output_tokens)}
    report = budget_json(demo, capsys)
    assert [op["models"] for op in report["by_operation"]] == [[{"model": DEEP_MODEL, "calls": len(sent)}]]
