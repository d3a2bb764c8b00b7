"""The doit side of sync: the declared pipeline (`pinakes.pipeline.stages`) as doit tasks, for
running and for `doit list` / `info`, both generated from one sequence of invocations.

    walk → pair │ extract:<doc> … → chunk:<doc> … → embed:g00000 │ extract:<doc of group 1> … →
      embed:g00001 │ … │ graph │ reverse-scan:<partner> …, reverse-scan:delisted

walk and pair always run (they are what detect change); the changed documents then stream through
in groups sized by estimated tokens. A group is extracted, chunked, embedded and committed (one
transaction per document) before the next group's text is read, so peak memory follows the group
size and the model, not the corpus, and a crash loses at most the group in flight.

`invocations()` yields what `pnk sync` runs as separate doit invocations (│ above): walk and pair,
one per group, graph, reverse-scan. doit keeps every Task it creates until its run ends (about
10 KB per document for the extract and chunk tasks), so one invocation for the whole corpus would
make memory grow with it. `run_pipeline` runs each, with the dependencies on tasks of an earlier
invocation dropped by one filter (`only_within`: those tasks ran before). `task_namespace` lists
them all in one namespace, every dependency kept, each group's extract tasks depending on the
previous group's embed task: what `doit list` shows is what runs, by construction. Each
per-document task is keyed on the document's build key (`pinakes.pipeline.keys`), compared with
the key the index stored beside its chunks.

The same namespace backs `pnk doit list|info` and the `.pinakes/dodo.py` shim for plain
`doit -f .pinakes/dodo.py list --all --status`.
"""

from __future__ import annotations

import functools
import io
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pinakes.rules as rules
from pinakes.kb import KBPaths
from pinakes.links.reverse import delisted
from pinakes.pipeline.pair import DocWork, compute_plan
from pinakes.pipeline.run import SyncContext
from pinakes.pipeline.stages import STAGES, Stage, phases
from pinakes.rules import Halt, Scope, TaskDict, task_name

if TYPE_CHECKING:  # doit is imported only when a sync runs it
    from importlib.metadata import EntryPoint

    from doit.exceptions import BaseFail
    from doit.reporter import ZeroReporter
    from doit.task import Task

# A group holds about this many tokens of source text (estimated from file sizes: an upper bound for a
# PDF, whose text is smaller than the file), and at most GROUP_MAX_DOCUMENTS documents.
GROUP_TOKENS = 64 * 1024
ESTIMATED_BYTES_PER_TOKEN = 4
GROUP_MAX_DOCUMENTS = 256

DODO_SHIM = '''"""doit view of this KB's sync pipeline, written by `pnk sync`.

    doit -f .pinakes/dodo.py list --all --status
    doit -f .pinakes/dodo.py info embed:g00000
"""
from pathlib import Path

from pinakes.sync.loader import inspection_namespace

globals().update(inspection_namespace(Path(__file__).resolve().parent.parent))
'''

# What the progress line says while an invocation that is no one document's runs.
_STEPS = {"graph": "deriving the graph", "reverse-scan": "reading connected KBs' links"}


def stream_groups(work: list[DocWork]) -> list[list[DocWork]]:
    """Cut the work list, in order, into groups of about GROUP_TOKENS estimated tokens."""
    budget = GROUP_TOKENS * ESTIMATED_BYTES_PER_TOKEN
    groups: list[list[DocWork]] = []
    current: list[DocWork] = []
    size = 0
    for item in work:
        if current and (size + item.file.size > budget or len(current) >= GROUP_MAX_DOCUMENTS):
            groups.append(current)
            current, size = [], 0
        current.append(item)
        size += item.file.size
    if current:
        groups.append(current)
    return groups


def ensure_plan(ctx: SyncContext) -> None:
    """Walk and pair if nobody has yet (an inspection plans without running doit), and cut the
    plan's work into groups."""
    if ctx.walk is None:
        from pinakes.rules.walk import run_walk

        run_walk(ctx, Scope())
    plan = compute_plan(ctx)
    if not ctx.groups and plan.work:
        ctx.groups = stream_groups(plan.work)


@dataclass(frozen=True)
class Invocation:
    """One doit run of `pnk sync`: some of the declared stages over one scope."""

    label: str  # "plan", "group 3", or the key of the one stage it runs
    stages: tuple[Stage, ...]
    scope: Scope
    waits_for: tuple[str, ...] = ()  # tasks of an earlier invocation its first stage's tasks wait for

    def tasks(self, ctx: SyncContext, halt: Halt) -> list[TaskDict]:
        return [task for position, stage in enumerate(self.stages)
                for task in rules.tasks(stage, ctx, self.scope, halt=halt,
                                        within=self.waits_for if position == 0 else ())]


