"""`pnk ask` and `pnk ask --deep` as a person and a script run them (the loop itself: test_deep_loop.py)."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pinakes.cli import main
from tests.budget_helpers import set_budget
from tests.deep_helpers import (
    HOP_QUESTION,
    KEY,
    DeepFake,
    Turn,
    answer_citing,
    decompose,
    demo_copy,
    ledger_records,
    serving,
    shown_passages,
    synced_demo,
)

CONFIDENT_QUESTION = "What is the Registrar's extension in the staff directory?"


def answer_marking(template: str, needle: str) -> Turn:
    """An answer citing the first passage shown that holds `needle`, written with that passage's
    own marker (`template` has one `{}`), as a model would: whatever place the ranking gave it."""

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        number = next(number for number, passage in shown_passages(body).items() if needle in passage)
        return {"answer": template.format(number), "citations": [number]}

    return Turn("json", respond)


@pytest.fixture(scope="module")
def synced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synced_demo(tmp_path_factory.mktemp("deep"))


@pytest.fixture
def demo(synced: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return demo_copy(synced, tmp_path, monkeypatch)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[DeepFake]:
    yield from serving(monkeypatch)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_ask_without_deep_spends_nothing_and_says_what_deep_would_reserve(
        demo: Path, fake: DeepFake, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "-C", str(demo), "ask", HOP_QUESTION, "--tag", "loans")

    assert code == 0 and err == ""
    assert "Nothing was spent: this is the free result." in out
    assert re.search(r"\((one synthesis call|up to 3 rounds of two calls), at most €\d\.\d{4,6} reserved "
                     r"under \[budget\]\):", out)
    command = out.rstrip().splitlines()[-1].strip()
    assert shlex.split(command) == ["pnk", "-C", str(demo), "ask", "--deep", HOP_QUESTION, "--tag", "loans"]
    assert fake.requests == [] and not (demo / ".pinakes" / "ledger.jsonl").exists()
    # The free result says where its confidence came from: the demo's golden-set fit.
    assert re.search(r"^confidence: (high|medium|low), fitted \(", out, flags=re.M), out


def test_ask_without_deep_as_json(demo: Path, fake: DeepFake, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-C", str(demo), "ask", CONFIDENT_QUESTION, "--json")

    document = json.loads(out)
    assert code == 0 and document["deep"] is False and document["spent_eur"] == "0"
    assert document["deep_branch"] == "synthesis" and document["deep_worst_case_calls"] == 1
    assert document["search"]["confidence"]["level"] == "high" and document["search"]["passages"]
    assert document["search"]["confidence"]["source"] == "fitted"
    assert fake.requests == []


def test_deep_prints_the_cited_answer_rounds_ending_and_cost(
        demo: Path, fake: DeepFake, capsys: pytest.CaptureFixture[str]) -> None:
    fake.reply_with(answer_marking("The main switchboard is 01632 960400 [{}].", "01632 960400"))

    code, out, err = run(capsys, "-C", str(demo), "ask", "--deep", CONFIDENT_QUESTION)

    assert code == 0, err
    lines = out.splitlines()
    assert lines[:2] == ["Answer:", "The main switchboard is 01632 960400 [1]."]
    assert "  [1] docs/governance/staff-directory.md:0-581 (Staff directory and responsibilities)" in lines
    assert "Free confidence high (fitted): one synthesis call." in lines
    assert any(line.startswith("Ended by synthesis: one synthesis call") for line in lines)
    assert any(line.startswith("Cost: €0.0") and "reserved at the worst case before the first call" in line
               for line in lines)
    assert KEY not in out + err


def test_deep_json_is_the_whole_result(demo: Path, fake: DeepFake, capsys: pytest.CaptureFixture[str]) -> None:
    set_budget(demo, confirm_above_eur="2.00")
    fake.reply_with(decompose("who approves the courier for each outgoing loan"),
                    answer_citing("The Registrar signs off the courier for each loan.", "signs off the courier"),
                    decompose("phone extension of the Registrar, Priya Lindqvist, for loans and loan agreements"),
                    answer_citing("Her extension is 2214.", "ext. 2214"))

    code, out, _ = run(capsys, "-C", str(demo), "ask", "--deep", HOP_QUESTION, "--json")

    document = json.loads(out)
    assert code == 0 and document["ok"] and document["answered"]
    assert (document["ended_by"], document["rounds_taken"], document["max_rounds"]) == ("sufficient", 2, 3)
    assert [c["citation"] for c in document["citations"]] == ["docs/governance/staff-directory.md:1769-2033"]
    cost = document["cost"]
    assert len(cost["calls"]) == 4 and cost["reserved_eur"] == cost["requested_eur"]
    assert 0 < float(cost["actual_eur"]) < float(cost["reserved_eur"])
    assert document["transcript"] is None


def test_a_transcript_is_written_where_asked_and_otherwise_only_kept_in_the_state_dir(
        demo: Path, fake: DeepFake, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fake.reply_with(answer_citing("The main switchboard is 01632 960400.", "01632 960400"),
                    answer_citing("The main switchboard is 01632 960400.", "01632 960400"))
    before = sorted(path for path in tmp_path.rglob("*") if path.is_file())

    assert run(capsys, "-C", str(demo), "ask", "--deep", CONFIDENT_QUESTION)[0] == 0
    written = sorted(path for path in tmp_path.rglob("*") if path.is_file())
    # Only the state dir moved (the ledger, its lock, SQLite's WAL files, the kept transcript).
    assert [path for path in written if path not in before
            and path.parent not in (demo / ".pinakes", demo / ".pinakes" / "transcripts")] == []
    assert len(list((demo / ".pinakes" / "transcripts").glob("*.json"))) == 1

    transcript = tmp_path / "run.json"
    assert run(capsys, "-C", str(demo), "ask", "--deep", CONFIDENT_QUESTION, "--transcript", str(transcript))[0] == 0
    document = json.loads(transcript.read_text(encoding="utf-8"))
    assert [exchange["kind"] for exchange in document["exchanges"]] == ["synthesis"]
    assert CONFIDENT_QUESTION in json.dumps(document["exchanges"][0]["request"])
    assert document["result"]["answered"] is True and KEY not in transcript.read_text(encoding="utf-8")


def test_no_key_is_an_error_before_anything_is_planned(
        demo: Path, fake: DeepFake, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("PINAKES_ANTHROPIC_API_KEY")
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)  # a key exported for other tools never enables spending

    code, _, err = run(capsys, "-C", str(demo), "ask", "--deep", CONFIDENT_QUESTION)

    assert code == 2 and "PINAKES_ANTHROPIC_API_KEY is not set" in err and KEY not in err
    assert fake.requests == [] and ledger_records(demo) == []


def test_no_terminal_above_the_confirm_threshold_aborts(
        demo: Path, fake: DeepFake, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "-C", str(demo), "ask", "--deep", HOP_QUESTION)  # pytest's stdin is no terminal

    assert code == 1 and "no terminal to confirm it on; nothing was spent" in err
    assert fake.requests == [] and ledger_records(demo) == []


@pytest.mark.parametrize("flag", [["--transcript", "x.json"], ["--api-key-file", "key.txt"]])
def test_paid_only_flags_need_deep(demo: Path, capsys: pytest.CaptureFixture[str], flag: list[str]) -> None:
    code, _, err = run(capsys, "-C", str(demo), "ask", CONFIDENT_QUESTION, *flag)
    assert code == 2 and "only apply to --deep" in err


def test_an_empty_or_oversized_question_is_refused(demo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "-C", str(demo), "ask", "--deep", "  ")[0] == 2
    code, _, err = run(capsys, "-C", str(demo), "ask", "--deep", "why " * 600)
    assert code == 2 and "a --deep question is at most 2,000" in err
