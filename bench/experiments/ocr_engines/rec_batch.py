"""Lines recognised one at a time against several at a time (the `rec_batch` constant of the
`rapidocr` registry entry; docs/QUALITY.md "OCR").

A recognition batch is padded to its widest line, so the batch size changes the CPU and memory an
OCR worker needs, never (by design) the text. Each setting runs in a fresh process (so its peak
memory is its own) through the shipped `ocr_engine.read_pdf_page` (render at 150 dpi, pinned
models, one thread), with only `rec_batch` changed, on five pages of R-intro that are read as
image-only (rendered; the text layer is the truth). A first page is read before timing (the models'
load and warm-up are not counted). Give the settings twice in alternating order for an honest A/B:

    python bench/experiments/ocr_engines/rec_batch.py 6 1 1 6
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
MANUAL = REPO.parent / "shared" / "corpora" / "r-manuals-pdf" / "docs" / "R-intro.pdf"
PAGES = (2, 10, 40, 60, 90)  # 0-based: R-intro pages 3 (the table of contents), 11, 41, 61, 91


def measure(batch: int) -> dict[str, object]:
    import pypdfium2 as pdfium

    from pinakes.extract import ocr_engine
    from pinakes.extract.quality import Ratio, token_bag
    from pinakes.extract.registry import EXTRACTORS

    constants = dict(EXTRACTORS["rapidocr"].constants)
    constants["rec_batch"] = batch
    object.__setattr__(EXTRACTORS["rapidocr"], "constants", constants)
    ocr_engine.read_pdf_page(MANUAL, 1)  # load and warm up
    document = pdfium.PdfDocument(str(MANUAL))
    recall = precision = Ratio(0, 0)
    cpu = time.process_time()
    for index in PAGES:
        page = ocr_engine.read_pdf_page(MANUAL, index)
        text_page = document[index].get_textpage()
        page_recall, page_precision = token_bag(text_page.get_text_range(), "\n".join(line.text for line in page.lines))
        recall, precision = recall + page_recall, precision + page_precision
    return {"rec_batch": batch, "cpu_seconds_a_page": round((time.process_time() - cpu) / len(PAGES), 2),
            "peak_resident_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
            "recall": round(recall.value or 0.0, 4), "precision": round(precision.value or 0.0, 4)}


def main() -> int:
    if sys.argv[1:2] == ["--one"]:
        print(json.dumps(measure(int(sys.argv[2]))))
        return 0
    for batch in sys.argv[1:] or ["6", "1", "1", "6"]:
        load = Path("/proc/loadavg").read_text().split()[0]
        result = subprocess.run([sys.executable, __file__, "--one", batch], check=True, capture_output=True, text=True)
        print(json.dumps({**json.loads(result.stdout), "load_average_before": float(load)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
