"""reverse-scan: the doit adapter of the reverse-scan stage: one task per `[[links.kb]]` partner,
`reverse-scan:<alias>`, up to date while the partner's last scan is inside the freshness window, and
`reverse-scan:delisted`, which removes what a partner dropped from the manifest left behind (the
scan is `pinakes.pipeline.reverse_scan`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pinakes.pipeline import reverse_scan
from pinakes.rules import Scope, StageAdapter

if TYPE_CHECKING:
    from pinakes.manifest import LinkedKB
    from pinakes.pipeline.run import SyncContext

DELISTED_TASK = "delisted"



def _partners(ctx: SyncContext, _scope: Scope) -> list[LinkedKB | None]:
    return [*ctx.manifest.links, None]


def _name(linked: LinkedKB | None) -> str:
    return DELISTED_TASK if linked is None else linked.alias


def _describe(linked: LinkedKB | None) -> str:
    if linked is None:
        return "remove the inbound links of KBs no longer in [[links.kb]]"
    return f"inbound links from {linked.alias} ({linked.id})"


def run_reverse_scan(ctx: SyncContext, linked: LinkedKB | None) -> None:
    if linked is None:
        reverse_scan.remove_delisted(ctx)
    else:
        reverse_scan.scan_partner(ctx, linked)


def _uptodate(ctx: SyncContext, linked: LinkedKB | None) -> bool:
    if linked is None:
        return not reverse_scan.any_delisted(ctx)
    return not reverse_scan.is_due(ctx, linked)


ADAPTER = StageAdapter["LinkedKB | None"](
    key="reverse-scan", doc="read connected KBs' committed sidecars for links into this KB (freshness-windowed)",
    items=_partners, name=_name, describe=_describe, action=run_reverse_scan, uptodate=_uptodate)
