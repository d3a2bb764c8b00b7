"""The sidecars a sync wrote (`SyncReport.sidecars_written`): listed, rendered and serialised as
sidecar paths, kept as the documents' paths in one buffer (`PathList`; issue #45: a 700k-page first
sync kept a string of its own per minted sidecar, ~88 MB to the run's end)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import pytest

from pinakes.cli import main
from pinakes.init import init_kb
from pinakes.pipeline.path_list import PathList
from pinakes.pipeline.report import WrittenSidecars
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.fakes import FakeEmbedder, substitute_embedder

DOCS = ["docs/a.md", "docs/b.md", "docs/deeper/c.md", "docs/deeper/d e.md"]


@pytest.fixture
def kb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    substitute_embedder(monkeypatch, lambda section, offline=None, threads=None: FakeEmbedder())
    root = tmp_path / "kb"
    init_kb(root, name="written")
    for number, rel in enumerate(DOCS):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"# Doc {number}\n\nAbout topic {number}.\n", encoding="utf-8")
    return root


def test_a_first_sync_lists_each_minted_sidecar_by_its_documents_own_path_string(kb: Path) -> None:
    report = run_sync(kb, SyncOptions(quiet=True), embedder=FakeEmbedder())
    sidecars = [rel + ".pnk.yaml" for rel in DOCS]
    assert report.ok and sorted(report.added) == DOCS
    assert sorted(report.sidecars_written) == sidecars and len(report.sidecars_written) == len(DOCS)
    assert all((kb / sidecar).is_file() for sidecar in report.sidecars_written)
    assert "docs/a.md.pnk.yaml" in report.sidecars_written and "docs/a.md" not in report.sidecars_written
    # no string of its own per sidecar, nor per added document: the paths are kept in one buffer each
    assert isinstance(report.added, PathList) and isinstance(report.sidecars_written.documents, PathList)
    assert list(report.sidecars_written.documents) == list(report.added)
    assert sorted(cast(list[str], report.to_dict()["sidecars_written"])) == sidecars
    text = report.render_text()
    assert all(f"wrote sidecar {sidecar}\n" in text for sidecar in sidecars)


def test_sync_json_and_text_list_the_written_sidecars(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-C", str(kb), "sync", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["sidecars_written"]
    assert sorted(listed) == [rel + ".pnk.yaml" for rel in DOCS]
    (kb / "docs/new.md").write_text("# New\n\nFresh.\n", encoding="utf-8")
    assert main(["-C", str(kb), "sync"]) == 0
    out = capsys.readouterr().out
    assert "wrote sidecar docs/new.md.pnk.yaml" in out and out.count("wrote sidecar") == 1


def test_sidecars_only_lists_what_it_minted(kb: Path) -> None:
    report = run_sync(kb, SyncOptions(sidecars_only=True))
    assert list(report.sidecars_written) == sorted(rel + ".pnk.yaml" for rel in DOCS)
    assert report.to_dict()["sidecars_written"] == list(report.sidecars_written)


def test_the_list_reads_like_the_list_of_paths_it_replaces() -> None:
    written = WrittenSidecars(["x/a.md.pnk.yaml"])
    written.add("x/b.md")
    written.add("x/a.md")  # listed twice (written, taken back elsewhere, written again): the newest goes first
    assert written == ["x/a.md.pnk.yaml", "x/b.md.pnk.yaml", "x/a.md.pnk.yaml"] and written != ["x/a.md.pnk.yaml"]
    assert written[1] == "x/b.md.pnk.yaml" and written[-2:] == ["x/b.md.pnk.yaml", "x/a.md.pnk.yaml"]
    written.take_back("x/a.md")
    assert written == ["x/a.md.pnk.yaml", "x/b.md.pnk.yaml"] and written.wrote_for("x/a.md")
    written.take_back("x/a.md")
    written.take_back("x/missing.md")
    assert written == ["x/b.md.pnk.yaml"] and not written.wrote_for("x/a.md") and bool(written)
    assert not WrittenSidecars() and WrittenSidecars() == []
    with pytest.raises(ValueError, match="not a sidecar path"):
        WrittenSidecars(["x/a.md"])
