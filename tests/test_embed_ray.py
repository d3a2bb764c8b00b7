"""The embed stage on a real two-node Ray cluster on this machine (`ray.cluster_utils.Cluster`),
pinned to loopback (every port the nodes listen on is checked): the same KB synced locally and on
Ray gives the same chunks and vectors (with the chunk-ahead worker beside the Ray driver too), a
worker killed mid-run loses and duplicates nothing, workers holding other weights or unable to start
refuse the run before anything is written, and the loss of every worker says what is true of a sync
and of a rebuild, with Ray's own messages kept off the terminal. Every sync goes through `pnk sync` in its own process, as a user runs it: the
workers get pinakes from the job's runtime_env (py_modules), the model from the node's environment.

Heavy: a cluster start (~10-15 s) and several real model runs.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from tests.ray_network import descendants, is_loopback, listening_sockets

pytestmark = [
    pytest.mark.heavy,
    pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                       reason="the [ray] extra is not installed (pip install -e '.[ray]'): no cluster to test on"),
]

# Every Ray process of these tests (the nodes, each `pnk sync` driver) resolves "this machine" to
# the loopback address instead of the machine's own: nothing is reachable from outside.
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}
# How many times the local sync of the same corpus a Ray sync of it may take before a test calls it
# hung: two workers on the same cores, Ray's own processes beside them, one worker left after a kill.
RAY_PATIENCE_PER_LOCAL_SECOND = 8
MODEL_RUNTIMES = ("onnxruntime", "fastembed", "torch", "sentence_transformers")
WORDS = ("index", "vector", "model", "chunk", "cluster", "worker", "driver", "commit", "transaction",
         "sqlite", "search", "token", "embedding", "batch", "node", "actor", "retry", "order", "memory",
         "writer", "stage", "sync", "corpus", "query", "answer", "document", "paragraph", "heading")


def _ray() -> Any:
    """The `ray` module, typed loosely as the product types it (pinakes.embed.untyped.RayModule): Ray's
    annotations leave its handles and several parameters partly unknown."""
    import ray

    return ray


def _prose(seed: int, paragraphs: int) -> str:
    rng = random.Random(seed)
    parts = [f"# Document {seed}"]
    for number in range(paragraphs):
        parts.append(f"## Part {number}")
        parts.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(60, 160))) + ".")
    return "\n\n".join(parts) + "\n"


def _write_corpus(root: Path, documents: int, paragraphs: int) -> None:
    for seed in range(documents):
        path = root / "docs" / f"doc{seed:03d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_prose(seed, paragraphs), encoding="utf-8")


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, **LOOPBACK_ENV, "RAY_ADDRESS": "", **extra}


def pnk(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pinakes", "-C", str(root), *args], capture_output=True,
                          text=True, env=env or _env(), timeout=900)


def _new_kb(root: Path, documents: int, paragraphs: int, *, manifest_lines: str = "") -> Path:
    from pinakes.init import init_kb

    init_kb(root, name=root.name)
    if manifest_lines:
        manifest = root / "pinakes.toml"
        text = manifest.read_text(encoding="utf-8")
        manifest.write_text(text.replace("[embedding]\n", f"[embedding]\n{manifest_lines}\n", 1), encoding="utf-8")
    _write_corpus(root, documents, paragraphs)
    return root


def _rows(root: Path) -> dict[tuple[str, int], tuple[str, int, int, np.ndarray]]:
    """(path, ordinal) -> (text, start, end, vector), failing on a chunk with no or two vectors."""
    with sqlite3.connect(root / ".pinakes" / "index.db") as conn:
        chunks = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        vectors = conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0]
        assert chunks == vectors, f"{chunks} chunks but {vectors} vectors"
        rows = conn.execute(
            "SELECT d.path, c.ordinal, c.text, c.char_start, c.char_end, e.vector FROM chunks c "
            "JOIN documents d ON d.id = c.doc_id JOIN embeddings e ON e.chunk_id = c.id").fetchall()
    found = {(path, ordinal): (text, start, end, np.frombuffer(blob, dtype=np.float32))
             for path, ordinal, text, start, end, blob in rows}
    assert len(found) == len(rows) == chunks, "a (document, ordinal) was written twice"
    return found


def _identity(root: Path) -> dict[str, str]:
    from pinakes.index.schema import read_meta

    with sqlite3.connect(root / ".pinakes" / "index.db") as conn:
        return {key: value for key, value in read_meta(conn).items() if key.startswith("embedding_")}


def _assert_same_index(ray_kb: Path, local_kb: Path) -> None:
    ray_rows, local_rows = _rows(ray_kb), _rows(local_kb)
    assert sorted(ray_rows) == sorted(local_rows)
    for key, (text, start, end, vector) in local_rows.items():
        other = ray_rows[key]
        assert (other[0], other[1], other[2]) == (text, start, end), key
        np.testing.assert_allclose(other[3], vector, atol=1e-5, err_msg=str(key))
    assert _identity(ray_kb) == _identity(local_kb)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Two nodes with one CPU each (this machine has two, shared): one worker per node. Node 2's
    hub cache differs from the head's (only the identity-mismatch test reads a hub model)."""
    caches = tmp_path_factory.mktemp("hub-caches")
    saved = {key: os.environ.get(key) for key in LOOPBACK_ENV}
    os.environ.update(LOOPBACK_ENV)  # the nodes are this process's children (and Ray reads it on import)
    from ray.cluster_utils import Cluster

    started: Any = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": False, "node_ip_address": "127.0.0.1",
        "env_vars": {"HF_HUB_CACHE": str(caches / "head"), "HF_HUB_OFFLINE": "1"}})
    try:
        started.add_node(num_cpus=1, node_ip_address="127.0.0.1",
                         env_vars={"HF_HUB_CACHE": str(caches / "node2"), "HF_HUB_OFFLINE": "1"})
        started.wait_for_nodes()
        ray = _ray()

        # This process watches the cluster (and kills a worker), as a loopback driver too.
        ray.init(address=started.address, _node_ip_address="127.0.0.1")
        nodes = [node for node in ray.nodes() if node["Alive"]]
        assert len(nodes) == 2
        assert {node["NodeManagerAddress"] for node in nodes} == {"127.0.0.1"}, "a node left loopback"
        # Ray has no authentication: no port of the test cluster may be reachable from elsewhere.
        listening = listening_sockets(descendants(os.getpid()) | {os.getpid()})
        assert any(port == int(str(started.address).rsplit(":", 1)[1]) for _address, port, _pid in listening)
        assert [entry for entry in listening if not is_loopback(entry[0])] == [], listening
        started.hub_caches = caches
        yield started
    finally:
        ray = _ray()

        ray.shutdown()
        started.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def local_reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The corpus the Ray runs must reproduce, synced by the local executor."""
    root = _new_kb(tmp_path_factory.mktemp("local") / "kb", documents=24, paragraphs=6)
    done = pnk(root, "sync", "--executor", "local")
    assert done.returncode == 0, done.stderr
    return root


def test_ray_sync_equals_local_and_a_local_sync_after_it_is_a_no_op(cluster: Any, local_reference: Path,
                                                                   tmp_path: Path) -> None:
    root = _new_kb(tmp_path / "kb", documents=24, paragraphs=6,
                   manifest_lines=f'executor = "ray"\nray_address = "{cluster.address}"')
    # The manifest chooses Ray; the driver reports which model runtimes it imported (none: the
    # workers hold the model, the driver only its tokenizer).
    script = ("import sys; from pinakes.cli import main; code = main(sys.argv[1:]); "
              "print(sorted(m for m in sys.modules if m.split('.')[0] in MODEL_RUNTIMES)); sys.exit(code)")
    done = subprocess.run([sys.executable, "-c", f"MODEL_RUNTIMES = {MODEL_RUNTIMES!r}; {script}", "-C", str(root),
                           "sync"], capture_output=True, text=True, env=_env(), timeout=900)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout
    assert "2 workers alive" in done.stderr  # progress lines name the workers
    _assert_same_index(root, local_reference)

    again = pnk(root, "sync", "--executor", "local", "--json")
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["noop"] is True and report["chunks_embedded"] == 0, report

    # The pipeline is the same stages whichever executor runs the model.
    on_ray, on_local = pnk(root, "doit", "list"), pnk(local_reference, "doit", "list")
    assert on_ray.returncode == 0, on_ray.stderr
    assert on_ray.stdout == on_local.stdout and "embed" in on_ray.stdout


# A `pnk sync` driver that reports, as its last line of output, what each chunk-ahead worker set
# (pipeline/chunk_ahead.py) it started did: the product's own `start`, watched.
WATCHED_AHEAD = """
import json, sys
from pinakes.pipeline import chunk_ahead
started = []
real_start = chunk_ahead.start
def start(*args, **kwargs):
    started.append(real_start(*args, **kwargs))
    return started[-1]