def invocations(ctx: SyncContext) -> Iterator[Invocation]:
    """The doit invocations of a sync, in order, from the declaration (`pipeline.stages.phases`): the
    stages that decide the change set, then the streamed stages once per group, each group waiting
    for the one before, then each later stage alone. A generator: the groups are cut once the plan
    exists, so a sync runs the first invocation before the next is made (an inspection plans
    read-only when asked for the groups)."""
    for phase in phases():
        if not phase.streamed:
            yield Invocation(phase.label, phase.stages, Scope())
            continue
        ensure_plan(ctx)
        last = rules.adapters()[phase.stages[-1].key]
        previous: Scope | None = None
        for number, group in enumerate(ctx.groups):
            scope = Scope(number, group)
            waits_for = tuple(last.task_names(ctx, previous)) if previous is not None else ()
            yield Invocation(f"{phase.label} {number}", phase.stages, scope, waits_for)
            previous = scope


def task_namespace(ctx: SyncContext) -> dict[str, object]:
    """The whole pipeline as one doit namespace, what `doit list` / `info` show: every invocation's
    tasks with every dependency, including those on a task of an earlier invocation."""
    halt = Halt()  # listed, never run: an inspection's context cannot write
    by_stage: dict[str, list[TaskDict]] = {stage.key: [] for stage in STAGES}
    for invocation in invocations(ctx):
        for task in invocation.tasks(ctx, halt):
            if task.get("name", "") is not None or not by_stage[task["basename"]]:
                by_stage[task["basename"]].append(task)  # a stage's own entry once, before its tasks
    found = rules.adapters()
    namespace: dict[str, object] = {
        _creator(stage): _yielding(by_stage[stage.key] or [
            {"basename": stage.key, "name": None, "doc": found[stage.key].doc}])  # no work: still listed
        for stage in STAGES}
    namespace["DOIT_CONFIG"] = doit_config([stage.key for stage in STAGES])
    return namespace


def only_within(tasks: list[TaskDict]) -> list[TaskDict]:
    """`tasks` as one invocation runs them: a dependency on a task outside the invocation is
    dropped, because that task ran in an earlier invocation (doit refuses a name it does not know)."""
    names = {task["basename"] for task in tasks} | {task_name(task) for task in tasks}
    for task in tasks:
        task["task_dep"] = [dependency for dependency in task.get("task_dep", []) if dependency in names]
    return tasks


def run_pipeline(ctx: SyncContext) -> tuple[int, str]:
    """Run the pipeline, one doit invocation after the other (see the module docstring); stops at
    the first that fails. Raises the PinakesError that stopped a step."""
    for invocation in invocations(ctx):
        scanning = invocation.label == "reverse-scan"
        if scanning and not (ctx.manifest.links or delisted(ctx.writer(), ctx.manifest)):
            continue  # no connected KB, and none to forget: reverse-scan has nothing to do
        if invocation.label in _STEPS:
            ctx.progress.step(_STEPS[invocation.label])
        # reverse-scan through its own entry, the one a sync that changed no document uses too
        code, output = run_reverse_scan(ctx) if scanning else run_invocation(ctx, invocation)
        if code:
            return code, output
    return 0, ""


def run_reverse_scan(ctx: SyncContext) -> tuple[int, str]:
    """The reverse-scan stage as its own doit invocation (after graph; or alone, when a sync that
    changed no document finds a connected KB's scan due)."""
    from pinakes.pipeline.stages import stage

    return run_invocation(ctx, Invocation("reverse-scan", (stage("reverse-scan"),), Scope()))


def run_invocation(ctx: SyncContext, invocation: Invocation) -> tuple[int, str]:
    """`invocation` through doit: (exit code, what doit reported). Raises the PinakesError a step
    stopped the run with (kept by the adapters' guard: doit itself would only print it)."""
    halt = Halt()
    tasks = only_within(invocation.tasks(ctx, halt))
    namespace: dict[str, object] = {
        _creator(stage): _yielding([task for task in tasks if task["basename"] == stage.key])
        for stage in invocation.stages}
    namespace["DOIT_CONFIG"] = doit_config([stage.key for stage in invocation.stages])
    code, output = run_doit(namespace)
    if halt.error is not None:
        raise halt.error
    return code, output


