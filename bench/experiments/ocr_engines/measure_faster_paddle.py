"""The alternative OCR engine measured against rapidocr (issue #43: "measure an alternative if you
find a better one that also ships its weights"): faster-paddle 1.0.4, a Rust reimplementation of the
PP-OCRv6 pipeline whose wheel embeds the tiny and small models (and its own ONNX Runtime).

Same pages, same truth, same scoring as bench/bench_ocr.py (bench/ocr_corpus.py's image-only pages of
the R manuals, token_bag against the text layer). Its lines are laid out through the shipped
ocr_layout.py, so only the engine differs. Pages go one at a time through one engine per process with
`--threads` threads; reported: CPU seconds a page (this process: load-independent enough to compare
with bench_ocr.py's worker CPU a page), wall pages/s, recall, precision, peak memory.

    pip install --target /tmp/fp faster-paddle==1.0.4   # not a dependency of Pinakes
    PYTHONPATH=/tmp/fp:src python bench/experiments/ocr_engines/measure_faster_paddle.py [--size tiny] [--threads 1]
"""

from __future__ import annotations

import argparse
import io
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any, cast

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "bench"))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="tiny", choices=("tiny", "small"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--pages-per-manual", type=int, default=3)
    args = parser.parse_args()

    import faster_paddle  # pyright: ignore[reportMissingImports]  # the experiment's own install, not in the venv
    import ocr_corpus
    import pypdfium2 as pdfium

    from pinakes.extract.floors import load_floors
    from pinakes.extract.ocr_engine import OcrLine, OcrPage
    from pinakes.extract.ocr_layout import layout_pages
    from pinakes.extract.quality import Ratio, token_bag

    engine = cast(Any, faster_paddle).OcrEngine(model_size=args.size, threads=args.threads)
    corpus = ocr_corpus.build(pages_per_manual=args.pages_per_manual)
    recall, precision = Ratio(0, 0), Ratio(0, 0)
    worst = (2.0, "")
    pages = 0
    cpu = wall = 0.0
    for manual in corpus:
        document = pdfium.PdfDocument(str(manual.scan_pdf))
        read: list[OcrPage] = []
        for index in range(len(document)):
            bitmap = document[index].render(scale=ocr_corpus.DPI / 72, grayscale=True)
            image = cast(Any, bitmap).to_pil()  # real pypdfium2 API that typings/pypdfium2 (src's parts) leaves out
            buffer = io.BytesIO()
            image.save(buffer, "PNG")
            started, started_cpu = time.perf_counter(), time.process_time()
            result = engine.ocr(buffer.getvalue())
            wall += time.perf_counter() - started
            cpu += time.process_time() - started_cpu
            lines = tuple(OcrLine(b["text"], b["topLeftCoord"][0], b["topLeftCoord"][1], b["bottomRightCoord"][0],
                                  b["bottomRightCoord"][1], b["confidence"]) for b in result["bounds"].values())
            read.append(OcrPage(image.width, image.height, lines))
        document.close()
        texts, _ = layout_pages(read, head_threshold=load_floors().running_head_threshold)
        for number, (text, truth) in enumerate(zip(texts, manual.truth, strict=True)):
            page_recall, page_precision = token_bag(truth, text)
            recall, precision = recall + page_recall, precision + page_precision
            worst = min(worst, (min(page_recall.value or 0, page_precision.value or 0),
                                f"{manual.name} p{manual.pages[number] + 1}"))
            pages += 1
    print(json.dumps({"engine": f"faster-paddle 1.0.4 {args.size}", "threads": args.threads, "pages": pages,
                      "cpu_seconds_per_page": round(cpu / pages, 2), "wall_pages_per_second": round(pages / wall, 2),
                      "recall": round(recall.value or 0, 4), "precision": round(precision.value or 0, 4),
                      "worst_page": worst, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024},
                     indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
