"""The four rules both paid entry points share (`pinakes.paid`, spec §1), through the real `anthropic`
client against the local Messages API (tests/fake_anthropic.py) and the real accountant: the key
from a Pinakes-specific variable only, the SDK's retries off, a failure classified by whether it
billed, and a reconciliation from the response's own usage."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from pinakes import paid
from pinakes.budget import Accountant, CallShape
from pinakes.errors import ApiKeyError, PaidCallError
from tests.budget_helpers import TEST_MODEL, caps, open_accountant
from tests.fake_anthropic import INPUT_TOKENS_PER_REQUEST, FakeAnthropic, Reply

KEY = "sk-ant-paid-rules-not-a-real-key"


def shape() -> CallShape:
    return CallShape(TEST_MODEL, max_input_tokens=20_000, max_output_tokens=500)


# --- rule 1: the key (no client needed) ------------------------------------------------------------


def test_the_key_comes_from_the_pinakes_variable_or_a_named_file_and_is_never_printed(tmp_path: Path) -> None:
    assert paid.read_api_key(environ={"PINAKES_ANTHROPIC_API_KEY": f" {KEY}\n"}).reveal() == KEY
    key_file = tmp_path / "key"
    key_file.write_text(f"{KEY}\n# a comment line the key file may carry\n", encoding="utf-8")
    key = paid.read_api_key(key_file, environ={})
    assert key.reveal() == KEY and KEY not in repr(key) and KEY not in str(key) and KEY not in f"{key!r}"
    with pytest.raises(ApiKeyError, match="PINAKES_ANTHROPIC_API_KEY is not set"):
        paid.read_api_key(environ={})
    with pytest.raises(ApiKeyError, match="cannot read the API key file"):
        paid.read_api_key(tmp_path / "absent", environ={})
    (tmp_path / "empty").write_text("\n", encoding="utf-8")
    with pytest.raises(ApiKeyError, match="empty"):
        paid.read_api_key(tmp_path / "empty", environ={})


def test_a_generic_anthropic_key_never_enables_spending_and_the_refusal_does_not_print_it() -> None:
    with pytest.raises(ApiKeyError) as caught:
        paid.read_api_key(environ={"ANTHROPIC_API_KEY": KEY})
    rendered = caught.value.render()
    assert "ANTHROPIC_API_KEY is set but deliberately not read" in rendered
    assert "PINAKES_ANTHROPIC_API_KEY" in rendered and KEY not in rendered
    assert caught.value.exit_code == 2  # a configuration problem, not a failed run


def test_billed_tokens_come_from_the_usage_and_cache_tokens_are_never_under_counted() -> None:
    plain = SimpleNamespace(usage=SimpleNamespace(input_tokens=1200, output_tokens=80))
    assert paid.billed_tokens(cast(paid.Message, plain)) == (1200, 80)
    cached = SimpleNamespace(usage=SimpleNamespace(input_tokens=100, output_tokens=5,
                                                   cache_creation_input_tokens=10, cache_read_input_tokens=7))
    assert paid.billed_tokens(cast(paid.Message, cached)) == (100 + 2 * 10 + 7, 5)  # a cache write bills at most 2x input


def test_paid_call_refuses_a_max_tokens_that_is_not_the_reservation(tmp_path: Path) -> None:
    plan = open_accountant(tmp_path, caps()).plan("extract", [shape()], interactive=False)
    with pytest.raises(ValueError, match="max_tokens"):
        # Neither is ever touched: the request is refused before the SDK or the client is used.
        paid.paid_call(cast(paid.SDK, object()), cast(paid.Client, object()), plan, shape(), {"max_tokens": 5})
    assert plan.call_ids == []  # refused before anything was reserved


# --- rules 2-4 through the real client ---------------------------------------------------------------


@pytest.fixture
def sdk() -> paid.SDK:
    module = pytest.importorskip("anthropic", reason="the [claude] extra is not installed: no client to test")
    return cast(paid.SDK, module)  # the module is the SDK the protocol describes


@pytest.fixture
def server() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        yield fake


REQUEST = {"model": TEST_MODEL, "messages": [{"role": "user", "content": [
    {"type": "text", "text": "These are pages 1 to 1 of a 1-page PDF."}]}]}


def run_call(tmp_path: Path, sdk: paid.SDK, client: paid.Client) -> tuple[Accountant, paid.PaidAnswer | PaidCallError]:
    accountant = open_accountant(tmp_path, caps())
    plan = accountant.plan("extract", [shape()], interactive=False)
    try:
        return accountant, paid.paid_call(sdk, client, plan, shape(), REQUEST, unit="unit-a")
    except PaidCallError as exc:
        return accountant, exc


def test_the_client_takes_the_key_explicitly_and_never_retries_on_its_own(
        sdk: paid.SDK, server: FakeAnthropic, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-generic-must-not-be-sent")
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "generic-token-must-not-be-sent")
    client = paid.make_client(sdk, paid.ApiKey(KEY), base_url=server.url)
    assert cast(Any, client).max_retries == 0  # the SDK's own attribute, outside the protocol pinakes uses
    server.queue(Reply("status", 529, headers={"retry-after": "0"}))

    _, outcome = run_call(tmp_path, sdk, client)

    assert isinstance(outcome, PaidCallError)
    assert len(server.messages_requests()) == 1  # the SDK did not retry the 529 behind our back
    headers = server.messages_requests()[0].headers
    assert headers.get("x-api-key") == KEY or headers.get("authorization") == f"Bearer {KEY}"
    assert "must-not-be-sent" not in repr(headers)  # no credential the environment offered was used


def test_an_answer_is_reconciled_from_its_own_usage(sdk: paid.SDK, server: FakeAnthropic, tmp_path: Path) -> None:
    client = paid.make_client(sdk, paid.ApiKey(KEY), base_url=server.url)
    accountant, answer = run_call(tmp_path, sdk, client)
    assert isinstance(answer, paid.PaidAnswer)
    assert answer.message.usage.input_tokens == INPUT_TOKENS_PER_REQUEST
    # $1/Mtok each way at 1 USD/EUR (tests/budget_helpers.py): the usage, not the 20,500-token bound.
    expected = (Decimal(INPUT_TOKENS_PER_REQUEST) + Decimal(server.output_tokens_per_page)) / 1_000_000
    assert answer.cost_eur == expected
    report = accountant.report()
    assert not report.unknown and report.windows[1].spent == expected


@pytest.mark.parametrize("status, retry_after", [(429, 7.0), (529, 7.0), (400, None), (401, None)])
def test_an_error_status_is_void_and_only_a_busy_one_is_retryable(
        sdk: paid.SDK, server: FakeAnthropic, tmp_path: Path, status: int, retry_after: float | None) -> None:
    client = paid.make_client(sdk, paid.ApiKey(KEY), base_url=server.url)
    server.queue(Reply("status", status, headers={"retry-after": "7"}))
    accountant, failure = run_call(tmp_path, sdk, client)
    assert isinstance(failure, PaidCallError)
    assert (failure.outcome, failure.status, failure.retry_after_s) == ("void", status, retry_after)
    assert "nothing was billed" in failure.message
    report = accountant.report()
    assert not report.unknown and report.windows[1].spent == 0
    if status == 401:
        assert "PINAKES_ANTHROPIC_API_KEY" in (failure.remedy or "") and KEY not in failure.render()


def test_a_timeout_is_an_unknown_outcome_counted_at_its_reservation(sdk: paid.SDK, server: FakeAnthropic, tmp_path: Path) -> None:
    client = paid.make_client(sdk, paid.ApiKey(KEY), base_url=server.url, timeout=0.3)
    server.queue(Reply("ok", delay_s=1.5))
    accountant, failure = run_call(tmp_path, sdk, client)
    assert isinstance(failure, PaidCallError)
    assert (failure.outcome, failure.retry_after_s) == ("unknown", None)
    assert "timed out" in failure.message
    assert f"pnk budget --resolve {failure.call_id} --actual" in (failure.remedy or "")
    report = accountant.report()
    assert [u.call_id for u in report.unknown] == [failure.call_id]
    assert report.windows[1].spent == Decimal("0.0205")  # 20,000 + 500 tokens at $1/Mtok


def test_an_unreadable_body_is_an_unknown_outcome(sdk: paid.SDK, server: FakeAnthropic, tmp_path: Path) -> None:
    client = paid.make_client(sdk, paid.ApiKey(KEY), base_url=server.url)
    server.queue(Reply("malformed"))
    accountant, failure = run_call(tmp_path, sdk, client)
    assert isinstance(failure, PaidCallError) and failure.outcome == "unknown"
    assert [u.call_id for u in accountant.report().unknown] == [failure.call_id]
    assert "unreadable" in failure.message


def test_a_request_that_never_connected_is_void(sdk: paid.SDK, tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nobody listens on: bound, then closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = paid.make_client(sdk, paid.ApiKey(KEY), base_url=f"http://127.0.0.1:{port}")
    accountant, failure = run_call(tmp_path, sdk, client)
    assert isinstance(failure, PaidCallError)
    assert (failure.outcome, failure.message) == ("void", "the request could not connect; nothing was billed")
    assert not accountant.report().unknown


def test_an_exception_that_is_no_api_failure_propagates_and_counts_as_possibly_billed(sdk: paid.SDK, tmp_path: Path) -> None:
    class Broken:
        class messages:  # the SDK's attribute name
            @staticmethod
            def create(**_kwargs: object) -> object:
                raise KeyError("a bug in the caller")

    accountant = open_accountant(tmp_path, caps())
    plan = accountant.plan("extract", [shape()], interactive=False)
    with pytest.raises(KeyError):
        paid.paid_call(sdk, cast(paid.Client, Broken()), plan, shape(), REQUEST)
    assert len(accountant.report().unknown) == 1


def test_the_shared_rules_are_not_allowlisted_and_the_gate_scans_them() -> None:
    """Spec §1: paid.py imports no client (it is handed the caller's), so it stays off the allowlist
    and the AST scan covers it like any other module."""
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT
    from tests.paid_gate_harness import ALLOWLIST_NAME, packaged_modules, paid_imports, read_allowlist

    modules = dict(packaged_modules(REPO_ROOT))
    assert "pinakes.paid" in modules and "pinakes.paid" not in read_allowlist(REPO_ROOT / ALLOWLIST_NAME)
    assert paid_imports(modules["pinakes.paid"].read_text(encoding="utf-8")) == []
    loaded = subprocess.run([sys.executable, "-c", "import sys, pinakes.paid; "
                             "print(sorted(m for m in sys.modules if m.split('.')[0] == 'anthropic'))"],
                            capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"
