"""The sync pipeline is declared once (`pinakes.pipeline.stages.STAGES`), and both views of it come
from that declaration: the doit namespace `pnk doit list|info` shows, and the doit invocations
`pnk sync` runs (one for walk and pair, one per group of documents, one for graph, one for
reverse-scan). These tests hold the two views to each other: the same tasks, the same dependencies
(less those on a task of an earlier invocation, which a later one cannot name), and a real sync
reaches every listed task in an order that keeps every listed dependency."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
from doit.loader import load_tasks
from doit.task import Task

from pinakes.cli import main
from pinakes.pipeline.stages import STAGES, Stage, check_declaration, phases
from pinakes.rules import Halt, adapters, task_name
from pinakes.sync import SyncOptions, loader
from pinakes.sync.engine import run_sync
from tests.fakes import FakeEmbedder
from tests.kb_helpers import Doc, init_test_kb, write_documents

DOCUMENTS = 7
GROUP_SIZE = 2  # 7 documents in groups of 2: 4 groups, the last one short


@pytest.fixture
def kb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A KB with a connected partner (not on this machine, so its scan is due and reports it) and
    seven documents whose sidecars give them stable ids: the listing before a sync and the sync
    itself name the same tasks."""
    root = init_test_kb(tmp_path / "kb", FakeEmbedder().identity)
    with (root / "pinakes.toml").open("a", encoding="utf-8") as manifest:
        manifest.write('\n[[links.kb]]\nalias = "elsewhere"\nid = "01J9ZX7K3M4N5P6Q7R8S9T0VWX"\n'
                       'path = "../elsewhere"\n')
    write_documents(root, [Doc(f"docs/doc{n}.md", f"# Doc {n}\n\nParagraph {n} about topic {n % 3}.\n",
                               title=f"Doc {n}") for n in range(DOCUMENTS)])
    monkeypatch.setattr(loader, "GROUP_MAX_DOCUMENTS", GROUP_SIZE)
    return root


def real_tasks(namespace: Mapping[str, object]) -> dict[str, Task]:
    """The tasks doit loads from `namespace`, by name (group tasks included)."""
    return {task.name: task for task in load_tasks(dict(namespace))}


def expand(names: Iterable[str], tasks: Mapping[str, Task]) -> set[str]:
    """`names` with each group task replaced by its subtasks (doit runs a group after all of them)."""
    found: set[str] = set()
    for name in names:
        task = tasks[name]
        found |= expand(task.task_dep, tasks) if task.has_subtask else {name}
    return found


def test_the_run_view_and_the_list_view_are_one_declaration(kb: Path) -> None:
    run = loader.inspection_run(kb)
    listed = real_tasks(loader.task_namespace(run))
    invocations = list(loader.invocations(run))
    assert [invocation.label for invocation in invocations] == [
        "plan", "group 0", "group 1", "group 2", "group 3", "graph", "vectors", "reverse-scan"]
    run_view = [loader.only_within(invocation.tasks(run, Halt())) for invocation in invocations]
    full_view = [invocation.tasks(run, Halt()) for invocation in invocations]

    # Every task the invocations run is listed, with the dependencies the list shows, and nothing
    # else is listed but the stages' group tasks.
    flat = {task_name(task): list(task.get("task_dep", [])) for tasks in full_view for task in tasks
            if "actions" in task}
    assert flat == {name: task.task_dep for name, task in listed.items() if not task.has_subtask}
    assert {name for name, task in listed.items() if task.has_subtask} == {
        stage.key for stage in STAGES if stage.fanout != "run"}
    # What an invocation drops is a dependency on a task that ran in an earlier invocation, and
    # only that: each group waits for the group before it in the listing, and runs after it.
    earlier: set[str] = set()
    for full, run in zip(full_view, run_view, strict=True):
        here = {task_name(task) for task in full}
        for before, after in zip(full, run, strict=True):
            dropped = set(before.get("task_dep", [])) - set(after.get("task_dep", []))
            assert set(after.get("task_dep", [])) <= here
            assert dropped <= earlier, (task_name(before), dropped - earlier)
        earlier |= here
    for number in range(1, 4):
        first = next(task for task in full_view[1 + number] if "actions" in task)
        assert f"embed:g{number - 1:05d}" in first.get("task_dep", [])


def test_a_sync_reaches_every_listed_task_in_dependency_order(
        kb: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["-C", str(kb), "doit", "list", "--all"]) == 0
    listing = {line.split()[0] for line in capsys.readouterr().out.splitlines() if line.strip()}
    listed = real_tasks(loader.task_namespace(loader.inspection_run(kb)))
    assert listing == set(listed)
    assert sum(name.startswith("embed:") for name in listing) == 4

    reached: list[str] = []
    real_reporter = loader.reporter_class

    def recording() -> type:
        class Recording(real_reporter()):
            def execute_task(self, task: Task) -> None:
                reached.append(task.name)
                super().execute_task(task)

            def skip_uptodate(self, task: Task) -> None:
                reached.append(task.name)
                super().skip_uptodate(task)

        return Recording

    monkeypatch.setattr(loader, "reporter_class", recording)
    report = run_sync(kb, SyncOptions(), embedder=FakeEmbedder())
    assert report.ok and len(report.added) == DOCUMENTS

    assert set(reached) == listing
    order = {name: position for position, name in reversed(list(enumerate(reached)))}  # first reach
    for name, task in listed.items():
        if task.has_subtask:
            continue  # a group task is reached once per invocation that holds some of its subtasks
        assert reached.count(name) == 1, name
        for dependency in expand(task.task_dep, listed):
            assert order[dependency] < order[name], f"{name} ran before {dependency}"


