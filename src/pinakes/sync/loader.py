"""The doit side of sync: the pipeline as doit tasks, for running and for `doit list` / `info`.

walk and pair always run (they are what detect change); extract, chunk, embed and graph are created
by doit's delayed task creation once pair has decided the change set, so the DAG's size follows the
change, not the corpus. Each per-document task's up-to-date check compares the document's build key
(content hash + extractor fingerprint + chunking settings + model identity) with the key the index
stored beside its chunks (`rules/keys.py`).

The same namespace backs `pnk doit list|info` and the `.pinakes/dodo.py` shim for plain
`doit -f .pinakes/dodo.py list --all --status`.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from pinakes.sync.context import SyncContext
from pinakes.sync.steps import STEPS, step

DODO_SHIM = '''"""doit view of this KB's sync pipeline, written by `pnk sync`.

    doit -f .pinakes/dodo.py list --all --status
    doit -f .pinakes/dodo.py info embed:b00000
"""
from pathlib import Path

from pinakes.sync.loader import inspection_namespace

globals().update(inspection_namespace(Path(__file__).resolve().parent.parent))
'''


def ensure_plan(ctx: SyncContext) -> None:
    """Walk and pair if nobody has yet (doit `list`/`info` create delayed tasks without running)."""
    if ctx.walk is None:
        step("walk").run_walk(ctx)
    step("pair").compute_plan(ctx)


def task_namespace(ctx: SyncContext) -> dict[str, Any]:
    from doit import create_after

    def task_walk() -> dict[str, Any]:
        return step("walk").task_walk(ctx)

    def task_pair() -> dict[str, Any]:
        return step("pair").task_pair(ctx)

    @create_after(executed="pair")
    def task_extract() -> Any:
        """turn each changed document into its indexed text"""
        ensure_plan(ctx)
        yield from step("extract").tasks_extract(ctx)

    @create_after(executed="pair")
    def task_chunk() -> Any:
        """split each extracted document into passages, counted in model tokens"""
        ensure_plan(ctx)
        yield from step("chunk").tasks_chunk(ctx)

    @create_after(executed="pair")
    def task_embed() -> Any:
        """embed the passages in batches across documents; one transaction per document"""
        ensure_plan(ctx)
        yield from step("embed").tasks_embed(ctx)

    @create_after(executed="pair")
    def task_graph() -> dict[str, Any]:
        return step("graph").task_graph(ctx)

    return {
        "task_walk": task_walk,
        "task_pair": task_pair,
        "task_extract": task_extract,
        "task_chunk": task_chunk,
        "task_embed": task_embed,
        "task_graph": task_graph,
        "DOIT_CONFIG": doit_config(ctx),
    }


def doit_config(ctx: SyncContext) -> dict[str, Any]:
    return {
        "dep_file": str(ctx.paths.doit_db),
        # sqlite3: transactional and safe with a hook-driven sync, a manual one and a reader at once
        # (the default dbm backend is single-process and interpreter-specific).
        "backend": "sqlite3",
        "verbosity": 0,
        "default_tasks": list(STEPS),
    }


def run_doit(ctx: SyncContext, argv: list[str]) -> tuple[int, str]:
    """Run doit over this context's namespace; returns (exit code, what doit reported)."""
    import sys

    from doit.cmd_base import ModuleTaskLoader
    from doit.doit_cmd import DoitMain

    output = io.StringIO()
    namespace = task_namespace(ctx)
    namespace["DOIT_CONFIG"] = {**namespace["DOIT_CONFIG"], "outfile": output,
                                "reporter": _reporter_class()}
    stdout, stderr = sys.stdout, sys.stderr
    try:
        code = DoitMain(ModuleTaskLoader(namespace), config_filenames=()).run(argv)
    finally:
        sys.stdout, sys.stderr = stdout, stderr
    return int(code or 0), output.getvalue()


def _reporter_class() -> type:
    from doit.reporter import ZeroReporter

    class FailureReporter(ZeroReporter):
        """Silent, except that a task failure's traceback is kept for the error message."""

        def add_failure(self, task: Any, fail: Any) -> None:
            self.outstream.write(f"{task.name}: {fail.get_msg()}\n")

        def runtime_error(self, msg: str) -> None:
            self.outstream.write(msg + "\n")

    return FailureReporter


def inspection_namespace(kb_root: Path) -> dict[str, Any]:
    """A read-only context for `doit list/info`: plans, never writes."""
    from pinakes.index.schema import open_reader
    from pinakes.kb import KBPaths
    from pinakes.manifest import load_manifest
    from pinakes.sync.context import SyncOptions
    from pinakes.sync.report import SyncReport

    paths = KBPaths(kb_root)
    manifest = load_manifest(paths.manifest)
    paths.state_dir.mkdir(exist_ok=True)  # doit keeps its (disposable) state there
    conn = open_reader(paths.index_db) if paths.index_db.exists() else None
    ctx = SyncContext(paths=paths, manifest=manifest, options=SyncOptions(), conn=conn,
                      report=SyncReport(str(kb_root), "inspect"), read_only=True)
    ctx.keys = step("pair").build_keys(manifest)
    return task_namespace(ctx)


def write_dodo_shim(paths: Any) -> None:
    shim = paths.state_dir / "dodo.py"
    if not shim.exists() or shim.read_text(encoding="utf-8") != DODO_SHIM:
        shim.write_text(DODO_SHIM, encoding="utf-8")
