"""The Ray executor's fast checks (the default suite): a local sync imports nothing of Ray, the
manifest and CLI choose the executor, and a cluster that is not there is refused before anything is
written. The cluster itself is exercised in tests/test_embed_ray.py (heavy)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import socket
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Generator
from pathlib import Path

import pytest

from pinakes.errors import ManifestError
from pinakes.manifest import load_manifest
from pinakes.pipeline.progress import SyncProgress

REPO_ROOT = Path(__file__).resolve().parent.parent


def test_a_local_sync_imports_nothing_of_ray(tmp_path: Path) -> None:
    # A fresh process: this one may have imported Ray for another test.
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO_ROOT / "tests")!r})
        from pathlib import Path
        from fakes import HashEmbedder
        from kb_helpers import Doc, init_test_kb, sync, write_documents
        embedder = HashEmbedder()
        root = init_test_kb(Path({str(tmp_path / "kb")!r}), embedder.identity)
        write_documents(root, [Doc("docs/a.md", "# A\\n\\nlocal embedding, no cluster\\n")])
        report = sync(root, embedder)
        assert report.indexed == 1, report.indexed
        print(sorted(name for name in sys.modules if name == "ray" or name.startswith("ray.")))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def _manifest_with(tmp_path: Path, lines: str) -> Path:
    from pinakes.init import init_kb

    init_kb(tmp_path, name="kb")
    manifest = tmp_path / "pinakes.toml"
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(text.replace("[embedding]\n", f"[embedding]\n{lines}\n", 1), encoding="utf-8")
    return manifest


def test_the_manifest_chooses_the_executor_and_its_cluster(tmp_path: Path) -> None:
    manifest = _manifest_with(tmp_path, 'executor = "ray"\nray_address = "10.0.0.5:6379"')
    embedding = load_manifest(manifest).embedding
    assert (embedding.executor, embedding.ray_address) == ("ray", "10.0.0.5:6379")


def test_the_default_executor_is_local(tmp_path: Path) -> None:
    embedding = load_manifest(_manifest_with(tmp_path, "")).embedding
    assert (embedding.executor, embedding.ray_address) == ("local", None)


def test_an_unknown_executor_is_refused_with_the_choices(tmp_path: Path) -> None:
    manifest = _manifest_with(tmp_path, 'executor = "dask"')
    with pytest.raises(ManifestError) as raised:
        load_manifest(manifest)
    rendered = raised.value.render()
    assert "executor" in rendered and '"local"' in rendered and '"ray"' in rendered


def test_a_remote_provider_is_not_run_on_ray(tmp_path: Path) -> None:
    manifest = _manifest_with(tmp_path, 'executor = "ray"')
    text = manifest.read_text(encoding="utf-8")
    text = text.replace('provider = "fastembed"', 'provider = "openai-compatible"\nbase_url = "http://127.0.0.1:9/v1"', 1)
    manifest.write_text(text, encoding="utf-8")
    with pytest.raises(ManifestError) as raised:
        load_manifest(manifest)
    assert "executor" in raised.value.render() and "openai-compatible" in raised.value.render()


def test_the_cli_refuses_an_unknown_executor(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "pinakes", "sync", "--executor", "dask"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert done.returncode == 2
    assert "--executor" in done.stderr and "'local'" in done.stderr


def test_the_cli_refuses_a_cluster_address_with_the_local_executor(tmp_path: Path) -> None:
    from pinakes.init import init_kb

    init_kb(tmp_path, name="kb")
    done = subprocess.run([sys.executable, "-m", "pinakes", "-C", str(tmp_path), "sync", "--executor", "local",
                           "--ray-address", "127.0.0.1:6379"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr  # EXIT_CONFIG: an argument is wrong
    assert "--ray-address" in done.stderr and "--executor local" in done.stderr
    assert not (tmp_path / ".pinakes" / "index.db").exists()


def test_progress_shows_the_workers_alive() -> None:
    from io import StringIO

    stream = StringIO()
    progress = SyncProgress(stream, "line", interval=0.0)
    progress.start(2, 10)
    progress.workers_alive(2)
    progress.advance(chunks=5)
    progress.workers_alive(1)
    progress.advance(documents=1, bytes_done=5)
    lines = stream.getvalue().splitlines()
    assert "2 workers alive" in lines[0] and "1 worker alive" in lines[-1]
    assert "sync: a cluster worker was lost; its batches go to the 1 worker left" in lines


def test_a_sync_quicker_than_one_progress_line_still_names_its_workers() -> None:
    from io import StringIO

    stream = StringIO()
    progress = SyncProgress(stream, "line", interval=3600.0)  # no periodic line will come
    progress.start(2, 10)
    progress.workers_alive(2)
    progress.workers_alive(2)  # the same count again is not news
    progress.advance(documents=2, bytes_done=10)
    progress.close()
    assert stream.getvalue().splitlines() == ["sync: embedding on the cluster: 2 workers alive"]


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # closed again when the block ends: nothing listens there


needs_ray = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None,
    reason="the [ray] extra is not installed: a missing cluster is reported only past the import")


def _kb_with_documents(root: Path, count: int) -> Path:
    from pinakes.init import init_kb

    init_kb(root, name="kb")
    (root / "docs").mkdir(exist_ok=True)
    for number in range(count):
        text = f"# D{number}\n\nsome text to embed {number}\n"
        (root / "docs" / f"d{number}.md").write_text(text, encoding="utf-8")
    return root


def _assert_nothing_written(root: Path) -> None:
    """No index file and no sidecar: the refused sync left the KB as it found it."""
    from pinakes.kb import SIDECAR_SUFFIX

    assert not (root / ".pinakes" / "index.db").exists()
    assert sorted(path.name for path in root.rglob(f"*{SIDECAR_SUFFIX}")) == []


@needs_ray
def test_a_missing_cluster_is_refused_by_address_and_nothing_is_written(tmp_path: Path) -> None:
    root = _kb_with_documents(tmp_path / "kb", 3)
    address = f"127.0.0.1:{_closed_port()}"
    env = {**os.environ, "RAY_ADDRESS": ""}
    done = subprocess.run([sys.executable, "-m", "pinakes", "sync", "--ray-address", address],
                          capture_output=True, text=True, cwd=root, env=env, timeout=120)
    assert done.returncode == 69, done.stderr
    assert address in done.stderr and "ray start --head" in done.stderr
    assert "nothing was embedded or written" in done.stderr and "Traceback" not in done.stderr
    _assert_nothing_written(root)  # the message is true: not even a sidecar or an empty index
    # The local executor then indexes the same KB (nothing the refused run left stands in the way).
    local = subprocess.run([sys.executable, "-m", "pinakes", "sync", "--executor", "local", "--json"],
                           capture_output=True, text=True, cwd=root, env=env, timeout=300)
    assert local.returncode == 0, local.stderr
    assert json.loads(local.stdout)["counts"]["indexed"] == 3
    # With an index already there, a new document and still no cluster: refused before its sidecar
    # is minted or the index records a sync start (doctor would call that a sync that never finished).
    (root / "docs" / "new.md").write_text("# New\n\nwaiting for the cluster\n", encoding="utf-8")
    again = subprocess.run([sys.executable, "-m", "pinakes", "sync", "--ray-address", address],
                           capture_output=True, text=True, cwd=root, env=env, timeout=120)
    assert again.returncode == 69 and "nothing was embedded or written" in again.stderr, again.stderr
    assert not (root / "docs" / "new.md.pnk.yaml").exists()
    with sqlite3.connect(root / ".pinakes" / "index.db") as conn:
        assert conn.execute("SELECT COUNT(*) FROM documents").fetchone() == (3,)
        assert conn.execute("SELECT 1 FROM meta WHERE key = 'sync_started_at'").fetchone() is None


@contextlib.contextmanager
def _silent_listener() -> Generator[str, None, None]:
    """A loopback TCP listener that accepts connections and never answers: not a Ray cluster."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError, OSError):
                accepted.append(server.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        server.close()


@needs_ray
@pytest.mark.heavy
def test_a_listener_that_is_not_ray_is_refused_within_the_connect_timeout(tmp_path: Path) -> None:
    # `ray.init` alone retried such an address for over ten minutes, printing Ray's log lines.
    root = _kb_with_documents(tmp_path / "kb", 2)
    env = {**os.environ, "RAY_ADDRESS": "", "PNK_RAY_CONNECT_TIMEOUT": "8"}
    with _silent_listener() as address:
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "pinakes", "sync", "--ray-address", address],
                              capture_output=True, text=True, cwd=root, env=env, timeout=120)
        elapsed = time.monotonic() - started
    assert done.returncode == 69, done.stderr
    assert elapsed < 8 + 20, f"took {elapsed:.0f} s"  # the timeout, and the imports and checks around it
    lines = done.stderr.strip().splitlines()
    assert lines[0].startswith(f"pnk: error: could not join a Ray cluster at {address}: it did not accept "
                               "a connection within 8 s"), done.stderr
    assert "remedy:" in lines[-1] and "PNK_RAY_CONNECT_TIMEOUT" in lines[-1]
    assert len(lines) == 2, done.stderr  # the error and its remedy: none of Ray's own lines
    assert "\x1b" not in done.stderr and done.stdout == ""
    _assert_nothing_written(root)


