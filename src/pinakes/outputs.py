"""Files a person names for a command to write (`--transcript`, `--outcomes`, a baseline): one guard.

Whatever the flags, such a path is never a file Pinakes keeps for itself: nothing under a `.pinakes/`
state directory (the index, the spend ledger, the caches), no KB manifest (`pinakes.toml`), no
sidecar (`*.pnk.yaml`, which holds a permanent ID). Symbolic links are resolved before deciding, so a
link pointing at the ledger is the ledger. An existing file is replaced only when `--force` says so,
or when it is a file of the very kind the command writes (an earlier outcomes file, say), which
`replaceable` recognises. The check runs before the command does its work, so a paid run is never
spent on an answer that then cannot be written.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from pinakes.errors import UsageError
from pinakes.jsontypes import JSONValue
from pinakes.kb import MANIFEST_NAME, SIDECAR_SUFFIX, STATE_DIR_NAME


def checked_output_path(path: Path | str, *, flag: str, force: bool = False,
                        replaceable: Callable[[Path], bool] | None = None) -> Path:
    """`path` resolved, once it is a file this command may write; `UsageError` otherwise.

    `flag` names the option in the errors; `force` allows replacing an existing file (never a
    Pinakes-owned one); `replaceable(path)` says whether an existing file may be replaced anyway."""
    given = Path(path)
    resolved = Path(os.path.realpath(given))
    owned = _owned_by_pinakes(resolved)
    if owned is not None:
        raise UsageError(f"{flag} {given} would overwrite {owned}; Pinakes never writes a named output there, "
                         "whatever the flags", remedy=f"name a file outside the KB's {STATE_DIR_NAME}/, not a "
                                                        f"{MANIFEST_NAME} or a sidecar, e.g. {flag} run.json",
                         path=resolved)
    if resolved.is_dir():
        raise UsageError(f"{flag} {given} is a directory", remedy=f"name a file, e.g. {flag} {given / 'run.json'}",
                         path=resolved)
    if os.path.lexists(resolved) and not force and not (replaceable is not None and replaceable(resolved)):
        force_hint = " or pass --force to replace it" if replaceable is None else " or move it away"
        raise UsageError(f"{flag} {given} exists; it was left as it is",
                         remedy=f"name a new file{force_hint}", path=resolved)
    return resolved


def _owned_by_pinakes(resolved: Path) -> str | None:
    """What Pinakes keeps at `resolved` (already free of symbolic links), or None."""
    if STATE_DIR_NAME in resolved.parts[:-1] or resolved.name == STATE_DIR_NAME:
        return f"a file in a KB's {STATE_DIR_NAME}/ (the index, the spend ledger, the caches)"
    if resolved.name == MANIFEST_NAME:
        return f"a KB manifest ({MANIFEST_NAME}: the KB's id and settings)"
    if resolved.name.endswith(SIDECAR_SUFFIX):
        return f"a sidecar ({SIDECAR_SUFFIX}: a document's permanent ID)"
    return None


def has_format(expected: str) -> Callable[[Path], bool]:
    """`replaceable` for JSON files Pinakes writes with a `format` marker: replace only one of those."""
    def check(path: Path) -> bool:
        import json

        try:
            with open(path, encoding="utf-8") as handle:
                data: JSONValue = json.load(handle)
        except (OSError, ValueError):
            return False
        return isinstance(data, dict) and data.get("format") == expected

    return check
