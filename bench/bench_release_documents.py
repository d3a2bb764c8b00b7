"""What a sync's per-document state holds and what letting it go hands back (issue #45: the walk's
file states and the plan's work, released after the graph by `PipelineRun.release_documents`, with
freed heap returned by `pipeline.run.collect_and_trim`), on a tree of N files without a sync:
the walk and the plan a first sync would make (`inspection_run`, read-only), VmRSS before, held,
after the release. A fresh process; the KB is not written.

    nice -n 10 python bench/bench_release_documents.py --kb /tmp/scale1m/pages60k
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_end_stages import memory  # VmRSS, VmHWM, RssAnon, RssFile in MB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kb", type=Path, required=True)
    args = parser.parse_args()
    import pinakes.pipeline.pair  # noqa: F401  # pyright: ignore[reportUnusedImport]  # its imports: paid up front
    from pinakes.pipeline.run import collect_and_trim
    from pinakes.sync import loader

    imports = memory()
    run = loader.inspection_run(args.kb)
    plan = run.decided()
    held = memory()
    documents = len(plan.work) if plan is not None else 0
    had_work = run.has_work()
    run.release_documents()
    released = memory()
    collect_and_trim()
    trimmed = memory()
    print(json.dumps({"kb": str(args.kb), "documents": documents, "imports": imports, "walk_and_plan": held,
                      "released": released, "trimmed": trimmed, "has_work_kept": run.has_work() == had_work,
                      "load": os.getloadavg(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}))


if __name__ == "__main__":
    main()
