"""The OCR engine itself: what the OCR worker process runs (never the sync's own process).

The functions here are sent to an extraction worker by `extract/ocr.py` (`isolation.run_isolated`),
so a crash, a hang or a memory blow-up in the image decoder or the ONNX models fails one page's
call, not the sync. Each decodes its input there too — a PDF page rendered by pypdfium2, an image
frame decoded by Pillow — since decoders of untrusted bytes are what isolation is for. Module level
imports nothing heavy: the worker imports this module by name before the first call.

The engine is `rapidocr` with the pinned models of `ocr_models.py` passed by path (it never looks
for, nor downloads, a model of its own), loaded once per worker and kept. Its settings are the
`rapidocr` registry entry's constants, so every one of them is in the OCR fingerprint:

- lines found by the small detector are read by the tiny recogniser, and a line it reads with less
  than `recheck_below` confidence is read again by the small recogniser, whose answer stands: on
  typeset pages 3% of lines are read twice, and a page costs about a third of the CPU the small
  recogniser alone needs at the same token recall (docs/QUALITY.md); a Japanese line (kana are not
  in the tiny dictionary, which reads it as low-confidence Han) is read by the small one, as before;

- no direction classifier: on the typeset pages of the development corpus it turned correct lines
  upside down (token recall 0.977 with it, 0.997 without, and 10% less CPU); an upside-down scan is
  read badly (a stated limit, docs/GUIDE.md);
- detection on the page scaled so its longer side is at most `det_limit_side` pixels (1280: 10%
  less CPU than the full 150-dpi page at about the same recall, docs/QUALITY.md);
- lines recognised one at a time, not six: a batch pads every line to its widest, which cost 21-25%
  more CPU and about 400 MiB more memory a worker on typeset pages (docs/QUALITY.md);
- one ONNX Runtime thread per worker: two workers read two pages at once (extract/ocr.py), which
  measured faster on a shared two-core machine than one worker with two threads, whose thread pool
  waits on the slowest core.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast

from pinakes.errors import SourceError
from pinakes.extract.registry import EXTRACTORS

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray
    from PIL.Image import Image

# The most pixels a page or frame may decode to (a 600-dpi A3 scan is 70 M; a 48-megapixel photo
# 48 M): above it the file is refused unread, as a decompression bomb, before anything is decoded.
MAX_PIXELS = 100_000_000
# rapidocr scales any page down to 2000 pixels a side before it reads it, so a PDF page (a poster,
# a map) is never rendered larger than this.
MAX_RENDER_SIDE = 4000
BOMB_REMEDY = ("if the image is genuine, scale it down (to under 100 megapixels) and run `pnk sync`; "
               "otherwise exclude it in [sources]")


@dataclass(frozen=True, slots=True)
class OcrLine:
    """One line the detector found and the recogniser read: its box in the page image's pixels
    (y grows downwards), and the recogniser's confidence."""

    text: str
    left: float
    top: float
    right: float
    bottom: float
    score: float


@dataclass(frozen=True, slots=True)
class OcrPage:
    width: int
    height: int
    lines: tuple[OcrLine, ...]
    seconds: float = 0.0  # what reading it took in the worker, for progress and estimates


@dataclass(frozen=True, slots=True)
class ImageInfo:
    frames: int  # pages of a multi-page TIFF; 1 for every other image


class _Output(Protocol):
    """What rapidocr returns for a page (RapidOCROutput; None everywhere when it found no text)."""

    boxes: NDArray[np.float32] | None  # (lines, 4 corners, x y)
    txts: tuple[str, ...] | None
    scores: tuple[float, ...] | None


class _Engine(Protocol):
    def __call__(self, image: NDArray[np.uint8]) -> _Output: ...


class _Reread(Protocol):
    """What rapidocr returns for one line read by recognition alone (TextRecOutput)."""

    txts: tuple[str, ...] | None
    scores: tuple[float, ...] | None