chunk_ahead.start = start
from pinakes.cli import main
code = main(sys.argv[1:])
print(json.dumps([{"first": ahead.first, "documents": len(ahead.items), "workers": len(ahead.processes),
                   "used": ahead.used, "refused": ahead.refused, "terms_used": ahead.terms_used}
                  for ahead in started]))
sys.exit(code)
"""


def test_a_ray_sync_chunks_ahead_beside_its_driver_as_a_local_sync_does(cluster: Any, local_reference: Path,
                                                                        tmp_path: Path) -> None:
    # The chunk-ahead worker chunks with the tokenizer the Ray workers sent the driver (a
    # TokenCounter, as a local model's): the driver takes its answers instead of chunking and
    # term-counting itself, and the index is still the local sync's. Forced on (the corpus is
    # below the worker's minimum size), as a sync of 64 documents or more on two cores runs it.
    root = _new_kb(tmp_path / "kb", documents=24, paragraphs=6)
    done = subprocess.run([sys.executable, "-c", WATCHED_AHEAD, "-C", str(root), "sync", "--ray-address",
                           cluster.address], capture_output=True, text=True,
                          env=_env(PINAKES_CHUNK_AHEAD="1"), timeout=900)
    assert done.returncode == 0, done.stderr
    assert "2 workers alive" in done.stderr  # the embedding ran on the cluster
    [ahead] = json.loads(done.stdout.strip().splitlines()[-1])
    assert ahead["documents"] == 24 and ahead["workers"] >= 1, ahead
    # Every document from the worker's first on came from it (the driver waited for each answer).
    assert 0 < ahead["first"] < 24 and ahead["used"] == 24 - ahead["first"], ahead
    assert ahead["refused"] == 0 and 0 < ahead["terms_used"] <= ahead["used"], ahead
    _assert_same_index(root, local_reference)


def _embedding_count(root: Path, index_name: str = "index.db") -> int:
    index = root / ".pinakes" / index_name
    if not index.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{index}?mode=ro", uri=True, timeout=1) as conn:
            return conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0]
    except sqlite3.Error:  # the schema is not there yet
        return 0


def _kill_one_worker(driver: subprocess.Popen[str], root: Path, deadline: float) -> str:
    """Wait until the driver has committed some vectors, then kill one of its workers."""
    ray = _ray()

    while time.monotonic() < deadline and driver.poll() is None:
        if _embedding_count(root) > 0:
            # With all_namespaces, Ray lists {"name", "namespace"} dicts (its stubs say strings).
            listed: list[dict[str, str]] = ray.util.list_named_actors(all_namespaces=True)
            names = [actor["name"] for actor in listed
                     if actor["namespace"] == "pinakes" and actor["name"].startswith(f"embed-{driver.pid}-")]
            if len(names) == 2:
                ray.kill(ray.get_actor(names[0], namespace="pinakes"), no_restart=True)
                return names[0]
        time.sleep(0.2)
    raise AssertionError("the sync ended (or never committed) before a worker could be killed")


def test_a_worker_killed_mid_run_loses_and_duplicates_nothing(cluster: Any, tmp_path: Path) -> None:
    # Ten cross-document calls of 64 chunks, more than the driver sends ahead (2 per worker): calls
    # are still being sent after the first commit, so the kill always lands mid-run (with 3 calls all
    # were sent at once, and on a quiet machine the sync could end between two polls).
    local_reference = _new_kb(tmp_path / "local" / "kb", documents=96, paragraphs=6)
    started = time.monotonic()
    done = pnk(local_reference, "sync", "--executor", "local")
    local_seconds = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    # The waits below only turn a hang into a failure, so they are sized by this machine's speed at
    # this moment: the same corpus embedded locally just now. A fixed 600 s ran out once at load ~16
    # (270 s for the whole test alone at load 9); a run that hangs still fails.
    patience = max(600.0, RAY_PATIENCE_PER_LOCAL_SECOND * local_seconds)
    print(f"local sync of the corpus: {local_seconds:.0f} s; waiting up to {patience:.0f} s on the Ray sync")
    root = _new_kb(tmp_path / "kb", documents=96, paragraphs=6)
    driver = subprocess.Popen([sys.executable, "-m", "pinakes", "-C", str(root), "sync", "--ray-address",
                               cluster.address], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=_env())
    try:
        started = time.monotonic()
        killed = _kill_one_worker(driver, root, started + patience / 2)
        killed_after = time.monotonic() - started
        assert _embedding_count(root) < len(_rows(local_reference)), "killed too late to prove anything"
        _out, err = driver.communicate(timeout=patience)
        print(f"Ray sync: a worker killed after {killed_after:.0f} s, done after {time.monotonic() - started:.0f} s")
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 0, f"{killed} killed; the sync failed:\n{err}"
    assert "a cluster worker was lost; its batches go to the 1 worker left" in err
    _assert_same_index(root, local_reference)


def _hub_snapshot(cache: Path, *, perturbed: bool) -> None:
    """A hub-style cached snapshot of MiniLM (sentence-transformers), the weights optionally nudged."""
    from pinakes.embed.packaged import PACKAGED_MODELS, verified_files

    packaged = next(model for model in PACKAGED_MODELS if model.provider == "sentence-transformers")
    commit = "0" * 39 + ("1" if perturbed else "0")
    repo = cache / "models--pnk-test--minilm"
    snapshot = repo / "snapshots" / commit
    for pinned, path in verified_files(packaged).items():
        target = snapshot / Path(pinned.relative).relative_to("model")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    if perturbed:
        from safetensors.numpy import load_file, save_file  # pyright: ignore[reportUnknownVariableType] -- untyped arg

        tensors = load_file(str(snapshot / "model.safetensors"))
        first = sorted(tensors)[0]
        tensors[first] = tensors[first] * np.float32(1.01)
        save_file(tensors, str(snapshot / "model.safetensors"))
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(commit, encoding="utf-8")


@pytest.mark.skipif(importlib.util.find_spec("sentence_transformers") is None,
                    reason="the [st] extra is not installed: the hub-model workers need sentence-transformers")
def test_a_worker_with_other_weights_refuses_the_run_before_any_vector(cluster: Any, tmp_path: Path) -> None:
    caches: Path = cluster.hub_caches
    _hub_snapshot(caches / "head", perturbed=False)
    _hub_snapshot(caches / "node2", perturbed=True)
    root = _new_kb(tmp_path / "kb", documents=2, paragraphs=2)
    manifest = root / "pinakes.toml"
    text = manifest.read_text(encoding="utf-8")
    text = text.replace('provider = "fastembed"', 'provider = "sentence-transformers"', 1)
    text = text.replace('model = "sentence-transformers/all-MiniLM-L6-v2"', 'model = "pnk-test/minilm"', 1)
    manifest.write_text(text, encoding="utf-8")
    done = pnk(root, "sync", "--offline", "--ray-address", cluster.address,
               env=_env(HF_HUB_CACHE=str(caches / "head"), HF_HUB_OFFLINE="1"))
    assert done.returncode != 0, done.stdout
    assert "refusing to mix two models' vectors" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not (root / ".pinakes" / "index.db").exists()  # refused before the index file was created
    assert list(root.rglob("*.pnk.yaml")) == []  # and before any sidecar


def _driver(root: Path, address: str, *extra: str) -> subprocess.Popen[str]:
    from tests.kb_helpers import ctrl_c_reaches_it

    return subprocess.Popen([sys.executable, "-m", "pinakes", "-C", str(root), "sync", "--ray-address", address,
                             *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
                            preexec_fn=ctrl_c_reaches_it)


def _wait_for_vectors(driver: subprocess.Popen[str], root: Path, index_name: str = "index.db") -> list[str]:
    """The driver's worker names, once it has committed some vectors (and is still running)."""
    ray = _ray()

    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and driver.poll() is None:
        if _embedding_count(root, index_name) > 0:
            listed: list[dict[str, str]] = ray.util.list_named_actors(all_namespaces=True)
            return [actor["name"] for actor in listed
                    if actor["namespace"] == "pinakes" and actor["name"].startswith(f"embed-{driver.pid}-")]
        time.sleep(0.2)
    raise AssertionError("the sync ended (or never committed) before the fault could be made")