def _creator(stage: Stage) -> str:
    """The name doit finds a stage's task creator under."""
    return "task_" + stage.key.replace("-", "_")


def _yielding(tasks: list[TaskDict]) -> Callable[[], Iterator[TaskDict]]:
    def create() -> Iterator[TaskDict]:
        yield from tasks

    return create


def doit_config(default_tasks: list[str]) -> dict[str, object]:
    return {
        # doit's own state holds no truth here: every task's up-to-date answer is computed from the
        # index (its build keys) before doit sees the task. So it lives in memory: a sync never
        # writes doit state to disk, which a full disk, a read-only .pinakes/ or a kill -9 (doit
        # flushes only at exit) could otherwise break or lose.
        "dep_file": ":memory:",
        "backend": "sqlite3",
        "verbosity": 0,
        "default_tasks": default_tasks,
    }


def run_doit(namespace: dict[str, object]) -> tuple[int, str]:
    """`doit run` over `namespace`; returns (exit code, what doit reported)."""
    from doit.cmd_base import ModuleTaskLoader
    from doit.doit_cmd import DoitMain

    output = io.StringIO()
    config = namespace["DOIT_CONFIG"]
    assert isinstance(config, dict)
    namespace["DOIT_CONFIG"] = {**config, "outfile": output, "reporter": reporter_class()}
    stdout, stderr = sys.stdout, sys.stderr
    _remember_doit_plugins()
    try:
        code = DoitMain(ModuleTaskLoader(namespace), config_filenames=()).run(["run"])
    finally:
        sys.stdout, sys.stderr = stdout, stderr
    return int(code or 0), output.getvalue()


def _remember_doit_plugins() -> None:
    """Every doit run looks its plugins up in the installed packages' metadata (three groups, ~4 ms
    each: ~0.04 s a sync of three invocations); what is installed does not change within a process,
    so each group's entry points are read once. Through doit's own seam for the lookup
    (`doit.plugin.entry_points_impl`)."""
    from doit import plugin  # pyright: ignore[reportAttributeAccessIssue, reportUnknownVariableType]

    plugin.entry_points_impl = lambda: _entry_points


@functools.cache
def _entry_points(*, group: str) -> tuple[EntryPoint, ...]:
    from importlib.metadata import entry_points

    return tuple(entry_points(group=group))


def reporter_class() -> type[ZeroReporter]:
    """doit's reporter for a sync (made on first use: doit is imported only when a sync runs it)."""
    from doit.reporter import ZeroReporter

    class FailureReporter(ZeroReporter):
        """Silent, except that a task failure's traceback is kept for the error message."""

        def add_failure(self, task: Task, fail: BaseFail) -> None:
            self.outstream.write(f"{task.name}: {fail.get_msg()}\n")

        def runtime_error(self, msg: str) -> None:
            self.outstream.write(msg + "\n")

    return FailureReporter


def inspection_context(kb_root: Path, mode: str = "inspect") -> SyncContext:
    """A read-only context: plans what a sync would do, never writes (doit list/info, pnk status)."""
    from pinakes.index.schema import open_reader
    from pinakes.manifest import load_manifest
    from pinakes.pipeline.keys import build_keys
    from pinakes.pipeline.progress import SyncProgress
    from pinakes.pipeline.report import SyncReport
    from pinakes.sync import SyncOptions

    paths = KBPaths(kb_root)
    manifest = load_manifest(paths.manifest)
    conn = open_reader(paths.index_db) if paths.index_db.exists() else None
    return SyncContext(paths=paths, manifest=manifest, options=SyncOptions(), conn=conn,
                       report=SyncReport(str(kb_root), mode), keys=build_keys(manifest),
                       progress=SyncProgress.for_stream(sys.stderr, quiet=True), read_only=True)


def inspection_namespace(kb_root: Path) -> dict[str, object]:
    """The doit namespace over a read-only context, for `doit list/info`."""
    ctx = inspection_context(kb_root)
    ctx.paths.state_dir.mkdir(exist_ok=True)  # doit keeps its (disposable) state there
    return task_namespace(ctx)


def write_dodo_shim(paths: KBPaths) -> None:
    shim = paths.state_dir / "dodo.py"
    if not shim.exists() or shim.read_text(encoding="utf-8") != DODO_SHIM:
        shim.write_text(DODO_SHIM, encoding="utf-8")
