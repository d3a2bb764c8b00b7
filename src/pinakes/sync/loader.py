"""The doit side of sync: the declared pipeline (`pinakes.pipeline.stages`) as doit tasks, for
running and for `doit list` / `info`, both generated from one sequence of invocations.

    walk → pair │ extract:<doc> … → chunk:<doc> … → embed:g00000 │ extract:<doc of group 1> … →
      embed:g00001 │ … │ graph │ reverse-scan:<partner> …, reverse-scan:delisted

walk and pair detect change: the walk task's up-to-date check walks the sources (once per sync),
the pair task's decides the plan. The changed documents then stream through in groups sized by
estimated tokens. A group is extracted, chunked, embedded and committed (one transaction per
document) before the next group's text is read, so peak memory follows the group size and the
model, not the corpus, and a crash loses at most the group in flight.

`invocations()` yields what `pnk sync` runs as separate doit invocations (│ above): walk and pair,
one per group, then each later stage. doit keeps every Task it creates until its run ends (about
10 KB per document for the extract and chunk tasks), so one invocation for the whole corpus would
make memory grow with it. `run_pipeline` runs each, with the dependencies on tasks of an earlier
invocation dropped by one filter (`only_within`: those tasks ran before), and hands doit only an
invocation with a task that is not up to date: a sync with nothing to do never imports doit, and no
stage is treated apart by name. `task_namespace` lists them all in one namespace, every dependency
kept, each group's extract tasks depending on the previous group's embed task: what `doit list`
shows is what runs, by construction. Each per-document task is keyed on the document's build key
(`pinakes.pipeline.keys`), compared with the key the index stored beside its chunks.

The same namespace backs `pnk doit list|info` and the `.pinakes/dodo.py` shim for plain
`doit -f .pinakes/dodo.py list --all --status`.
"""

from __future__ import annotations

import functools
import io
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import pinakes.rules as rules
from pinakes.kb import KBPaths
from pinakes.pipeline import stages
from pinakes.pipeline.run import return_freed_memory
from pinakes.pipeline.stages import Phase, Stage, phases
from pinakes.rules import Halt, PipelineRun, Scope, TaskDict, task_name

if TYPE_CHECKING:  # doit is imported only when a sync runs it
    from importlib.metadata import EntryPoint

    from doit.exceptions import BaseFail
    from doit.reporter import ZeroReporter
    from doit.task import Task

    from pinakes.pipeline.run import SyncContext
    from pinakes.pipeline.types import DocWork

# A group holds about this many tokens of source text (estimated from file sizes: an upper bound for a
# PDF, whose text is smaller than the file), and at most GROUP_MAX_DOCUMENTS documents.
GROUP_TOKENS = 64 * 1024
ESTIMATED_BYTES_PER_TOKEN = 4
GROUP_MAX_DOCUMENTS = 256
# The last group is folded into the one before it when the two together stay within this many times
# both caps: a short tail group would be embedded as a sorted set of its own, and each sorted set
# pads its batches (at 300 pages, 256 + 44: 84,023 padded tokens against 81,891 for one set, +2.6%
# of the model's work; docs/perf/sync.md, coldcpu), and costs a doit invocation of its own.
LAST_GROUP_SLACK = 1.25

DODO_SHIM = '''"""doit view of this KB's sync pipeline, written by `pnk sync`.

    doit -f .pinakes/dodo.py list --all --status
    doit -f .pinakes/dodo.py info embed:g00000
"""
from pathlib import Path

from pinakes.sync.loader import inspection_namespace

globals().update(inspection_namespace(Path(__file__).resolve().parent.parent))
'''

def stream_groups(work: Sequence[DocWork]) -> list[Sequence[DocWork]]:
    """Cut the work, in order, into groups of about GROUP_TOKENS estimated tokens and at most
    GROUP_MAX_DOCUMENTS documents: slices of it (a first sync's `WorkTable` cuts row ranges, whose
    work items are made when a group is read). The last group joins the one before it where both
    together stay within LAST_GROUP_SLACK times those caps."""
    from pinakes.pipeline.plan_table import WorkTable

    budget = GROUP_TOKENS * ESTIMATED_BYTES_PER_TOKEN
    sizes = work.sizes() if isinstance(work, WorkTable) else (item.file.size for item in work)
    ranges: list[tuple[int, int, int]] = []  # start, end, estimated bytes
    start = size = 0
    for position, file_size in enumerate(sizes):
        if position > start and (size + file_size > budget or position - start >= GROUP_MAX_DOCUMENTS):
            ranges.append((start, position, size))
            start, size = position, 0
        size += file_size
    if len(work) > start:
        ranges.append((start, len(work), size))
    if len(ranges) >= 2 and _fit_together(ranges[-2], ranges[-1], budget):
        (before, _, before_size), (_, end, last_size) = ranges[-2], ranges[-1]
        ranges[-2:] = [(before, end, before_size + last_size)]
    return [work[start:end] for start, end, _ in ranges]


