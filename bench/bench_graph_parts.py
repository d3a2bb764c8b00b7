"""The graph stage's memory by parts, each alone in a fresh process, for this tree and a baseline in
the same run (issue #45: "the first sync of a 700k-page tree ... stays under 1 GB RSS throughout";
the whole first sync of 700k pages peaked at 1,220 MB in its graph stage).

    nice -n 5 python bench/bench_graph_parts.py --kb COPY [--base main] [--parts text-edges structure hubs graph]
        [--repeat 1] [--first] [--scale N]

COPY is a synced KB (e.g. a copy of bench_first_sync_rss.py's /tmp/kb100k/tree): the graph is
derived again in it, so never point this at a KB another run reads. The working tree's
`src/pinakes` and `--base`'s (git archive) are each byte-compiled into their own folder
(compare_noop.py's `snapshot`); every part then runs in its own child process under each, the two
versions alternating, so both share the machine's moods. A child opens the index as the sync does,
resets its peak (`/proc/self/clear_refs` 5), and reports its VmRSS before the part, its VmHWM
(peak) after it, the difference, and the part's CPU seconds; then, outside the measurement, a digest
of the rows the part wrote, so the two versions are seen to write the same rows.

`--first`: each child empties the graph's tables (and the text links' resolutions) before its peak
is reset, so the part runs as a first sync's graph stage does; without it the graph is derived over
the existing one (which a derivation deletes first). `--scale N`: the parts run on `scaled_copy`,
a stand-in N times the size of `--kb`, built beside it.

Parts: `text-edges` (`links.text_edges.derive_text_edges`), `structure`
(`pipeline.graph.derive_structure`), `hubs` (`pipeline.graph_rows.hub_members`: read, nothing
written) and `graph` (`pipeline.graph.derive_graph` in full, what a first sync runs).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_noop import snapshot

REPO = Path(__file__).resolve().parent.parent

PARTS = ("text-edges", "structure", "hubs", "graph")

CHILD = r"""
import hashlib, json, sys, time
from pathlib import Path

def memory():
    values = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            values[key] = round(int(rest.split()[0]) / 1024)
    return values

def digest(conn, queries):
    found = hashlib.sha256()
    for query in queries:
        for row in conn.execute(query):
            found.update(repr(row).encode())
    return found.hexdigest()[:16]

part, root = sys.argv[1], Path(sys.argv[2])
from pinakes.index import schema
from pinakes.links.text_edges import derive_text_edges
from pinakes.manifest import load_manifest
from pinakes.pipeline import graph_rows
from pinakes.pipeline.graph import derive_graph, derive_structure

conn = schema.open_writer(root / ".pinakes" / "index.db")
kb_id = load_manifest(root / "pinakes.toml").kb.id
conn.execute("SELECT COUNT(*) FROM documents").fetchone()
if sys.argv[3] == "first":  # the graph's tables as a first sync finds them: empty (cleared before the peak is reset)
    with schema.transaction(conn):
        conn.execute("DELETE FROM edges")
        conn.execute("DELETE FROM nodes")
        conn.execute("DELETE FROM links WHERE origin = 'text'")
        conn.execute("UPDATE text_links SET status = 'pending', dst_kb_id = NULL, dst_doc_id = NULL, candidates = 0")
    conn.execute("PRAGMA shrink_memory")
    import ctypes
    ctypes.CDLL("libc.so.6").malloc_trim(0)
try:
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM from here
    reset = True
except OSError:
    reset = False
before = memory()
cpu = time.process_time()
if part == "text-edges":
    result = derive_text_edges(conn, kb_id)
elif part == "structure":
    result = derive_structure(conn)
elif part == "hubs":
    members = graph_rows.hub_members(conn)
    hubs = members.hubs if hasattr(members, "hubs") else members  # before: ids in lists; now: ranks in arrays
    result = {"hubs": len(hubs), "members": sum(len(found) for found in hubs.values())}
elif part == "graph":
    result = derive_graph(conn, kb_id, None)
cpu = time.process_time() - cpu
after = memory()
TEXT = ["SELECT id, status, dst_kb_id, dst_doc_id, candidates FROM text_links ORDER BY id",
        "SELECT * FROM links WHERE origin = 'text' ORDER BY src_doc_id, dst_kb_id, dst_doc_id"]
STRUCTURE = ["SELECT id, kind, key FROM nodes ORDER BY id", "SELECT rowid, src, dst, kind FROM edges ORDER BY rowid"]
rows = {"text-edges": TEXT, "structure": STRUCTURE, "graph": TEXT + STRUCTURE}.get(part, [])
print(json.dumps({"before_rss": before["VmRSS"], "peak": after["VmHWM"], "delta": after["VmHWM"] - before["VmRSS"],
                  "peak_reset": reset, "cpu_s": round(cpu, 2), "result": result if isinstance(result, (dict, int)) else None,
                  "rows": digest(conn, rows) if rows else None}))
