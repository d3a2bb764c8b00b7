"""reverse-scan: learn which documents in connected KBs link to this one (spec §6.2, §6.3).

The last step of the DAG, after `graph`: one task per `[[links.kb]]` partner, `reverse-scan:<alias>`,
and `reverse-scan:delisted`, which removes what a partner dropped from the manifest left behind.
A partner's task is up to date while its last scan is inside the freshness window (`kb_refs.last_scan`,
`pinakes.links.reverse.FRESHNESS_WINDOW`): then nothing of the partner is read at all. Past the
window the task runs, keyed on the partner's committed sidecars: an unchanged set is re-stamped
without reading one, a changed one is read whole and its rows replaced all or nothing.
`pnk sync --scan-links` makes every partner's task run and read.

No outcome fails the sync: each problem (a partner not on this machine or not readable, an id that
does not match, a folder that cannot be listed, a sidecar that does not parse, a target that is not
here, a scan stopped at its per-partner bound) is reported with its remedy in the sync report,
because sync runs on git hooks and a missing partner must not block a commit.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING

from pinakes.links import reverse

if TYPE_CHECKING:
    from pinakes.manifest import LinkedKB
    from pinakes.pipeline.run import SyncContext

DELISTED_TASK = "delisted"


def task_reverse_scan(ctx: SyncContext) -> Iterator[dict[str, object]]:
    yield {"basename": "reverse-scan", "name": None,
           "doc": "read connected KBs' committed sidecars for links into this KB (freshness-windowed)"}
    at = reverse.now()
    for linked in ctx.manifest.links:
        due = _is_due(ctx, linked, at)
        if not due and not ctx.read_only and ctx.conn is not None:
            ctx.report.link_scans.append(reverse.fresh_outcome(ctx.conn, linked).to_dict())
        yield {
            "basename": "reverse-scan",
            "name": linked.alias,
            "doc": f"inbound links from {linked.alias} ({linked.id})",
            "actions": [(run_partner_scan, [ctx, linked])],
            "task_dep": ["graph"],
            "uptodate": [not due],
            "verbosity": 0,
        }
    yield {
        "basename": "reverse-scan",
        "name": DELISTED_TASK,
        "doc": "remove the inbound links of KBs no longer in [[links.kb]]",
        "actions": [(run_remove_delisted, [ctx])],
        "task_dep": ["graph"],
        "uptodate": [ctx.conn is None or not reverse.delisted(ctx.conn, ctx.manifest)],
        "verbosity": 0,
    }


def _is_due(ctx: SyncContext, linked: LinkedKB, at: datetime) -> bool:
    if ctx.conn is None:  # an inspection of a KB with no index yet: everything would be scanned
        return True
    return reverse.is_due(ctx.conn, ctx.paths.root, linked, force=ctx.options.scan_links, at=at)


def run_partner_scan(ctx: SyncContext, linked: LinkedKB) -> bool:
    if ctx.read_only:
        return True
    outcome = reverse.scan_partner(ctx.writer(), ctx.manifest, ctx.paths.root, linked, force=ctx.options.scan_links)
    ctx.report.link_scans.append(outcome.to_dict())
    _refresh_census(ctx)
    return True


def run_remove_delisted(ctx: SyncContext) -> bool:
    if ctx.read_only:
        return True
    for outcome in reverse.remove_delisted(ctx.writer(), ctx.manifest):
        ctx.report.link_scans.append(outcome.to_dict())
    _refresh_census(ctx)
    return True


def _refresh_census(ctx: SyncContext) -> None:
    """The graph step counted inbound cross-KB edges before this step replaced them."""
    from pinakes.pipeline.graph import cross_kb_counts

    if ctx.report.graph_census is not None:
        ctx.report.graph_census.update(cross_kb_counts(ctx.writer(), ctx.kb_id))
