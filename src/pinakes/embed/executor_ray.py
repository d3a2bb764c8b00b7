"""The embed stage on a Ray cluster: workers hold the model, the sync's own process stays the writer.

A sync's only step that outgrows one machine is the model (about 62 ms of CPU per chunk for the
default int8 model), and it is a pure function of chunk text and a pinned model. So `pnk sync
--executor ray` keeps everything else where it is (walk, pair, extract, chunk, and every commit, one
transaction per document into the one SQLite index) and sends chunk *texts* to one actor per Ray node;
no filesystem is shared. The driver never loads the weights: it counts tokens for the chunker with the
workers' own tokenizer (sent back as JSON when they start) and holds no model in memory.

What runs where (docs/GUIDE.md, "Embedding on a cluster"):
- each worker loads the model with the same loader as a local sync (`load_embedder`) and reports its
  `ModelIdentity`; any worker whose identity differs from the one the driver expects (the pinned
  packaged model, a local model directory's weights, else the first worker's) refuses the whole run
  before a vector is computed;
- the workers run the driver's own `pinakes` code: it travels in the job's `runtime_env`
  (`py_modules`), so a cluster needs only the model's dependencies installed (`pip install
  "pinakes-kb[light,ray]"` in the cluster image), never the same checkout;
- each embedding call (at most EMBED_SLICE_CHUNKS texts) is cut into model batches (`plan_batches`,
  with the caps and call cost the workers' model reports at start; a worker embeds each batch it is
  sent as one model call): the ones a local run makes while there are no more workers than batches
  (then the vectors are bit for bit a local run's), smaller ones to keep more workers busy. They go out with at most
  `IN_FLIGHT_PER_WORKER` per worker and are put back in the caller's order. The embed stage submits
  up to `calls_ahead` calls before it collects the first (`DispatchAhead`, embed/base.py), so the
  workers embed the next calls while the driver writes one, and a sync keeps more than the 8
  workers one call's texts can feed busy; docs/perf/scale-out.md.

Reaching the cluster is bounded (embed/ray_connect.py): a child process connects first and is killed
after PNK_RAY_CONNECT_TIMEOUT (60 s), the workers get five times that to start, and Ray's own output
never reaches the terminal. A sync connects before it writes anything (sync/engine.py), so every
refusal here leaves the KB as it was.

Faults: a worker that dies mid-batch is dropped and its batch goes to another worker (a batch's
vectors are only ever written once, by the driver, after they arrive); when no worker is left the run
stops with a ClusterError, keeping every document already committed (a rebuild's new index is
discarded instead, the live one untouched); Ctrl-C cancels the batches in flight. `ray` is imported
here and in ray_connect only: a local sync never imports it (tests/test_embed_ray_options.py).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes.embed import ray_connect
from pinakes.embed._common import ProviderEmbedder
from pinakes.embed.base import ModelIdentity
from pinakes.embed.batching import MAX_BATCH_TOKENS
from pinakes.embed.loader import load_embedder, packaged_for, provider_spec
from pinakes.embed.registry import EXECUTORS
from pinakes.errors import EXIT_UNAVAILABLE, MissingExtraError, ModelMismatchError, PinakesError, UsageError

if TYPE_CHECKING:
    import numpy as np

    from pinakes.embed.base import Embedder
    from pinakes.embed.connect import ConnectRequest
    from pinakes.embed.settings import EmbeddingSection
    from pinakes.embed.tokens import TokenCounter
    from pinakes.embed.untyped import RayActor, RayModule, RayRef

# Batches queued per worker beyond the one it runs: one, so a worker finds its next batch waiting
# when it finishes one, while the driver holds at most 2 x workers batches of text and vectors.
IN_FLIGHT_PER_WORKER = 2
# The smallest model batch a call is cut into to keep more workers busy: below it, the per-batch
# round trip outweighs what another worker adds.
MIN_BATCH_TEXTS = 8
# How often a wait for results wakes up to notice Ctrl-C and lost workers.
WAIT_SLICE_S = 1.0
# A cluster that does not accept a TCP connection in this long is reported as unreachable (Ray's own
# connect retries for minutes before failing).
CONNECT_TIMEOUT_S = 5.0
# Where the workers are named (`ray list actors`): embed-<driver pid>-<node id>.
WORKER_NAMESPACE = "pinakes"
START_CLUSTER = "start one with `ray start --head` (and `ray start --address HEAD:6379` on each other machine)"


class ClusterError(PinakesError):
    """The Ray cluster cannot be reached, or has no worker left to embed on."""

    exit_code = EXIT_UNAVAILABLE


def cluster_address(flag: str | None, manifest_address: str | None) -> str:
    """Which cluster a sync embeds on, by Ray's conventions: --ray-address, else [embedding]
    ray_address, else RAY_ADDRESS, else "auto" (the cluster started on this machine)."""
    return flag or manifest_address or os.environ.get("RAY_ADDRESS") or "auto"


@dataclass(frozen=True)
class WorkerStarted:
    """What a worker's start reports to the driver: the model it loaded, to check it and to chunk
    with its tokenizer; or, instead, the loader's refusal (rendered)."""

    identity: ModelIdentity | None = None
    max_input_tokens: int = 0
    tokenizer: str | None = None  # the tokenizer as JSON (TokenCounter.to_str)
    node: str = ""
    refused: str | None = None
    # How the worker's model plans its batches (embed/batching.py `plan_batches`): the driver plans with
    # them, so a call's batches are the ones a local run makes.
    max_batch_tokens: int = MAX_BATCH_TOKENS
    call_tokens: int | None = None


