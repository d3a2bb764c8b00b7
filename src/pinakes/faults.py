"""Named kill points for crash testing.

`faultpoint("sync.after-walk")` does nothing unless the environment variable PNK_FAULT names that
point (optionally `name:N` for the N-th hit), in which case the process SIGKILLs itself there. Tests
sweep every point and then check that a second sync leaves the KB consistent. PNK_FAULT_STOP (same
syntax, several points separated by commas) SIGSTOPs the process there instead, so a test can act
while it is caught at that point (another process racing it) and SIGCONT it after. PNK_FAULT_TRACE=1
prints each point as it is reached, so a sweep can discover them all.
"""

from __future__ import annotations

import os
import signal
import sys

_hits: dict[tuple[str, str], int] = {}
# The variable naming the points, and what reaching one does (neither signal exists on Windows).
_ACTIONS = (("PNK_FAULT", getattr(signal, "SIGKILL", None)), ("PNK_FAULT_STOP", getattr(signal, "SIGSTOP", None)))


def faultpoint(name: str) -> None:
    if os.environ.get("PNK_FAULT_TRACE"):
        print(f"faultpoint {name}", file=sys.stderr, flush=True)
    for variable, action in _ACTIONS:
        targets = os.environ.get(variable)
        if not targets or action is None:
            continue
        for target in targets.split(","):
            point, _, nth = target.strip().partition(":")
            if point != name:
                continue
            _hits[variable, name] = _hits.get((variable, name), 0) + 1
            if _hits[variable, name] >= (int(nth) if nth else 1):
                os.kill(os.getpid(), action)
