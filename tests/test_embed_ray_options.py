"""The Ray executor's fast checks (the default suite): a local sync imports nothing of Ray, the
manifest and CLI choose the executor, and a cluster that is not there is refused before anything is
written. The cluster itself is exercised in tests/test_embed_ray.py (heavy)."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import sqlite3
import subprocess
import sys
import textwrap
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


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # closed again when the block ends: nothing listens there


@pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                    reason="the [ray] extra is not installed: a missing cluster is reported only past the import")
def test_a_missing_cluster_is_refused_by_address_and_nothing_is_written(tmp_path: Path) -> None:
    from pinakes.init import init_kb

    root = tmp_path / "kb"
    init_kb(root, name="kb")
    (root / "docs").mkdir(exist_ok=True)
    (root / "docs" / "a.md").write_text("# A\n\nsome text to embed\n", encoding="utf-8")
    address = f"127.0.0.1:{_closed_port()}"
    env = {**os.environ, "RAY_ADDRESS": ""}
    done = subprocess.run([sys.executable, "-m", "pinakes", "sync", "--ray-address", address],
                          capture_output=True, text=True, cwd=root, env=env, timeout=120)
    assert done.returncode == 69, done.stderr
    assert address in done.stderr and "ray start --head" in done.stderr
    assert "Traceback" not in done.stderr
    index = root / ".pinakes" / "index.db"
    if index.exists():
        with sqlite3.connect(index) as conn:
            assert conn.execute("SELECT COUNT(*) FROM documents").fetchone() == (0,)
            assert conn.execute("SELECT COUNT(*) FROM embeddings").fetchone() == (0,)
    # The local executor then indexes the same KB (nothing the refused run left stands in the way).
    local = subprocess.run([sys.executable, "-m", "pinakes", "sync", "--executor", "local", "--json"],
                           capture_output=True, text=True, cwd=root, env=env, timeout=300)
    assert local.returncode == 0, local.stderr
    assert json.loads(local.stdout)["counts"]["indexed"] >= 1
