"""The settled mark: the index holds exactly what the walk cache describes, under these inputs.

A no-op sync of a large KB spends most of its time proving that nothing changed: walking and
stat-ing every file (unavoidable), then pairing every document against its index row. The second
half is redundant when the walk found every file exactly as the walk cache recorded it and the
index has not moved since a sync left it complete. The mark records that state, with a digest of
every input besides the files (the manifest's bytes, the build keys, the Pinakes version), so a
sync that finds it intact and an all-hit walk has an empty plan without loading the index rows.

The mark is written only by a sync that ends with nothing pending (no failure, no document left
unpaired, sidecars written) and is removed in the same transaction as anything that could make it
false: every write to the walk cache and the start of every pipeline. Uncertainty therefore
always falls back to the full pairing, which is what decides; the mark only skips repeating it.

The mark also carries the stat digest of the walk cache it was written with (computed in the
transaction that writes it), so a sync need not load the cache to know the walk would find every file
as cached: a walk that only stats, whose files' digest equals the mark's and none of whose stamps is
in the racy window, has found exactly the cache's files with the cache's stats
(`sources.walk.walk_settled`). Anything else loads the cache and compares the stats just taken with
it, as every walk does.

Its counterpart is the unfinished start (`unfinished_start`): a sync records `sync_started_at` when
its pipeline starts and removes it with `last_sync_at` when it ends, so one killed or stopped past
its last commit leaves a mark that the next sync finishes its work from (the graph, the reverse
scan) and that doctor reports.
"""

from __future__ import annotations

import sqlite3
from dataclasses import asdict
from pathlib import Path

import xxhash

from pinakes import __version__
from pinakes.index.schema import SETTLED_META_KEY
from pinakes.pipeline.keys import BuildKeys
from pinakes.sources.walk import walk_cache_digest

META_KEY = SETTLED_META_KEY


def settled_digest(manifest_path: Path, keys: BuildKeys) -> str:
    """What the mark is valid for: the manifest's exact bytes, the build keys and this version."""
    digest = xxhash.xxh3_128()
    digest.update(manifest_path.read_bytes())
    digest.update(repr(sorted(asdict(keys).items())).encode())
    digest.update(__version__.encode())
    return digest.hexdigest()


def is_settled(conn: sqlite3.Connection, digest: str) -> bool:
    return settled_cache_digest(conn, digest) is not None


def settled_cache_digest(conn: sqlite3.Connection, digest: str) -> str | None:
    """The walk cache's stat digest the mark was written for (`sources.walk.walk_cache_digest`), when
    the index is settled for `digest`; None when it is not ("" from a mark that carries none)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (META_KEY,)).fetchone()
    if row is None:
        return None
    inputs, _, cache = str(row[0]).partition(" ")
    return cache if inputs == digest else None


def mark_settled(conn: sqlite3.Connection, digest: str) -> None:
    """Record that the index is settled for `digest`, and the stat digest of the walk cache it is
    settled with (call inside the transaction: every later write to the cache removes the mark)."""
    value = f"{digest} {walk_cache_digest(conn)}"
    conn.execute("INSERT INTO meta (key, value) VALUES (?, ?) "
                 "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (META_KEY, value))


def unfinished_start(conn: sqlite3.Connection | None) -> bool:
    """Whether a sync started its pipeline (`sync_started_at`) after the last recorded completion."""
    if conn is None:
        return False
    meta = dict(conn.execute(
        "SELECT key, value FROM meta WHERE key IN ('sync_started_at', 'last_sync_at')").fetchall())
    started = meta.get("sync_started_at")
    return bool(started) and (meta.get("last_sync_at") is None or started > meta["last_sync_at"])
