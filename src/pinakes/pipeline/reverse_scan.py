"""The reverse-scan stage's core: learn which documents in connected KBs link to this one (spec §6.2,
§6.3), one partner at a time, and forget what a partner dropped from the manifest left behind.

A partner is due once its last scan is outside the freshness window (`kb_refs.last_scan`,
`pinakes.links.reverse.FRESHNESS_WINDOW`); before that nothing of it is read at all. Past the window
its committed sidecars are keyed: an unchanged set is re-stamped without reading one, a changed one
is read whole and its rows replaced all or nothing. `pnk sync --scan-links` makes every partner due.

No outcome fails the sync: each problem (a partner not on this machine or not readable, an id that
does not match, a folder that cannot be listed, a sidecar that does not parse, a target that is not
here, a scan stopped at its per-partner bound) is reported with its remedy in the sync report,
because sync runs on git hooks and a missing partner must not block a commit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pinakes.links import reverse

if TYPE_CHECKING:
    from pinakes.manifest import LinkedKB
    from pinakes.pipeline.run import SyncContext


def is_due(ctx: SyncContext, linked: LinkedKB) -> bool:
    """Whether `linked` is to be read now. One that is not is reported as fresh, once, by a run that
    writes (its outcome row says when it was last read)."""
    if ctx.conn is None:  # an inspection of a KB with no index yet: everything would be scanned
        return True
    due = reverse.is_due(ctx.conn, ctx.paths.root, linked, force=ctx.options.scan_links, at=reverse.now())
    if not due and not ctx.read_only:
        ctx.report.link_scans.append(reverse.fresh_outcome(ctx.conn, linked).to_dict())
    return due


def any_delisted(ctx: SyncContext) -> bool:
    return ctx.conn is not None and bool(reverse.delisted(ctx.conn, ctx.manifest))


def scan_partner(ctx: SyncContext, linked: LinkedKB) -> None:
    if ctx.read_only:
        return
    outcome = reverse.scan_partner(ctx.writer(), ctx.manifest, ctx.paths.root, linked, force=ctx.options.scan_links)
    ctx.report.link_scans.append(outcome.to_dict())
    _refresh_census(ctx)


def remove_delisted(ctx: SyncContext) -> None:
    if ctx.read_only:
        return
    for outcome in reverse.remove_delisted(ctx.writer(), ctx.manifest):
        ctx.report.link_scans.append(outcome.to_dict())
    _refresh_census(ctx)


def _refresh_census(ctx: SyncContext) -> None:
    """The graph step counted inbound cross-KB edges before this step replaced them."""
    from pinakes.pipeline.graph import cross_kb_counts

    if ctx.report.graph_census is not None:
        ctx.report.graph_census.update(cross_kb_counts(ctx.writer(), ctx.kb_id))
