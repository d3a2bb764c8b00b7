"""What a sync's report and `pnk status` say about documents indexed again with their content
unchanged (issue #40, minors): a rebuild printed "re-embedded 29" beside "0 embedded, 194 reused",
and a rename was listed as "re-embedded (settings changed)"."""

from __future__ import annotations

from pathlib import Path

import pytest

from pinakes.cli import main
from pinakes.init import init_kb
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.fakes import FakeEmbedder, substitute_embedder


@pytest.fixture
def kb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    substitute_embedder(monkeypatch, lambda section, offline=None, threads=None: FakeEmbedder())
    root = tmp_path / "kb"
    init_kb(root, name="wording")
    for number in range(4):
        (root / "docs" / f"doc{number}.md").write_text(f"# Doc {number}\n\nAbout topic {number}.\n", encoding="utf-8")
    assert run_sync(root, SyncOptions(quiet=True), embedder=FakeEmbedder()).ok
    return root


def test_a_rebuild_says_it_rebuilt_documents_and_which_vectors_it_embedded(
        kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-C", str(kb), "sync", "--rebuild"]) == 0
    out = capsys.readouterr().out
    documents = len(list((kb / "docs").glob("*.md")))
    assert f"rebuilt as they were {documents}" in out
    assert "re-embedded" not in out and "re-indexed" not in out
    assert "chunks: 0 embedded, " in out  # the documents were read and chunked again; no vector was computed


def test_a_rename_is_reported_as_a_rename_by_status_and_by_sync(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The file name's words are in the chunks' context, so a rename that changes them indexes the
    document again: that is the rename, never "settings changed"."""
    (kb / "docs/doc1.md").rename(kb / "docs/moved.md")
    assert main(["-C", str(kb), "status"]) == 0
    status = capsys.readouterr().out
    assert "moved: 1" in status and "docs/doc1.md -> docs/moved.md" in status
    assert "settings changed" not in status and "re-embedded" not in status
    assert main(["-C", str(kb), "sync"]) == 0
    out = capsys.readouterr().out
    assert "renamed 1" in out and "settings changed" not in out and "re-embedded" not in out
    assert "renamed docs/doc1.md -> docs/moved.md (re-indexed: its file name's words are part of its chunks' context)" in out


def test_a_settings_change_is_still_reported_as_one(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Control: a new sidecar title (the documents' context changed, the content did not)."""
    sidecar = kb / "docs/doc2.md.pnk.yaml"
    sidecar.write_text(sidecar.read_text(encoding="utf-8") + 'title: "A new title"\n', encoding="utf-8")
    assert main(["-C", str(kb), "status"]) == 0
    assert "re-indexed (settings changed): 1" in capsys.readouterr().out
    assert main(["-C", str(kb), "sync"]) == 0
    assert "re-indexed (settings changed) 1" in capsys.readouterr().out
