"""Free OCR on scanned pages of a typeset manual, against the text-layer extraction of the same pages
in the same run (#43's bar: token recall and precision each >= 0.95, every page indexed, at least
one page a second on a two-core machine using both cores).

    python bench/bench_ocr.py [--pages-per-manual 3] [--workers N] [--json FILE]

The corpus is built first (bench/ocr_corpus.py: pages of the R manuals rendered at 150 dpi into
image-only PDFs, their text layer kept as truth). Two arms over the same pages:

- `text layer` (the baseline): `pdf.extract` on the pages as they are, the shipped path (parse in an
  isolated child, layout.py);
- `ocr`: the shipped path for a scan: `pdf.extract` on the image-only pages (every page reported
  without text), then `ocr_pdf.read_scanned_pages`: each page rendered and read in the OCR workers,
  `--workers` of them (default: one per core, at most two), the lines laid out by layout.py.

Scored per page with `quality.token_bag` (multisets of lowercase `[a-z0-9]+` tokens) against the
text layer (NFKC), pooled and worst page. The OCR workers load their models once, before the clock
starts (the load is reported apart: a sync pays it once per run). Reports pages/s of each arm, the
OCR workers' CPU seconds a page, the parent's and each worker's peak memory, and the load average
before and after: on a shared machine the numbers depend on it, so it is printed beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import cast

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))


def _proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _proc_peak(pid: int, field: str = "VmHWM") -> int:
    """A worker's peak resident memory (VmHWM) or address space (VmPeak), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    return 0


def _workers() -> dict[int, int]:
    from pinakes.extract import isolation

    workers = isolation._workers  # pyright: ignore[reportPrivateUsage]  # the pool's live workers: no public view
    return {slot: worker.process.pid for slot, worker in workers.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--pages-per-manual", type=int, default=3)
    parser.add_argument("--workers", type=int, default=None, help="OCR worker processes (default: one per core, at most 2)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()

    import ocr_corpus

    from pinakes.extract import ocr, ocr_models, pdf
    from pinakes.extract.ocr_engine import read_pdf_page
    from pinakes.extract.ocr_pdf import read_scanned_pages
    from pinakes.extract.quality import Ratio, token_bag
    from pinakes.extract.registry import EXTRACTORS

    if not ocr_corpus.MANUALS.is_dir():
        print(f"bench_ocr skipped: the R manuals are not at {ocr_corpus.MANUALS}")
        return 0
    if not ocr_models.ocr_installed():
        print("bench_ocr skipped: OCR needs the [ocr] extra (rapidocr)")
        return 0
    if args.workers is not None:
        ocr.ocr_workers = lambda: args.workers  # the bench's knob
    corpus = ocr_corpus.build(pages_per_manual=args.pages_per_manual)
    load_before = os.getloadavg()
    pages = sum(len(manual.pages) for manual in corpus)

    started = time.perf_counter()
    for manual in corpus:
        pdf.extract(manual.text_pdf)
    text_seconds = time.perf_counter() - started

    workers = ocr.ocr_workers()
    load_started = time.perf_counter()
    warm = corpus[0].scan_pdf
    ocr.read_pages(warm, [(read_pdf_page, (warm, 0))] * workers, what="OCR warm-up")  # each worker loads its models
    load_seconds = time.perf_counter() - load_started
    pids = _workers()
    cpu_before = {slot: _proc_cpu(pid) for slot, pid in pids.items()}

    fingerprint = EXTRACTORS["pypdfium2"].ocr_fingerprint() or ""
    recall, precision = Ratio(0, 0), Ratio(0, 0)
    per_page: list[dict[str, object]] = []
    unread = 0
    started = time.perf_counter()
    for manual in corpus:
        scanned = pdf.extract(manual.scan_pdf)
        assert scanned.pages_without_text == tuple(range(1, len(manual.pages) + 1)), scanned.pages_without_text
        merged = read_scanned_pages(scanned, manual.scan_pdf, fingerprint)
        unread += len(merged.pages_without_text)
        assert merged.pages is not None
        for number, (span, truth) in enumerate(zip(merged.pages, manual.truth, strict=True)):
            page_recall, page_precision = token_bag(truth, merged.text[span[0]:span[1]])
            recall, precision = recall + page_recall, precision + page_precision
            per_page.append({"manual": manual.name, "page": manual.pages[number] + 1,
                             "recall": round(page_recall.value or 0, 4), "precision": round(page_precision.value or 0, 4)})
    ocr_seconds = time.perf_counter() - started
    pids = _workers()
    worker_cpu = sum(_proc_cpu(pid) - cpu_before.get(slot, 0.0) for slot, pid in pids.items())
    worst = min(per_page, key=lambda row: min(float(cast(float, row["recall"])), float(cast(float, row["precision"]))))
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M"), "cpus": os.cpu_count(), "pages": pages, "workers": workers,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "text_layer": {"seconds": round(text_seconds, 2), "pages_per_second": round(pages / text_seconds, 1)},
        "ocr": {"seconds": round(ocr_seconds, 2), "pages_per_second": round(pages / ocr_seconds, 3),
                "seconds_per_page": round(ocr_seconds / pages, 2),
                "worker_cpu_seconds_per_page": round(worker_cpu / pages, 2),
                "model_load_seconds": round(load_seconds, 2),
                "recall": round(recall.value or 0, 4), "precision": round(precision.value or 0, 4),
                "pages_without_text": unread, "worst_page": worst},
        "memory_mib": {"parent_peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
                       "worker_peaks": [_proc_peak(pid) // (1 << 20) for pid in pids.values()],
                       "worker_address_space_peaks": [_proc_peak(pid, "VmPeak") // (1 << 20) for pid in pids.values()]},
        "per_page": per_page,
    }
    summary = {key: value for key, value in result.items() if key != "per_page"}
    print(json.dumps(summary, indent=2))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
