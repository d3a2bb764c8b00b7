"""`pnk ask --deep` from cron: `--yes` confirms a spend above confirm_above_eur without a terminal
(never past a cap), and every paid run's transcript is kept, bounded, under `.pinakes/transcripts/`
(`pnk sync --clear-cache=transcripts` empties it). Against the local Messages API (tests/deep_helpers.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from pinakes.cli import main
from pinakes.deep import transcripts
from tests.budget_helpers import set_budget
from tests.deep_helpers import (
    HOP_QUESTION,
    KEY,
    DeepFake,
    answer_citing,
    decompose,
    demo_copy,
    ledger_records,
    serving,
    synced_demo,
)

CONFIDENT_QUESTION = "What is the Registrar's extension in the staff directory?"
HOP_REPLIES = (decompose("who approves the courier for each outgoing loan"),
               answer_citing("The Registrar signs off the courier for each loan.", "signs off the courier"),
               decompose("phone extension of the Registrar, Priya Lindqvist, for loans and loan agreements"),
               answer_citing("Her extension is 2214.", "ext. 2214"))


@pytest.fixture(scope="module")
def synced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synced_demo(tmp_path_factory.mktemp("automation"))


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


def kept(kb: Path) -> list[Path]:
    return sorted((kb / ".pinakes" / "transcripts").glob("*.json"))


# -- --yes --------------------------------------------------------------------------------------------


def test_yes_confirms_a_spend_above_the_threshold_without_a_terminal(
        demo: Path, fake: DeepFake, capsys: pytest.CaptureFixture[str]) -> None:
    fake.reply_with(*HOP_REPLIES)
    code, out, err = run(capsys, "-C", str(demo), "ask", "--deep", "--yes", HOP_QUESTION, "--json")  # no tty
    document = json.loads(out)
    assert code == 0, err
    assert float(document["cost"]["reserved_eur"]) > 0.50  # above the default confirm_above_eur
    assert document["answered"] and len(fake.requests) == 4
    assert ledger_records(demo)


def test_yes_never_admits_a_run_a_cap_refuses(demo: Path, fake: DeepFake, capsys: pytest.CaptureFixture[str]) -> None:
    set_budget(demo, daily_eur="0.10")
    code, _, err = run(capsys, "-C", str(demo), "ask", "--deep", "--yes", HOP_QUESTION)
    assert code != 0 and "daily" in err
    assert fake.requests == [] and ledger_records(demo) == [] and kept(demo) == []


def test_without_yes_the_no_terminal_refusal_names_it(demo: Path, fake: DeepFake,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "-C", str(demo), "ask", "--deep", HOP_QUESTION)
    assert code == 1 and "no terminal to confirm it on; nothing was spent" in err and "add --yes" in err
    assert fake.requests == [] and kept(demo) == []


def test_yes_needs_deep(demo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "-C", str(demo), "ask", "--yes", CONFIDENT_QUESTION)
    assert code == 2 and "only apply to --deep" in err


# -- kept transcripts ----------------------------------------------------------------------------------


def test_every_paid_run_keeps_its_transcript_in_the_state_dir(
        demo: Path, fake: DeepFake, capsys: pytest.CaptureFixture[str]) -> None:
    fake.reply_with(answer_citing("The main switchboard is 01632 960400.", "01632 960400"))
    code, out, _ = run(capsys, "-C", str(demo), "ask", "--deep", CONFIDENT_QUESTION, "--json")
    result = json.loads(out)
    assert code == 0 and result["transcript"] is None
    (path,) = kept(demo)
    assert result["kept_transcript"] == str(path) and path.name.endswith(f"-{result['cost']['operation_id']}.json")
    document = json.loads(path.read_text(encoding="utf-8"))
    assert [exchange["kind"] for exchange in document["exchanges"]] == ["synthesis"]
    assert CONFIDENT_QUESTION in json.dumps(document["exchanges"][0]["request"])
    assert document["result"]["kept_transcript"] == str(path)
    assert KEY not in path.read_text(encoding="utf-8")


def test_a_transcript_that_cannot_be_kept_never_costs_the_answer(
        demo: Path, fake: DeepFake, capsys: pytest.CaptureFixture[str]) -> None:
    (demo / ".pinakes" / "transcripts").write_text("a file where the folder goes\n", encoding="utf-8")
    fake.reply_with(answer_citing("The main switchboard is 01632 960400.", "01632 960400"))
    code, out, _ = run(capsys, "-C", str(demo), "ask", "--deep", CONFIDENT_QUESTION)
    assert code == 0 and out.startswith("Answer:")
    assert "the transcript could not be kept" in out


def test_kept_transcripts_are_bounded_newest_first(tmp_path: Path) -> None:
    for number in range(6):
        (tmp_path / f"2026120{number}T000000000000Z-OP{number}.json").write_text("x" * 100, encoding="utf-8")
    removed = transcripts.prune(tmp_path, max_kept=4, max_bytes=10_000)
    assert sorted(path.name[:9] for path in removed) == ["20261200T", "20261201T"]
    removed = transcripts.prune(tmp_path, max_kept=4, max_bytes=250)
    assert [path.name[:9] for path in sorted(tmp_path.glob("*.json"))] == ["20261204T", "20261205T"]
    transcripts.prune(tmp_path, max_kept=4, max_bytes=10)  # the newest stays whatever its size
    assert [path.name[:9] for path in tmp_path.glob("*.json")] == ["20261205T"]


def test_clear_cache_transcripts_empties_them_and_asks_first(
        demo: Path, fake: DeepFake, capsys: pytest.CaptureFixture[str]) -> None:
    fake.reply_with(answer_citing("The main switchboard is 01632 960400.", "01632 960400"))
    assert run(capsys, "-C", str(demo), "ask", "--deep", CONFIDENT_QUESTION)[0] == 0
    assert len(kept(demo)) == 1
    code, _, err = run(capsys, "-C", str(demo), "sync", "--clear-cache=transcripts")  # no terminal, no --yes
    assert code == 2 and "--yes" in err and len(kept(demo)) == 1
    code, out, _ = run(capsys, "-C", str(demo), "sync", "--clear-cache=transcripts", "--yes")
    assert code == 0 and "removed 1 kept transcript" in out and kept(demo) == []
    assert ledger_records(demo)  # what the runs cost stays: only their transcripts went