def test_ray_text_is_made_terminal_safe() -> None:
    from pinakes.embed.ray_connect import plain

    assert plain("\x1b[33m(raylet)\x1b[0m The node \x1b]0;title\x07died\r\x07") == "(raylet) The node died"


def test_the_cluster_auto_joins_is_the_one_ray_recorded(tmp_path: Path) -> None:
    from pinakes.embed.ray_connect import auto_address, is_loopback

    environ = {"RAY_TMPDIR": str(tmp_path)}
    assert auto_address(environ) is None  # no cluster started here
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "ray_current_cluster").write_text("127.0.0.1:6379\n", encoding="utf-8")
    assert auto_address(environ) == "127.0.0.1:6379"
    assert is_loopback("127.0.0.1:6379") and is_loopback("localhost:6379") and is_loopback("[::1]:6379")
    assert not is_loopback("10.0.0.5:6379") and not is_loopback("auto")


def test_the_connect_timeout_is_bounded_and_configurable() -> None:
    from pinakes.embed.ray_connect import (
        RAY_CONNECT_TIMEOUT_S,
        START_FACTOR,
        connect_timeout_s,
        start_timeout_s,
    )

    assert connect_timeout_s({}) == RAY_CONNECT_TIMEOUT_S == 60
    assert connect_timeout_s({"PNK_RAY_CONNECT_TIMEOUT": "8"}) == 8
    for wrong in ("0", "-3", "soon"):  # never unbounded, never an error
        assert connect_timeout_s({"PNK_RAY_CONNECT_TIMEOUT": wrong}) == RAY_CONNECT_TIMEOUT_S
    assert start_timeout_s({"PNK_RAY_CONNECT_TIMEOUT": "8"}) == 8 * START_FACTOR