def test_every_declared_stage_has_one_adapter() -> None:
    assert set(adapters()) == {stage.key for stage in STAGES}
    assert all(key == adapter.key for key, adapter in adapters().items())
    check_declaration()
    assert [phase.label for phase in phases()] == ["plan", "group", "graph", "vectors", "reverse-scan"]


def test_a_bad_declaration_is_refused() -> None:
    with pytest.raises(ValueError, match="'b' reads"):
        check_declaration((Stage("a", (), "run"), Stage("b", ("c",), "run"), Stage("c", (), "run")))
    with pytest.raises(ValueError, match="declared twice"):
        check_declaration((Stage("a", (), "run"), Stage("a", (), "run")))
    with pytest.raises(ValueError, match="next to each other"):
        check_declaration((Stage("a", (), "document", streamed=True), Stage("b", ("a",), "run"),
                           Stage("c", ("b",), "document", streamed=True)))


def test_the_declaration_imports_neither_numpy_nor_doit() -> None:
    probe = ("import sys, pinakes.pipeline.stages\n"
             "print(sorted(m for m in ('numpy', 'doit') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_an_error_a_stage_raises_reaches_the_caller_as_itself(kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The adapters' guard keeps the error that stopped a task and the runner raises it: the caller
    sees the stage's own PinakesError (with what the run had committed), not doit's exit code."""
    from pinakes.errors import PinakesError
    from pinakes.pipeline import embed as embed_stage
    from pinakes.sidecar.model import Link

    written: list[str] = []
    real_write_links = embed_stage.write_links

    def refusing(conn: sqlite3.Connection, kb_id: str, doc_id: str, links: Iterable[Link]) -> None:
        if len(written) == GROUP_SIZE:  # the first document of the second group
            raise PinakesError("the planted refusal", remedy="none")
        written.append(doc_id)
        real_write_links(conn, kb_id, doc_id, links)

    monkeypatch.setattr(embed_stage, "write_links", refusing)
    with pytest.raises(PinakesError, match="the planted refusal") as stopped:
        run_sync(kb, SyncOptions(), embedder=FakeEmbedder())
    assert "doit exit" not in stopped.value.render()
    assert stopped.value.details[0].startswith(f"the sync stopped after indexing {GROUP_SIZE} documents")


@pytest.mark.parametrize("connected", [True, False])
def test_a_stage_declared_after_reverse_scan_still_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         connected: bool) -> None:
    """The runner does not end at reverse-scan, whether it runs (a connected KB) or has nothing to
    do: an invocation after it is run too (graph again, harmless: derived in full each sync)."""
    from pinakes.pipeline.stages import stage
    from pinakes.rules import PipelineRun

    root = init_test_kb(tmp_path / "kb", FakeEmbedder().identity)
    if connected:
        with (root / "pinakes.toml").open("a", encoding="utf-8") as manifest:
            manifest.write('\n[[links.kb]]\nalias = "elsewhere"\nid = "01J9ZX7K3M4N5P6Q7R8S9T0VWX"\n'
                           'path = "../elsewhere"\n')
    write_documents(root, [Doc("docs/a.md", "# A\n\nA paragraph.\n")])
    declared = loader.invocations

    def with_a_last_stage(run: PipelineRun) -> Iterable[loader.Invocation]:
        yield from declared(run)
        yield loader.Invocation("after reverse-scan", (stage("graph"),), loader.Scope())

    ran: list[str] = []
    real_run = loader.run_invocation

    def recording(run: PipelineRun, invocation: loader.Invocation, *args: Any) -> tuple[int, str]:
        ran.append(invocation.label)
        return real_run(run, invocation, *args)

    monkeypatch.setattr(loader, "invocations", with_a_last_stage)
    monkeypatch.setattr(loader, "run_invocation", recording)
    run_sync(root, SyncOptions(), embedder=FakeEmbedder())
    assert ran[-1] == "after reverse-scan"
    assert ("reverse-scan" in ran) == connected


# --- the walk runs once, as the walk task; what doit lists as up to date is what a sync skips --------


def test_a_sync_walks_once_and_in_the_walk_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The walk is the walk task's up-to-date check (it decides whether anything changed), made once
    per sync; its action records the changes. A no-op sync walks once too, and starts no doit run:
    every task `pnk doit list --status` shows is up to date."""
    import traceback

    from pinakes.sources import walk as source_walk

    kb = init_test_kb(tmp_path / "kb", FakeEmbedder().identity)  # no partner: nothing stays due
    write_documents(kb, [Doc(f"docs/doc{n}.md", f"# Doc {n}\n\nParagraph {n}.\n") for n in range(DOCUMENTS)])

    walks: list[list[str]] = []

    def recorded(real: Callable[..., object]) -> Callable[..., object]:
        def recording(*args: object, **kwargs: object) -> object:
            walks.append([frame.filename for frame in traceback.extract_stack()])
            return real(*args, **kwargs)
        return recording

    doit_runs: list[list[str]] = []
    real_run_doit = loader.run_doit

    def recording_doit(namespace: dict[str, object]) -> tuple[int, str]:
        doit_runs.append(sorted(name for name in namespace if name.startswith("task_")))
        return real_run_doit(namespace)

    monkeypatch.setattr(source_walk, "walk", recorded(source_walk.walk))
    monkeypatch.setattr(source_walk, "walk_settled", recorded(source_walk.walk_settled))  # a settled index's
    monkeypatch.setattr(loader, "run_doit", recording_doit)
    report = run_sync(kb, SyncOptions(), embedder=FakeEmbedder())
    assert report.ok and len(report.added) == DOCUMENTS
    assert len(walks) == 1
    assert any(name.endswith(str(Path("rules") / "walk.py")) for name in walks[0]), "walked outside the walk task"
    assert doit_runs[0] == ["task_pair", "task_walk"]  # the first invocation doit runs holds the walk task
    conn = sqlite3.connect(kb / ".pinakes" / "index.db")
    try:  # the walk task's action recorded what the walk found
        cached = {row[0] for row in conn.execute("SELECT path FROM walk_cache")}
    finally:
        conn.close()
    assert {f"docs/doc{n}.md" for n in range(DOCUMENTS)} <= cached

    walks.clear()
    doit_runs.clear()
    capsys.readouterr()
    assert main(["-C", str(kb), "doit", "list", "--all", "--status"]) == 0
    statuses = {line.split()[1]: line.split()[0] for line in capsys.readouterr().out.splitlines() if line.strip()}
    walks.clear()
    again = run_sync(kb, SyncOptions(), embedder=FakeEmbedder())
    assert again.ok and again.noop and again.unchanged == DOCUMENTS
    assert len(walks) == 1 and doit_runs == []
    assert {name for name, status in statuses.items() if status != "U" and ":" in name} == set(), statuses
    assert statuses["walk"] == statuses["pair"] == statuses["graph"] == "U"


def test_a_stage_is_added_through_its_declaration_alone(kb: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """docs/architecture.md's worked example ("Adding a stage"), done: a declaration (one `Stage` in
    STAGES), a core (a typed function) and an adapter module named after the key. Nothing in the
    loader or the driver changes, and the stage is listed by `pnk doit list` and run by `pnk sync`,
    after the stage it reads, only when its check says it is due."""
    import types

    from pinakes.pipeline import stages
    from pinakes.rules import PipelineRun, Scope, StageAdapter, no_name, one_per_run

    counted: list[int] = []

    def count_active(conn: sqlite3.Connection) -> int:  # the core: a typed function over the index
        return int(conn.execute("SELECT COUNT(*) FROM documents WHERE state = 'active'").fetchone()[0])

    def run_census(run: PipelineRun, _scope: Scope) -> None:
        counted.append(count_active(run.ctx.writer()))

    adapter_module = types.ModuleType("pinakes.rules.census")
    adapter_module.ADAPTER = StageAdapter[Scope](  # pyright: ignore[reportAttributeAccessIssue]  # a module built here
        key="census", doc="count the active documents", items=one_per_run, name=no_name, action=run_census,
        uptodate=lambda run, _scope: not run.changed())
    monkeypatch.setitem(sys.modules, "pinakes.rules.census", adapter_module)
    monkeypatch.setattr(stages, "STAGES", (*stages.STAGES, stages.Stage("census", ("graph",), "run")))
    stages.check_declaration(stages.STAGES)

    capsys.readouterr()
    assert main(["-C", str(kb), "doit", "list"]) == 0
    assert "census" in {line.split()[0] for line in capsys.readouterr().out.splitlines() if line.strip()}
    main(["-C", str(kb), "doit", "info", "census"])  # exits 1: the task would run
    assert "task_dep   : \n - graph" in capsys.readouterr().out  # its input, as a task_dep

    reached: list[str] = []
    real_reporter = loader.reporter_class

    def recording() -> type:
        class Recording(real_reporter()):
            def execute_task(self, task: Task) -> None:
                reached.append(task.name)
                super().execute_task(task)

        return Recording

    monkeypatch.setattr(loader, "reporter_class", recording)
    assert run_sync(kb, SyncOptions(), embedder=FakeEmbedder()).ok
    assert counted == [DOCUMENTS]
    assert reached.index("census") > reached.index("graph")
    assert run_sync(kb, SyncOptions(), embedder=FakeEmbedder()).noop
    assert counted == [DOCUMENTS]  # up to date: not run again
