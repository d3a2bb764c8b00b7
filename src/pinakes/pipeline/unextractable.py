"""A new file that no sync can extract gets no sidecar (issue #40), and stays named as failing.

Pairing mints a new document's ID on disk before any extraction (spec §6.4: the ID is on disk before
the index refers to it). When the file then fails as `UNEXTRACTABLE` (it fails every sync until its
bytes change), nothing will ever refer to that ID: the sidecar this run minted is taken back
(`take_back_minted_sidecar`), unless its bytes changed since it was written (then it is a person's).
A sidecar that existed before the run (written by hand, or by the pre-commit hook, which mints
without extracting) is never touched.

Such a file then has no sidecar, and a run that writes none (index-only: the post-commit and
post-merge hooks, `pnk eval`) does not try a file without one; it would note "not indexed yet" and
clear the failure the last sync recorded, so `pnk status` and doctor would stop naming the file and
the `[sources] exclude` line that leaves it out. `carry_forward` keeps that failure in such a run's
report instead, as long as the file has not changed since it was recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from pinakes.pipeline.report import UNEXTRACTABLE

if TYPE_CHECKING:
    from pinakes.pipeline.run import SyncContext
    from pinakes.pipeline.types import DocWork
    from pinakes.sources.walk import WalkResult


def take_back_minted_sidecar(ctx: SyncContext, item: DocWork) -> None:
    """Remove the sidecar this run minted for `item`, which failed as unextractable: a new document
    (`added`, its sidecar among those this run wrote) whose sidecar still holds the bytes written."""
    import xxhash

    from pinakes.sidecar import sidecar_path_for

    if item.reason != "added" or item.sidecar_hash is None or not ctx.report.sidecars_written.wrote_for(item.path):
        return
    path = sidecar_path_for(ctx.paths.root / item.path)
    try:
        if xxhash.xxh3_128_hexdigest(path.read_bytes()) != item.sidecar_hash:
            return  # edited since it was minted: it is a person's now
        path.unlink()
    except OSError:
        return  # left where it is: a later sync pairs it like any sidecar
    ctx.report.sidecars_written.take_back(item.path)


def carry_forward(ctx: SyncContext, walk: WalkResult, arrivals: Sequence[str]) -> set[str]:
    """In a run that writes no sidecars, report the recorded unextractable failure of each new file
    without one (of the plan's `arrivals`), while the file is as it was then. Returns their paths:
    the failure stands in place of the file's "not indexed yet" note."""
    if not ctx.options.index_only or ctx.conn is None or ctx.read_only:
        return set()
    waiting = [path for path in arrivals if path not in walk.sidecars and path in walk.docs]
    if not waiting:
        return set()
    marks = ",".join("?" * len(waiting))
    carried: set[str] = set()
    for path, error, at in ctx.conn.execute(
            f"SELECT path, error, at FROM failures WHERE stage = ? AND path IN ({marks})", (UNEXTRACTABLE, *waiting)):
        if walk.docs[path].mtime <= _seconds(at):
            ctx.report.fail(path, UNEXTRACTABLE, error)
            carried.add(path)
    return carried


def _seconds(at: str) -> float:
    """A failure's `at` (ISO 8601, to the second) as a timestamp, rounded up: a file written within
    the second the failure was recorded in is taken as the one that failed."""
    try:
        return datetime.fromisoformat(at).timestamp() + 1.0
    except (TypeError, ValueError):
        return float("-inf")  # unreadable: carry nothing