class _Recogniser(Protocol):
    def __call__(self, image: NDArray[np.uint8], use_det: bool, use_cls: bool, use_rec: bool) -> _Reread: ...


@dataclass(frozen=True, slots=True)
class _Loaded:
    fast: _Engine  # small detection, tiny recognition, every line kept whatever its score
    careful: _Recogniser  # small recognition, for the lines the tiny one doubts
    recheck_below: float
    text_score: float


_engine: _Loaded | None = None  # the loaded engines, kept for the worker's life


def read_pdf_page(path: Path, index: int) -> OcrPage:
    """Render page `index` (0-based) of the PDF at the OCR's render dpi and read it."""
    import time

    import numpy as np
    import pypdfium2 as pdfium

    started = time.monotonic()
    dpi = int(EXTRACTORS["rapidocr"].constants["render_dpi"])
    document = pdfium.PdfDocument(str(path))
    try:
        page = document[index]
        try:
            width, height = page.get_size()
            scale = dpi / 72
            longest = max(width, height) * scale
            if longest > MAX_RENDER_SIDE:  # a poster-sized page: read at the resolution detection uses
                scale *= MAX_RENDER_SIDE / longest
            bitmap = page.render(scale=scale, grayscale=True)
            try:
                pixels = bitmap.to_numpy()  # a view of the bitmap's buffer: copied before it is closed
                gray = (pixels if pixels.ndim == 2 else pixels[..., 0]).copy()
            finally:
                bitmap.close()
        finally:
            page.close()
    finally:
        document.close()
    return _read(np.stack([gray] * 3, axis=-1), started)


def probe_image(path: Path) -> ImageInfo:
    """How many frames the image holds, refusing what Pillow cannot read and decompression bombs
    (from the header alone, before any pixel is decoded)."""
    image = _open(path)
    try:
        frames = int(getattr(image, "n_frames", 1) or 1)
        for frame in range(frames):
            _seek(image, path, frame)
    finally:
        image.close()
    return ImageInfo(frames)


def read_image_frame(path: Path, frame: int) -> OcrPage:
    """Decode frame `frame` (0-based) of the image, turned upright as its EXIF orientation says, and
    read it."""
    import time

    import numpy as np
    from PIL import ImageOps

    started = time.monotonic()
    image = _open(path)
    try:
        _seek(image, path, frame)
        try:
            upright = ImageOps.exif_transpose(image)
            pixels: NDArray[np.uint8] = np.asarray(upright.convert("RGB"))
        except (OSError, ValueError, SyntaxError) as exc:  # a truncated or corrupt frame
            raise SourceError(f"frame {frame + 1} of the image cannot be decoded ({exc}); not indexed",
                              remedy="export the image again and run `pnk sync`, or exclude it in [sources]",
                              path=path) from exc
    finally:
        image.close()
    return _read(pixels, started)


def _open(path: Path) -> Image:
    from PIL import Image as PILImage
    from PIL import UnidentifiedImageError

    PILImage.MAX_IMAGE_PIXELS = MAX_PIXELS  # Pillow's own check then raises, never only warns
    try:
        image = PILImage.open(path)
    except PILImage.DecompressionBombError as exc:
        raise SourceError(f"the image is over the {MAX_PIXELS:,}-pixel limit ({exc}); not indexed as a "
                          "likely decompression bomb", remedy=BOMB_REMEDY, path=path) from exc
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise SourceError(f"the image cannot be read ({exc}); not indexed",
                          remedy="export it again as PNG, JPEG, TIFF or WebP and run `pnk sync`, "
                                 "or exclude it in [sources]", path=path) from exc
    _check_pixels(image.size, path)
    return image


