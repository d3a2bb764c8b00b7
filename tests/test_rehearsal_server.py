"""The rehearsal server a person runs to try a paid run without a key or a bill
(`python tests/fake_anthropic.py`, docs/GUIDE.md "Rehearsing a paid run"): started as a subprocess on
loopback, its printed `export` lines are the only wiring, and real `pnk sync --extract=claude-vision`
and `pnk ask --deep` runs reach it through the SDK's `ANTHROPIC_BASE_URL`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import pytest

pytest.importorskip("anthropic", reason="the [claude] extra is not installed: the paid path cannot run")
pytest.importorskip("pypdfium2", reason="the [pdf] extra is not installed: nothing renders pages")

from pinakes.cli import main
from pinakes.init import init_kb
from tests.budget_helpers import set_budget
from tests.conftest import REPO_ROOT
from tests.fake_anthropic import REHEARSAL_ANSWER, REHEARSAL_KEY, scanned_pdf
from tests.fakes import FakeEmbedder, substitute_embedder

SCRIPT = REPO_ROOT / "tests" / "fake_anthropic.py"
EXPORT = re.compile(r"^export (?P<name>[A-Z_]+)=(?P<value>\S+)$")


@dataclass
class Rehearsal:
    process: subprocess.Popen[str]
    exports: dict[str, str]  # what the script told the person to set
    banner: str

    def stop(self) -> str:
        """Stop it as a service manager would (SIGTERM) and return what it logged on stderr."""
        self.process.terminate()
        _, err = self.process.communicate(timeout=20)
        assert self.process.returncode == 0, err  # SIGTERM stops it cleanly, as Ctrl-C does
        return err


@pytest.fixture
def rehearsal() -> Iterator[Rehearsal]:
    process = subprocess.Popen([sys.executable, str(SCRIPT), "--port", "0"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT.parent)
    lines: list[str] = []
    assert process.stdout is not None
    for line in process.stdout:  # the banner ends with the line after the exports
        lines.append(line.rstrip("\n"))
        if line.startswith("then run"):
            break
    exports = {m["name"]: m["value"] for m in map(EXPORT.match, lines) if m}
    started = Rehearsal(process, exports, "\n".join(lines))
    try:
        yield started
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=20)


@pytest.fixture
def kb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rehearsal: Rehearsal) -> Path:
    """A KB with a scanned PDF, in a shell that has run the printed exports and nothing else."""
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    for name, value in rehearsal.exports.items():
        monkeypatch.setenv(name, value)
    substitute_embedder(monkeypatch, lambda section, offline=None, threads=None: FakeEmbedder())
    root = init_kb(tmp_path / "kb", name="rehearsal").root
    (root / "docs" / "scan.pdf").write_bytes(scanned_pdf(2))
    (root / "docs" / "notes.md").write_text("# Harbour\n\nThe harbour master keeps the tide tables.\n")
    return root


def test_the_script_prints_exactly_the_variables_to_set_and_listens_on_loopback(rehearsal: Rehearsal) -> None:
    assert set(rehearsal.exports) == {"ANTHROPIC_BASE_URL", "PINAKES_ANTHROPIC_API_KEY"}, rehearsal.banner
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", rehearsal.exports["ANTHROPIC_BASE_URL"])
    assert rehearsal.exports["PINAKES_ANTHROPIC_API_KEY"] == REHEARSAL_KEY
    assert "loopback only" in rehearsal.banner and "copy of the KB" in rehearsal.banner
    # GUIDE.md shows the lines a person pastes, for --port 8765: they are the script's own
    guide = (REPO_ROOT / "docs" / "GUIDE.md").read_text(encoding="utf-8")
    port = rehearsal.exports["ANTHROPIC_BASE_URL"].rsplit(":", 1)[1]
    for line in rehearsal.banner.splitlines():
        if line.startswith("export "):
            assert f"\n{line.replace(':' + port, ':8765')}\n" in guide, line


def test_a_paid_sync_runs_against_it(kb: Path, rehearsal: Rehearsal, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-C", str(kb), "sync", "--extract=claude-vision", "--yes", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["counts"]["failed"] == 0
    assert main(["-C", str(kb), "search", "--mode", "bm25", "Text of page 2", "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert "docs/scan.pdf" in {hit["path"] for hit in hits["passages"]}, hits  # the stub's page text, indexed
    assert main(["-C", str(kb), "budget", "--json"]) == 0
    daily = next(w for w in json.loads(capsys.readouterr().out)["windows"] if w["window"] == "daily_eur")
    assert Decimal(daily["spent_eur"]) > 0  # the ledger records what the stub reported as spend
    log = rehearsal.stop()
    assert re.search(r"POST /v1/messages -> 200 \(2 page images\)", log), log


def test_a_deep_answer_runs_against_it(kb: Path, rehearsal: Rehearsal, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-C", str(kb), "sync", "--quiet"]) == 0  # free: the PDF is skipped, the note indexed
    set_budget(kb, confirm_above_eur="2.00")  # no terminal here to confirm the worst case on
    # No free confidence (the shipped prior could call this note's answer confident, and a confident
    # search is answered in one call): the run decomposes, so both kinds of call meet the server.
    manifest = kb / "pinakes.toml"
    manifest.write_text(manifest.read_text(encoding="utf-8") + '\n[retrieval.confidence]\nsignal = "none"\n',
                        encoding="utf-8")
    capsys.readouterr()
    assert main(["-C", str(kb), "ask", "--deep", "who keeps the tide tables?", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["answer"] == REHEARSAL_ANSWER and answer["citations"], json.dumps(answer, indent=1)
    log = rehearsal.stop()
    assert log.count("POST /v1/messages -> 200") >= 2, log  # a decomposition, then an answer


def test_a_non_loopback_host_is_refused() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--host", "0.0.0.0", "--port", "0"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "not a loopback address" in done.stderr and done.stdout == ""
