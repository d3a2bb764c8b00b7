"""pdf-eval: score the free PDF path on the corpus, gate it against the committed baseline, and
re-fit both floors to check neither drifted from `src/pinakes/extract/floors.toml` (spec §7.1).

    python tests/pdf-corpus/evaluate.py                    # the gate (dodo pdf-eval, CI)
    python tests/pdf-corpus/evaluate.py --write-baseline   # after an intended change, reviewed
    python tests/pdf-corpus/evaluate.py --fit --write-floors
    python tests/pdf-corpus/evaluate.py --r-manuals        # the real manuals: native vs layout
    python tests/pdf-corpus/evaluate.py --disable strip_running_heads   # plant a regression

Exit 0: every stratum within tolerance of its baseline, floors as fitted, every scanned page
reported as having no usable text layer. Exit 1: a regression, named. It skips (exit 0, saying
why) when pypdfium2 or fpdf2 is not installed: a [light]-only checkout cannot run it.
Each stratum's score pools numerators and denominators over its fixtures (a null stays null).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from spec import FIXTURES, KNOWN_RUNNING_HEAD_SIGNATURES, SPEC_VERSION, STRATA, Fixture  # noqa: E402

if TYPE_CHECKING:
    from pinakes.extract.floors import Floors
    from pinakes.extract.layout import LayoutOptions
    from pinakes.extract.pdf import _Page  # pyright: ignore[reportPrivateUsage] -- what pdf._read_page returns

BASELINE = HERE / "baseline.json"
R_MANUALS = HERE.parents[2] / "shared" / "corpora" / "r-manuals-pdf"
TOLERANCE = 0.02  # absolute, per metric and stratum
FLOOR_TOLERANCE = 1e-6  # a re-fit must reproduce the shipped floors
METRICS = ("char_recall", "order_fidelity", "junk_rate", "pair_adjacency", "word_coverage")
LOWER_IS_BETTER = frozenset({"junk_rate"})


@dataclass
class FixtureScore:
    name: str
    stratum: str
    metrics: Mapping[str, object]  # metric -> quality.Ratio
    pages: int
    pages_without_text: tuple[int, ...]


@dataclass
class EvalResult:
    # stratum -> metric -> ratio dict
    strata: dict[str, dict[str, dict[str, object]]] = field(default_factory=dict[str, dict[str, dict[str, object]]])
    fixtures: list[FixtureScore] = field(default_factory=list[FixtureScore])
    skipped: dict[str, str] = field(default_factory=dict[str, str])
    problems: list[str] = field(default_factory=list[str])
    fit: dict[str, object] = field(default_factory=dict[str, object])

    @property
    def ok(self) -> bool:
        return not self.problems


def missing_dependency() -> str | None:
    """Why this eval cannot run here, or None."""
    for module, extra in (("pypdfium2", "pinakes-kb[pdf]"), ("fpdf", "pinakes-kb[dev] (fpdf2)")):
        try:
            __import__(module)
        except ImportError:
            return f"{module} is not installed: pip install \"{extra}\""
    return None


def read_pages(path: Path) -> list[_Page]:
    """The extractor's own page reading (pdf._read_page): glyphs, native yield, drawing."""
    import pypdfium2 as pdfium

    from pinakes.extract.pdf import _read_page  # pyright: ignore[reportPrivateUsage] -- the extractor's own, on purpose

    document = pdfium.PdfDocument(str(path))
    try:
        return [_read_page(document, index) for index in range(len(document))]
    finally:
        document.close()


def native_texts(path: Path) -> list[str]:
    """Each page's native text layer as main's extractor returned it before layout.py (pdfium's
    own order; CRLF -> LF, controls dropped, trailing spaces stripped): the "before" arm."""
    import pypdfium2 as pdfium

    noise = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ufffe\uffff]")
    trailing = re.compile(r"[ \t]+$", re.MULTILINE)
    document = pdfium.PdfDocument(str(path))
    texts: list[str] = []
    try:
        for index in range(len(document)):
            page = document[index]
            text_page = page.get_textpage()
            # get_text_bounded: real pypdfium2 API that typings/pypdfium2 (src's parts only) leaves out
            raw = cast(
                str,
                text_page.get_text_bounded(),  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]  # absent from typings/pypdfium2
            )
            text_page.close()
            page.close()
            text = raw.replace("\r\n", "\n").replace("\r", "\n")
            texts.append(trailing.sub("", noise.sub("", text)).strip("\n"))
    finally:
        document.close()
    return texts


