"""Where a sync runs its model, by the executor the registry names (embed/registry.py `EXECUTORS`).

An executor with a `connect` entry holds the model itself, away from this process (Ray: one worker
per node of a cluster). A run on it connects once, before the pipeline writes anything, so every
refusal (no cluster, a worker's loader refusing the model, workers that disagree) comes before the
first sidecar or index row, and ends it with the run (`close`). An executor without one leaves the
model to the sync's own process (`load_embedder`). Nothing here names an executor: a new one is
its registry entry and the module its `connect` names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, cast

from pinakes.embed.base import Embedder
from pinakes.embed.registry import EXECUTORS, ExecutorSpec, entry_point

if TYPE_CHECKING:
    from pinakes.embed.settings import EmbeddingSection


@dataclass(frozen=True)
class ConnectRequest:
    """What an executor's `connect` is given."""

    section: EmbeddingSection
    address: str | None  # --ray-address, else None: the executor's own default (the section's, the environment's)
    offline: bool | None  # None: PNK_OFFLINE decides, where the model loads
    rebuilding: bool  # the run writes a new index that replaces the live one only when it completes
    on_workers: Callable[[int], None] | None = None  # told how many workers are alive, now and on each loss


class ConnectedEmbedder(Embedder, Protocol):
    """The model on an executor's own workers."""

    def watch_workers(self, on_workers: Callable[[int], None] | None) -> None: ...

    def close(self) -> None: ...


ConnectExecutor = Callable[[ConnectRequest], ConnectedEmbedder]


def executor_spec(name: str) -> ExecutorSpec:
    """The registered executor `name` (the manifest and `--executor` accept only registered names)."""
    return EXECUTORS[name]


def connects(name: str) -> bool:
    """Whether a run on executor `name` connects to where its model runs before it writes anything."""
    return executor_spec(name).connect is not None


def connect(name: str, request: ConnectRequest) -> ConnectedEmbedder:
    """Connect executor `name` (one that `connects`), its module imported now."""
    reference = executor_spec(name).connect
    if reference is None:
        raise ValueError(f"executor {name!r} runs the model in this process: there is nothing to connect")
    return cast("ConnectExecutor", entry_point(reference))(request)
