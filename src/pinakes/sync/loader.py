"""The doit side of sync: the pipeline as doit tasks, for running and for `doit list` / `info`.

walk and pair always run (they are what detect change); extract, chunk and embed are created by
doit's delayed task creation once pair has decided the change set, so the DAG's size follows the
change, not the corpus. The changed documents stream through in groups sized by estimated tokens:

    extract:<doc> … → chunk:<doc> … → embed:g00000 → extract:<doc of group 1> … → embed:g00001 → … → graph
      → reverse-scan:<partner> …

A group is extracted, chunked, embedded and committed (one transaction per document) before the
next group's text is read, so peak memory follows the group size and the model, not the corpus, and
a crash loses at most the group in flight. `pnk sync` runs that graph as one doit invocation for
walk and pair, one per group, one for graph and one for reverse-scan (`run_pipeline`): doit keeps
every Task it creates until its run ends (about 10 KB per document for the extract and chunk tasks),
so one invocation for the whole corpus would make memory grow with it. The whole graph, with each group's extract tasks
depending on the previous group's embed task, is what `doit list` shows. Each per-document task is
keyed on the document's build key (`pinakes.pipeline.keys`), compared with the key the index stored
beside its chunks.

The same namespace backs `pnk doit list|info` and the `.pinakes/dodo.py` shim for plain
`doit -f .pinakes/dodo.py list --all --status`.
"""

from __future__ import annotations

import io
import sqlite3
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from pinakes.kb import KBPaths
from pinakes.links.reverse import delisted
from pinakes.pipeline.pair import DocWork, compute_plan
from pinakes.pipeline.run import SyncContext
from pinakes.rules import chunk, embed, extract, graph, pair, reverse_scan, walk

# A group holds about this many tokens of source text (estimated from file sizes: an upper bound for a
# PDF, whose text is smaller than the file), and at most GROUP_MAX_DOCUMENTS documents.
GROUP_TOKENS = 64 * 1024
ESTIMATED_BYTES_PER_TOKEN = 4
GROUP_MAX_DOCUMENTS = 256

DEFAULT_TASKS = ["walk", "pair", "extract", "graph", "reverse-scan"]  # chunk, embed: extract's dependents

DODO_SHIM = '''"""doit view of this KB's sync pipeline, written by `pnk sync`.

    doit -f .pinakes/dodo.py list --all --status
    doit -f .pinakes/dodo.py info embed:g00000
"""
from pathlib import Path

from pinakes.sync.loader import inspection_namespace

globals().update(inspection_namespace(Path(__file__).resolve().parent.parent))
'''


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
    """Walk and pair if nobody has yet (doit `list`/`info` create delayed tasks without running)."""
    if ctx.walk is None:
        walk.run_walk(ctx)
    plan = compute_plan(ctx)
    if not ctx.groups and plan.work:
        ctx.groups = stream_groups(plan.work)


def _group_tasks(ctx: SyncContext, number: int, group: list[DocWork],
                 after: str | None) -> Iterator[dict[str, object]]:
    for task in extract.tasks_extract(ctx, group, after=after):
        yield guarded(ctx, task)
    for task in chunk.tasks_chunk(ctx, group):
        yield guarded(ctx, task)
    yield guarded(ctx, embed.task_embed(ctx, number, group))


def _group_docs() -> Iterator[dict[str, object]]:
    yield {"basename": "chunk", "name": None,
           "doc": "split each extracted document into passages, counted in model tokens"}
    yield {"basename": "embed", "name": None,
           "doc": "embed one group's passages and commit each document in its own transaction"}


def task_namespace(ctx: SyncContext) -> dict[str, object]:
    """The whole pipeline as one doit namespace: what `doit list` / `info` show."""
    from doit import create_after

    def task_walk() -> dict[str, object]:
        return guarded(ctx, walk.task_walk(ctx))

    def task_pair() -> dict[str, object]:
        return guarded(ctx, pair.task_pair(ctx))

    @create_after(executed="pair")
    def task_extract() -> Iterator[dict[str, object]]:
        """turn each changed document into its indexed text"""
        ensure_plan(ctx)
        yield from _group_docs()
        previous: str | None = None
        for number, group in enumerate(ctx.groups):
            yield from _group_tasks(ctx, number, group, previous)
            previous = f"embed:{embed.group_task_name(number)}"

    @create_after(executed="pair")
    def task_graph() -> dict[str, object]:
        return guarded(ctx, graph.task_graph(ctx))

    @create_after(executed="graph")
    def task_reverse_scan() -> Iterator[dict[str, object]]:
        """read connected KBs' committed sidecars for links into this KB"""
        for task in reverse_scan.task_reverse_scan(ctx):
            yield guarded(ctx, task)

    return {
        "task_walk": task_walk,
        "task_pair": task_pair,
        "task_extract": task_extract,
        "task_graph": task_graph,
        "task_reverse_scan": task_reverse_scan,
        "DOIT_CONFIG": doit_config(ctx, DEFAULT_TASKS),
    }