def test_every_worker_lost_stops_the_run_and_the_next_sync_continues(cluster: Any, local_reference: Path,
                                                                    tmp_path: Path) -> None:
    ray = _ray()

    root = _new_kb(tmp_path / "kb", documents=24, paragraphs=6)
    driver = _driver(root, cluster.address)
    try:
        # What a raylet's death sends every driver, on Ray's own error channel, in colour: a plain Ray
        # driver prints it to stdout as "\x1b[33m(raylet)\x1b[0m ...". Sent as soon as the driver's job
        # exists, so a fast sync cannot finish between its first vectors and the workers' loss.
        _publish_to_driver(cluster.address, root, "The node died: \x1b[31mits raylet\x1b[0m exited")
        workers = [ray.get_actor(name, namespace="pinakes") for name in _wait_for_vectors(driver, root)]
        for worker in workers:
            ray.kill(worker, no_restart=True)
        out, err = driver.communicate(timeout=600)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 69, err
    assert "every Ray worker of the cluster at" in err and "Traceback" not in err
    assert "the documents committed so far are kept" in err and "continues from there" in err
    assert "(raylet)" not in out + err and "\x1b" not in out + err, (out, err)  # kept off the terminal,
    assert "Ray's last message: The node died: its raylet exited" in err  # but said, plainly, with the error
    kept = _embedding_count(root)
    assert 0 < kept < len(_rows(local_reference)), kept

    resumed = pnk(root, "sync", "--executor", "local", "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert 0 < json.loads(resumed.stdout)["chunks_embedded"] < len(_rows(local_reference))  # only the rest
    _assert_same_index(root, local_reference)


def _publish_to_driver(address: str, root: Path, message: str) -> None:
    """Send `message` to the `pnk sync` driver of `root` on Ray's error channel, as a raylet does,
    and give its listener a moment to receive it."""
    ray = _ray()
    from ray._private import state
    from ray._private.utils import publish_error_to_driver  # pyright: ignore[reportUnknownVariableType] -- untyped arg
    from ray._raylet import (  # compiled: no stub, so nothing typed
        GcsClient,  # pyright: ignore[reportAttributeAccessIssue, reportUnknownVariableType]  # Ray's private, untyped client
    )

    deadline = time.monotonic() + 300
    jobs: list[dict[str, Any]] = []
    while time.monotonic() < deadline and not jobs:  # the driver's job appears once it has connected
        jobs = [job for job in cast(list[dict[str, Any]], state.jobs())
                if not job["IsDead"] and str(root) in str(job.get("Entrypoint", ""))]
        time.sleep(0.2)
    assert len(jobs) == 1, jobs
    publish_error_to_driver("raylet_died", message, gcs_client=cast(Any, GcsClient(address=address)),
                            job_id=ray.JobID(bytes.fromhex(jobs[0]["JobID"])))
    time.sleep(1.0)


def test_every_worker_lost_in_a_rebuild_says_the_live_index_is_untouched(cluster: Any, tmp_path: Path) -> None:
    ray = _ray()

    root = _new_kb(tmp_path / "kb", documents=24, paragraphs=6)
    built = pnk(root, "sync", "--executor", "local")
    assert built.returncode == 0, built.stderr
    before = _rows(root)
    driver = _driver(root, cluster.address, "--rebuild", "--no-reuse")  # every chunk embedded on the workers
    try:
        for name in _wait_for_vectors(driver, root, "index.db.new"):
            ray.kill(ray.get_actor(name, namespace="pinakes"), no_restart=True)
        _out, err = driver.communicate(timeout=600)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 69, err
    # Not "committed so far are kept ... continues from there": a rebuild keeps nothing of itself.
    assert "the rebuild stopped and its new index is discarded: the live index is as it was" in err, err
    assert "run `pnk sync --rebuild` again" in err and "continues from there" not in err
    assert not (root / ".pinakes" / "index.db.new").exists()
    after = _rows(root)
    assert sorted(after) == sorted(before)
    assert all(np.array_equal(after[key][3], before[key][3]) for key in before)


def test_workers_that_cannot_start_are_refused_in_bounded_time(cluster: Any, tmp_path: Path) -> None:
    ray = _ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    @ray.remote(num_cpus=1)
    class Hog:  # another job holding one node's only CPU: a worker there cannot be scheduled
        def ping(self) -> int:
            return 1

    node = next(node for node in ray.nodes() if node["Alive"])
    hog = Hog.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)).remote()
    try:
        assert ray.get(hog.ping.remote(), timeout=60) == 1
        root = _new_kb(tmp_path / "kb", documents=2, paragraphs=2)
        started = time.monotonic()
        done = pnk(root, "sync", "--ray-address", cluster.address, env=_env(PNK_RAY_CONNECT_TIMEOUT="6"))
        elapsed = time.monotonic() - started
    finally:
        ray.kill(hog)
    assert done.returncode == 69, done.stderr
    assert "the Ray workers did not all start within 30 s" in done.stderr and "ray status" in done.stderr
    assert elapsed < 30 + 40, f"took {elapsed:.0f} s"  # the bound, and the connection and imports around it
    assert "Traceback" not in done.stderr
    assert not (root / ".pinakes" / "index.db").exists()


def test_ctrl_c_cancels_the_batches_in_flight_and_ends_the_workers(cluster: Any, tmp_path: Path) -> None:
    import signal

    ray = _ray()

    # Four times the other faults' corpus: the signal must land while batches are still in flight,
    # and a quick writer finished 24 documents between the first commit and the signal.
    root = _new_kb(tmp_path / "kb", documents=96, paragraphs=6)
    driver = _driver(root, cluster.address)
    try:
        names = _wait_for_vectors(driver, root)
        assert len(names) == 2
        driver.send_signal(signal.SIGINT)
        _out, err = driver.communicate(timeout=120)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode != 0 and "Traceback" not in err, err
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        listed: list[dict[str, str]] = ray.util.list_named_actors(all_namespaces=True)
        if not {actor["name"] for actor in listed} & set(names):
            break
        time.sleep(0.5)
    else:
        raise AssertionError(f"the workers outlived the interrupted sync: {names}")
    # Nothing half-written: every committed chunk has its one vector, and the next sync finishes.
    _rows(root)
    assert pnk(root, "sync", "--executor", "local").returncode == 0
