"""Named kill points for crash testing.

`faultpoint("sync.after-walk")` does nothing unless the environment variable PNK_FAULT names that
point (optionally `name:N` for the N-th hit), in which case the process SIGKILLs itself there. Tests
sweep every point and then check that a second sync leaves the KB consistent. PNK_FAULT_TRACE=1 prints
each point as it is reached, so a sweep can discover them all.
"""

from __future__ import annotations

import os
import signal
import sys

_hits: dict[str, int] = {}


def faultpoint(name: str) -> None:
    if os.environ.get("PNK_FAULT_TRACE"):
        print(f"faultpoint {name}", file=sys.stderr, flush=True)
    target = os.environ.get("PNK_FAULT")
    if not target:
        return
    point, _, nth = target.partition(":")
    if point != name:
        return
    _hits[name] = _hits.get(name, 0) + 1
    if _hits[name] >= (int(nth) if nth else 1):
        os.kill(os.getpid(), signal.SIGKILL)
