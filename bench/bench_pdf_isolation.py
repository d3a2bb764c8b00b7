"""What isolating the PDF parser costs per document (issue #13 item 5). One command:

    python bench/bench_pdf_isolation.py [--repeats 5] [--docs DIR]

Measured in the same run, interleaved document by document so machine noise hits all three alike:

- in process: `pinakes.extract.pdf.extract_in_process` (the parse with no child: the baseline);
- isolated, reused worker: `pinakes.extract.pdf.extract` with the worker already running (what a
  sync does from its second PDF on);
- isolated, fresh worker: the worker stopped before every call, so each document pays a Python
  start-up and the imports (the design not chosen: a process per document).

Documents: the R manuals (../shared/corpora/r-manuals-pdf/docs, or --docs) when present, plus a
generated one-page PDF, where the fixed cost dominates. Per document and method: the median wall
and the fastest of --repeats calls (ten times as many for the one-page PDF). The machine this runs
on is shared, so the fastest call is the better estimate of what a method costs and the median of
what it costs under load; the overhead is the difference from in process, the ratio the quotient.
Results: bench/results/pdf_isolation.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # tests.test_extract_text.make_pdf

from pinakes.extract import isolation  # noqa: E402
from pinakes.extract.pdf import extract, extract_in_process  # noqa: E402
from pinakes.extract.types import ExtractedText  # noqa: E402

R_MANUALS = REPO.parent / "shared" / "corpora" / "r-manuals-pdf" / "docs"
RESULTS = REPO / "bench" / "results" / "pdf_isolation.json"


def timed(function: Callable[[Path, str], ExtractedText], path: Path) -> tuple[float, int]:
    started = time.perf_counter()
    extracted = function(path, "pdf")
    return time.perf_counter() - started, len(extracted.pages or ())


def fresh_worker_extract(path: Path, source_type: str) -> ExtractedText:
    isolation.shutdown()
    return extract(path, source_type)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--docs", type=Path, default=R_MANUALS)
    options = parser.parse_args()

    from tests.test_extract_text import make_pdf

    scratch = Path(tempfile.mkdtemp(prefix="bench-pdf-isolation-"))
    one_page = scratch / "one-page.pdf"
    one_page.write_bytes(make_pdf([["A one-page document about harbour dredging."]]))
    documents = [one_page]
    if options.docs.is_dir():
        documents += sorted(options.docs.glob("*.pdf"))
    else:
        print(f"(no R manuals at {options.docs}: only the generated one-page PDF is measured)")

    methods = {"in_process": extract_in_process, "isolated_reused": extract,
               "isolated_fresh": fresh_worker_extract}
    started = time.perf_counter()
    extract(one_page, "pdf")  # the first worker start is a one-off per sync: measured apart
    first_start = time.perf_counter() - started

    round_trips: list[float] = []
    for _ in range(500):  # the fixed cost alone: a call that does nothing (os.getpid) and returns an int
        begun = time.perf_counter()
        isolation.run_isolated(os.getpid, limits=isolation.Limits.for_input(0), what="a no-op")
        round_trips.append(time.perf_counter() - begun)
    round_trip = statistics.median(round_trips)

    rows: list[dict[str, Any]] = []
    for path in documents:
        samples: dict[str, list[float]] = {name: [] for name in methods}
        pages = 0
        for _ in range(options.repeats * (10 if path == one_page else 1)):
            for name, function in methods.items():
                if name == "isolated_reused":
                    extract(one_page, "pdf")  # make sure the worker is up, outside the timing
                seconds, pages = timed(function, path)
                samples[name].append(seconds)
        rows.append({"document": path.name, "bytes": path.stat().st_size, "pages": pages,
                     **{f"{name}_ms": round(min(values) * 1000, 2) for name, values in samples.items()},
                     **{f"{name}_median_ms": round(statistics.median(values) * 1000, 2)
                        for name, values in samples.items()}})

    # One worker through every document, then its high-water mark (VmHWM: ru_maxrss would also
    # count this process's own RSS from before the worker's exec).
    isolation.shutdown()
    worker = isolation.run_isolated(os.getpid, limits=isolation.Limits.for_input(0), what="a no-op")
    for path in documents:
        extract(path, "pdf")
    child_peak = next(int(line.split()[1]) * 1024 for line in Path(f"/proc/{worker}/status").read_text().splitlines()
                      if line.startswith("VmHWM:"))
    isolation.shutdown()
    totals = {name: sum(row[f"{name}_ms"] for row in rows) for name in methods}
    pages_total = sum(row["pages"] for row in rows)

    print("fastest of the repeats (the medians are in the JSON):")
    print(f"{'document':<16} {'pages':>5} {'in process':>11} {'reused':>9} {'overhead':>9} "
          f"{'ratio':>6} {'fresh':>9} {'overhead':>9} {'ratio':>6}")
    for row in rows:
        base = row["in_process_ms"]
        reused, fresh = row["isolated_reused_ms"], row["isolated_fresh_ms"]
        print(f"{row['document']:<16} {row['pages']:>5} {base:>9.1f}ms {reused:>7.1f}ms {reused - base:>+7.1f}ms "
              f"{reused / base:>6.2f} {fresh:>7.1f}ms {fresh - base:>+7.1f}ms {fresh / base:>6.2f}")
    base = totals["in_process"]
    print(f"{'all':<16} {pages_total:>5} {base:>9.1f}ms {totals['isolated_reused']:>7.1f}ms "
          f"{totals['isolated_reused'] - base:>+7.1f}ms {totals['isolated_reused'] / base:>6.2f} "
          f"{totals['isolated_fresh']:>7.1f}ms {totals['isolated_fresh'] - base:>+7.1f}ms "
          f"{totals['isolated_fresh'] / base:>6.2f}")
    print(f"round trip of a no-op call: {round_trip * 1e6:.0f} us (median of 500); "
          f"first worker start (one per sync, with the first document): {first_start * 1000:.0f} ms; "
          f"pages/s in process {pages_total / base * 1000:.0f}, isolated {pages_total / totals['isolated_reused'] * 1000:.0f}; "
          f"peak RSS of a worker {child_peak / 2**20:.0f} MiB")

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "measured_at": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "machine": platform.platform(),
        "cpus": os.cpu_count(), "python": platform.python_version(), "repeats": options.repeats,
        "first_worker_start_ms": round(first_start * 1000, 1), "noop_round_trip_us": round(round_trip * 1e6, 1), "worker_peak_rss_bytes": child_peak,
        "rows": rows, "totals_ms": totals, "pages": pages_total,
    }, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {RESULTS.relative_to(REPO)}")


if __name__ == "__main__":
    main()
