"""The transcripts of paid `pnk ask --deep` runs, kept under `.pinakes/transcripts/`.

Every run that made a paid call keeps what `--transcript PATH` writes (each request and reply
verbatim, beside the result): one JSON file named `<UTC time>-<operation id>.json`, so a paid answer
can be audited after the fact even when nobody asked for a file. The folder is bounded: after each
run the oldest files go until at most MAX_KEPT remain and they hold at most MAX_BYTES together (the
newest is always kept). `pnk sync --clear-cache=transcripts` empties it. A transcript that cannot be
kept (a full disk) never costs the answer that was paid for: the run says so in a note.
"""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime
from pathlib import Path

MAX_KEPT = 50
MAX_BYTES = 20 * 1024 * 1024
SUFFIX = ".json"


def kept_path(directory: Path, operation_id: str, now: datetime | None = None) -> Path:
    """Where this run's transcript is kept (the name sorts by time)."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%S%fZ")
    return directory / f"{stamp}-{operation_id}{SUFFIX}"


def write(path: Path, document: dict[str, object]) -> Path:
    from pinakes.atomic import atomic_write_text

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    return path


def prune(directory: Path, *, max_kept: int = MAX_KEPT, max_bytes: int = MAX_BYTES) -> list[Path]:
    """Remove the oldest kept transcripts beyond the bounds; returns what was removed."""
    files = sorted((path for path in directory.glob(f"*{SUFFIX}") if path.is_file()), reverse=True)  # newest first
    kept_bytes = 0
    removed: list[Path] = []
    for number, path in enumerate(files):
        try:
            size = path.stat().st_size
        except OSError:
            continue
        if number == 0 or (number < max_kept and kept_bytes + size <= max_bytes):
            kept_bytes += size
            continue
        with contextlib.suppress(OSError):
            path.unlink()
            removed.append(path)
    return removed
