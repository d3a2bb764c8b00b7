"""The index writer's SQLite settings (index/schema.py, docs/perf/writer.md): WAL with
synchronous=NORMAL, and what they promise: a writer killed with SIGKILL loses
no transaction it committed, however much of the WAL was not yet checkpointed, and leaves a file
that passes its integrity check."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from pinakes.index import schema


def test_a_writer_connection_runs_wal_with_synchronous_normal(tmp_path: Path) -> None:
    for conn in (schema.open_writer(tmp_path / "index.db"), schema.open_writer(tmp_path / "index.db")):
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        conn.close()


_WRITER = """
import sys
from pathlib import Path
from pinakes.index import schema
conn = schema.open_writer(Path(sys.argv[1]))
for number in range(200):
    with schema.transaction(conn):
        conn.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (f"k{number}", "x" * 2000))
print("committed", flush=True)
sys.stdin.read()  # held open, its WAL never checkpointed, until killed
"""


def test_a_killed_writer_keeps_every_commit_its_wal_holds(tmp_path: Path) -> None:
    index = tmp_path / "index.db"
    child = subprocess.Popen([sys.executable, "-c", _WRITER, str(index)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "committed"
    wal = index.with_name("index.db-wal")
    assert wal.stat().st_size > 200 * 2000  # the commits are in the WAL, not yet in the file
    child.send_signal(signal.SIGKILL)
    child.wait()
    conn = sqlite3.connect(index)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("SELECT count(*) FROM meta WHERE key LIKE 'k%'").fetchone()[0] == 200
