"""doit adapters of the sync pipeline's stages: one module per stage, only doit glue.

This folder is the top-level `rules/` of the repository; the build maps it into the package as
`pinakes.rules` (`package-dir` in pyproject.toml), as it does `templates/`.

Each module here defines `ADAPTER`, a `StageAdapter` that says, for its stage of
`pinakes.pipeline.stages.STAGES`, which items a scope holds (the run, the documents of a group, the
connected KBs), what each item's task is named and described as, its action (a call into the stage's
core) and whether it is up to date. `tasks()` turns one stage over one scope into doit task dicts:
its `task_dep` come from the declared inputs, and every action runs inside one guard, `_guarded`,
which turns a `PinakesError`, an index error or a filesystem error into a failed task and keeps the
error in a `Halt` for the runner (`pinakes.sync.loader`) to raise: doit itself would only print a
traceback.

The stages' cores take typed inputs and return typed outputs (`pinakes.pipeline.types`); between
two doit tasks those values wait in `PipelineRun`, the one piece of state the adapters share. doit
passes values between tasks through its own database, which suits hashes and counts, not text and
vectors.

The adapters are imported on first use, each by its stage's key (`adapter()`), never with this
package: a stage's module may import numpy (embed), and a sync that changes nothing imports only the
adapters of the stages it checks.
"""

from __future__ import annotations

import importlib
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Protocol, Required, TypedDict, TypeVar, cast

from pinakes.errors import PinakesError

if TYPE_CHECKING:
    from pinakes.pipeline.backends import ExtractionBackend
    from pinakes.pipeline.embed import EmbedRun
    from pinakes.pipeline.pair import Plan
    from pinakes.pipeline.run import SyncContext
    from pinakes.pipeline.stages import Stage
    from pinakes.pipeline.types import Chunked, DocWork, Extracted, Failed
    from pinakes.pipeline.walk import Walked

Item = TypeVar("Item")