class EmbedWorker:
    """One per Ray node (a Ray actor): the model, loaded once, embedding the batches it is sent."""

    def __init__(self, section: EmbeddingSection, offline: bool | None, threads: int | None) -> None:
        self._section = section
        self._offline = offline
        self._threads = threads
        self._embedder: Embedder | None = None

    def start(self) -> WorkerStarted:
        """Load the model; what the driver needs to check it and to chunk (or the loader's refusal)."""
        from pinakes.embed.tokens import TokenCounter

        try:
            embedder = load_embedder(self._section, offline=self._offline, threads=self._threads)
        except PinakesError as exc:
            return WorkerStarted(refused=exc.render())
        self._embedder = embedder
        counter = getattr(embedder, "token_counter", None)
        max_batch_tokens, call_tokens = MAX_BATCH_TOKENS, None
        if isinstance(embedder, ProviderEmbedder):
            max_batch_tokens, call_tokens = embedder.max_batch_tokens, embedder.call_tokens
            embedder.call_tokens = None  # each batch the driver sends, planned there as here, is one model call
        return WorkerStarted(embedder.identity, embedder.max_input_tokens,
                             counter.to_str() if isinstance(counter, TokenCounter) else None, _node_name(),
                             max_batch_tokens=max_batch_tokens, call_tokens=call_tokens)

    def embed(self, texts: list[str], batch_size: int) -> np.ndarray:
        assert self._embedder is not None, "start() loads the model first"
        return self._embedder.embed_documents(texts, batch_size=batch_size)


def _node_name() -> str:
    ray = _import_ray()
    return f"{ray.util.get_node_ip_address()} ({ray.get_runtime_context().get_node_id()[:8]})"


def expected_identity(section: EmbeddingSection) -> ModelIdentity | None:
    """The identity the workers must report, known on the driver without loading the weights: a
    packaged model's pinned digest, a local model directory's weights, or the snapshot of a hub model
    this machine's cache holds; None otherwise (then every worker must agree with the first)."""
    from pinakes.embed.snapshot import local_weights_identity

    spec = provider_spec(section.provider)
    packaged = packaged_for(spec, section)  # as the loader picks it
    if packaged is not None:
        return ModelIdentity(section.provider, section.model, packaged.revision, packaged.weights.sha256,
                             packaged.dim)
    if spec.identity != "snapshot":
        return None  # its weights are named only once loaded (fastembed's hub models)
    if Path(section.model).is_dir():
        revision, digest = local_weights_identity(Path(section.model))
        return ModelIdentity(section.provider, section.model, revision, digest, section.dim)
    return _cached_snapshot_identity(section)


def _cached_snapshot_identity(section: EmbeddingSection) -> ModelIdentity | None:
    """The identity of the hub snapshot this machine's cache holds for `section`, if it holds one."""
    from pinakes.embed.hub import hub_cache_dir, repo_cache_name
    from pinakes.embed.snapshot import snapshot_identity

    try:
        revision, digest = snapshot_identity(hub_cache_dir() / repo_cache_name(section.model), section.revision)
    except PinakesError:
        return None  # not downloaded here: the workers must agree with the first one
    return ModelIdentity(section.provider, section.model, revision, digest, section.dim)


