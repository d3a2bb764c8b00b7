"""`pnk sync` as a user meets it: output, --json, exit codes, errors without tracebacks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pinakes.cli import main
from pinakes.init import init_kb
from tests.fakes import FakeEmbedder, substitute_embedder


@pytest.fixture
def kb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    substitute_embedder(monkeypatch, lambda section, offline=None, threads=None: FakeEmbedder())
    root = tmp_path / "kb"
    init_kb(root, name="cli")
    (root / "docs/a.md").write_text("# A\n\nText.\n", encoding="utf-8")
    return root


def test_sync_prints_a_report_and_exits_zero(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-C", str(kb), "sync"]) == 0
    out = capsys.readouterr().out
    assert "added 1" in out and "graph: membership" in out and "wrote sidecar docs/a.md.pnk.yaml" in out


def test_sync_json_is_machine_readable(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sync", "-C", str(kb), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True and report["added"] == ["docs/a.md"]
    assert set(report["graph_census"]) >= {"membership", "authored"}


def test_failed_documents_are_listed_and_exit_one(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (kb / "docs/bad.md").write_bytes(b"ok then \xc3\x28 broken")
    assert main(["-C", str(kb), "sync", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "docs/bad.md [unextractable]" in err and "offset" in err


@pytest.mark.parametrize("argv, fragment", [
    (["sync", "--sidecars-only", "--rebuild"], "cannot be combined"),
    (["sync", "--extract", "nonsense"], "unknown extraction backend"),
    (["sync", "--stage"], "--stage only applies"),
])
def test_bad_flags_exit_two_without_traceback(kb: Path, capsys: pytest.CaptureFixture[str],
                                              argv: list[str], fragment: str) -> None:
    assert main(["-C", str(kb), *argv]) == 2
    err = capsys.readouterr().err
    assert fragment in err and "Traceback" not in err and "remedy:" in err


def test_sync_outside_a_kb_names_pnk_init(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-C", str(tmp_path), "sync"]) == 2
    assert "pnk init" in capsys.readouterr().err


def test_doit_list_shows_the_whole_pipeline(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-C", str(kb), "doit", "list"]) == 0
    listed = capsys.readouterr().out.split()
    for step in ("walk", "pair", "extract", "chunk", "embed", "graph"):
        assert step in listed
    assert main(["-C", str(kb), "doit", "list", "--all"]) == 0
    assert "extract:" in capsys.readouterr().out  # the pending new document's task
    assert main(["-C", str(kb), "doit", "run"]) == 2