def run_pipeline(ctx: SyncContext) -> tuple[int, str]:
    """Run the pipeline: walk and pair, then each group, then graph, each its own doit invocation
    (see the module docstring); stops at the first invocation that fails or sets ctx.fatal."""

    def task_walk() -> dict[str, object]:
        return guarded(ctx, walk.task_walk(ctx))

    def task_pair() -> dict[str, object]:
        return guarded(ctx, pair.task_pair(ctx))

    def task_graph() -> dict[str, object]:
        task = graph.task_graph(ctx)
        task["task_dep"] = []  # walk, pair and every group ran in the invocations before
        return guarded(ctx, task)

    code, output = run_doit({"task_walk": task_walk, "task_pair": task_pair,
                             "DOIT_CONFIG": doit_config(ctx, ["walk", "pair"])})
    if code or ctx.fatal is not None:
        return code, output
    ensure_plan(ctx)
    for number, group in enumerate(ctx.groups):

        def task_extract(number: int = number, group: list[DocWork] = group) -> Iterator[dict[str, object]]:
            """turn each changed document into its indexed text"""
            yield from _group_docs()
            yield from _group_tasks(ctx, number, group, None)

        code, output = run_doit({"task_extract": task_extract,
                                 "DOIT_CONFIG": doit_config(ctx, ["extract", "embed"])})
        if code or ctx.fatal is not None:
            return code, output
    ctx.progress.step("deriving the graph")
    code, output = run_doit({"task_graph": task_graph, "DOIT_CONFIG": doit_config(ctx, ["graph"])})
    if code or ctx.fatal is not None or not (ctx.manifest.links or delisted(ctx.writer(), ctx.manifest)):
        return code, output  # no connected KB, and none to forget: reverse-scan has nothing to do
    ctx.progress.step("reading connected KBs' links")
    return run_reverse_scan(ctx)


def run_reverse_scan(ctx: SyncContext) -> tuple[int, str]:
    """The reverse-scan step as its own doit invocation (after graph; or alone, when a sync that
    changed no document finds a connected KB's scan due)."""

    def task_reverse_scan() -> Iterator[dict[str, object]]:
        """read connected KBs' committed sidecars for links into this KB"""
        for task in reverse_scan.task_reverse_scan(ctx):
            task.pop("task_dep", None)  # graph ran in the invocation before (or had nothing to do)
            yield guarded(ctx, task)

    return run_doit({"task_reverse_scan": task_reverse_scan, "DOIT_CONFIG": doit_config(ctx, ["reverse-scan"])})


def guarded(ctx: SyncContext, task: dict[str, object]) -> dict[str, object]:
    """`task` with each action run through `_run_guarded`: a fault of the index or the filesystem
    inside any step stops the run as one PinakesError (ctx.fatal), not as a traceback in doit's
    report."""
    actions = task.get("actions")
    if isinstance(actions, list):
        task["actions"] = [(_run_guarded, [ctx, action[0], list(action[1])]) for action in actions]
    return task


def _run_guarded(ctx: SyncContext, action: Callable[..., bool], args: list[object]) -> bool:
    from pinakes.errors import PinakesError, filesystem_error
    from pinakes.index.schema import index_error

    try:
        return action(*args)
    except PinakesError as exc:
        ctx.fatal = exc
    except sqlite3.Error as exc:
        ctx.fatal = index_error(ctx.index_path, exc)
    except OSError as exc:
        ctx.fatal = filesystem_error(exc.filename or ctx.paths.state_dir, exc, "sync the KB")
    return False


def doit_config(ctx: SyncContext, default_tasks: list[str]) -> dict[str, object]:
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
    namespace["DOIT_CONFIG"] = {**config, "outfile": output, "reporter": _reporter_class()}
    stdout, stderr = sys.stdout, sys.stderr
    try:
        code = DoitMain(ModuleTaskLoader(namespace), config_filenames=()).run(["run"])
    finally:
        sys.stdout, sys.stderr = stdout, stderr
    return int(code or 0), output.getvalue()


def _reporter_class() -> type:
    from doit.reporter import ZeroReporter

    class FailureReporter(ZeroReporter):
        """Silent, except that a task failure's traceback is kept for the error message."""

        def add_failure(self, task: object, fail: object) -> None:
            self.outstream.write(f"{getattr(task, 'name', task)}: {fail.get_msg()}\n")  # type: ignore[attr-defined]

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
