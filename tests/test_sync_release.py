"""A sync lets go of its per-document state (the walk's file states, the plan's work) once the graph,
the last stage that reads it, has run: the vector file's step and self-calibration run without it
(issue #45: a 700k-file first sync held ~0.5 GB of it to its end), and every answer that state gave
(`has_work`, `changed`, what the later steps do) stays what it was. Real syncs of a real KB."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest

from pinakes.pipeline import vector_file
from pinakes.pipeline.report import SyncReport
from pinakes.pipeline.run import FREED_MEMORY_MIN_DOCUMENTS, SyncContext, SyncOptions
from pinakes.rules import PipelineRun
from pinakes.sync import loader
from pinakes.sync.engine import run_sync
from tests.fakes import FakeEmbedder
from tests.test_sync_streaming import make_kb


def sync(root: Path) -> SyncReport:
    return run_sync(root, SyncOptions(), embedder=FakeEmbedder())


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

    def spying_refresh(ctx: SyncContext) -> object:
        run = runs[-1]
        assert run.walk is not None and run.plan is not None
        seen_by_vectors.append((len(run.walk.found.docs), len(run.plan.work), run.has_work(), run.changed()))
        return real_refresh(ctx)

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


def test_a_sync_that_only_builds_the_vector_file_lets_the_documents_go_before_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No document changed, so the graph has nothing to do, but the vector file is built (missing,
    stale, of an older format): the walk's file states and the plan go before that step, as after a
    graph that ran (a 700k-page KB's upgrade held them through the whole build: 1.85 GB)."""
    root = make_kb(tmp_path / "kb", 5)
    assert sync(root).ok
    events: list[str] = []
    release = PipelineRun.release_documents

    def remembering(run: PipelineRun) -> None:
        events.append(f"release {len(run.walk.found.docs) if run.walk is not None else None}")
        release(run)

    real_refresh = vector_file.refresh

    def spying_refresh(ctx: SyncContext) -> object:
        events.append("vectors")
        return real_refresh(ctx)

    monkeypatch.setattr(PipelineRun, "release_documents", remembering)
    monkeypatch.setattr(vector_file, "refresh", spying_refresh)
    assert sync(root).ok and events == []  # nothing to do: nothing let go, no collection paid
    def gone(*_args: object) -> bool:
        return False

    monkeypatch.setattr(vector_file, "is_current", gone)  # as if the file were gone
    report = sync(root)
    assert report.ok and not report.changed and not report.added
    assert events == ["release 5", "vectors"]


def graph_holds_every_chunk(root: Path) -> bool:
    with sqlite3.connect(root / ".pinakes" / "index.db") as conn:
        nodes = {str(row[0]) for row in conn.execute("SELECT key FROM nodes WHERE kind = 'chunk'")}
        chunks = {str(row[0]) for row in conn.execute("SELECT doc_id || ':' || ordinal FROM chunks")}
    return bool(chunks) and chunks == nodes


def test_handing_freed_memory_back_never_fails() -> None:
    loader.return_freed_memory(FREED_MEMORY_MIN_DOCUMENTS)


def test_freed_memory_is_collected_and_trimmed_only_for_a_kb_of_many_documents(monkeypatch: pytest.MonkeyPatch) -> None:
    """Below FREED_MEMORY_MIN_DOCUMENTS a run frees a few MB, and the full collection would cost
    more than it returns (~40 ms each with the model loaded): neither it nor the trim runs."""
    from pinakes.pipeline import run as run_module

    calls: list[str] = []
    monkeypatch.setattr(run_module.gc, "collect", lambda: calls.append("collect") or 0)
    def trim(pad: int) -> None:
        calls.append(f"trim {pad}")

    monkeypatch.setattr(run_module, "_malloc_trim", lambda: trim)
    run_module.return_freed_memory(FREED_MEMORY_MIN_DOCUMENTS - 1)
    run_module.return_freed_memory(0)
    assert calls == []
    run_module.return_freed_memory(FREED_MEMORY_MIN_DOCUMENTS)
    assert calls == ["collect", "trim 0"]


