"""The tables docs/QUALITY.md ("Confidence on a KB nobody fitted") quotes, from collect.py's rows:
no golden set, every corpus scored on its real questions (seeds summed), by

  - self-calibration as shipped (DEFAULT_RULES' rows, the fit on them at SYNTHETIC_CEILING), and the
    other rule sets and ceilings measured;
  - the shipped prior, made leave one corpus out (bench/make_confidence_prior.py's recipe on the
    other four corpora);

each with numerator, denominator and Wilson 95% interval, and the gap between synthetic and real
questions (features' class means; AUC of the self-calibrated model on real questions).

    python bench/experiments/self_calibration/final_tables.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent.parent
sys.path[:0] = [str(HERE), str(REPO / "bench"), str(REPO / "src")]

import analyse  # noqa: E402
import make_confidence_prior  # noqa: E402

from pinakes.calibration.fitting import fit_confidence  # noqa: E402

SHIPPED_VARIANT, SHIPPED_CEILING = "lead6", 0.05
OTHERS = (("lead6", 0.02), ("lead6", 0.10), ("lead8", 0.05), ("run6", 0.05), ("rare4", 0.05), ("run6-p50", 0.05),
          ("lead6-p50", 0.05), ("rare6-p50", 0.05), ("run4", 0.05), ("rare6", 0.05), ("run8", 0.05))


def self_calibrated(variant: str, ceiling: float) -> dict[str, analyse.Tally]:
    out: dict[str, analyse.Tally] = {}
    for corpus in analyse.CORPORA:
        tally = analyse.Tally()
        for seed in analyse.available(corpus, variant):
            fit = fit_confidence(analyse.synth(corpus, seed, variant), "self", max_false_confidence=ceiling)
            tally.add(fit, analyse.real(corpus, seed))
        out[corpus] = tally
    return out


def gap(variant: str) -> dict[str, dict[str, list[float]]]:
    names = ("cosine", "keyword_share", "related_share", "csls", "agreement")
    out: dict[str, dict[str, list[float]]] = {}
    for corpus in analyse.CORPORA:
        seeds = analyse.available(corpus, variant)
        # real ans, real no, synth ans, synth no
        means: dict[str, list[list[float]]] = {name: [[], [], [], []] for name in names}
        for seed in seeds:
            for rows, offset in ((analyse.real(corpus, seed), 0), (analyse.synth(corpus, seed, variant), 2)):
                for name in names:
                    means[name][offset].append(statistics.fmean(r.features[name] for r in rows
                                                                if r.features and r.kind != "no-answer"))
                    means[name][offset + 1].append(statistics.fmean(r.features[name] for r in rows
                                                                    if r.features and r.kind == "no-answer"))
        out[corpus] = {name: [round(statistics.fmean(v), 3) for v in values] for name, values in means.items()}
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    report: dict[str, object] = {}
    shipped = self_calibrated(SHIPPED_VARIANT, SHIPPED_CEILING)
    print(f"== self-calibration as shipped ({SHIPPED_VARIANT}, ceiling {SHIPPED_CEILING})")
    for corpus, tally in shipped.items():
        print(f"{corpus:10} {tally.cells()}")
    report["self_calibration"] = {corpus: tally.to_dict() for corpus, tally in shipped.items()}
    print("== the prior, leave one corpus out")
    report["prior_loco"] = make_confidence_prior.measure(make_confidence_prior.corpus_rows())
    print("== the prior with the cosine, leave one corpus out (lost)")
    report["prior_loco_with_cosine"] = make_confidence_prior.measure(
        make_confidence_prior.corpus_rows(), ("cosine", "keyword_share", "related_share"))
    print("== other rule sets and ceilings (FA / FC per corpus)")
    others: dict[str, object] = {}
    for variant, ceiling in OTHERS:
        tallies = self_calibrated(variant, ceiling)
        cells = "  ".join(f"{c[:5]} {t.fa / t.answerable:.3f}/{t.fc / t.no_answer:.3f}" for c, t in tallies.items())
        print(f"{variant:10} c={ceiling:<5} {cells}")
        others[f"{variant}@{ceiling}"] = {corpus: tally.to_dict() for corpus, tally in tallies.items()}
    report["other_rules"] = others
    print("== features' class means: real answerable / real no-answer / synthetic answerable / synthetic no-answer")
    report["gap"] = gap(SHIPPED_VARIANT)
    for corpus, means in report["gap"].items():
        print(f"{corpus:10} " + "  ".join(f"{name[:8]} {'/'.join(f'{v:.2f}' for v in values)}"
                                          for name, values in means.items()))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