def _seek(image: Image, path: Path, frame: int) -> None:
    from PIL import Image as PILImage

    try:
        image.seek(frame)
    except (EOFError, OSError, ValueError, SyntaxError, PILImage.DecompressionBombError) as exc:
        raise SourceError(f"frame {frame + 1} of the image cannot be read ({exc}); not indexed",
                          remedy="export the image again and run `pnk sync`, or exclude it in [sources]",
                          path=path) from exc
    _check_pixels(image.size, path, frame)


def _check_pixels(size: tuple[int, int], path: Path, frame: int = 0) -> None:
    width, height = size
    if width * height > MAX_PIXELS:
        where = f"frame {frame + 1} of the image" if frame else "the image"
        raise SourceError(f"{where} is {width:,} x {height:,} = {width * height:,} pixels, over the "
                          f"{MAX_PIXELS:,}-pixel limit; not indexed as a likely decompression bomb",
                          remedy=BOMB_REMEDY, path=path)


def _read(pixels: NDArray[np.uint8], started: float) -> OcrPage:
    """Read an RGB page (height x width x 3) with the engine: its lines, boxes as axis-aligned bounds."""
    import time

    height, width = int(pixels.shape[0]), int(pixels.shape[1])
    engines = _load()
    output = engines.fast(pixels)
    lines: list[OcrLine] = []
    if output.boxes is not None and output.txts is not None and output.scores is not None:
        for box, text, score in zip(output.boxes.tolist(), output.txts, output.scores, strict=True):
            if score < engines.recheck_below:
                text, score = _read_again(engines.careful, pixels, box)
            xs = [float(point[0]) for point in box]
            ys = [float(point[1]) for point in box]
            if score >= engines.text_score and text.strip():
                lines.append(OcrLine(text, min(xs), min(ys), max(xs), max(ys), float(score)))
    return OcrPage(width, height, tuple(lines), time.monotonic() - started)


def _read_again(careful: _Recogniser, pixels: NDArray[np.uint8], box: list[list[float]]) -> tuple[str, float]:
    """The line inside `box` (its four corners) read by the small recogniser: (text, score), or
    ("", 0.0) when it reads nothing."""
    import numpy as np
    from rapidocr.utils.process_img import get_rotate_crop_image

    crop = cast("NDArray[np.uint8]", get_rotate_crop_image(pixels, np.array(box, dtype=np.float32)))
    again = careful(crop, use_det=False, use_cls=False, use_rec=True)
    if not again.txts or not again.scores:
        return "", 0.0
    return again.txts[0], float(again.scores[0])


def _load() -> _Loaded:
    """The engines, loaded on first use in this worker from the pinned, verified model files."""
    global _engine
    if _engine is None:
        import cv2
        from rapidocr import RapidOCR

        from pinakes.extract.ocr_models import verified_model_paths

        cv2.setNumThreads(1)  # one core per worker; the parent runs two workers (extract/ocr.py)
        constants = EXTRACTORS["rapidocr"].constants
        models = verified_model_paths()
        shared: dict[str, object] = {
            "Global.log_level": "error",
            "Global.use_cls": False,
            "Global.model_root_dir": str(models["det"].parent),
            "Det.model_path": str(models["det"]),
            "Det.limit_type": "max",
            "Det.limit_side_len": int(constants["det_limit_side"]),
            "Rec.rec_batch_num": int(constants["rec_batch"]),
            "EngineConfig.onnxruntime.intra_op_num_threads": 1,
            "EngineConfig.onnxruntime.inter_op_num_threads": 1,
        }
        fast = RapidOCR(params={**shared, "Global.text_score": 0.0, "Rec.model_path": str(models["rec_tiny"]),
                                "Rec.rec_keys_path": str(models["rec_tiny_keys"])})
        # Only its recogniser is ever loaded (rapidocr loads each model on its first use).
        careful = RapidOCR(params={**shared, "Global.text_score": 0.0, "Rec.model_path": str(models["rec"])})
        _engine = _Loaded(cast("_Engine", fast), cast("_Recogniser", careful),
                          float(constants["recheck_below"]), float(constants["text_score"]))
    return _engine
