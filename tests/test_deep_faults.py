"""`pnk ask --deep` when the ledger refuses to record a call that billed (issue #24, item 2's deep half):
a real fault (`chattr +i` on the ledger while the request is in flight: an immutable inode refuses the
reconciliation's append even to root), the real `anthropic` client and the local Messages API.

The call was made and paid for, so its reply is never thrown away: the run stops before its next
call, the result it had (that reply included) is printed — or is the `result` of the `--json` error —
and written to `--transcript` when one was asked for, beside the error that names the call and the
`pnk budget --resolve` command that closes it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("anthropic", reason="the [claude] extra is not installed: the paid path cannot run")

from pinakes.cli import main
from pinakes.kb import KBPaths
from tests.budget_helpers import set_budget
from tests.deep_helpers import DeepFake, Turn, demo_copy, ledger_records, serving, synced_demo
from tests.test_paid_faults import immutable_flags, make_immutable, on_first_message

QUESTION = "What is the Registrar's extension in the staff directory?"
# Whichever call comes first (a synthesis answer, or a round's decomposition), this is its reply.
PAID_REPLY = {"answer": "The Registrar's extension is 2214 [1].", "citations": [1],
              "queries": ["extension of the Registrar"]}


@pytest.fixture(scope="module")
def synced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synced_demo(tmp_path_factory.mktemp("deep-faults"))


@pytest.fixture
def demo(synced: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = demo_copy(synced, tmp_path, monkeypatch)
    set_budget(root, confirm_above_eur="10.00", per_operation_eur="10.00", daily_eur="20.00", monthly_eur="50.00")
    return root


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[DeepFake]:
    yield from serving(monkeypatch)


@pytest.mark.heavy
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_a_reply_the_ledger_would_not_record_is_kept_beside_the_error_naming_the_call(
        demo: Path, fake: DeepFake, tmp_path: Path, capsys: pytest.CaptureFixture[str], as_json: bool) -> None:
    fake.reply_with(Turn("json", PAID_REPLY))
    transcript = tmp_path / "transcript.json"
    ledger = KBPaths(demo).ledger
    with immutable_flags() as flagged:
        on_first_message(fake, lambda: make_immutable(ledger, flagged))
        capsys.readouterr()

        code = main(["-C", str(demo), "ask", "--deep", *(["--json"] if as_json else []),
                     "--transcript", str(transcript), QUESTION])

        out, err = capsys.readouterr()
        assert code == 74, out + err
        assert len(fake.messages_requests()) == 1  # the run stopped before its next call
        assert [r["kind"] for r in ledger_records(demo)] == ["reservation"]
    text = err if not as_json else json.loads(out)["remedy"] + json.loads(out)["message"]
    found = re.search(r"`pnk budget --resolve (\S+) --actual (\S+)`", text)
    assert found is not None, out + err
    call_id, actual = found.groups()
    if as_json:
        document = json.loads(out)
        assert document["ok"] is False and document["call_id"] == call_id
        assert f"call {call_id} was made and billed" in document["message"]
        assert any("is kept: in this JSON's `result` and written to" in line for line in document["details"])
        result = document["result"]
        assert [call["call_ids"] for call in result["cost"]["calls"]] == [[call_id]]
    else:
        assert "Traceback" not in err and f"call {call_id} was made and billed" in err
        assert f"is kept: printed above and written to {transcript}" in err
        assert "Ended by" in out and "Cost:" in out  # the result, printed on stdout
    kept = json.loads(transcript.read_text(encoding="utf-8"))
    assert [json.loads(exchange["reply"]) for exchange in kept["exchanges"]] == [PAID_REPLY]
    assert kept["result"]["ended_by"] in ("synthesis", "ledger")

    capsys.readouterr()  # the named command closes the call, once the ledger takes writes again
    assert main(["-C", str(demo), "budget", "--resolve", call_id, "--actual", actual]) == 0
    capsys.readouterr()
    assert main(["-C", str(demo), "budget", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["unknown_outcomes"] == []
