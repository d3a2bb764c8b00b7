"""The sync pipeline is declared once (`pinakes.pipeline.stages.STAGES`), and both views of it come
from that declaration: the doit namespace `pnk doit list|info` shows, and the doit invocations
`pnk sync` runs (one for walk and pair, one per group of documents, one for graph, one for
reverse-scan). These tests hold the two views to each other: the same tasks, the same dependencies
(less those on a task of an earlier invocation, which a later one cannot name), and a real sync
reaches every listed task in an order that keeps every listed dependency."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

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
    ctx = loader.inspection_context(kb)
    listed = real_tasks(loader.task_namespace(ctx))
    invocations = list(loader.invocations(ctx))
    assert [invocation.label for invocation in invocations] == [
        "plan", "group 0", "group 1", "group 2", "group 3", "graph", "reverse-scan"]
    run_view = [loader.only_within(invocation.tasks(ctx, Halt())) for invocation in invocations]
    full_view = [invocation.tasks(ctx, Halt()) for invocation in invocations]

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
    listed = real_tasks(loader.task_namespace(loader.inspection_context(kb)))
    assert listing == set(listed)
    assert sum(name.startswith("embed:") for name in listing) == 4

    reached: list[str] = []
    real_reporter = loader.reporter_class

    def recording() -> type:
        class Recording(real_reporter()):  # type: ignore[misc]
            def execute_task(self, task: Task) -> None:
                reached.append(task.name)
                super().execute_task(task)

            def skip_uptodate(self, task: Task) -> None:
                reached.append(task.name)
                super().skip_uptodate(task)

        return Recording

    monkeypatch.setattr(loader, "reporter_class", recording)
    report = run_sync(kb, SyncOptions(), embedder=FakeEmbedder())  # type: ignore[arg-type]
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
    assert [phase.label for phase in phases()] == ["plan", "group", "graph", "reverse-scan"]


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

    written: list[str] = []
    real_write_links = embed_stage.write_links

    def refusing(conn: object, kb_id: str, doc_id: str, links: object) -> None:
        if len(written) == GROUP_SIZE:  # the first document of the second group
            raise PinakesError("the planted refusal", remedy="none")
        written.append(doc_id)
        real_write_links(conn, kb_id, doc_id, links)  # type: ignore[arg-type]

    monkeypatch.setattr(embed_stage, "write_links", refusing)
    with pytest.raises(PinakesError, match="the planted refusal") as stopped:
        run_sync(kb, SyncOptions(), embedder=FakeEmbedder())  # type: ignore[arg-type]
    assert "doit exit" not in stopped.value.render()
    assert stopped.value.details[0].startswith(f"the sync stopped after indexing {GROUP_SIZE} documents")


@pytest.mark.parametrize("connected", [True, False])
def test_a_stage_declared_after_reverse_scan_still_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         connected: bool) -> None:
    """The runner does not end at reverse-scan, whether it runs (a connected KB) or has nothing to
    do: an invocation after it is run too (graph again, harmless: derived in full each sync)."""
    from pinakes.pipeline.stages import stage

    root = init_test_kb(tmp_path / "kb", FakeEmbedder().identity)
    if connected:
        with (root / "pinakes.toml").open("a", encoding="utf-8") as manifest:
            manifest.write('\n[[links.kb]]\nalias = "elsewhere"\nid = "01J9ZX7K3M4N5P6Q7R8S9T0VWX"\n'
                           'path = "../elsewhere"\n')
    write_documents(root, [Doc("docs/a.md", "# A\n\nA paragraph.\n")])
    declared = loader.invocations

    def with_a_last_stage(ctx: object) -> Iterable[loader.Invocation]:
        yield from declared(ctx)  # type: ignore[arg-type]
        yield loader.Invocation("after reverse-scan", (stage("graph"),), loader.Scope())

    ran: list[str] = []
    real_run = loader.run_invocation

    def recording(ctx: object, invocation: loader.Invocation) -> tuple[int, str]:
        ran.append(invocation.label)
        return real_run(ctx, invocation)  # type: ignore[arg-type]

    monkeypatch.setattr(loader, "invocations", with_a_last_stage)
    monkeypatch.setattr(loader, "run_invocation", recording)
    run_sync(root, SyncOptions(), embedder=FakeEmbedder())  # type: ignore[arg-type]
    assert ran[-1] == "after reverse-scan"
    assert ("reverse-scan" in ran) == connected
