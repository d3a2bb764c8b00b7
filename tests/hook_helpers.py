"""Shared by the hook tests: what `pnk install-hooks` wrote before hooks found the KB and pnk at run
time (absolute interpreter and KB paths), so that upgrading and diagnosing such hooks can be tested."""

from __future__ import annotations

import shlex
from pathlib import Path

from pinakes.hooks import MARKER


def old_style_hook(name: str, command: str, python: Path, kb: Path) -> str:
    """What `pnk install-hooks` wrote before hooks found the KB and pnk at run time."""
    local = f'"$(dirname "$0")/{name}.local"'
    line = f"{shlex.quote(str(python))} -m pinakes -C {shlex.quote(str(kb))} {command}"
    if name != "pre-commit":
        line += " || true  # a post-commit/post-merge failure must never block git"
    return (f"#!/bin/sh\n{MARKER}\n# Forces the free extractor.\n"
            f'if [ -x {local} ]; then {local} "$@" || exit $?; fi\n{line}\n')