def connect(request: ConnectRequest) -> RayEmbedder:
    """The "ray" executor's `connect` (embed/registry.py): the cluster --ray-address names, else the
    section's, else Ray's own default (`cluster_address`)."""
    return connect_ray_embedder(request.section, address=cluster_address(request.address, request.section.ray_address),
                                offline=request.offline, on_workers=request.on_workers, rebuilding=request.rebuilding)


def connect_ray_embedder(section: EmbeddingSection, *, address: str, offline: bool | None,
                         on_workers: Callable[[int], None] | None = None,
                         rebuilding: bool = False) -> RayEmbedder:
    """Connect to the cluster at `address`, start one worker per node and check every worker's
    model: a RayEmbedder, or ClusterError / ModelMismatchError / the workers' loader refusal, all
    raised before any vector exists (a sync connects before it writes anything). `rebuilding`: the
    run writes a new index that replaces the live one only when it completes."""
    if EXECUTORS["ray"].refuses(provider_spec(section.provider)):
        raise UsageError(f"[embedding] provider {section.provider!r} already embeds outside this process; "
                         "--executor ray runs a local model on a cluster",
                         remedy="sync with `--executor local` (the default)")
    ray_connect.pin_loopback(address)  # before Ray is imported: it reads the switch once
    ray = _import_ray()
    _check_reachable(address)
    initialised_here = not ray.is_initialized()
    if initialised_here:
        # A child connects first, within the timeout: `ray.init` itself waits for as long as it takes.
        why = ray_connect.probe(address, ray_connect.connect_timeout_s())
        if why is not None:
            recorded = ray_connect.auto_address() if address == "auto" else None
            shown = f"auto ({recorded}, the cluster last started on this machine)" if recorded else address
            raise _unreachable(shown, why, answered=probed(address) or recorded is not None)
        ray_connect.quiet_driver_messages()  # before init: its listener thread prints from the first message
        try:
            ray.init(address=address, runtime_env=_runtime_env(), log_to_driver=False,
                     logging_level="ERROR", configure_logging=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise _unreachable(address, str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from exc
    workers: list[RayActor] = []
    try:
        workers.extend(_start_workers(ray, section, offline))
        started = _wait_started(ray, workers, ray_connect.start_timeout_s())
        identity, first, tokenizer = _check_workers(section, started)
    except BaseException:
        _shutdown(ray, workers, initialised_here)
        raise
    from pinakes.embed.tokens import TokenCounter

    return RayEmbedder(ray, workers, identity=identity, max_input_tokens=first.max_input_tokens,
                       counter=TokenCounter.from_str(tokenizer), batch_size=section.batch_size,
                       max_batch_tokens=first.max_batch_tokens, call_tokens=first.call_tokens,
                       address=address, owns_connection=initialised_here, on_workers=on_workers,
                       rebuilding=rebuilding)


def _import_ray() -> RayModule:
    try:
        import ray
    except ImportError as exc:
        raise MissingExtraError("ray", "embedding on a Ray cluster (--executor ray)", missing_module="ray") from exc
    return ray


def probed(address: str) -> bool:
    """Whether `unreachable_reason` can probe `address`: a HOST:PORT, not "auto" (found through
    Ray's own files) or a ray:// Ray Client address."""
    return address != "auto" and "://" not in address


def unreachable_reason(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> str | None:
    """Why nothing answers at the HOST:PORT `address` (one TCP connection), or None when something does."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout_s):
            return None
    except (OSError, ValueError) as exc:
        return getattr(exc, "strerror", None) or str(exc)


def _check_reachable(address: str) -> None:
    """Refuse an address where nothing listens, at once: `ray.init` would retry for minutes."""
    if not probed(address):
        return
    why = unreachable_reason(address)
    if why is not None:
        raise _unreachable(address, why)


def _unreachable(address: str, why: str, *, answered: bool = False) -> ClusterError:
    """The cluster at `address` could not be joined (`answered`: something accepts connections at
    that HOST:PORT, but no Ray cluster this machine can join)."""
    if not answered:
        return ClusterError(f"no Ray cluster answers at {address} ({why}); nothing was embedded or written",
                            remedy=f"{START_CLUSTER}, then `pnk sync --executor ray --ray-address HOST:6379` "
                                   "(or set RAY_ADDRESS); `pnk sync --executor local` embeds here instead")
    return ClusterError(
        f"could not join a Ray cluster at {address}: {why}; nothing was embedded or written",
        remedy="check that it is the head node's address (`ray start --head` prints it; port 6379 by default) "
               "and that the cluster advertises an address this machine reaches it at: a single-machine "
               f"cluster needs {ray_connect.LOOPBACK_ENV}=0 for `ray start` and `pnk sync` alike "
               f"(docs/GUIDE.md, \"Embedding on a cluster\"); {ray_connect.TIMEOUT_ENV}=SECONDS sets the "
               "wait; `pnk sync --executor local` embeds here instead")


def _runtime_env() -> dict[str, object]:
    """The driver's own pinakes code travels with the job, so workers run exactly this version."""
    import pinakes

    return {"py_modules": [str(Path(pinakes.__file__).parent)],
            "env_vars": {key: value for key, value in os.environ.items()
                         if key in ("PNK_OFFLINE", "HF_HUB_OFFLINE")}}


def _start_workers(ray: RayModule, section: EmbeddingSection, offline: bool | None) -> list[RayActor]:
    """One actor per alive node with CPUs, holding all of that node's CPUs (the model runtime
    spreads one batch over them, which beats several single-threaded copies of the model)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = [node for node in ray.nodes() if node.get("Alive") and node.get("Resources", {}).get("CPU", 0) >= 1]
    if not nodes:
        raise ClusterError("the Ray cluster has no node with a CPU to embed on",
                           remedy=f"{START_CLUSTER}; give each node CPUs (`ray start --num-cpus N`)")
    remote = ray.remote(EmbedWorker)
    workers: list[RayActor] = []
    for node in nodes:
        cpus = int(node["Resources"]["CPU"])
        workers.append(remote.options(
            name=f"embed-{os.getpid()}-{node['NodeID'][:12]}", namespace=WORKER_NAMESPACE,
            num_cpus=cpus, max_restarts=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False),
        ).remote(section, offline, cpus))
    return workers


def _wait_started(ray: RayModule, workers: list[RayActor], timeout_s: float) -> list[WorkerStarted]:
    """Every worker's start() report; ClusterError when they are not all up within `timeout_s`
    (an actor waits, silently and for ever, for CPUs another job holds)."""
    from ray.exceptions import GetTimeoutError

    try:
        return ray.get([worker.start.remote() for worker in workers], timeout=timeout_s)
    except GetTimeoutError as exc:
        raise ClusterError(
            f"the Ray workers did not all start within {timeout_s:g} s (each needs every CPU of its node, "
            "and loads the model); nothing was embedded or written",
            remedy=f"`ray status` shows what holds the cluster's CPUs: let it finish, then sync again; "
                   f"{ray_connect.TIMEOUT_ENV}=SECONDS waits longer (workers get "
                   f"{ray_connect.START_FACTOR}x it)") from exc


def _check_workers(section: EmbeddingSection,
                   started: Sequence[WorkerStarted]) -> tuple[ModelIdentity, WorkerStarted, str]:
    """Every worker loaded the model the driver expects, the same one: else the run is refused."""
    reports: list[tuple[ModelIdentity, WorkerStarted]] = []
    for report in started:
        if report.refused is not None or report.identity is None:
            raise PinakesError(f"a Ray worker could not load the model:\n{report.refused}",
                               remedy="install the model's packages on every node (docs/GUIDE.md, "
                                      "\"Embedding on a cluster\"), then sync again")
        reports.append((report.identity, report))
    expected = expected_identity(section) or reports[0][0]
    for identity, report in reports:
        if identity != expected:
            raise ModelMismatchError(
                f"the Ray worker on {report.node} loaded {identity.model} with weights sha256 "
                f"{identity.weights_sha256} ({identity.revision}), but this sync expects "
                f"{expected.weights_sha256} ({expected.revision}); refusing to mix two models' vectors "
                "in one index (nothing was embedded or written)",
                remedy="install the same model files on every node (the same pinakes-kb extras and "
                       "[embedding] revision), then sync again")
    first = reports[0][1]
    if first.tokenizer is None:
        raise PinakesError(f"{expected.model} ({expected.provider}) exposes no tokenizer to count with",
                           remedy="use `pnk sync --executor local` for this model")
    return expected, first, first.tokenizer


@dataclass
class EmbedCall:
    """One `embed_documents_async` call: its texts, the rows that have arrived, its batches still out."""

    texts: list[str]
    rows: np.ndarray
    size: int  # texts per model batch
    outstanding: int = 0
    error: Exception | None = None  # a batch's failure, raised when the call is collected


class RayEmbedder:
    """An `Embedder` whose model runs on the cluster's workers; token counts are the driver's own
    (the workers' tokenizer, loaded here without the weights)."""

    def __init__(self, ray: RayModule, workers: list[RayActor], *, identity: ModelIdentity, max_input_tokens: int,
                 counter: TokenCounter, batch_size: int, address: str, owns_connection: bool,
                 on_workers: Callable[[int], None] | None, rebuilding: bool = False,
                 max_batch_tokens: int = MAX_BATCH_TOKENS, call_tokens: int | None = None) -> None:
        self._ray = ray
        self._workers = workers
        self.identity = identity
        self.max_input_tokens = max_input_tokens
        self._counter = counter
        self.batch_size = batch_size
        self.max_batch_tokens = max_batch_tokens  # the workers' model's planning (WorkerStarted)
        self.call_tokens = call_tokens
        self.address = address
        self._owns_connection = owns_connection
        self._rebuilding = rebuilding
        self._on_workers: Callable[[int], None] = lambda _alive: None
        self.watch_workers(on_workers)
        # Model batches of every call not yet collected: waiting for a worker, and on one.
        self._queued: deque[tuple[EmbedCall, list[int]]] = deque()
        self._in_flight: dict[RayRef, tuple[EmbedCall, list[int], RayActor]] = {}

    @property
    def workers_alive(self) -> int:
        return len(self._workers)

    def watch_workers(self, on_workers: Callable[[int], None] | None) -> None:
        """Tell `on_workers` how many workers are alive, now and whenever one is lost."""
        if on_workers is not None:
            self._on_workers = on_workers
            on_workers(len(self._workers))

    @property
    def token_counter(self) -> TokenCounter:
        """The counter `count_tokens` uses (the workers' tokenizer): the chunk stage reads from it
        whether counts add up (pipeline/chunk.py `counts_add_up`), as on a local model."""
        return self._counter

    def count_tokens(self, text: str) -> int:
        return self._counter.count(text)

    def count_tokens_batch(self, texts: Sequence[str]) -> list[int]:
        return self._counter.count_batch(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]

    @property
    def calls_ahead(self) -> int:
        """How many calls the embed stage may submit ahead of the one it writes (embed/base.py
        `DispatchAhead`): enough to keep every worker's IN_FLIGHT_PER_WORKER batches filled while
        the driver writes, so the driver holds at most 2 x workers calls' texts and vectors."""
        return max(2, IN_FLIGHT_PER_WORKER * len(self._workers))

    def embed_documents(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        """One unit row per text, in order: the model batches a local run would make, spread over
        the workers; a batch whose worker dies is sent to another."""
        return self.collect(self.embed_documents_async(texts, batch_size))

    def embed_documents_async(self, texts: Sequence[str], batch_size: int | None = None, *,
                              known_counts: Mapping[str, int] | None = None) -> EmbedCall:
        """Queue `texts`' model batches behind every call not yet collected and start what the
        workers have room for; `collect` gives the rows. Batches are planned on token counts:
        `known_counts`' where it has them (embed/base.py `DispatchAhead`), the rest counted here."""
        import numpy as np

        from pinakes.embed.batching import plan_batches
        from pinakes.embed.tokens import known_or_counted

        self._require_workers()
        size = batch_size or self.batch_size
        call = EmbedCall(list(texts), np.empty((len(texts), self.identity.dim), dtype=np.float32), size)
        if texts:
            counts = known_or_counted(self._counter.count_batch, call.texts, known_counts or {})
            batches = plan_batches(counts, self._counter.special_tokens, size, self.max_batch_tokens, self.call_tokens)
            if len(batches) < len(self._workers):
                # A call's texts are spread over every worker: smaller model batches only when there
                # are more workers than the local run's batches (vectors then equal a local run's
                # within float tolerance rather than bit for bit), never below MIN_BATCH_TEXTS.
                call.size = max(MIN_BATCH_TEXTS, min(size, -(-len(texts) // len(self._workers))))
                batches = plan_batches(counts, self._counter.special_tokens, call.size, self.max_batch_tokens,
                                       self.call_tokens)
            call.outstanding = len(batches)
            self._queued.extend((call, indices) for indices in batches)
            self._dispatch()
        return call

    def collect(self, call: object) -> np.ndarray:
        """`call`'s rows once all of its batches are back (results of later calls that arrive
        meanwhile are kept in their own call)."""
        assert isinstance(call, EmbedCall)
        try:
            while call.outstanding:
                self._dispatch()
                if not self._in_flight:
                    raise RuntimeError("this embedding call was cancelled")
                done, _ = self._ray.wait(list(self._in_flight), num_returns=1, timeout=WAIT_SLICE_S)
                for ref in done:
                    self._receive(ref)
        except BaseException:  # Ctrl-C or a lost cluster: nothing more is computed for this run
            self.cancel()
            raise
        if call.error is not None:
            raise call.error
        return call.rows

    def _receive(self, ref: RayRef) -> None:
        owner, indices, worker = self._in_flight.pop(ref)
        owner.outstanding -= 1
        try:
            vectors = self._result(ref, worker)
        except PinakesError:
            raise
        except Exception as exc:  # the model refused this batch: its call fails alone, the others go on
            owner.error = exc
            return
        if vectors is None:
            owner.outstanding += 1
            self._queued.appendleft((owner, indices))  # its worker died: another one embeds it
        else:
            owner.rows[indices] = vectors

    def cancel(self) -> None:
        """Drop every call not yet collected: the batches waiting, and those running on a worker."""
        for ref in self._in_flight:
            with contextlib.suppress(Exception):  # its worker is already gone: nothing left to cancel
                self._ray.cancel(ref, force=True)
        self._in_flight.clear()
        self._queued.clear()

    def _require_workers(self) -> None:
        if self._workers:
            return
        if self._rebuilding:
            error = ClusterError(
                f"every Ray worker of the cluster at {self.address} is gone; the rebuild stopped and its "
                "new index is discarded: the live index is as it was before the rebuild",
                remedy="bring the cluster back, then run `pnk sync --rebuild` again (or "
                       "`pnk sync --rebuild --executor local`)")
        else:
            error = ClusterError(
                f"every Ray worker of the cluster at {self.address} is gone; the documents committed "
                "so far are kept", remedy="bring the cluster back (or `pnk sync --executor local`), "
                                          "then sync again: it continues from there")
        said = ray_connect.ray_said()
        if said:
            error.details.append(f"Ray's last message: {said[-1]}")
        raise error

    def _dispatch(self) -> None:
        """Send queued batches, oldest first, to the least loaded workers, up to
        IN_FLIGHT_PER_WORKER each."""
        self._require_workers()
        load = {id(worker): 0 for worker in self._workers}
        for _call, _indices, worker in self._in_flight.values():
            load[id(worker)] = load.get(id(worker), 0) + 1
        for worker in sorted(self._workers, key=lambda candidate: load[id(candidate)]):
            while self._queued and load[id(worker)] < IN_FLIGHT_PER_WORKER:
                call, indices = self._queued.popleft()
                ref = worker.embed.remote([call.texts[index] for index in indices], call.size)
                self._in_flight[ref] = (call, indices, worker)
                load[id(worker)] += 1

    def _result(self, ref: RayRef, worker: RayActor) -> np.ndarray | None:
        """The batch's vectors, or None when its worker died (then the worker is dropped)."""
        from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError

        try:
            return self._ray.get(ref)
        except (ActorDiedError, ActorUnavailableError, RayActorError):
            if worker in self._workers:
                self._workers.remove(worker)
                self._on_workers(len(self._workers))
            return None

    def close(self) -> None:
        """End the workers (their model memory goes with them) and this process's connection."""
        self.cancel()
        _shutdown(self._ray, self._workers, self._owns_connection)
        self._workers = []


def _shutdown(ray: RayModule, workers: list[RayActor], disconnect: bool) -> None:
    for worker in workers:
        with contextlib.suppress(Exception):  # already gone with its node: nothing left to end
            ray.kill(worker)
    if disconnect and ray.is_initialized():
        ray.shutdown()