@dataclass
class PipelineRun:
    """One sync run as its doit tasks share it: the run-wide context, the run's extraction backend,
    and each stage's output until the stages that read it have run. Each output is made once, by the
    stage's up-to-date check or its action, whichever asks first."""

    ctx: SyncContext
    backend: ExtractionBackend
    previous: sqlite3.Connection | None = None  # rebuilding: the index being replaced, which pairing reads
    embedding: EmbedRun | None = None  # the embed stage's state across groups (made on first use)
    walk: Walked | None = None
    plan: Plan | None = None  # None once decided: the index is settled for today's inputs (no plan)
    planned: bool = False
    settled_digest: str = ""
    groups: list[Sequence[DocWork]] = field(default_factory=list[Sequence["DocWork"]])  # the plan's work, streamed
    extracted: dict[str, Extracted] = field(default_factory=dict[str, "Extracted"])  # the group in flight
    chunked: dict[str, Chunked] = field(default_factory=dict[str, "Chunked"])
    failed: set[str] = field(default_factory=set[str])  # doc_ids whose pipeline stopped, in any stage
    _unfinished: bool | None = None
    _had_work: bool | None = None  # has_work() as decided, kept once the documents are released

    @property
    def indexed(self) -> sqlite3.Connection | None:
        """The index the documents are paired against (the one a rebuild replaces)."""
        return self.previous if self.ctx.rebuilding else self.ctx.conn

    def walked(self) -> Walked:
        """The walk of this sync (pipeline/walk.py), walked once."""
        if self.walk is None:
            from pinakes.pipeline.walk import walk_sources

            self.walk = walk_sources(self.ctx)
        return self.walk

    def decided(self) -> Plan | None:
        """Pairing's decision (pipeline/pair.py), made once; None when the index is settled for
        today's inputs and the walk found every file as cached, so the plan would be empty."""
        if not self.planned:
            self.plan = self._decide()
            self.planned = True
        return self.plan

    def _decide(self) -> Plan | None:
        import time

        from pinakes.pipeline.settled import is_settled, settled_digest

        ctx, walked = self.ctx, self.walked()
        started = time.perf_counter()
        self.settled_digest = settled_digest(ctx.paths.manifest, ctx.keys)
        if not (ctx.rebuilding or ctx.options.force) and walked.as_cached and ctx.conn is not None \
                and is_settled(ctx.conn, self.settled_digest):
            ctx.report.unchanged = len(walked.found.docs)
            ctx.report.timings["pair"] = time.perf_counter() - started
            return None
        from pinakes.pipeline import pair  # only a sync that pairs imports it

        plan = pair.compute_plan(ctx, walked.found, self.indexed)
        if plan.collisions:
            raise pair.collision_error(plan)
        self.backend.extend_plan(ctx, plan, walked.found)  # --force's overrides
        ctx.report.unchanged = len(walked.found.docs) - len(plan.work)
        ctx.report.timings["pair"] = time.perf_counter() - started
        return plan

    def has_work(self) -> bool:
        """Whether pairing decided anything to apply (a rebuild always has: its index is new)."""
        if self._had_work is not None:
            return self._had_work
        plan = self.decided()
        return plan is not None and (not plan.is_empty or self.ctx.rebuilding)

    def unfinished(self) -> bool:
        """Whether an earlier sync started its pipeline and never recorded its end (pipeline/settled.py)."""
        if self._unfinished is None:
            from pinakes.pipeline.settled import unfinished_start

            self._unfinished = unfinished_start(self.ctx.conn)
        return self._unfinished

    def changed(self) -> bool:
        """Whether this sync changes the indexed documents, or finishes the changes of a sync that
        stopped before its end: what the stages after the streamed ones derive from."""
        return self.has_work() or self.unfinished()

    def embed_state(self) -> EmbedRun:
        if self.embedding is None:
            from pinakes.pipeline.embed import EmbedRun

            self.embedding = EmbedRun()
        return self.embedding

    def keep(self, outcome: Extracted | Chunked | Failed | None) -> None:
        """Hold a streamed stage's output for the next stage (a failure: for none)."""
        from pinakes.pipeline.types import Chunked, Extracted

        if isinstance(outcome, Extracted):
            self.extracted[outcome.work.doc_id] = outcome
        elif isinstance(outcome, Chunked):
            self.chunked[outcome.work.doc_id] = outcome
        elif outcome is not None:
            self.failed.add(outcome.work.doc_id)

    def release_documents(self) -> None:
        """After the last stage that reads them (the graph, rules/graph.py): the walk's file states
        and the plan's per-document work are let go (~0.75 KB a file, ~0.5 GB in a 700k-file first
        sync) before the vector file and self-calibration; has_work() and changed() keep their answers.
        The chunk-ahead worker ends here too (every document is chunked by now): it keeps the plan's
        DocWork list, which would hold every document's work and file state to the sync's end."""
        from pinakes.sources.walk import WalkResult

        self._had_work = self.has_work()
        self.ctx.release_chunk_ahead()
        self.groups = []
        if self.plan is not None:
            plan = self.plan
            plan.work, plan.sidecars, plan.sidecar_writes, plan.arrivals, plan.pending_mints = [], {}, [], [], set()
        if self.walk is not None:
            self.walk = self.walk._replace(found=WalkResult(), changes=(), removals=())

    def release(self, group: Iterable[DocWork]) -> None:
        """The group is committed (or failed): its text and chunks are no longer needed."""
        for item in group:
            self.extracted.pop(item.doc_id, None)
            self.chunked.pop(item.doc_id, None)


class Scope(NamedTuple):
    """What one doit invocation covers: the whole run, or one group of the plan's documents."""

    group: int | None = None  # the group's number, in streaming order
    documents: Sequence[DocWork] = ()


Action = Callable[..., bool]


class TaskDict(TypedDict, total=False):
    """A doit task as its loader reads it (doit takes more keys; these are the ones Pinakes sets)."""

    basename: Required[str]
    name: str | None
    doc: str
    actions: list[tuple[Action, list[object]]]
    task_dep: list[str]
    uptodate: list[bool]
    verbosity: int


def task_name(task: TaskDict) -> str:
    """The name doit gives `task`: `basename:name`, or the basename for a stage's one task (and for
    the entry that describes a stage with many)."""
    name = task.get("name")
    return task["basename"] if name is None else f"{task['basename']}:{name}"


@dataclass(frozen=True)
class StageAdapter(Generic[Item]):
    key: str  # the stage's key in STAGES: the doit basename
    doc: str  # what `doit list` says of the stage as a whole
    items: Callable[[PipelineRun, Scope], Sequence[Item]]  # one task per item
    name: Callable[[Item], str | None]  # the task's name after `key:`; None for the stage's one task
    action: Callable[[PipelineRun, Item], None]  # raises PinakesError to stop the run
    uptodate: Callable[[PipelineRun, Item], bool]
    describe: Callable[[Item], str] | None = None  # what `doit list` says of one task (default: doc)
    # What a sync reports of an up-to-date task, which no action runs for (pair: its plan's notes).
    on_uptodate: Callable[[PipelineRun, Item], None] | None = None
    step: str | None = None  # what the progress line says while its invocation runs (a run-wide stage)

    def task_names(self, run: PipelineRun, scope: Scope) -> list[str]:
        return [self._full_name(item) for item in self.items(run, scope)]

    def _full_name(self, item: Item) -> str:
        name = self.name(item)
        return self.key if name is None else f"{self.key}:{name}"