def _fit_together(before: tuple[int, int, int], last: tuple[int, int, int], budget: int) -> bool:
    documents = last[1] - before[0]
    return documents <= GROUP_MAX_DOCUMENTS * LAST_GROUP_SLACK and before[2] + last[2] <= budget * LAST_GROUP_SLACK


class Invocation(NamedTuple):
    """One doit run of `pnk sync`: some of the declared stages over one scope."""

    label: str  # "plan", "group 3", or the key of the one stage it runs
    stages: tuple[Stage, ...]
    scope: Scope
    waits_for: tuple[str, ...] = ()  # tasks of an earlier invocation its first stage's tasks wait for

    def tasks(self, run: PipelineRun, halt: Halt) -> list[TaskDict]:
        return [task for position, stage in enumerate(self.stages)
                for task in rules.tasks(stage, run, self.scope, halt=halt,
                                        within=self.waits_for if position == 0 else ())]


def invocations(run: PipelineRun) -> Iterator[Invocation]:
    """The doit invocations of a sync, in order, from the declaration (`pipeline.stages.phases`): the
    stages that decide the change set, then the streamed stages once per group, each group waiting
    for the one before, then each later stage alone. A generator: the groups are cut from the plan
    once the invocation before them was made (and, in a sync, run), so they hold each document as
    pairing left it; a group's new documents get their sidecars as its invocation is made (in a
    sync: after the previous group ran)."""
    for phase in phases():
        if not phase.streamed:
            yield Invocation(phase.label, phase.stages, Scope())
        else:  # its own generator: the last group's documents go with its frame once it has run
            yield from _streamed(run, phase)


def _streamed(run: PipelineRun, phase: Phase) -> Iterator[Invocation]:
    """A streamed phase's invocations, one per group (see `invocations`)."""
    plan = run.decided()
    if not run.groups and plan is not None and plan.work:
        run.groups = stream_groups(plan.work)
    previous: Scope | None = None
    for number, group in enumerate(run.groups):
        if plan is not None and plan.pending_mints:  # new documents' IDs go on disk just before their group
            from pinakes.pipeline.sidecar_writes import mint_group

            # Not stored back in run.groups: the group's hashed and minted items are let go once
            # it has run (a first sync of 700k documents would otherwise keep them all).
            group = mint_group(run.ctx, plan.pending_mints, group, run.failed)
        scope = Scope(number, group)
        waits_for = (tuple(rules.adapter(phase.stages[-1].key).task_names(run, previous))
                     if previous is not None else ())
        yield Invocation(f"{phase.label} {number}", phase.stages, scope, waits_for)
        previous = scope


def task_namespace(run: PipelineRun) -> dict[str, object]:
    """The whole pipeline as one doit namespace, what `doit list` / `info` show: every invocation's
    tasks with every dependency, including those on a task of an earlier invocation."""
    halt = Halt()  # listed, never run: an inspection's context cannot write
    declared = stages.STAGES  # read when called: the declaration is the one source (a test extends it)
    by_stage: dict[str, list[TaskDict]] = {stage.key: [] for stage in declared}
    for invocation in invocations(run):
        for task in invocation.tasks(run, halt):
            if task.get("name", "") is not None or not by_stage[task["basename"]]:
                by_stage[task["basename"]].append(task)  # a stage's own entry once, before its tasks
    namespace: dict[str, object] = {
        _creator(stage): _yielding(by_stage[stage.key] or [
            {"basename": stage.key, "name": None, "doc": rules.adapter(stage.key).doc}])  # no work: still listed
        for stage in declared}
    namespace["DOIT_CONFIG"] = doit_config([stage.key for stage in declared])
    return namespace


def only_within(tasks: list[TaskDict]) -> list[TaskDict]:
    """`tasks` as one invocation runs them: a dependency on a task outside the invocation is
    dropped, because that task ran in an earlier invocation (doit refuses a name it does not know)."""
    names = {task["basename"] for task in tasks} | {task_name(task) for task in tasks}
    for task in tasks:
        task["task_dep"] = [dependency for dependency in task.get("task_dep", []) if dependency in names]
    return tasks


