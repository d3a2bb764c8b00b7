"""The OCR models the `[ocr]` extra ships, pinned by sha256, and whether the extra is installed.

`rapidocr` 3.10.0 carries its PP-OCRv6 small detection and recognition models (ONNX) inside its
wheel, so OCR works on a machine that has never been online. Left to itself it would download a
model it does not find (from its model hub) and would read its default config, whose direction
classifier costs time and, measured on typeset pages, accuracy (docs/QUALITY.md "OCR"). So Pinakes
never lets it choose: every model is passed by path, after the file's sha256 has been checked against
the digest pinned here (as the embedding model's are, embed/packaged.py); a mismatch refuses to
run and names the file and the reinstall that restores it. The digests are also part of the OCR
fingerprint (`registry.EXTRACTORS["rapidocr"]`), so other weights can never pass for these.

This module imports nothing heavy: the registry, the build keys and `pnk status` ask it whether OCR
is installed without loading a model.
"""

from __future__ import annotations

import hashlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from pinakes.errors import MissingExtraError, ModelUnavailableError

OCR_EXTRA = "ocr"
OCR_DISTRIBUTION = "rapidocr==3.10.0"
OCR_MODULE = "rapidocr"


@dataclass(frozen=True, slots=True)
class PinnedModel:
    role: str  # "det" or "rec"
    relative: str  # its path inside the rapidocr package
    sha256: str


# The files of rapidocr 3.10.0's wheel (its RECORD lists the same digests, base64-encoded).
DETECTION = PinnedModel("det", "models/PP-OCRv6_det_small.onnx",
                        "090f04abcd9d9a7498bc4ebf677e4cb9bdce1fe4197ddb7e529f1ef44e1ff94f")
RECOGNITION = PinnedModel("rec", "models/PP-OCRv6_rec_small.onnx",
                          "6f327246b50388f3c176ae304bd95767ea6dc0c9ae92153ef8cbe210b3c14884")
PINNED_MODELS = (DETECTION, RECOGNITION)


def ocr_installed() -> bool:
    """Whether the `[ocr]` extra is importable (asked without importing it)."""
    try:
        return (importlib.util.find_spec(OCR_MODULE) is not None
                and importlib.util.find_spec("onnxruntime") is not None)
    except (ImportError, ValueError):
        return False


def require_ocr(purpose: str) -> None:
    """Raise MissingExtraError naming `[ocr]` unless it is installed."""
    if not ocr_installed():
        raise MissingExtraError(OCR_EXTRA, purpose, missing_module=OCR_MODULE)


def package_dir() -> Path:
    spec = importlib.util.find_spec(OCR_MODULE)
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtraError(OCR_EXTRA, "OCR", missing_module=OCR_MODULE)
    return Path(next(iter(spec.submodule_search_locations)))


def verified_model_paths() -> dict[str, Path]:
    """{role: path} of every pinned model, each checked against its sha256 (in the OCR worker, once
    per process: about 0.1 s for the 31 MB)."""
    root = package_dir()
    paths: dict[str, Path] = {}
    for pinned in PINNED_MODELS:
        path = root / pinned.relative
        remedy = f'reinstall it: pip install --force-reinstall "{OCR_DISTRIBUTION}"'
        try:
            found = sha256_file(path)
        except OSError as exc:
            raise ModelUnavailableError(f"the OCR model {path.name} cannot be read: {exc.strerror or exc}",
                                        remedy=remedy, path=path) from exc
        if found != pinned.sha256:
            raise ModelUnavailableError(
                f"the OCR model {path.name} does not match the sha256 pinned for {OCR_DISTRIBUTION}: "
                f"expected {pinned.sha256}, found {found}; refusing to use it", remedy=remedy, path=path)
        paths[pinned.role] = path
    return paths


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def unread_pages_advice() -> str:
    """What to do about pages with no text the index could use, as things stand on this machine."""
    paid = "or extract them with a paid backend (`pnk sync --extract=claude-vision`)"
    if ocr_installed():
        return f"OCR found no text on them (a photograph, a blank or faint scan); {paid}"
    from pinakes.distribution import pip_install

    return f"install free OCR ({pip_install((OCR_EXTRA,))}) and run `pnk sync` to read them, {paid}"