def one_per_run(_run: PipelineRun, scope: Scope) -> tuple[Scope]:
    """`items` of a stage that runs once (its one task stands for the whole scope)."""
    return (scope,)


def per_document(_run: PipelineRun, scope: Scope) -> Sequence[DocWork]:
    """`items` of a stage that runs once per document of the scope's group."""
    return scope.documents


def document_name(item: DocWork) -> str:
    return item.doc_id


def no_name(_item: object) -> None:
    return None


def document_is_current(run: PipelineRun, item: DocWork) -> bool:
    """Whether the index holds `item` built with today's key (then its per-document tasks are up to date)."""
    from pinakes.pipeline.keys import key_is_current

    return key_is_current(run.ctx.conn, item.doc_id, item.path, item.key)


class Halt:
    """The error that stopped a doit invocation, kept for the runner to raise after doit returns."""

    def __init__(self) -> None:
        self.error: PinakesError | None = None


# The declared stages' adapters, looked up together by key: each one's item type is its own.
AnyAdapter = StageAdapter[Any]  # Any: the stage's item (a Scope, a DocWork), known to its module


class AdapterModule(Protocol):
    """What the module of each declared stage, `pinakes.rules.<key>` (a dash as an underscore), defines."""

    ADAPTER: AnyAdapter


def adapter(key: str) -> AnyAdapter:
    """The adapter of the declared stage `key`, from the module named after it (imported on first
    use): adding a stage touches its declaration, its core and its adapter module, nothing here."""
    module = cast("AdapterModule", importlib.import_module(f"{__name__}.{key.replace('-', '_')}"))
    return module.ADAPTER


def adapters() -> Mapping[str, AnyAdapter]:
    """Every declared stage's adapter by key."""
    from pinakes.pipeline.stages import STAGES

    return {stage.key: adapter(stage.key) for stage in STAGES}


def tasks(stage: Stage, run: PipelineRun, scope: Scope, *, halt: Halt,
          within: Sequence[str] = ()) -> Iterator[TaskDict]:
    """The doit tasks of `stage` over `scope`. Each input of the stage becomes a task_dep: on the
    same item's task when both stages fan out over the same thing, on every task of the input in
    this scope when the stage covers the whole scope and the input its documents, else on the input
    stage as a whole. `within`: the tasks every task of the stage waits for besides its inputs (a
    group's first stage waits for the previous group's last). An up-to-date task's stage says what
    it reports of it (`on_uptodate`) as the task is made: doit skips it."""
    found = adapter(stage.key)
    items = found.items(run, scope)
    if stage.fanout != "run":
        yield {"basename": stage.key, "name": None, "doc": found.doc}
    for item in items:
        uptodate = found.uptodate(run, item)
        if uptodate and found.on_uptodate is not None:
            found.on_uptodate(run, item)
        task: TaskDict = {
            "basename": stage.key,
            "doc": found.doc if found.describe is None else found.describe(item),
            "actions": [(_guarded, [run, halt, found.action, item])],
            "task_dep": [*within, *_input_deps(stage, run, scope, found.name(item))],
            "uptodate": [uptodate],
            "verbosity": 0,
        }
        name = found.name(item)
        if name is not None:
            task["name"] = name
        yield task


def _input_deps(stage: Stage, run: PipelineRun, scope: Scope, name: str | None) -> Iterator[str]:
    from pinakes.pipeline.stages import stage as declared

    for key in stage.inputs:
        source = declared(key)
        if source.fanout == stage.fanout and name is not None:
            yield f"{key}:{name}"
        elif stage.fanout == "group" and source.fanout == "document":
            yield from adapter(key).task_names(run, scope)
        else:
            yield key


def _guarded(run: PipelineRun, halt: Halt, action: Callable[[PipelineRun, Item], None], item: Item) -> bool:
    """One stage action as a doit action: a fault of the index or the filesystem, or any error a
    stage raises to stop the run, fails the task and is kept as one PinakesError, never shown as a
    traceback in doit's report. A failure of one document is no error here: the stage reports it
    and the run goes on."""
    from pinakes.errors import filesystem_error
    from pinakes.index.schema import index_error

    ctx = run.ctx
    try:
        action(run, item)
    except PinakesError as exc:
        halt.error = exc
    except sqlite3.Error as exc:
        halt.error = index_error(ctx.index_path, exc)
    except OSError as exc:
        halt.error = filesystem_error(exc.filename or ctx.paths.state_dir, exc, "sync the KB")
    else:
        return True
    return False
