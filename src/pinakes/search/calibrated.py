"""Where a search's confidence comes from (issue #41): the first of these that applies to the
search's scorer (its embedding model, rerank on or off), in this order:

  fitted           pinakes.toml's `[retrieval.confidence]`: fitted on the KB's golden set
                   (`pnk eval --fit-confidence --write`), or written there by a person
  self-calibrated  `.pinakes/self-calibration.json`: fitted on questions the KB made of its own
                   documents (calibration/self_calibration.py; the first sync of a large enough KB
                   writes it, `pnk eval --self-calibrate` rewrites it)
  prior            the model fitted across the development corpora, shipped as package data
                   (data/confidence/prior.json; bench/make_confidence_prior.py made it)
  unknown          none applies, or `[retrieval.confidence] signal = "none"` turned the signal off

A `[retrieval.confidence]` block that names another scorer is reported as such (re-fit it), never
skipped for a lower source: the person who wrote it asked for it. What each source means in rates
measured on questions it never saw: docs/QUALITY.md, "Confidence on a KB nobody fitted".

Reading is cheap and done once per change: the stored self-calibration is re-read only when its
file's modification time moves (a `stat` per search), so a server picks up the first sync's
calibration without a restart.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

from pinakes.jsontypes import is_dict, is_list, str_list
from pinakes.kb import KBPaths
from pinakes.manifest.sections import FEATURES, MODEL, NONE_SIGNAL, ConfidenceSection

FITTED, SELF_CALIBRATED, PRIOR, UNCALIBRATED = "fitted", "self-calibrated", "prior", "unknown"
SOURCES = (FITTED, SELF_CALIBRATED, PRIOR, UNCALIBRATED)
# What each source means, in words an agent reads beside the level (MCP); the rates are measured on
# questions the source never saw (docs/QUALITY.md, "Confidence on a KB nobody fitted").
SOURCE_GUIDANCE = {
    FITTED: "thresholds fitted on this KB's own golden set",
    SELF_CALIBRATED: "calibrated on questions made from this KB's own documents, with no golden set: "
                     "weaker than a fit to real questions; treat high as likely, not certain",
    PRIOR: "calibrated on other KBs only (the shipped prior): a rough guide; treat high as likely, not certain",
    UNCALIBRATED: "no calibration applies; judge the passages yourself",
}
SELF_CALIBRATION_FORMAT = "pinakes-self-calibration/1"
PRIOR_FORMAT = "pinakes-confidence-prior/1"
# A block over features that mean the same under every embedding model (shares of the query's
# keywords): it applies whatever model embedded the KB.
ANY_EMBEDDING = "any embedding model"
SELF_CALIBRATION_NAME = "self-calibration.json"
PRIOR_PATH = Path(__file__).resolve().parent.parent / "data" / "confidence" / "prior.json"


@dataclass(frozen=True)
class CalibratedBlock:
    """A confidence block that is not pinakes.toml's: shaped like ConfidenceSection (the Thresholds
    protocol of search/confidence.py)."""

    high: float
    low: float
    fitted_for: str
    signal: str = MODEL
    features: tuple[str, ...] = ()
    weights: tuple[float, ...] = ()
    bias: float = 0.0
    any_embedding: bool = False  # applies_to ANY_EMBEDDING: no embedding model need be named


def self_calibration_path(paths: KBPaths) -> Path:
    return paths.state_dir / SELF_CALIBRATION_NAME


def read_block(path: Path, expected_format: str) -> CalibratedBlock | None:
    """The `confidence` block of a stored calibration, or None when the file is missing, of another
    format, or does not hold a usable model (a damaged derived file is as good as none)."""
    try:
        data: object = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not is_dict(data) or data.get("format") != expected_format:
        return None
    block = block_from(data.get("confidence"))
    if block is not None and data.get("applies_to") == ANY_EMBEDDING:
        block = replace(block, any_embedding=True)
    return block


def block_from(value: object) -> CalibratedBlock | None:
    if not is_dict(value):
        return None
    features, weights = str_list(value.get("features")), value.get("weights")
    if features is None or not is_list(weights):
        return None
    numbers = [_number(weight) for weight in weights]
    high, low, bias = _number(value.get("high")), _number(value.get("low")), _number(value.get("bias"))
    fitted_for, signal = value.get("fitted_for"), value.get("signal", MODEL)
    if (high is None or low is None or bias is None or any(n is None for n in numbers)
            or not isinstance(fitted_for, str) or not isinstance(signal, str)):
        return None
    block = CalibratedBlock(high=high, low=low, fitted_for=fitted_for, signal=signal, features=tuple(features),
                            weights=tuple(n for n in numbers if n is not None), bias=bias)
    usable = (block.signal == MODEL and features and len(features) == len(block.weights)
              and all(name in FEATURES for name in features) and block.low <= block.high and block.fitted_for)
    return block if usable else None


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@functools.cache
def packaged_prior() -> CalibratedBlock | None:
    """The prior that ships inside Pinakes, read once per process."""
    return read_block(PRIOR_PATH, PRIOR_FORMAT)


Candidate = tuple[ConfidenceSection | CalibratedBlock, str]


class KBConfidence:
    """The confidence blocks one KB's searches may use, in the order they are tried."""

    def __init__(self, manifest_block: ConfidenceSection | None, stored: Path | None,
                 prior: CalibratedBlock | None = None) -> None:
        self.manifest_block = manifest_block
        self.stored = stored
        self.prior = prior
        self._stored_stamp: tuple[int, int] | None = None
        self._stored_block: CalibratedBlock | None = None

    @classmethod
    def for_kb(cls, paths: KBPaths, manifest_block: ConfidenceSection | None) -> KBConfidence:
        return cls(manifest_block, self_calibration_path(paths), packaged_prior())

    @property
    def turned_off(self) -> bool:
        return self.manifest_block is not None and self.manifest_block.signal == NONE_SIGNAL

    def candidates(self) -> list[Candidate]:
        if self.manifest_block is not None:
            return [] if self.turned_off else [(self.manifest_block, FITTED)]
        found: list[Candidate] = []
        stored = self._self_calibration()
        if stored is not None:
            found.append((stored, SELF_CALIBRATED))
        if self.prior is not None:
            found.append((self.prior, PRIOR))
        return found

    def _self_calibration(self) -> CalibratedBlock | None:
        if self.stored is None:
            return None
        try:
            status = os.stat(self.stored)
        except OSError:
            self._stored_stamp = self._stored_block = None
            return None
        stamp = (status.st_mtime_ns, status.st_size)
        if stamp != self._stored_stamp:
            self._stored_stamp, self._stored_block = stamp, read_block(self.stored, SELF_CALIBRATION_FORMAT)
        return self._stored_block