def extract_with(pages: Sequence[_Page], options: LayoutOptions, threshold: float) -> list[str]:
    from pinakes.extract.layout import layout_document

    return layout_document([page.glyphs for page in pages], head_threshold=threshold,
                           options=options)


def score_fixture(fixture: Fixture, pdf: Path, options: LayoutOptions, floors: Floors) -> FixtureScore:
    from pinakes.extract import quality
    from pinakes.extract.pdf import pages_without_text

    pages = read_pages(pdf)
    texts = extract_with(pages, options, floors.running_head_threshold)
    extracted = "\n\n".join(texts)
    native = "\n\n".join(native_texts(pdf))
    truth = fixture.truth
    metrics = {
        "char_recall": quality.char_recall(truth, extracted),
        "order_fidelity": quality.order_fidelity(truth, extracted),
        "junk_rate": quality.junk_rate(truth, extracted),
        "pair_adjacency": quality.pair_adjacency(extracted, fixture.pairs),
        "word_coverage": quality.word_coverage(native, extracted),
    }
    flagged = pages_without_text(pages, floors.text_yield_floor)
    return FixtureScore(fixture.name, fixture.stratum, metrics, len(pages), flagged)


def evaluate(options: LayoutOptions | None = None, *, workdir: Path | None = None,
             baseline: Path | None = BASELINE) -> EvalResult:
    """Score every fixture, compare with `baseline` (None: no comparison), re-fit the floors."""
    from generate import build_all

    from pinakes.extract.floors import load_floors
    from pinakes.extract.layout import LayoutOptions
    from pinakes.extract.quality import Ratio

    options = options if options is not None else LayoutOptions()
    floors = load_floors()
    result = EvalResult()
    with tempfile.TemporaryDirectory(prefix="pnk-pdf-corpus-") as scratch:
        directory = workdir or Path(scratch)
        built, result.skipped = build_all(directory)
        fixtures = [fixture for fixture in FIXTURES if fixture.name in built]
        for fixture in fixtures:
            result.fixtures.append(score_fixture(fixture, built[fixture.name], options, floors))
        result.fit = fit_floors(fixtures, built)
    for stratum in STRATA:
        scores = [s for s in result.fixtures if s.stratum == stratum]
        if not scores:
            continue
        pooled: dict[str, dict[str, object]] = {}
        for metric in METRICS:
            total = Ratio(0, 0)
            for score in scores:
                total = total + cast(Ratio, score.metrics[metric])
            pooled[metric] = total.to_dict()
        result.strata[stratum] = pooled
    _check_scanned(result)
    _check_floors(result, floors)
    if baseline is not None:
        _compare(result, json.loads(baseline.read_text(encoding="utf-8")))
    return result


def fit_floors(fixtures: Sequence[Fixture], built: dict[str, Path]) -> dict[str, object]:
    """Both floors from the corpus (§7.1): T is the midpoint between the lowest recurrence a genuine
    head reaches and the highest anything else in the headers-footers stratum reaches; the yield
    floor is the midpoint between the highest yield of a scanned page and the lowest of any other."""
    from pinakes.extract.layout import head_recurrences, segments_from_words, words_from_glyphs

    genuine: list[float] = []
    other: list[float] = []
    scanned_yields: list[int] = []
    real_yields: list[int] = []
    for fixture in fixtures:
        pages = read_pages(built[fixture.name])
        yields = [page.native_chars for page in pages]
        (scanned_yields if fixture.stratum == "scanned" else real_yields).extend(yields)
        if fixture.stratum != "headers-footers":
            continue
        known = KNOWN_RUNNING_HEAD_SIGNATURES[fixture.name]
        segmented = [segments_from_words(words_from_glyphs(page.glyphs)) for page in pages]
        for rows in head_recurrences(segmented):
            for _segment, signature, share in rows:
                if share is not None:
                    (genuine if signature in known else other).append(share)
    fit: dict[str, object] = {
        "lowest_genuine_recurrence": min(genuine), "highest_other_recurrence": max(other),
        "highest_scanned_yield": max(scanned_yields), "lowest_real_yield": min(real_yields),
    }
    fit["running_head_threshold"] = round((min(genuine) + max(other)) / 2, 4)
    fit["text_yield_floor"] = (max(scanned_yields) + min(real_yields)) / 2
    fit["separable"] = min(genuine) > max(other) and min(real_yields) > max(scanned_yields)
    return fit