"""


def run_part(code: Path, part: str, kb: Path, first: bool) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(code)}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, part, str(kb), "first" if first else "again"],
                          capture_output=True, text=True, env=env, check=False)
    if done.returncode:
        return {"error": done.stderr[-2000:]}
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["wall_s"] = round(time.perf_counter() - started, 1)
    return result


def scaled_copy(kb: Path, times: int, into: Path) -> Path:
    """A KB at `into` (made afresh) whose index holds `kb`'s active documents `times` over, each copy
    under a folder of its own (`c<k>/<path>`, so each folder is `times` folders) with ids of its own
    (the ULID's first character made `k + 1`), with what the graph stage reads: the documents' paths
    and metadata, their chunks' ordinals and heading paths (no text: the stage never reads it; the
    full-text triggers are dropped), and their text links, pending. A stand-in for a tree `times` as
    large, built in seconds where a sync takes hours; its graph is derived by the first run."""
    sys.path.insert(0, str(REPO / "src"))
    from pinakes.index import schema

    if into.exists():
        shutil.rmtree(into)
    (into / ".pinakes").mkdir(parents=True)
    shutil.copy(kb / "pinakes.toml", into / "pinakes.toml")
    conn = schema.create_index(into / ".pinakes" / "index.db")
    for trigger in ("chunks_fts_insert", "chunks_fts_delete", "chunks_fts_update"):
        conn.execute(f"DROP TRIGGER {trigger}")
    conn.execute("ATTACH ? AS source", (f"{(kb / '.pinakes' / 'index.db').resolve().as_uri()}?mode=ro",))
    with schema.transaction(conn):
        for copy in range(times):
            new_id = f"'{copy + 1}' || substr(d.id, 2)"
            conn.execute(f"INSERT INTO documents (id, path, content_hash, mtime, source_type, metadata, indexed_at) "
                         f"SELECT {new_id}, 'c{copy}/' || d.path, d.content_hash, d.mtime, d.source_type, d.metadata, "
                         f"d.indexed_at FROM source.documents d WHERE d.state = 'active'")
            conn.execute(f"INSERT INTO chunks (doc_id, ordinal, text, char_start, char_end, token_count, heading_path) "
                         f"SELECT {new_id}, c.ordinal, '', 0, 0, 0, c.heading_path FROM source.chunks c "
                         f"JOIN source.documents d ON d.id = c.doc_id AND d.state = 'active'")
            conn.execute(f"INSERT INTO text_links (doc_id, syntax, target, subpath, char_start, char_end, line) "
                         f"SELECT {new_id}, t.syntax, t.target, t.subpath, t.char_start, t.char_end, t.line "
                         f"FROM source.text_links t JOIN source.documents d ON d.id = t.doc_id AND d.state = 'active'")
    conn.execute("DETACH source")
    conn.close()
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kb", type=Path, required=True, help="a synced KB this may write to (a copy)")
    parser.add_argument("--base", default="main", help="the baseline's git revision")
    parser.add_argument("--parts", nargs="*", default=list(PARTS), choices=PARTS)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--first", action="store_true",
                        help="each part on an empty graph, as a first sync runs it (else the graph is derived again)")
    parser.add_argument("--scale", type=int, default=1, metavar="N",
                        help="run on a KB made of --kb's index N times over (`scaled_copy`), built beside --kb")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-graph-parts-"))
    versions = {"base": snapshot(args.base, work / "base"), "this": snapshot(None, work / "this")}
    kb = args.kb
    if args.scale > 1:
        kb = scaled_copy(args.kb, args.scale, args.kb.with_name(f"{args.kb.name}-x{args.scale}"))
    with sqlite3.connect(f"{(kb / '.pinakes' / 'index.db').resolve().as_uri()}?mode=ro", uri=True) as conn:
        size = {table: conn.execute(query).fetchone()[0] for table, query in (
            ("documents", "SELECT COUNT(*) FROM documents WHERE state = 'active'"),
            ("chunks", "SELECT COUNT(*) FROM chunks c JOIN documents d ON d.id = c.doc_id AND d.state = 'active'"),
            ("text_links", "SELECT COUNT(*) FROM text_links"))}
    print(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "kb": str(kb), **size,
                      "base": args.base, "first": args.first, "load": os.getloadavg()}), flush=True)
    results: list[dict[str, object]] = []
    for part in args.parts:
        for attempt in range(args.repeat):
            pair: dict[str, dict[str, object]] = {}
            for name in ("base", "this") if attempt % 2 == 0 else ("this", "base"):
                pair[name] = run_part(versions[name], part, kb, args.first)
            line: dict[str, object] = {"part": part, "attempt": attempt, **{name: pair[name] for name in ("base", "this")}}
            base_delta, this_delta = pair["base"].get("delta"), pair["this"].get("delta")
            if isinstance(base_delta, int) and isinstance(this_delta, int):
                line["delta_saved_mb"] = base_delta - this_delta
                line["same_rows"] = pair["base"].get("rows") == pair["this"].get("rows")
                line["same_result"] = pair["base"].get("result") == pair["this"].get("result")
            line["load"] = os.getloadavg()
            print(json.dumps(line), flush=True)
            results.append(line)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
