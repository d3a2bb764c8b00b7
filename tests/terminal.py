"""Running a child Python on a real pseudo-terminal, for tests of what a person's terminal shows."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time

from tests.conftest import REPO_ROOT


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT / "src"), env.get("PYTHONPATH")]))
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    return env


def run_on_pty(script: str, *args: str, columns: int = 120) -> tuple[str, str]:
    """Run `script` with its stderr on a pseudo-terminal: (its stdout, everything the terminal got)."""
    import fcntl
    import struct
    import termios

    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, columns, 0, 0))
    proc = subprocess.Popen([sys.executable, "-c", script, *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=slave, env=child_env(), cwd=REPO_ROOT)
    os.close(slave)
    received = bytearray()
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child is gone and so is the terminal's other end
                break
            if not data:
                break
            received += data
        stdout, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    assert proc.returncode == 0, received.decode("utf-8", "replace")
    return stdout.decode(), received.decode("utf-8", "replace")
