"""The reranker (spec §4.1): the one `[rerank] provider` names in the registry (embed/registry.py), a
local cross-encoder (search/rerank_local.py, default BAAI/bge-reranker-base) or one behind an HTTP
endpoint the user runs (search/rerank_remote.py). Every one reports sigmoid(logit) per (query,
passage), so a threshold fitted under one provider means the same thing under another.

A local reranker that was asked for and cannot run is an error, never a silent skip: a search that
quietly fell back to fused order would report scores and confidence from a different scorer than
the one the KB was calibrated on. No PyPI package ships cross-encoder weights usable offline (see
docs/QUALITY.md), so without a model cache the remedy is `rerank = false` or a one-time download.
An HTTP reranker's endpoint is another matter: it may be down or slow at any moment, and an agent
is better served by results now than by an error; so when it fails, the search answers in fused
order, says so in a note (`reranked_or_note`), and its confidence is the un-reranked one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast

from pinakes.budget.errors import BudgetError
from pinakes.embed.hub import prepare_hub_environment, resolve_offline
from pinakes.embed.registry import RERANKERS, entry_point
from pinakes.errors import RerankEndpointError, UsageError
from pinakes.search.fusion import Candidate, order_reranked

if TYPE_CHECKING:
    from pinakes.manifest import BudgetSection, RerankSection


class Reranker(Protocol):
    model: str

    def score(self, query: str, texts: Sequence[str]) -> list[float]: ...


@dataclass(frozen=True)
class RerankRequest:
    """What a reranker's `load` is given beside its section: whether it may download (resolved), and
    where a reranker behind an endpoint records its identity and spends (`kb_root`, `budget`, `kb_id`)."""

    offline: bool = False
    kb_root: Path | None = None
    budget: BudgetSection | None = None
    kb_id: str | None = None


LoadReranker = Callable[["RerankSection", RerankRequest], Reranker]


def load_reranker(section: RerankSection, offline: bool | None = None, *, kb_root: Path | None = None,
                  budget: BudgetSection | None = None, kb_id: str | None = None) -> Reranker:
    """The reranker the manifest's [rerank] section names (provider, model, revision, batch_size).
    One behind an endpoint records its identity under `kb_root` and spends through `budget` when
    priced; offline mode does not apply to a server the user runs."""
    spec = RERANKERS.get(section.provider)
    if spec is None:
        raise UsageError(f"unknown rerank provider {section.provider!r}",
                         remedy=f"use one of: {', '.join(RERANKERS)}")
    local_only = resolve_offline(offline)
    if spec.runs_here:
        prepare_hub_environment(local_only)
    load = cast(LoadReranker, entry_point(spec.load))
    return load(section, RerankRequest(local_only, kb_root, budget, kb_id))


# -- an HTTP reranker that fails: results in fused order, and a note ------------------------------------


def reranker_or_note(load: Callable[[], Reranker], notes: list[str]) -> Reranker | None:
    """The reranker `load` gives; None, with a note, when an HTTP reranker cannot be set up (its key's
    variable unset). A local reranker's failure to load stays an error (the module docstring)."""
    try:
        return load()
    except RerankEndpointError as exc:
        notes.append(not_reranked(exc))
        return None


def reranked_or_note(reranker: Reranker, query: str, candidates: list[Candidate], texts: Sequence[str],
                     notes: list[str]) -> list[Candidate] | None:
    """`candidates` scored (their `rerank` set) and in reranked order; None, with a note, when an HTTP
    reranker failed or the budget admits no rerank request: the caller keeps the fused order."""
    try:
        scores = reranker.score(query, texts)
    except RerankEndpointError as exc:
        notes.append(not_reranked(exc))
        return None
    except BudgetError as exc:
        why = " ".join(line.strip() for line in exc.message.splitlines() if line.strip())
        notes.append(f"not reranked, passages are in fused order: the budget admits no rerank request now ({why}); "
                     "raise the cap it names in [budget] or wait for its window to pass (`pnk budget` shows the "
                     "spending), or set [retrieval] rerank = false")
        return None
    for candidate, score in zip(candidates, scores, strict=True):
        candidate.rerank = float(score)
    return order_reranked(candidates)


def not_reranked(exc: RerankEndpointError) -> str:
    remedy = f"; {exc.remedy}" if exc.remedy else ""
    return f"not reranked, passages are in fused order: {exc.message}{remedy}"
