"""The GUIDE's one-machine Ray cluster keeps every port on loopback: its shell block, run as written
(parsed from docs/GUIDE.md) in a network namespace of this test's that has a LAN-like address for Ray
to find (tests/ray_network.py), while every listening TCP socket in the namespace is sampled. Ray has
no authentication: a port on any other address would let anyone who reaches it run code here.

Heavy: a real cluster start and a real `pnk sync --executor ray` (~30 s).
"""

from __future__ import annotations

import importlib.util
import os
import random
import re
import shutil
import sqlite3
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.ray_network import LAN_ADDRESS, can_unshare, is_loopback, parse_listeners, run_in_lan_namespace

pytestmark = [
    pytest.mark.heavy,
    pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                       reason="the [ray] extra is not installed (pip install -e '.[ray]'): no cluster to test"),
]

GUIDE = REPO_ROOT / "docs" / "GUIDE.md"
MARKER = "<!-- tests/test_embed_ray_loopback.py runs this block as written"
WORDS = ("index", "vector", "model", "chunk", "cluster", "worker", "driver", "commit", "search", "token")


def guide_block() -> str:
    """The shell block that follows MARKER in the GUIDE."""
    text = GUIDE.read_text(encoding="utf-8")
    assert MARKER in text, f"{GUIDE} lost the one-machine cluster block this test runs"
    found = re.search(r"```sh\n(.*?)```", text[text.index(MARKER):], re.S)
    assert found is not None
    return found.group(1)


def test_the_guide_names_a_loopback_cluster_and_the_sync_that_uses_it() -> None:
    block = guide_block()
    assert "ray start --head" in block and "pnk sync --executor ray" in block


@pytest.fixture
def work() -> Iterator[Path]:
    """A short scratch path: Ray's unix sockets live under RAY_TMPDIR, and a socket path has ~107
    characters (pytest's tmp_path is too deep)."""
    why = can_unshare()
    if why is not None:
        pytest.skip(why)
    path = Path(tempfile.mkdtemp(prefix="pnkray-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_the_guides_one_machine_cluster_listens_on_loopback_only(work: Path) -> None:
    from pinakes.init import init_kb

    kb = work / "kb"
    init_kb(kb, name="kb")
    for seed in range(4):
        rng = random.Random(seed)
        (kb / "docs" / f"d{seed}.md").write_text(
            f"# D{seed}\n\n" + " ".join(rng.choice(WORDS) for _ in range(300)) + "\n", encoding="utf-8")
    samples = work / "listening"
    # Around the block, never in it: a private Ray temp dir (the machine's /tmp/ray belongs to
    # whoever else runs Ray here), proof that Ray would otherwise pick the LAN address, and a
    # sampler of every listening TCP socket in the namespace while the block runs.
    script = f"""
export RAY_TMPDIR={work}/ray-tmp
mkdir -p "$RAY_TMPDIR"
cd {kb}
env -u RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER python -c \\
  'from ray._private.services import get_node_ip_address as ip; print("ray-default-address", ip())'
( while :; do cat /proc/net/tcp /proc/net/tcp6 >> {samples}; sleep 0.2; done ) &
{guide_block()}
echo "block-exit $?"
cat /proc/net/tcp /proc/net/tcp6 >> {samples}
"""
    env = {key: value for key, value in os.environ.items() if not key.startswith("RAY_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"  # `ray` and `pnk` of this venv
    done = run_in_lan_namespace(script, env=env, timeout=600)
    output = done.stdout + done.stderr
    assert f"ray-default-address {LAN_ADDRESS}" in done.stdout, output  # the namespace can catch a LAN bind
    assert "block-exit 0" in done.stdout, output  # the documented sync worked
    with sqlite3.connect(kb / ".pinakes" / "index.db") as conn:
        assert conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0] > 0
    listening = {(address, port) for address, port, _inode in parse_listeners(samples.read_text())}
    exposed = sorted((address, port) for address, port in listening if not is_loopback(address))
    assert exposed == [], f"listening beyond loopback: {exposed}"
    assert ("127.0.0.1", 6379) in listening, sorted(listening)  # the samples saw the cluster's head
    assert len(listening) >= 5, sorted(listening)  # and its other processes (node, agents, workers)
