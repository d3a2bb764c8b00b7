"""Reaching a Ray cluster in bounded time, without Ray's own output on the user's terminal.

`ray.init` has no timeout. At an address where something that is not Ray accepts connections it
retries for over ten minutes (20 tries of ~40 s), and when a cluster's node advertises an address
other than the one this machine reaches it at, it waits for a node that never appears; meanwhile it
prints Ray's log lines. So before a sync connects, a child process makes the same connection
(`probe`) with its output captured, and is killed after `connect_timeout_s()` (RAY_CONNECT_TIMEOUT_S,
or PNK_RAY_CONNECT_TIMEOUT): the sync connects only to a cluster that accepted the child, and
otherwise stops with the address, the reason (Ray's last log line, which names the address it really
tried) and the remedy, before it has written anything.

Loopback: Ray's "this machine" is the machine's network address, even for `127.0.0.1`: it rewrites
a loopback cluster address to that address, and `ray start --node-ip-address=127.0.0.1` advertises it
too. Only RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 makes it loopback, for `ray start` (the cluster then
listens on 127.0.0.1 only; docs/GUIDE.md) and for a driver alike, so `pin_loopback` sets it for a
sync whose cluster address is a loopback one, before Ray is imported.

Once connected, Ray's driver prints the cluster's error messages (a worker killed: `(raylet) ...` in
ANSI colours) to this process's stdout, where they would break `--json`; `quiet_driver_messages`
keeps them instead (`ray_said`), with control characters removed, for the error that ends a run.

Run as `python -m pinakes.embed.ray_connect ADDRESS`, this module is the probe's child.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections import deque
from collections.abc import Mapping
from typing import cast

# How long a sync waits for a Ray cluster to accept it. A healthy cluster accepts a driver in a few
# seconds; the wait is for a busy head node.
RAY_CONNECT_TIMEOUT_S = 60.0
TIMEOUT_ENV = "PNK_RAY_CONNECT_TIMEOUT"
# The workers' start, a model load on each node, gets this many connect timeouts (5 min by default).
START_FACTOR = 5
# Ray's switch that makes "this machine" 127.0.0.1 (named for the platforms where it is the default).
LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
LOOPBACK_HOSTS = ("localhost", "::1", "[::1]")
# ANSI escape sequences, then any other control character, in what Ray prints.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
# A Ray C++ log line: "[2026-01-01 00:00:00,000 W 12 12] file.cc:123: message".
_RAY_LOG = re.compile(r"^\[[^\]]* [WEF] \d+ \d+\] [\w./-]+:\d+: (?P<message>.+)$")

_said: deque[str] = deque(maxlen=20)
_SAID_CHARS = 300  # of a kept message's first line


def connect_timeout_s(environ: Mapping[str, str] = os.environ) -> float:
    """The connect timeout: PNK_RAY_CONNECT_TIMEOUT (seconds) when set to a positive number."""
    try:
        value = float(environ.get(TIMEOUT_ENV, ""))
    except ValueError:
        return RAY_CONNECT_TIMEOUT_S
    return value if value > 0 else RAY_CONNECT_TIMEOUT_S


def start_timeout_s(environ: Mapping[str, str] = os.environ) -> float:
    """How long the workers may take to start once connected (scheduled on CPUs, the job's code
    unpacked, the model loaded): START_FACTOR times the connect timeout."""
    return START_FACTOR * connect_timeout_s(environ)


def is_loopback(address: str) -> bool:
    """Whether the HOST:PORT `address` names this machine's loopback interface."""
    host = address.rpartition(":")[0] if ":" in address else address
    return host in LOOPBACK_HOSTS or host.startswith("127.")