def _check_scanned(result: EvalResult) -> None:
    for score in result.fixtures:
        if score.stratum == "scanned" and score.pages_without_text != tuple(range(1, score.pages + 1)):
            result.problems.append(f"{score.name}: every scanned page must be reported as having no usable "
                                   f"text layer; reported {list(score.pages_without_text)} of {score.pages}")
        if score.stratum != "scanned" and score.pages_without_text:
            result.problems.append(f"{score.name}: pages {list(score.pages_without_text)} reported as having "
                                   "no usable text layer, but they have one")


def _check_floors(result: EvalResult, floors: Floors) -> None:
    fit = result.fit
    if not fit.get("separable"):
        result.problems.append(f"the corpus no longer separates the floors: {fit}")
    for key, shipped in (("running_head_threshold", floors.running_head_threshold),
                         ("text_yield_floor", floors.text_yield_floor)):
        if abs(float(cast(float, fit[key])) - shipped) > FLOOR_TOLERANCE:
            result.problems.append(f"floor drift: {key} re-fits to {fit[key]} but floors.toml ships {shipped}; "
                                   "re-fit with --fit --write-floors if the corpus change is intended")


def _compare(result: EvalResult, baseline: dict[str, object]) -> None:
    strata = cast("dict[str, dict[str, dict[str, Any]]]", baseline.get("strata", {}))
    assert isinstance(strata, dict)
    for stratum, metrics in strata.items():
        if stratum not in result.strata:
            if any(s.startswith(stratum) for s in result.skipped.values()):
                continue
            skipped_here = [f.name for f in FIXTURES if f.stratum == stratum and f.name in result.skipped]
            if not skipped_here:
                result.problems.append(f"{stratum}: in the baseline but not scored")
            continue
        for metric, expected in metrics.items():
            got = result.strata[stratum][metric]["value"]
            want = expected["value"]
            if (got is None) != (want is None):
                result.problems.append(f"{stratum} {metric}: {got} where the baseline has {want}")
                continue
            if got is None:
                continue
            drop = (got - want) if metric in LOWER_IS_BETTER else (want - got)
            if drop > TOLERANCE:
                result.problems.append(f"{stratum} {metric}: {got:.4f} against the baseline's {want:.4f} "
                                       f"(worse by {drop:.4f}, tolerance {TOLERANCE})")


def baseline_payload(result: EvalResult) -> dict[str, object]:
    return {"spec_version": SPEC_VERSION, "tolerance": TOLERANCE,
            "note": "pooled per stratum; written by tests/pdf-corpus/evaluate.py --write-baseline",
            "strata": result.strata}


def write_floors(fit: dict[str, object], path: Path) -> None:
    fitted_on = (f"tests/pdf-corpus spec v{SPEC_VERSION} ({len(FIXTURES)} fixtures): T between genuine heads "
                 f"at >= {fit['lowest_genuine_recurrence']} and other zone lines at <= "
                 f"{fit['highest_other_recurrence']}; yield between scanned <= {fit['highest_scanned_yield']} "
                 f"and real >= {fit['lowest_real_yield']} characters")
    path.write_text(
        "# Fitted by `python tests/pdf-corpus/evaluate.py --fit --write-floors`; do not edit by hand.\n"
        "# Both values enter the pypdfium2 extractor's fingerprint: a re-fit re-extracts every PDF.\n"
        f"fitted_on = {json.dumps(fitted_on)}\n\n"
        f"[running_head]\nthreshold = {fit['running_head_threshold']}\n\n"
        f"[text_yield]\nfloor = {fit['text_yield_floor']}\n", encoding="utf-8")


