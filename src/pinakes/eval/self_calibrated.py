"""`pnk eval --self-calibrate`: self-calibration on request (calibration/self_calibration.py), with
no time bound, stored in `.pinakes/self-calibration.json`, and what it means said in words."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pinakes.calibration.fitting import ConfidenceFit
from pinakes.calibration.self_calibration import (
    SelfCalibration,
    StoredSelfCalibration,
    read_stored,
    self_calibrate,
    store,
)
from pinakes.errors import PinakesError
from pinakes.kb import KBPaths
from pinakes.search.calibrated import FITTED, SELF_CALIBRATED, UNCALIBRATED

QUALITY_SECTION = 'docs/QUALITY.md, "Confidence on a KB nobody fitted"'


@dataclass
class SelfCalibrationRun:
    calibration: SelfCalibration
    stored: Path
    used_as: str  # the source searches take: self-calibrated, or what pinakes.toml says instead
    warnings: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        fit = self.calibration.fit
        data: dict[str, object] = {
            "stored": str(self.stored), "used_as": self.used_as, "questions": self.calibration.questions,
            "documents": self.calibration.documents, "seconds": self.calibration.seconds,
            "rules": self.calibration.rules.describe(),
        }
        if fit is not None:
            data.update(json.loads(self.stored.read_text(encoding="utf-8")))
        return data


def run_self_calibration(kb_root: Path, *, sync: bool = True) -> SelfCalibrationRun:
    from pinakes.eval.runner import sync_before_eval
    from pinakes.manifest import load_manifest

    paths = KBPaths(kb_root)
    warnings: list[str] = []
    if sync:
        warnings += [warning for warning in sync_before_eval(kb_root).warnings
                     if "self-calibrated" not in warning]  # this command says it below
    calibration = self_calibrate(kb_root)
    if calibration.fit is None:
        raise PinakesError(f"confidence could not be self-calibrated: {calibration.why_not}",
                           remedy="add documents (self-calibration asks questions of them), or write a golden set "
                                  "with `pnk eval --init` and fit it with `pnk eval --fit-confidence --write`")
    stored = store(kb_root, calibration)
    block = load_manifest(paths.manifest).retrieval.confidence
    used_as = SELF_CALIBRATED if block is None else FITTED if block.signal != "none" else UNCALIBRATED
    return SelfCalibrationRun(calibration, stored, used_as, tuple(warnings))


def render(run: SelfCalibrationRun) -> str:
    calibration = run.calibration
    fit = calibration.fit
    assert fit is not None
    lines = [f"self-calibrated on {calibration.questions} questions made from {calibration.documents} documents "
             f"({calibration.rules.describe()}), each asked as it is and with its document left out, in "
             f"{calibration.seconds:.1f} s",
             f"stored: {run.stored}", "", "what it holds (the evidence model and its thresholds):",
             _block(fit), ""]
    lines.append(f"on its own questions: false-abstain {_rate(fit.false_abstain)}, false-confidence "
                 f"{_rate(fit.false_confidence)} (ceiling {fit.max_false_confidence:g}); on real questions it "
                 f"was measured held-out in {QUALITY_SECTION}")
    if fit.low == fit.high:
        lines.append("low = high: this calibration has no medium band (a search is high or low)")
    if run.used_as == SELF_CALIBRATED:
        lines.append("searches now report confidence from it (source: self-calibrated) while pinakes.toml has no "
                     "[retrieval.confidence]")
    elif run.used_as == FITTED:
        lines.append("note: pinakes.toml's [retrieval.confidence] is what searches use (source: fitted); this "
                     "self-calibration is used only without it, and shrinks a small golden set's fit "
                     "(`pnk eval --fit-confidence`)")
    else:
        lines.append('note: [retrieval.confidence] signal = "none" turns confidence off; searches say unknown')
    return "\n".join(lines)


def _block(fit: ConfidenceFit) -> str:
    model = fit.model
    assert model is not None
    terms = " + ".join(f"{weight} × {name}" for name, weight in zip(model.features, model.weights, strict=True))
    return (f"  probability = logistic({model.bias} + {terms})\n"
            f"  high >= {fit.high}, low < {fit.low}\n  fitted for: {fit.fitted_for}")


def _rate(rate: object) -> str:
    from pinakes.calibration.fitting import Rate

    assert isinstance(rate, Rate)
    return f"{'null' if rate.value is None else f'{rate.value:.3f}'} ({int(rate.numerator)}/{rate.denominator})"




def self_calibration_for_fit(kb_root: Path) -> tuple[StoredSelfCalibration | None, str | None]:
    """The KB's stored self-calibration for its index's embedding model, made and stored now if
    there is none (a small golden set's fit is shrunk towards it); else None and why."""
    from pinakes.index import schema
    from pinakes.search.confidence import model_named_in

    conn = schema.open_reader(KBPaths(kb_root).index_db)
    try:
        model = schema.read_meta(conn).get("embedding_model") or ""
    finally:
        conn.close()
    stored = read_stored(kb_root)
    if stored is not None and model and model_named_in(model, stored.fit.fitted_for):
        return stored, None
    calibration = self_calibrate(kb_root)
    if calibration.fit is None:
        return None, calibration.why_not
    store(kb_root, calibration)
    return read_stored(kb_root), None