def test_the_chunk_ahead_worker_and_the_documents_it_keeps_go_with_the_release(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The chunk-ahead worker keeps the plan's whole DocWork list (pipeline/chunk_ahead.py): it ends
    at the release, so the vector step and self-calibration run with no document's work alive."""
    import gc
    import subprocess
    import weakref

    from pinakes.pipeline import chunk_ahead
    from pinakes.pipeline.types import DocWork
    from tests.kb_helpers import packaged_token_counter
    from tests.test_chunk_ahead import Counting

    monkeypatch.setenv(chunk_ahead.OVERRIDE, "1")  # a worker even for a few documents
    started: list[weakref.ReferenceType[chunk_ahead.ChunkAhead]] = []
    workers: list[subprocess.Popen[bytes]] = []
    real_start = cast(Callable[..., chunk_ahead.ChunkAhead], chunk_ahead.start)

    def start(*args: object, **kwargs: object) -> chunk_ahead.ChunkAhead:
        ahead = real_start(*args, **kwargs)
        started.append(weakref.ref(ahead))  # held weakly: the test must not keep its documents alive
        workers.extend(ahead.processes)
        return ahead

    seen: list[tuple[bool, bool, int, bool]] = []
    real_refresh = vector_file.refresh

    def spying_refresh(ctx: SyncContext) -> object:
        gc.collect()
        alive = sum(1 for obj in gc.get_objects() if isinstance(obj, DocWork))
        seen.append((ctx.chunk_ahead is None, started[0]() is None, alive,
                     all(worker.poll() is not None for worker in workers)))
        return real_refresh(ctx)

    monkeypatch.setattr(chunk_ahead, "start", start)
    monkeypatch.setattr(vector_file, "refresh", spying_refresh)
    root = make_kb(tmp_path / "kb", 12)
    report = run_sync(root, SyncOptions(), embedder=Counting(packaged_token_counter()))
    assert report.ok and len(report.added) == 12
    assert len(started) == 1 and workers  # a worker ran ahead during the sync
    # At the vector step: the worker is gone, ended, and no DocWork is alive.
    assert seen == [(True, True, 0, True)]
    assert graph_holds_every_chunk(root)


def test_freed_memory_is_handed_back_after_the_release_and_after_each_later_stage(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The heap is trimmed after the graph's release and after every stage that follows (the vector
    build lets go of its whole index there; glibc keeps ~40% of such a heap otherwise), never
    during the streamed groups."""
    events: list[str] = []
    run_invocation = cast(Callable[..., tuple[int, str]], loader.run_invocation)

    def recording(run: PipelineRun, invocation: loader.Invocation, *args: object, **kwargs: object
                  ) -> tuple[int, str]:
        events.append(invocation.label)
        return run_invocation(run, invocation, *args, **kwargs)

    monkeypatch.setattr(loader, "run_invocation", recording)
    sizes: set[int] = set()
    def remembered(documents: int) -> None:
        sizes.add(documents)
        events.append("trim")

    monkeypatch.setattr(loader, "return_freed_memory", remembered)
    root = make_kb(tmp_path / "kb", 5)
    assert sync(root).ok
    assert sizes == {5}  # the KB's documents, as the walk found them: what decides whether to trim
    graph = events.index("graph")
    assert "trim" not in events[:graph] and events[graph + 1] == "trim"
    later = events[graph + 1:]
    assert "vectors" in later and later[later.index("vectors") + 1] == "trim"
    assert all(later[at + 1] == "trim" for at, label in enumerate(later) if label != "trim")


def test_the_self_calibration_starts_with_the_run_let_go_and_its_memory_handed_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Self-calibration runs after the sync returned (sync/engine.py): by then the run's objects are
    garbage, and the heap they held is collected and trimmed before the calibration's searcher maps
    the vector file on top of what the process still holds."""
    import weakref

    from pinakes.calibration import on_sync
    from pinakes.pipeline import run as run_module

    runs: list[weakref.ref[PipelineRun]] = []
    events: list[str] = []
    init = cast(Callable[..., None], PipelineRun.__init__)
    free = on_sync.return_freed_memory
    calibrate = cast(Callable[..., object], on_sync.self_calibrate)

    def remembered(run: PipelineRun, *args: object, **kwargs: object) -> None:
        init(run, *args, **kwargs)
        runs.append(weakref.ref(run))

    def freeing(documents: int) -> None:
        events.append(f"free {documents}")
        free(documents)

    def calibrating(*args: object, **kwargs: object) -> object:
        events.append("calibrate" if runs and all(run() is None for run in runs) else "calibrate with the run alive")
        return calibrate(*args, **kwargs)

    monkeypatch.setattr(PipelineRun, "__init__", remembered)
    monkeypatch.setattr(on_sync, "return_freed_memory", freeing)
    # As a KB of FREED_MEMORY_MIN_DOCUMENTS would (below it the run's cycles wait for the automatic
    # collections: a few MB).
    monkeypatch.setattr(run_module, "FREED_MEMORY_MIN_DOCUMENTS", 10)
    monkeypatch.setattr(on_sync, "self_calibrate", calibrating)
    report = sync(make_kb(tmp_path / "kb", 24))
    assert report.ok and len(report.added) == 24
    assert events == ["free 24", "calibrate"]