def r_manuals(root: Path = R_MANUALS) -> list[dict[str, object]]:
    """Native text layer vs layout on the real R manuals, bag-of-tokens against truth/, in one run."""
    from pinakes.extract.floors import load_floors
    from pinakes.extract.layout import LayoutOptions
    from pinakes.extract.quality import token_bag, word_coverage

    floors = load_floors()
    number = re.compile(r"\s*(\d+|[ivxlc]+)\s*", re.IGNORECASE)
    head = re.compile(r"(chapter|appendix) .*", re.IGNORECASE)

    def edge_lines(pages: list[str]) -> tuple[int, int]:
        """Pages whose first or last line is a bare page number; pages opening with a chapter head."""
        numbered = sum(1 for text in pages if text.strip() and any(
            number.fullmatch(line) for line in (text.strip().splitlines()[0], text.strip().splitlines()[-1])))
        headed = sum(1 for text in pages if text.strip() and head.fullmatch(text.strip().splitlines()[0]))
        return numbered, headed

    rows: list[dict[str, object]] = []
    for pdf in sorted((root / "docs").glob("*.pdf")):
        truth_path = root / "truth" / f"{pdf.stem}.txt"
        if not truth_path.is_file():
            continue
        truth = truth_path.read_text(encoding="utf-8")
        started = time.perf_counter()
        native_pages = native_texts(pdf)
        native_seconds = time.perf_counter() - started
        started = time.perf_counter()
        pages = read_pages(pdf)
        layout_pages = extract_with(pages, LayoutOptions(), floors.running_head_threshold)
        layout_seconds = time.perf_counter() - started
        native = "\n\n".join(native_pages)
        for arm, texts, seconds in (("native", native_pages, native_seconds), ("layout", layout_pages, layout_seconds)):
            text = "\n\n".join(texts)
            recall, precision = token_bag(truth, text)
            numbered, headed = edge_lines(texts)
            rows.append({"manual": pdf.stem, "arm": arm, "pages": len(pages), "recall": recall.value,
                         "precision": precision.value, "junk_rate": 1 - (precision.value or 0.0),
                         "page_number_lines": numbered, "chapter_head_lines": headed,
                         "word_coverage": word_coverage(native, text).value, "seconds": seconds})
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--write-baseline", action="store_true")
    parser.add_argument("--fit", action="store_true", help="print the re-fitted floors")
    parser.add_argument("--write-floors", action="store_true")
    parser.add_argument("--r-manuals", action="store_true")
    parser.add_argument("--disable", action="append", default=[],
                        choices=("reading_order", "strip_running_heads", "join_hyphens"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    reason = missing_dependency()
    if reason:
        print(f"pdf-eval skipped: {reason}")
        return 0
    from pinakes.extract.floors import floors_path
    from pinakes.extract.layout import LayoutOptions

    if args.r_manuals:
        if not (R_MANUALS / "docs").is_dir():
            print(f"R manuals skipped: {R_MANUALS} is absent (CI copies ../shared beside the clone)")
            return 0
        for row in r_manuals():
            print(json.dumps(row) if args.json else
                  f"{row['manual']:8} {row['arm']:6} pages {row['pages']:3}  recall {row['recall']:.4f}  "
                  f"precision {row['precision']:.4f}  junk {row['junk_rate']:.4f}  pages with a number line "
                  f"{row['page_number_lines']:3}  opening on a chapter head {row['chapter_head_lines']:3}  "
                  f"coverage {row['word_coverage']:.4f}  {row['seconds']:.2f}s")
        return 0
    options = replace(LayoutOptions(), **{step: False for step in args.disable})
    result = evaluate(options, baseline=None if args.write_baseline else BASELINE)
    if args.write_floors:
        write_floors(result.fit, floors_path())
        print(f"wrote {floors_path()}")
    if args.write_baseline:
        BASELINE.write_text(json.dumps(baseline_payload(result), indent=2) + "\n", encoding="utf-8")
        print(f"wrote {BASELINE}")
    if args.json:
        print(json.dumps({"strata": result.strata, "fit": result.fit, "skipped": result.skipped,
                          "problems": result.problems}, indent=2))
    else:
        for name, why in result.skipped.items():
            print(f"skipped {name}: {why}")
        for stratum, metrics in result.strata.items():
            shown = "  ".join(f"{m} {v['value'] if v['value'] is not None else 'null'}"
                              for m, v in metrics.items())
            print(f"{stratum:22} {shown}")
        if args.fit or args.write_floors:
            print(f"fit: {result.fit}")
        for problem in result.problems:
            print(f"REGRESSION: {problem}")
        print("pdf-eval: ok" if result.ok else f"pdf-eval: {len(result.problems)} problem(s)")
    if args.write_baseline or args.write_floors:
        return 0
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
