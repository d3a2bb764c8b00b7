"""reverse-scan: the doit adapter of the reverse-scan stage: one task per `[[links.kb]]` partner,
`reverse-scan:<alias>`, and `reverse-scan:delisted`, which removes what a partner dropped from the
manifest left behind (the scan is `pinakes.pipeline.reverse_scan`).

A partner's task is up to date while its last scan is inside the freshness window and this sync
changes none of the documents its links may point to (the graph it reads is up to date); when it
runs, it reads the partner if due, else reports it fresh.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pinakes.pipeline import reverse_scan
from pinakes.rules import PipelineRun, Scope, StageAdapter

if TYPE_CHECKING:
    from pinakes.manifest import LinkedKB

DELISTED_TASK = "delisted"


def _partners(run: PipelineRun, _scope: Scope) -> list[LinkedKB | None]:
    return [*run.ctx.manifest.links, None]


def _name(linked: LinkedKB | None) -> str:
    return DELISTED_TASK if linked is None else linked.alias


def _describe(linked: LinkedKB | None) -> str:
    if linked is None:
        return "remove the inbound links of KBs no longer in [[links.kb]]"
    return f"inbound links from {linked.alias} ({linked.id})"


def run_reverse_scan(run: PipelineRun, linked: LinkedKB | None) -> None:
    if linked is None:
        reverse_scan.remove_delisted(run.ctx)
    else:
        reverse_scan.scan_partner(run.ctx, linked)


def _uptodate(run: PipelineRun, linked: LinkedKB | None) -> bool:
    if linked is None:
        return not reverse_scan.any_delisted(run.ctx)
    return not (reverse_scan.is_due(run.ctx, linked) or run.changed())


ADAPTER = StageAdapter["LinkedKB | None"](
    key="reverse-scan", doc="read connected KBs' committed sidecars for links into this KB (freshness-windowed)",
    items=_partners, name=_name, describe=_describe, action=run_reverse_scan, uptodate=_uptodate,
    step="reading connected KBs' links")