class Outcome(NamedTuple):
    """What `run_pipeline` did: how many invocations doit ran, and the exit code and report of the
    last (non-zero: the one that failed, and the run stopped there)."""

    ran: int = 0
    code: int = 0
    output: str = ""


def run_pipeline(run: PipelineRun, before_doit: Callable[[], None] = lambda: None) -> Outcome:
    """Run the pipeline, one doit invocation after the other (see the module docstring); an
    invocation whose every task is up to date is not handed to doit, so a sync with nothing to do
    never imports it. `before_doit` is called before each invocation that doit runs. Stops at the
    first that fails; raises the PinakesError that stopped a step."""
    ran = 0
    released: int | None = None  # once the documents are let go: how many the walk had found
    # The graph's place passed with nothing to do (the documents unchanged): they are let go before
    # the next step that runs — a vector file built whole (missing, stale, of another format) held
    # the walk and the plan through its build otherwise (1.85 GB at 700k pages) — and never in a
    # sync with nothing at all to do, whose collection would cost its no-op time. A reverse scan
    # alone (a partner due) pays that collection too (from FREED_MEMORY_MIN_DOCUMENTS documents):
    # the bound on memory first.
    release_due = False
    for invocation in invocations(run):
        halt = Halt()
        tasks = invocation.tasks(run, halt)
        if all(task.get("uptodate") == [True] for task in tasks if "actions" in task):
            release_due = release_due or invocation.stages[-1].key == RELEASE_AFTER
            continue
        if release_due:
            released, release_due = _release_documents(run), False
            return_freed_memory(released)
        before_doit()
        step = rules.adapter(invocation.stages[0].key).step
        if step is not None:
            run.ctx.progress.step(step)
        ran += 1
        code, output = run_invocation(run, invocation, tasks, halt)
        if code:
            return Outcome(ran, code, output)
        if invocation.stages[-1].key == RELEASE_AFTER:
            released = _release_documents(run)
        if released is not None:  # the documents' pages, then each later stage's: the vector build frees
            return_freed_memory(released)  # a whole index, ~40% of which glibc would keep into self-calibration
    return Outcome(ran)


def _release_documents(run: PipelineRun) -> int:
    """Let go of the run's documents (PipelineRun.release_documents); how many the walk had found."""
    found = len(run.walk.found.docs) if run.walk is not None else 0
    run.release_documents()
    return found


# The last stage that reads the walk and the plan's documents (rules/graph.py `_changed`); the later
# ones (the vector file, the reverse scan) and self-calibration read the index only.
RELEASE_AFTER = "graph"


def run_invocation(run: PipelineRun, invocation: Invocation, tasks: list[TaskDict] | None = None,
                   halt: Halt | None = None) -> tuple[int, str]:
    """`invocation` through doit (its `tasks`, made with `halt`, when already made): (exit code, what
    doit reported). Raises the PinakesError a step stopped the run with (kept by the adapters' guard:
    doit itself would only print it)."""
    halt = halt if halt is not None else Halt()
    tasks = only_within(tasks if tasks is not None else invocation.tasks(run, halt))
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
    from doit import plugin  # pyright: ignore[reportAttributeAccessIssue, reportUnknownVariableType]  # not in typings/doit

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
    from pinakes.pipeline.run import SyncContext, SyncOptions

    paths = KBPaths(kb_root)
    manifest = load_manifest(paths.manifest)
    conn = open_reader(paths.index_db) if paths.index_db.exists() else None
    return SyncContext(paths=paths, manifest=manifest, options=SyncOptions(), conn=conn,
                       report=SyncReport(str(kb_root), mode), keys=build_keys(manifest),
                       progress=SyncProgress.for_stream(sys.stderr, quiet=True), read_only=True)


def inspection_run(kb_root: Path) -> PipelineRun:
    """A read-only run over `inspection_context`: its checks plan what a sync would do."""
    from pinakes.pipeline.backends import backend_for

    ctx = inspection_context(kb_root)
    return PipelineRun(ctx, backend_for(ctx.manifest, ctx.options))


def inspection_namespace(kb_root: Path) -> dict[str, object]:
    """The doit namespace over a read-only run, for `doit list/info`."""
    run = inspection_run(kb_root)
    run.ctx.paths.state_dir.mkdir(exist_ok=True)  # doit keeps its (disposable) state there
    return task_namespace(run)


def write_dodo_shim(paths: KBPaths) -> None:
    shim = paths.state_dir / "dodo.py"
    if not shim.exists() or shim.read_text(encoding="utf-8") != DODO_SHIM:
        shim.write_text(DODO_SHIM, encoding="utf-8")