def auto_address(environ: Mapping[str, str] = os.environ) -> str | None:
    """The cluster `ray.init(address="auto")` joins: the one last started on this machine, as Ray
    records it (`ray_current_cluster` in Ray's temp directory); None when none is recorded."""
    if "RAY_TMPDIR" in environ:
        base = environ["RAY_TMPDIR"]
    elif sys.platform.startswith("linux") and "TMPDIR" in environ:
        base = environ["TMPDIR"]
    else:
        base = "/tmp"
    try:
        with open(os.path.join(base, "ray", "ray_current_cluster"), encoding="utf-8") as handle:
            return handle.read().strip() or None
    except OSError:
        return None


def pin_loopback(address: str) -> None:
    """Make Ray's "this machine" 127.0.0.1 for this process (and the probe) when the cluster is on
    loopback, unless the environment already says; it takes effect only before `import ray`."""
    resolved = auto_address() if address == "auto" else address
    if resolved and is_loopback(resolved) and "ray" not in sys.modules:
        os.environ.setdefault(LOOPBACK_ENV, "0")


def plain(text: str) -> str:
    """`text` as one terminal-safe line: ANSI sequences and control characters removed."""
    return _CONTROL.sub(" ", _ANSI.sub("", text)).strip()


def probe(address: str, timeout_s: float) -> str | None:
    """Connect to the cluster at `address` from a child process, killed after `timeout_s`: None
    when the cluster accepted it, else why not (one line)."""
    child = subprocess.Popen([sys.executable, "-m", "pinakes.embed.ray_connect", address],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, errors="replace", start_new_session=True)
    try:
        out, err = child.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        out, err = child.communicate()
        return _with_last_log(f"it did not accept a connection within {timeout_s:g} s", err)
    except BaseException:  # Ctrl-C: the child goes with this process
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        raise
    verdict = _verdict(out)
    if child.returncode == 0 and verdict.get("connected") is True:
        return None
    reason = str(verdict.get("error") or f"the connection attempt exited with status {child.returncode}")
    return _with_last_log(plain(reason), err)


def _verdict(out: str) -> dict[str, object]:
    """The child's last JSON line."""
    for line in reversed(out.splitlines()):
        try:
            data: object = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict):
            return cast("dict[str, object]", data)  # a JSON object's keys are strings
    return {}


def _with_last_log(reason: str, err: str) -> str:
    """`reason`, and Ray's last warning or error line (it names the address Ray really tried)."""
    for line in reversed(err.splitlines()):
        match = _RAY_LOG.match(plain(line))
        if match:
            return f"{reason}; Ray's last message: {match['message'].rstrip('.')}"
    return reason


def quiet_driver_messages() -> None:
    """Keep the messages Ray's driver would print to stdout (`ray._private.worker`'s
    `print_to_stdstream`, fed by the cluster's error channel) instead of printing them."""
    import ray._private.worker as ray_worker

    if hasattr(ray_worker, "print_to_stdstream"):
        ray_worker.print_to_stdstream = _keep


def _keep(data: Mapping[str, object], ignore_prefix: bool = False) -> None:
    del ignore_prefix
    lines = data.get("lines")
    for message in cast("list[object]", lines) if isinstance(lines, list) else []:
        first = next((line for line in str(message).splitlines() if line.strip()), "")
        if first:
            _said.append(plain(first)[:_SAID_CHARS])


def ray_said() -> list[str]:
    """The cluster's messages kept since this process connected, oldest first."""
    return list(_said)


def _main(argv: list[str]) -> int:
    """The probe's child: connect as a sync would, print one JSON verdict line, exit at once."""
    address = argv[0]
    try:
        import logging

        import ray

        ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR,  # pyright: ignore[reportUnknownMemberType] (a parameter's type is partly unknown)
                 configure_logging=False)
    except Exception as exc:  # whatever Ray raises is the verdict
        print(json.dumps({"error": (str(exc).strip().splitlines() or [type(exc).__name__])[0]}), flush=True)
        sys.stderr.flush()
        os._exit(1)
    print(json.dumps({"connected": True}), flush=True)
    os._exit(0)  # no orderly shutdown: the cluster notices the driver left


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
