"""Self-calibration's question-making on a large synced KB: its peak memory and time, the
near-duplicate rule by one batched pass over the stored vectors (calibration/near_duplicates.py,
shipped) against the whole float32 matrix it used before (`--matrix`, the reference kept here),
each in a fresh child process (issue #45: "the first sync of a 700k-page tree ... stays under 1 GB
RSS throughout"; bench_end_stages.py's `calibrate` runs the whole self-calibration).

    nice -n 10 python bench/bench_calibration_questions.py --kb /tmp/scale1m/kb918 [--matrix] [--json out.json]

The child reports VmRSS before (imports, an open index) and VmHWM after, from /proc, the questions
made, and a digest of every question's left-out documents (the same digest from both paths = the
same near-duplicate sets). Read only: the KB is not written.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_end_stages import memory  # noqa: E402  (VmRSS, VmHWM, RssAnon, RssFile in MB)


def child(root: Path, matrix: bool) -> dict[str, object]:
    import numpy as np

    from pinakes.calibration.near_duplicates import stored_near_chunks
    from pinakes.calibration.questions import make_questions
    from pinakes.calibration.self_calibration import DEFAULT_RULES
    from pinakes.index import schema
    from pinakes.kb import KBPaths
    from pinakes.search.shared_ranks import NEAR_DUPLICATE_COSINE
    from pinakes.search.vectors import load_matrix

    paths = KBPaths(root)
    conn = schema.open_reader(paths.index_db)
    dim = schema.read_meta(conn).get("embedding_dim")
    width = int(dim) if dim and dim.isdigit() else None
    before = memory()
    started = time.perf_counter()

    def by_matrix(sources: Sequence[int]) -> dict[int, set[int]]:  # the rule as it was: one matrix, a product a source
        loaded = load_matrix(conn, width, paths.index_db)
        ids, vectors = loaded.chunk_ids, loaded.vectors
        found: dict[int, set[int]] = {}
        for chunk_id in sources:
            row = int(np.searchsorted(ids, chunk_id))
            if row < len(ids) and int(ids[row]) == chunk_id:
                found[chunk_id] = {int(ids[i]) for i in np.nonzero(vectors @ vectors[row] >= NEAR_DUPLICATE_COSINE)[0]}
        return found

    def by_pass(sources: Sequence[int]) -> dict[int, set[int]]:
        return dict(stored_near_chunks(conn, sources, width, paths.index_db))

    questions = make_questions(conn, DEFAULT_RULES, None, by_matrix if matrix else by_pass)
    seconds = time.perf_counter() - started
    conn.close()
    digest = hashlib.sha256(json.dumps([[q.id, q.query, list(q.left_out)] for q in questions]).encode()).hexdigest()
    return {"path": "matrix" if matrix else "batched pass", "before": before, "after": memory(),
            "questions": len(questions), "left_out_total": sum(len(q.left_out) for q in questions),
            "digest": digest[:16], "seconds": round(seconds, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kb", type=Path, required=True)
    parser.add_argument("--matrix", action="store_true", help="the whole-matrix reference instead")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.kb, args.matrix)))
        return
    load = os.getloadavg()
    done = subprocess.run([sys.executable, __file__, "--kb", str(args.kb), "--child"] + (["--matrix"] if args.matrix else []),
                          capture_output=True, text=True, check=False)
    if done.returncode:
        sys.exit(done.stderr[-3000:])
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result.update(load_before=load, load_after=os.getloadavg(), date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
    print(json.dumps(result), flush=True)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
