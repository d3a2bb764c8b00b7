"""One vocabulary for what a sync does (pipeline/report.py CHANGE_KINDS): the sync report's fields and
the status's (what the next sync would do) carry the same names and, for a KB, the same paths; the
JSON keys of `pnk sync --json` are those names, and `pnk status --json` keeps its own (a contract)."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest

from pinakes.cli import main
from pinakes.init import init_kb
from pinakes.pipeline.report import CHANGE_KINDS, SyncReport
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from pinakes.sync.status import STATUS_JSON_KEYS, KBStatus, kb_status
from tests.fakes import FakeEmbedder


def test_report_and_status_share_every_change_kind() -> None:
    assert set(CHANGE_KINDS) <= {f.name for f in fields(SyncReport)}
    assert set(CHANGE_KINDS) <= {f.name for f in fields(KBStatus)}
    assert set(STATUS_JSON_KEYS) <= set(CHANGE_KINDS)


def test_status_names_what_the_sync_then_reports_and_keeps_its_json_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "kb"
    init_kb(root, name="vocabulary")
    docs = root / "docs"
    for number in range(4):
        (docs / f"doc{number}.md").write_text(f"# Doc {number}\n\nAbout topic {number}.\n", encoding="utf-8")
    run_sync(root, SyncOptions(quiet=True), embedder=FakeEmbedder())
    (docs / "doc0.md").write_text("# Doc 0\n\nRewritten.\n", encoding="utf-8")
    (docs / "doc1.md").rename(docs / "moved.md")
    (docs / "doc2.md").unlink()
    (docs / "fresh.md").write_text("# Fresh\n\nBrand new.\n", encoding="utf-8")

    status = kb_status(root)
    monkeypatch.chdir(root)
    assert main(["status", "--json"]) == 0
    status_json = json.loads(capsys.readouterr().out)
    report = run_sync(root, SyncOptions(quiet=True), embedder=FakeEmbedder())

    for kind in ("added", "changed", "reembedded", "renamed", "deleted"):
        assert getattr(status, kind) == getattr(report, kind), kind
    assert (status.added, status.renamed) == (["docs/fresh.md"], [("docs/doc1.md", "docs/moved.md")])
    assert status.sidecars_written == sorted(report.sidecars_written) == ["docs/fresh.md.pnk.yaml",
                                                                          "docs/moved.md.pnk.yaml"]
    for kind in CHANGE_KINDS:
        key = STATUS_JSON_KEYS.get(kind, kind)
        assert key in status_json, key
        assert kind == key or kind not in status_json  # no second key for one kind
    assert status_json["new"] == ["docs/fresh.md"] and status_json["moved"] == [
        {"from": "docs/doc1.md", "to": "docs/moved.md"}]
    assert set(CHANGE_KINDS) <= set(report.to_dict())
