"""doit adapters of the sync pipeline's stages: one module per stage, only doit glue.

Each module here defines `ADAPTER`, a `StageAdapter` that says, for its stage of
`pinakes.pipeline.stages.STAGES`, which items a scope holds (the run, the documents of a group, the
connected KBs), what each item's task is named and described as, its action (a call into the stage's
core) and whether it is up to date. `tasks()` turns one stage over one scope into doit task dicts:
its `task_dep` come from the declared inputs, and every action runs inside one guard, `_guarded`,
which turns a `PinakesError`, an index error or a filesystem error into a failed task and keeps the
error in a `Halt` for the runner (`pinakes.sync.loader`) to raise: doit itself would only print a
traceback.

The adapters are imported on first use (`adapters()`), never with this package: a stage's module
may import numpy (embed), and a sync that changes nothing never builds a task.
"""

from __future__ import annotations

import importlib
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, Required, TypedDict, TypeVar, cast

from pinakes.errors import PinakesError

if TYPE_CHECKING:
    from pinakes.pipeline.pair import DocWork
    from pinakes.pipeline.run import SyncContext
    from pinakes.pipeline.stages import Stage

Item = TypeVar("Item")


@dataclass(frozen=True)
class Scope:
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
    items: Callable[[SyncContext, Scope], Sequence[Item]]  # one task per item
    name: Callable[[Item], str | None]  # the task's name after `key:`; None for the stage's one task
    action: Callable[[SyncContext, Item], None]  # raises PinakesError to stop the run
    uptodate: Callable[[SyncContext, Item], bool]
    describe: Callable[[Item], str] | None = None  # what `doit list` says of one task (default: doc)

    def task_names(self, ctx: SyncContext, scope: Scope) -> list[str]:
        return [self._full_name(item) for item in self.items(ctx, scope)]

    def _full_name(self, item: Item) -> str:
        name = self.name(item)
        return self.key if name is None else f"{self.key}:{name}"


def one_per_run(_ctx: SyncContext, scope: Scope) -> tuple[Scope]:
    """`items` of a stage that runs once (its one task stands for the whole scope)."""
    return (scope,)


def per_document(_ctx: SyncContext, scope: Scope) -> Sequence[DocWork]:
    """`items` of a stage that runs once per document of the scope's group."""
    return scope.documents


def document_name(item: DocWork) -> str:
    return item.doc_id


def no_name(_item: object) -> None:
    return None


def never_uptodate(_ctx: SyncContext, _item: object) -> bool:
    return False


def document_is_current(ctx: SyncContext, item: DocWork) -> bool:
    """Whether the index holds `item` built with today's key (then its per-document tasks are up to date)."""
    from pinakes.pipeline.keys import key_is_current

    return key_is_current(ctx.conn, item.doc_id, item.path, item.key)


class Halt:
    """The error that stopped a doit invocation, kept for the runner to raise after doit returns."""

    def __init__(self) -> None:
        self.error: PinakesError | None = None


class AdapterModule(Protocol):
    """What the module of each declared stage, `pinakes.rules.<key>` (a dash as an underscore), defines."""

    ADAPTER: StageAdapter[Any]


def adapters() -> Mapping[str, StageAdapter[Any]]:
    """Every declared stage's adapter by key, each imported on first use (see the module docstring)
    from the module named after its key: adding a stage touches its declaration, its core and its
    adapter module, nothing here."""
    from pinakes.pipeline.stages import STAGES

    found: dict[str, StageAdapter[Any]] = {}
    for stage in STAGES:
        module = cast("AdapterModule", importlib.import_module(f"{__name__}.{stage.key.replace('-', '_')}"))
        found[stage.key] = module.ADAPTER
    return found


def tasks(stage: Stage, ctx: SyncContext, scope: Scope, *, halt: Halt,
          within: Sequence[str] = ()) -> Iterator[TaskDict]:
    """The doit tasks of `stage` over `scope`. Each input of the stage becomes a task_dep: on the
    same item's task when both stages fan out over the same thing, on every task of the input in
    this scope when the stage covers the whole scope and the input its documents, else on the input
    stage as a whole. `within`: the tasks every task of the stage waits for besides its inputs (a
    group's first stage waits for the previous group's last)."""
    found = adapters()
    adapter = found[stage.key]
    items = adapter.items(ctx, scope)
    if stage.fanout != "run":
        yield {"basename": stage.key, "name": None, "doc": adapter.doc}
    for item in items:
        task: TaskDict = {
            "basename": stage.key,
            "doc": adapter.doc if adapter.describe is None else adapter.describe(item),
            "actions": [(_guarded, [ctx, halt, adapter.action, item])],
            "task_dep": [*within, *_input_deps(stage, ctx, scope, adapter.name(item), found)],
            "uptodate": [adapter.uptodate(ctx, item)],
            "verbosity": 0,
        }
        name = adapter.name(item)
        if name is not None:
            task["name"] = name
        yield task


def _input_deps(stage: Stage, ctx: SyncContext, scope: Scope, name: str | None,
                found: Mapping[str, StageAdapter[Any]]) -> Iterator[str]:
    from pinakes.pipeline.stages import stage as declared

    for key in stage.inputs:
        source = declared(key)
        if source.fanout == stage.fanout and name is not None:
            yield f"{key}:{name}"
        elif stage.fanout == "group" and source.fanout == "document":
            yield from found[key].task_names(ctx, scope)
        else:
            yield key


def _guarded(ctx: SyncContext, halt: Halt, action: Callable[[SyncContext, Item], None], item: Item) -> bool:
    """One stage action as a doit action: a fault of the index or the filesystem, or any error a
    stage raises to stop the run, fails the task and is kept as one PinakesError, never shown as a
    traceback in doit's report. A failure of one document is no error here: the stage reports it
    and the run goes on."""
    from pinakes.errors import filesystem_error
    from pinakes.index.schema import index_error

    try:
        action(ctx, item)
    except PinakesError as exc:
        halt.error = exc
    except sqlite3.Error as exc:
        halt.error = index_error(ctx.index_path, exc)
    except OSError as exc:
        halt.error = filesystem_error(exc.filename or ctx.paths.state_dir, exc, "sync the KB")
    else:
        return True
    return False
