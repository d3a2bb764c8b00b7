"""Files a person names for a command to write (#24 item 7): `pnk ask --deep --transcript` refuses an
existing file unless --force, and refuses anything in `.pinakes/`, a manifest or a sidecar whatever
the flags, symbolic links resolved first, before anything is spent; `pnk eval --outcomes` and the
baselines it writes go through the same guard (`pinakes.outputs`)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from pinakes.cli import main
from pinakes.errors import UsageError
from pinakes.outputs import checked_output_path, has_format
from tests.deep_helpers import DeepFake, answer_citing, demo_copy, ledger_records, serving, synced_demo
from tests.test_cli_ask import CONFIDENT_QUESTION

DEMO = Path(__file__).parent / "demo-kb"


@pytest.fixture(scope="module")
def synced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synced_demo(tmp_path_factory.mktemp("outputs"))


@pytest.fixture
def demo(synced: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return demo_copy(synced, tmp_path, monkeypatch)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[DeepFake]:
    yield from serving(monkeypatch)


def ask(demo: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    code = main(["-C", str(demo), "ask", "--deep", CONFIDENT_QUESTION, *extra])
    return code, capsys.readouterr().err


def protected_targets(demo: Path, tmp_path: Path) -> dict[str, Path]:
    (demo / ".pinakes" / "ledger.jsonl").touch()
    outside_link = tmp_path / "innocent.json"
    outside_link.symlink_to(demo / ".pinakes" / "ledger.jsonl")
    folder_link = tmp_path / "state"
    folder_link.symlink_to(demo / ".pinakes", target_is_directory=True)
    sidecar = next((demo / "docs").rglob("*.pnk.yaml"))
    return {"ledger": demo / ".pinakes" / "ledger.jsonl", "manifest": demo / "pinakes.toml",
            "link to the ledger": outside_link, "new file in .pinakes": folder_link / "new.json",
            "sidecar": sidecar}


@pytest.mark.parametrize("force", [False, True])
def test_a_transcript_never_lands_on_a_file_pinakes_keeps(
        demo: Path, fake: DeepFake, tmp_path: Path, capsys: pytest.CaptureFixture[str], force: bool) -> None:
    for what, target in protected_targets(demo, tmp_path).items():
        state = {path: path.read_bytes() for path in (demo / "pinakes.toml", demo / ".pinakes" / "ledger.jsonl")}
        before = target.read_bytes() if target.exists() else None
        code, err = ask(demo, capsys, "--transcript", str(target), *(["--force"] if force else []))
        assert code == 2, what
        assert "Pinakes never writes a named output there" in err and "Traceback" not in err, err
        assert (target.read_bytes() if target.exists() else None) == before, what
        assert {path: path.read_bytes() for path in state} == state
        assert not (demo / ".pinakes" / "new.json").exists()
    assert fake.requests == [] and ledger_records(demo) == []  # refused before anything was spent


def test_an_existing_transcript_is_replaced_only_with_force(
        demo: Path, fake: DeepFake, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    transcript = tmp_path / "notes.txt"
    transcript.write_text("my own notes\n", encoding="utf-8")
    code, err = ask(demo, capsys, "--transcript", str(transcript))
    assert code == 2 and "exists; it was left as it is" in err and "--force" in err
    assert transcript.read_text(encoding="utf-8") == "my own notes\n"
    assert fake.requests == [] and ledger_records(demo) == []

    fake.reply_with(answer_citing("The main switchboard is 01632 960400.", "01632 960400"))
    code, err = ask(demo, capsys, "--transcript", str(transcript), "--force")
    assert code == 0, err
    assert json.loads(transcript.read_text(encoding="utf-8"))["result"]["answered"] is True


def test_force_without_a_transcript_is_refused(demo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = ask(demo, capsys, "--force")
    assert code == 2 and "--force only applies to --transcript" in err


def test_eval_outputs_go_through_the_same_guard(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kb = tmp_path / "demo"
    shutil.copytree(DEMO, kb)
    manifest = (kb / "pinakes.toml").read_bytes()
    notes = tmp_path / "notes.json"
    notes.write_text('{"mine": true}\n', encoding="utf-8")
    refusals = [
        (["eval", str(kb), "--no-sync", "--outcomes", str(kb / "pinakes.toml")], "never writes a named output"),
        (["eval", str(kb), "--no-sync", "--outcomes", str(notes)], "exists; it was left as it is"),
        (["eval", str(kb), "--no-sync", "--update-baseline", "--baseline", str(kb / ".pinakes" / "b.json")],
         "never writes a named output"),
        (["eval", "--rescore", str(kb / "eval/outcomes.json"), "--update-baseline", "--baseline", str(notes)],
         "exists; it was left as it is"),
    ]
    for argv, says in refusals:
        assert main(argv) == 2, argv
        assert says in capsys.readouterr().err, argv
    assert (kb / "pinakes.toml").read_bytes() == manifest and notes.read_text(encoding="utf-8") == '{"mine": true}\n'
    assert not (kb / ".pinakes" / "b.json").exists()
    # A file of the kind the command writes is the one thing it replaces without being told.
    baseline = tmp_path / "baseline.json"
    shutil.copy(kb / "eval/baseline.json", baseline)
    assert main(["eval", "--rescore", str(kb / "eval/outcomes.json"), "--update-baseline",
                 "--baseline", str(baseline)]) == 0
    assert "baseline written" in capsys.readouterr().out


def test_the_guard_resolves_links_and_refuses_folders(tmp_path: Path) -> None:
    (tmp_path / "kb" / ".pinakes").mkdir(parents=True)
    link = tmp_path / "out.json"
    link.symlink_to(tmp_path / "kb" / ".pinakes" / "index.db")  # dangling: still inside .pinakes/
    with pytest.raises(UsageError, match="never writes a named output"):
        checked_output_path(link, flag="--x", force=True)
    with pytest.raises(UsageError, match="is a directory"):
        checked_output_path(tmp_path, flag="--x", force=True)
    fresh = checked_output_path(tmp_path / "new.json", flag="--x")
    assert fresh == (tmp_path / "new.json").resolve()
    marked = tmp_path / "marked.json"
    marked.write_text('{"format": "pinakes-eval-outcomes/1"}', encoding="utf-8")
    assert checked_output_path(marked, flag="--x", replaceable=has_format("pinakes-eval-outcomes/1")) == marked.resolve()
    with pytest.raises(UsageError, match="exists"):
        checked_output_path(marked, flag="--x", replaceable=has_format("pinakes-eval-baseline/1"))
