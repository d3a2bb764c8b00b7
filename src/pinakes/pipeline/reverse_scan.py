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

if TYPE_CHECKING:
    from pinakes.manifest import LinkedKB
    from pinakes.pipeline.run import SyncContext


def is_due(ctx: SyncContext, linked: LinkedKB) -> bool:
    """Whether `linked` is to be read now (its last scan is outside the window, or `--scan-links`)."""
    if ctx.conn is None:  # an inspection of a KB with no index yet: everything would be scanned
        return True
    from pinakes.links import reverse

    return reverse.is_due(ctx.conn, ctx.paths.root, linked, force=ctx.options.scan_links, at=reverse.now())


def any_delisted(ctx: SyncContext) -> bool:
    """Whether the index holds links from a KB `[[links.kb]]` no longer lists. A KB that lists none
    and was never scanned (the common case, asked by every no-op sync) costs one indexed read."""
    if ctx.conn is None or (not ctx.manifest.links and
                            ctx.conn.execute("SELECT 1 FROM kb_refs LIMIT 1").fetchone() is None):
        return False
    from pinakes.links import reverse

    return bool(reverse.delisted(ctx.conn, ctx.manifest))


def scan_partner(ctx: SyncContext, linked: LinkedKB) -> None:
    """Read `linked` when it is due; one that is not is reported as fresh (its outcome says when it
    was last read and when it is next due)."""
    if ctx.read_only:
        return
    from pinakes.links import reverse

    if not is_due(ctx, linked):
        ctx.report.link_scans.append(reverse.fresh_outcome(ctx.writer(), linked).to_dict())
        return
    outcome = reverse.scan_partner(ctx.writer(), ctx.manifest, ctx.paths.root, linked, force=ctx.options.scan_links)
    ctx.report.link_scans.append(outcome.to_dict())
    _refresh_census(ctx)


def remove_delisted(ctx: SyncContext) -> None:
    if ctx.read_only:
        return
    from pinakes.links import reverse

    for outcome in reverse.remove_delisted(ctx.writer(), ctx.manifest):
        ctx.report.link_scans.append(outcome.to_dict())
    _refresh_census(ctx)


def _refresh_census(ctx: SyncContext) -> None:
    """The graph step counted inbound cross-KB edges before this step replaced them."""
    from pinakes.pipeline.graph import cross_kb_counts

    if ctx.report.graph_census is not None:
        ctx.report.graph_census.update(cross_kb_counts(ctx.writer(), ctx.kb_id))
