"""A filtered keyword search, its scope handed to FTS5 as rowids to look up against checked on the
rows MATCH finds (search/bm25.py `_fts5_ranked`, issue #41): the same SQL, paired per query.

    python bench/bench_filtered_keyword.py KB_DIR [--questions FILE.jsonl] [--queries 50]

The scope is what a filter compiles to (lexical/filters.py `document_where`): here every active
document but one, as self-calibration's unanswerable twin asks (a tag or path filter over most of a
KB is the same shape). Both forms return the same rows in the same order (checked).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from pinakes.kb import KBPaths  # noqa: E402
from pinakes.lexical.filters import SearchFilters, document_where  # noqa: E402
from pinakes.lexical.tokenizer import Tokenizer  # noqa: E402
from pinakes.search.bm25 import match_expression  # noqa: E402
from pinakes.search.query import analyze, tokenizer_of  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("kb", type=Path)
    parser.add_argument("--questions", type=Path, default=REPO.parent / "shared" / "corpora" / "cranfield" / "questions.jsonl")
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args()
    # Read-only and schema-agnostic: the SQL measured reads only tables every schema has.
    conn = sqlite3.connect(f"{KBPaths(args.kb).index_db.resolve().as_uri()}?mode=ro", uri=True)
    tokenizer = Tokenizer(tokenizer_of(conn))
    excluded = conn.execute("SELECT id FROM documents WHERE state = 'active' LIMIT 1").fetchone()[0]
    where, params = document_where(SearchFilters(exclude_doc_ids=(excluded,)), "d")
    scope = f"SELECT c.id FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE {where}"
    with open(args.questions, encoding="utf-8") as handle:
        queries = [json.loads(line)["query"] for line in handle if line.strip()][: args.queries]
    times: dict[str, list[float]] = {"rowids handed to FTS5": [], "checked on MATCH's rows": []}
    for number, query in enumerate(queries):
        units = tuple(unit for unit in analyze(query, tokenizer).units if not unit.function_word)
        match = match_expression(units)
        if match is None:
            continue
        answers: list[list[Any]] = []
        arms = list(times)
        if number % 2:
            arms.reverse()
        for arm in arms:
            plus = "+" if arm == "checked on MATCH's rows" else ""
            sql = (f"SELECT chunks_fts.rowid, bm25(chunks_fts) FROM chunks_fts WHERE chunks_fts MATCH ? AND "
                   f"{plus}chunks_fts.rowid IN ({scope}) ORDER BY bm25(chunks_fts), chunks_fts.rowid LIMIT 150")
            started = time.perf_counter()
            answers.append(conn.execute(sql, [match, *params]).fetchall())
            times[arm].append((time.perf_counter() - started) * 1000)
        assert answers[0] == answers[1], query
    chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    print(json.dumps({"kb": str(args.kb), "chunks": chunks, "queries": len(times["checked on MATCH's rows"]),
                      **{f"{arm} p50 ms": round(statistics.median(values), 3) for arm, values in times.items()},
                      **{f"{arm} p90 ms": round(sorted(values)[int(0.9 * (len(values) - 1))], 3)
                         for arm, values in times.items()},
                      "load_average": [round(v, 2) for v in os.getloadavg()]}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
