"""extract: the extract stage as doit tasks, one per document; its core is pinakes.pipeline.extract.

Documents stream through in groups: a group's extraction waits for the previous group's vectors to
be committed, so only one group's text is ever held. A task is up to date when the index holds the
document at its path, built from its current build key.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from pinakes.pipeline import extract as core
from pinakes.pipeline.keys import key_is_current

if TYPE_CHECKING:
    from pinakes.pipeline.pair import DocWork
    from pinakes.pipeline.run import SyncContext


def tasks_extract(ctx: SyncContext, group: list[DocWork],
                  after: str | None) -> Iterator[dict[str, object]]:
    """One task per document of `group`; `after` is the task the group must wait for."""
    for item in group:
        yield {
            "basename": "extract",
            "name": item.doc_id,
            "doc": f"extract {item.path}",
            "actions": [(run_extract, [ctx, item])],
            "task_dep": [after] if after else [],
            "uptodate": [key_is_current(ctx.conn, item.doc_id, item.path, item.key)],
            "verbosity": 0,
        }


def run_extract(ctx: SyncContext, item: DocWork) -> bool:
    """A document's failure is recorded by the core and the run goes on; an error that ends the run
    is raised, and the runner's guard turns it into the task failure that stops the sync."""
    core.extract(ctx, item)
    return True
