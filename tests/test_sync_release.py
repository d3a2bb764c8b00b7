"""A sync lets go of its per-document state (the walk's file states, the plan's work) once the graph,
the last stage that reads it, has run: the vector file's step and self-calibration run without it
(issue #45: a 700k-file first sync held ~0.5 GB of it to its end), and every answer that state gave
(`has_work`, `changed`, what the later steps do) stays what it was. Real syncs of a real KB."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pinakes.pipeline import vector_file
from pinakes.pipeline.report import SyncReport
from pinakes.pipeline.run import SyncOptions
from pinakes.rules import PipelineRun
from pinakes.sync import loader
from pinakes.sync.engine import run_sync
from tests.fakes import FakeEmbedder
from tests.test_sync_streaming import make_kb


def sync(root: Path) -> SyncReport:
    return run_sync(root, SyncOptions(), embedder=FakeEmbedder())  # type: ignore[arg-type]


def test_the_steps_after_the_graph_run_without_the_walk_and_the_plan(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_kb(tmp_path / "kb", 5)
    runs: list[PipelineRun] = []
    seen_by_vectors: list[tuple[int, int, bool, bool]] = []
    release = PipelineRun.release_documents

    def remembering(run: PipelineRun) -> None:
        assert run.walk is not None and run.walk.found.docs and run.plan is not None and run.plan.work
        runs.append(run)
        release(run)

    real_refresh = vector_file.refresh

    def spying_refresh(ctx: object) -> object:
        run = runs[-1]
        assert run.walk is not None and run.plan is not None
        seen_by_vectors.append((len(run.walk.found.docs), len(run.plan.work), run.has_work(), run.changed()))
        return real_refresh(ctx)  # type: ignore[arg-type]

    monkeypatch.setattr(PipelineRun, "release_documents", remembering)
    monkeypatch.setattr(vector_file, "refresh", spying_refresh)
    report = sync(root)
    assert report.ok and len(report.added) == 5
    # The vector step ran after the release, and still knew the sync changed the documents.
    assert seen_by_vectors == [(0, 0, True, True)]
    assert graph_holds_every_chunk(root)  # the graph read the plan before it went

    # An edit after it: found, indexed, and the steps after the graph run again.
    (root / "docs" / "doc01.md").write_text("# Document 1\n\nA zeppelin paragraph.\n", encoding="utf-8")
    again = sync(root)
    assert again.ok and again.changed == ["docs/doc01.md"] and len(seen_by_vectors) == 2
    assert seen_by_vectors[-1] == (0, 0, True, True) and graph_holds_every_chunk(root)
    # A sync with nothing to do never reaches the release (nothing to let go).
    assert sync(root).ok and len(runs) == 2


def graph_holds_every_chunk(root: Path) -> bool:
    with sqlite3.connect(root / ".pinakes" / "index.db") as conn:
        nodes = {str(row[0]) for row in conn.execute("SELECT key FROM nodes WHERE kind = 'chunk'")}
        chunks = {str(row[0]) for row in conn.execute("SELECT doc_id || ':' || ordinal FROM chunks")}
    return bool(chunks) and chunks == nodes


def test_handing_freed_memory_back_never_fails() -> None:
    loader._return_freed_memory()  # pyright: ignore[reportPrivateUsage]
