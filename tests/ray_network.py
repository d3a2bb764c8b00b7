"""Where Ray listens, read from /proc (no `ss` needed), and a network namespace that has a LAN-like
address for Ray to find, so a test sees what a cluster on a real machine would bind to.

Ray calls "this machine" the address of the interface its default route leaves by; a namespace with
only loopback would make every cluster look loopback-only. `run_in_lan_namespace` gives the script
its own user, network, mount and pid namespaces (`unshare`), with a veth pair holding LAN_ADDRESS and
the default route: nothing in it can reach (or be reached from) the real network, and every process
it starts dies with it.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

LAN_ADDRESS = "10.199.0.1"  # the namespace's "machine address" (a private range; no route out)
NAMESPACE_SETUP = f"""set -e
ip link set lo up
ip link add pnk0 type veth peer name pnk1
ip addr add {LAN_ADDRESS}/24 dev pnk0
ip link set pnk1 up
ip link set pnk0 up
ip route add default dev pnk0
set +e
"""


def can_unshare() -> str | None:
    """Why a LAN namespace cannot be made here, or None when it can."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "`unshare` (util-linux) and `ip` (iproute2) are needed to give Ray a namespace of its own"
    done = subprocess.run(["unshare", "-Urn", "--pid", "--fork", "--mount-proc", "sh", "-c", NAMESPACE_SETUP],
                          capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        return f"cannot make a network namespace with a veth pair here: {done.stderr.strip()[:200]}"
    return None


def run_in_lan_namespace(script: str, *, env: Mapping[str, str],
                         timeout: float) -> subprocess.CompletedProcess[str]:
    """Run the bash `script` in a fresh namespace holding LAN_ADDRESS (its processes end with it)."""
    return subprocess.run(["unshare", "-Urn", "--pid", "--fork", "--mount-proc", "--kill-child",
                           "bash", "-c", NAMESPACE_SETUP + script],
                          capture_output=True, text=True, env=dict(env), timeout=timeout)


def parse_listeners(proc_net: str) -> set[tuple[str, int, int]]:
    """(address, port, socket inode) of the listening TCP sockets in /proc/net/tcp{,6} text."""
    found: set[tuple[str, int, int]] = set()
    for line in proc_net.splitlines():
        fields = line.split()
        if len(fields) < 10 or fields[3] != "0A" or ":" not in fields[1]:  # 0A: TCP_LISTEN
            continue
        address, port = fields[1].rsplit(":", 1)
        found.add((_address(address), int(port, 16), int(fields[9])))
    return found


def _address(hex_address: str) -> str:
    """/proc/net's hex address (each 32-bit word in host byte order, little-endian here) as text."""
    words = bytes.fromhex(hex_address)
    raw = b"".join(words[index:index + 4][::-1] for index in range(0, len(words), 4))
    address = ipaddress.ip_address(raw)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def is_loopback(address: str) -> bool:
    return ipaddress.ip_address(address).is_loopback


def listening_sockets(pids: Iterable[int]) -> set[tuple[str, int, int]]:
    """(address, port, pid) of every TCP socket the processes `pids` listen on (this namespace)."""
    proc_net = "".join(Path(f"/proc/net/{name}").read_text() for name in ("tcp", "tcp6"))
    by_inode = {inode: (address, port) for address, port, inode in parse_listeners(proc_net)}
    found: set[tuple[str, int, int]] = set()
    for pid in pids:
        try:
            links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:  # gone meanwhile
            continue
        for link in links:
            if link.startswith("socket:[") and int(link[8:-1]) in by_inode:
                found.add((*by_inode[int(link[8:-1])], pid))
    return found


def descendants(root_pid: int) -> set[int]:
    """Every living process under `root_pid` (its children, theirs, ...)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry))
    found: set[int] = set()
    stack = [root_pid]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found
