"""`pnk eval [KB]`: the golden-set scoreboard, the regression gate, and the tools around it (spec §7).

    pnk eval [KB]                       sync if needed, run eval/questions.yaml, gate on eval/baseline.json
    pnk eval --update-baseline          the same, then rewrite the baseline from this run
    pnk eval --rescore OUTCOMES.json    recompute the scoreboard from a committed outcomes file (no weights)
    pnk eval --compare BEFORE AFTER     paired comparison of two outcomes files, with the sign test
    pnk eval --init                     draft eval/questions.yaml from the KB's own headings, to edit
    pnk eval --fit-confidence           fit [retrieval.confidence] on the golden set and print the block
    pnk eval --fit-confidence --write   the same, written into pinakes.toml (backed up, re-validated)
    pnk eval --fit-fusion [--write]     choose the keyword/vector fusion on the golden set (fixed RRF unless it wins)
    pnk eval --self-calibrate           fit the confidence model on questions made from the KB's own documents
    pnk eval --questions FILE.jsonl     nDCG@10 / recall@10 / recall@100 / MRR over any KB

Exit status: 0 when the run passes (or is skipped for want of a golden set), 1 on a regression
against the baseline, and a PinakesError's own code for bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from pinakes.cli.command import Command, CommandArgs, Subcommands
from pinakes.wording import counted

if TYPE_CHECKING:
    from pinakes.calibration.shrinkage import GoldenFit
    from pinakes.eval.fitting import ConfidenceFit
    from pinakes.eval.harness import EvalPaths, GateResult
    from pinakes.eval.outcomes import OutcomesFile
    from pinakes.eval.scoreboard import Rate, Scoreboard
    from pinakes.manifest import Manifest

EXIT_REGRESSED = 1
CONFIDENCE_TABLE = "retrieval.confidence"  # replaced whole by --write, with any sub-table under it


@dataclass(frozen=True, kw_only=True)
class EvalArgs(CommandArgs):
    kb: str | None
    json: bool
    no_sync: bool
    baseline: Path | None
    outcomes: Path | None
    tolerance: float | None
    update_baseline: bool
    fit_confidence: bool
    fit_fusion: bool
    write: bool
    # one of these at most (a mutually exclusive group); none: a golden-set run
    init: bool
    rescore: Path | None
    compare: list[Path] | None  # BEFORE AFTER
    questions: Path | None
    self_calibrate: bool


def register(subparsers: Subcommands, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "eval", parents=[common],
        help="score retrieval on the KB's golden set and gate on its baseline",
        description="Run the KB's golden set (eval/questions.yaml) through the same search the CLI and "
                    "MCP use; report recall@k, MRR, rerank precision and the false-abstain / "
                    "false-confidence rates per question kind; fail on regression against "
                    "eval/baseline.json.",
        epilog="examples: pnk eval tests/demo-kb · pnk eval --init · pnk eval --fit-confidence --write · "
               "pnk eval --questions ../shared/corpora/cranfield/questions.jsonl -C cranfield-kb",
    )
    parser.add_argument("kb", nargs="?", metavar="KB", help="the KB directory (default: the current KB, or -C)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--no-sync", action="store_true", help="evaluate the index as it is, without syncing")
    parser.add_argument("--baseline", metavar="FILE", type=Path,
                        help="the baseline to gate on (default: KB/eval/baseline.json)")
    parser.add_argument("--outcomes", metavar="FILE", type=Path,
                        help="where to write the per-question outcomes (default: KB/eval/outcomes.json)")
    parser.add_argument("--tolerance", metavar="X", type=float, default=None,
                        help="absolute drop a rate may show before it counts as a regression (default 0.02)")
    parser.add_argument("--update-baseline", action="store_true", help="rewrite the baseline from this run")
    parser.add_argument("--fit-confidence", action="store_true",
                        help="fit [retrieval.confidence] thresholds on the golden set and print the block "
                             "with the trade-off curve")
    parser.add_argument("--fit-fusion", action="store_true",
                        help="choose the keyword/vector fusion (list weights, RRF k, or one list alone) on the "
                             "golden set; fixed RRF unless another beats it by a sign test at p < 0.005")
    parser.add_argument("--write", action="store_true",
                        help="with --fit-confidence or --fit-fusion: write the fitted block into pinakes.toml, "
                             "replacing any [retrieval.confidence] or [retrieval.fusion] (every other byte kept; "
                             "a backup beside it)")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--init", action="store_true",
                        help="draft eval/questions.yaml from the KB's own documents: answerable questions "
                             "and no-answer ones to check (a draft to edit; never overwrites one)")
    action.add_argument("--rescore", metavar="OUTCOMES", type=Path,
                        help="recompute the scoreboard from an outcomes file, offline")
    action.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"), type=Path,
                        help="paired comparison of two outcomes files (exact sign test)")
    action.add_argument("--questions", metavar="FILE", type=Path,
                        help="score a .jsonl of {id, query, relevant} (paths relative to the source root)")
    action.add_argument("--self-calibrate", action="store_true",
                        help="fit the confidence model on questions made from the KB's own documents (each asked "
                             "as it is and with its document left out) and store it in .pinakes/; searches use it "
                             "while pinakes.toml has no [retrieval.confidence]")
    parser.set_defaults(run=Command(EvalArgs, run))


def run(args: EvalArgs) -> int:
    from pinakes.errors import UsageError

    if args.tolerance is not None and not 0 <= args.tolerance < 1:
        raise UsageError(f"--tolerance must be between 0 and 1, got {args.tolerance}", remedy="pass --tolerance 0.02")
    if args.update_baseline and (args.compare or args.questions or args.fit_confidence):
        raise UsageError("--update-baseline only applies to a golden-set run or --rescore",
                         remedy="run `pnk eval --update-baseline` on its own")
    if args.fit_confidence and (args.compare or args.questions):
        raise UsageError("--fit-confidence fits on the golden set (or an outcomes file via --rescore)",
                         remedy="drop --compare / --questions")
    if args.fit_fusion:
        return _fit_fusion(args)
    if args.write and not args.fit_confidence:
        raise UsageError("--write writes a fitted [retrieval.confidence] and needs --fit-confidence",
                         remedy="run `pnk eval --fit-confidence --write`")
    if args.write and args.rescore:
        raise UsageError("--write fits on this KB's own golden-set run, not on an outcomes file (it may come "
                         "from another KB or configuration)",
                         remedy="run `pnk eval --fit-confidence --write` in the KB, or drop --write and paste "
                                "the printed block")
    if args.init and args.fit_confidence:
        raise UsageError("--init drafts the questions the fit needs; they are edited before any fit",
                         remedy="run `pnk eval --init`, edit eval/questions.yaml, then "
                                "`pnk eval --fit-confidence --write`")
    if args.self_calibrate and (args.fit_confidence or args.update_baseline or args.write):
        raise UsageError("--self-calibrate fits on the KB's own documents and stores the result in .pinakes/",
                         remedy="run `pnk eval --self-calibrate` on its own")
    if args.init:
        return _init(args)
    if args.self_calibrate:
        return _self_calibrate(args)
    if args.compare:
        return _compare(args, args.compare)
    if args.rescore:
        return _rescore(args, args.rescore)
    if args.questions:
        return _corpus(args, args.questions)
    return _golden_run(args)


# ------------------------------------------------------------------------------------------------


def _kb_root(args: EvalArgs) -> Path:
    from pinakes.kb import find_kb_root

    return find_kb_root(args.kb or args.kb_dir)


def _manifest_path(args: EvalArgs) -> Path:
    from pinakes.kb import KBPaths

    return KBPaths(_kb_root(args)).manifest


def _load(args: EvalArgs) -> tuple[EvalPaths, Manifest]:
    from pinakes.eval.harness import EvalPaths
    from pinakes.kb import KBPaths
    from pinakes.manifest import load_manifest

    kb_root = _kb_root(args)
    manifest = load_manifest(KBPaths(kb_root).manifest)
    return EvalPaths.for_kb(kb_root, baseline=args.baseline, outcomes=args.outcomes), manifest


def _golden_run(args: EvalArgs) -> int:
    from pinakes.errors import UsageError
    from pinakes.eval import harness
    from pinakes.eval.baseline import Baseline, read_baseline, write_baseline
    from pinakes.eval.outcomes import write_outcomes

    manifest_bytes = _manifest_path(args).read_bytes() if args.write else None
    paths, manifest = _load(args)
    _check_outputs(args, outcomes=None if args.fit_confidence else paths.outcomes,
                   baseline=paths.baseline if args.update_baseline else None)
    golden, skipped = harness.load_for_run(paths, manifest)
    if golden is None:
        if args.fit_confidence:
            raise UsageError(f"nothing to fit on: {skipped}",
                             remedy="draft a golden set with `pnk eval --init`, edit it, then run "
                                    "`pnk eval --fit-confidence --write` again")
        _emit(args, {"ok": True, "skipped": skipped}, f"eval skipped: {skipped}")
        return 0
    run = harness.evaluate(paths, manifest, golden, sync=not args.no_sync)
    for warning in run.sync_warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.fit_confidence:
        return _fit(args, run.outcomes, manifest_bytes, paths.kb_root)
    write_outcomes(paths.outcomes, run.outcomes)
    if args.update_baseline:
        previous = read_baseline(paths.baseline) if paths.baseline.exists() else None
        write_baseline(paths.baseline, Baseline(run.outcomes.header, run.scoreboard))
        result = harness.gate(run.outcomes.header, run.scoreboard, previous, _tolerance(args))
        _report(args, paths, run.outcomes, run.scoreboard, result, updated=True)
        return 0
    baseline = read_baseline(paths.baseline) if paths.baseline.exists() else None
    result = harness.gate(run.outcomes.header, run.scoreboard, baseline, _tolerance(args))
    _report(args, paths, run.outcomes, run.scoreboard, result, updated=False)
    return 0 if result.ok else EXIT_REGRESSED


def _fit_fusion(args: EvalArgs) -> int:
    from pinakes.cli.eval_fusion import fit_fusion_run
    from pinakes.errors import UsageError

    if (args.fit_confidence or args.update_baseline or args.init or args.rescore or args.compare
            or args.questions or args.self_calibrate):
        raise UsageError("--fit-fusion runs on the golden set on its own",
                         remedy="run `pnk eval --fit-fusion --write` without the other actions")
    manifest_bytes = _manifest_path(args).read_bytes() if args.write else None
    paths, manifest = _load(args)
    data, text = fit_fusion_run(paths, manifest, manifest_bytes, write=args.write, sync=not args.no_sync)
    _emit(args, data, text)
    return 0


def _init(args: EvalArgs) -> int:
    from pinakes.eval.skeleton import MIN_NO_ANSWER, draft_golden_set
    from pinakes.index.schema import open_reader
    from pinakes.kb import KBPaths

    kb_root = _kb_root(args)
    conn = open_reader(KBPaths(kb_root).index_db)
    try:
        drafted = draft_golden_set(kb_root, conn)
    finally:
        conn.close()
    next_steps = ("edit it (its comments say how: rewrite the answerable drafts as people would ask them, "
                  "check each TODO no-answer question), then `pnk eval --fit-confidence --write`")
    short = None
    if drafted.no_answer < MIN_NO_ANSWER:
        short = (f"only {drafted.no_answer} no-answer questions could be drafted from this KB's words; the fit "
                 f"needs {MIN_NO_ANSWER} to promise its false-confidence ceiling for new questions: add "
                 "questions of your own about things your documents do not cover")
    _emit(args, {"ok": True, "written": str(drafted.path), "drafted": drafted.answerable,
                 "no_answer": drafted.no_answer, "no_answer_needed": MIN_NO_ANSWER, "short": short,
                 "next": next_steps},
          f"wrote {drafted.path}: {drafted.answerable} answerable drafts and {drafted.no_answer} no-answer "
          f"drafts to check\n" + (f"note: {short}\n" if short else "") + f"next: {next_steps}")
    return 0


def _self_calibrate(args: EvalArgs) -> int:
    from pinakes.eval.self_calibrated import render, run_self_calibration

    run = run_self_calibration(_kb_root(args), sync=not args.no_sync)
    for warning in run.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    _emit(args, {"ok": True, **run.to_dict()}, render(run))
    return 0


def _check_outputs(args: EvalArgs, *, outcomes: Path | None, baseline: Path | None) -> None:
    """The files this run will write are refused before it runs when they are Pinakes' own (the
    manifest, a sidecar, anything in .pinakes/) or an existing file of another kind."""
    from pinakes.eval.baseline import BASELINE_FORMAT
    from pinakes.eval.outcomes import OUTCOMES_FORMAT
    from pinakes.outputs import checked_output_path, has_format

    if outcomes is not None:
        checked_output_path(outcomes, flag="--outcomes", replaceable=has_format(OUTCOMES_FORMAT))
    if baseline is not None:
        checked_output_path(baseline, flag="--baseline", replaceable=has_format(BASELINE_FORMAT))


def _rescore(args: EvalArgs, outcomes_path: Path) -> int:
    from pinakes.eval import harness
    from pinakes.eval.baseline import Baseline, read_baseline, write_baseline
    from pinakes.eval.outcomes import read_outcomes
    from pinakes.eval.scoreboard import score

    outcomes = read_outcomes(outcomes_path)
    if args.fit_confidence:
        return _fit(args, outcomes, None)
    board = score(outcomes)
    if args.update_baseline:
        target = args.baseline or outcomes_path.parent / "baseline.json"
        _check_outputs(args, outcomes=None, baseline=target)
        write_baseline(target, Baseline(outcomes.header, board))
        _emit(args, {"ok": True, "scoreboard": board.to_dict(), "baseline_written": str(target)},
              _board_text(outcomes, board) + f"\nbaseline written: {target}")
        return 0
    baseline = read_baseline(args.baseline) if args.baseline else None
    result = harness.gate(outcomes.header, board, baseline, _tolerance(args))
    _report(args, None, outcomes, board, result, updated=False)
    return 0 if result.ok else EXIT_REGRESSED


def _compare(args: EvalArgs, pair: list[Path]) -> int:
    from pinakes.eval.outcomes import read_outcomes
    from pinakes.eval.paired import compare_outcomes, render_comparison

    before, after = (read_outcomes(path) for path in pair)
    result = compare_outcomes(before, after)
    _emit(args, {"ok": True, **result.to_dict()}, render_comparison(result))
    return 0


def _corpus(args: EvalArgs, questions_path: Path) -> int:
    from pinakes.eval.corpus import load_corpus_questions, score_corpus
    from pinakes.eval.runner import index_embedding, open_searcher, sync_before_eval

    paths, manifest = _load(args)
    questions = load_corpus_questions(questions_path, paths.kb_root, manifest.sources.roots)
    if not args.no_sync:
        for warning in sync_before_eval(paths.kb_root).warnings:
            print(f"warning: {warning}", file=sys.stderr)
    with open_searcher(paths.kb_root, manifest) as searcher:
        scores = score_corpus(searcher, questions)
    retrieval = manifest.retrieval
    data = scores.to_dict()
    data.update({
        "embedding": index_embedding(paths.kb_root),
        "reranker": manifest.rerank.model if retrieval.rerank else None,
        "retrieval": {"candidates_per_source": retrieval.candidates_per_source, "fusion_top_k": retrieval.fusion_top_k,
                      "rrf_k": retrieval.rrf_k, "rerank": retrieval.rerank},
    })
    lines = [f"{data['questions']} questions scored from {questions_path}"
             + (f" ({len(scores.skipped)} skipped: no relevant document in the KB)" if scores.skipped else "")]
    for key in ("ndcg@10", "recall@10", "recall@100", "mrr"):
        value = data[key]
        lines.append(f"  {key:<11} {'—' if value is None else f'{value:.4f}'}")
    if scores.missing_relevant:
        missing = scores.missing_relevant
        lines.append(f"note: {counted(missing, 'relevant path')} {'is not a file' if missing == 1 else 'are not files'} "
                     f"in this KB and {'was' if missing == 1 else 'were'} left out")
    lines.append(f"note: one search of {data['passages_per_question']} passages per question, folded to "
                 f"documents (mean {data['mean_documents_ranked'] or 0:.1f} documents ranked); relevance is binary")
    _emit(args, {"ok": True, **data}, "\n".join(lines))
    return 0


# ------------------------------------------------------------------------------------------------


def _fit(args: EvalArgs, outcomes: OutcomesFile, manifest_bytes: bytes | None,
         kb_root: Path | None = None) -> int:
    """Fit [retrieval.confidence], print it with its trade-off curve, and with --write put it into
    pinakes.toml (`manifest_bytes`: the file as it was when the run loaded it). With `kb_root` (a
    golden-set run of that KB) a small golden set's fit is shrunk towards its self-calibration."""
    golden = _fit_outcomes(outcomes, kb_root)
    fit = golden.fit
    curve = _trade_off_curve(fit)
    written = _write_block(args, fit, manifest_bytes) if args.write else None
    data: dict[str, object] = {"ok": True, **fit.to_dict(), "trade_off_curve": curve, "written": written,
                               "shrunk_towards": golden.shrunk_towards, "note": golden.note}
    _emit(args, data, _fit_text(fit, curve, written, golden.note))
    return 0


def _fit_outcomes(outcomes: OutcomesFile, kb_root: Path | None) -> GoldenFit:
    from pinakes.calibration.shrinkage import CARRY, GoldenFit, fit_golden_set
    from pinakes.errors import PinakesError
    from pinakes.eval.fitting import FitError, describe_fit, fit_confidence
    from pinakes.eval.outcomes import header_object

    header, retrieval = outcomes.header, outcomes.retrieval
    golden = header_object(header, "golden_set")
    settings = (f"{retrieval.get('mode', 'hybrid')} final_k={retrieval['final_k']} "
                f"fusion_top_k={retrieval.get('fusion_top_k')} "
                f"candidates_per_source={retrieval.get('candidates_per_source')} rrf_k={retrieval.get('rrf_k')}")
    embedding = header_object(header, "embedding")
    embedding_name = str(embedding.get("model") or "unknown embedding model")
    if embedding.get("provider"):  # int8 ONNX and fp32 weights of one model score differently
        embedding_name += f" via {embedding['provider']}"
    reranker = header_object(header, "reranker")  # empty: rerank was off
    reranked = str(reranker["model"]) if reranker.get("model") and retrieval.get("rerank") else None
    fitted_for = describe_fit(embedding_name, reranked, str(golden.get("path", "golden set")), len(outcomes.rows),
                              settings)
    try:
        no_answer = sum(1 for row in outcomes.rows if row.kind == "no-answer")
        if kb_root is None or no_answer >= CARRY or reranked:
            return GoldenFit(fit_confidence(outcomes.rows, fitted_for), None, None)
        from pinakes.eval.self_calibrated import self_calibration_for_fit

        base, why_not = self_calibration_for_fit(kb_root)
        return fit_golden_set(outcomes.rows, fitted_for, base, why_not)
    except FitError as exc:
        raise PinakesError(f"cannot fit confidence thresholds: {exc}",
                           remedy="the golden set needs answerable and no-answer questions, searched "
                                  "with vectors or rerank on (`pnk eval --init` drafts both kinds)") from None


class _CurvePoint(TypedDict):
    low: float
    false_abstain: dict[str, object]  # a Rate's to_dict()
    false_confidence: dict[str, object]
    chosen: bool


class _Written(TypedDict):
    path: str
    placement: str  # the rewrite's placement
    backup: str | None


def _trade_off_curve(fit: ConfidenceFit) -> list[_CurvePoint]:
    """The fit's operating points (no other beats them on both errors), by rising threshold, with
    the one written marked: the point whose errors are the fit's own (added if the front lacks it)."""
    from pinakes.eval.scoreboard import Rate

    answerable, no_answer = fit.false_abstain.denominator, fit.false_confidence.denominator
    chosen_errors = (fit.false_abstain.numerator, fit.false_confidence.numerator)
    points = list(fit.trade_offs)
    if not any((fa, fc) == chosen_errors for _, fa, fc in points):
        points = sorted([*points, (fit.low, *chosen_errors)])
    return [{"low": low, "false_abstain": Rate(fa, answerable).to_dict(),
             "false_confidence": Rate(fc, no_answer).to_dict(), "chosen": (fa, fc) == chosen_errors}
            for low, fa, fc in points]


def _write_block(args: EvalArgs, fit: ConfidenceFit, manifest_bytes: bytes | None) -> _Written:
    from pinakes.manifest.rewrite import write_table

    result = write_table(_manifest_path(args), CONFIDENCE_TABLE, fit.manifest_block(), expected=manifest_bytes,
                         backup_label="confidence")
    return {"path": str(result.path), "placement": result.placement,
            "backup": str(result.backup) if result.backup else None}


def _fit_text(fit: ConfidenceFit, curve: list[_CurvePoint], written: _Written | None, note: str | None) -> str:
    if written is None:
        lines = ["# Fitted on the golden set. `pnk eval --fit-confidence --write` writes this block into "
                 "pinakes.toml itself",
                 "# (replacing any [retrieval.confidence], every other byte kept, a backup beside it); or paste it:"]
    else:
        lines = ["# Fitted on the golden set:"]
    lines += [fit.manifest_block().rstrip(), ""]
    lines.append(f"trade-off curve (threshold low; {fit.false_abstain.denominator} answerable and "
                 f"{fit.false_confidence.denominator} no-answer questions; > marks the point fitted):")
    lines.append("    low          false-abstain   false-confidence")
    for point in curve:
        mark = ">" if point["chosen"] else " "
        lines.append(f"  {mark} {point['low']:<12} {_count(point['false_abstain']):<15} "
                     f"{_count(point['false_confidence'])}")
    lines += [
        f"false-abstain:    {_fraction(fit.false_abstain)}  (answerable questions that would abstain)",
        f"false-confidence: {_fraction(fit.false_confidence)}  (no-answer questions that would not abstain)",
        f"no-answer at high: {_fraction(fit.no_answer_high)}",
        "These are scored on the set they were fitted on: a floor, not a forecast.",
    ]
    if fit.cross_validated is not None:
        from pinakes.eval.fitting import CROSS_FIT_FOLDS

        cv_abstain, cv_confidence = fit.cross_validated
        lines.append(f"forecast for new questions ({CROSS_FIT_FOLDS}-fold cross-fitted, each question scored by a fit "
                     f"made without it): false-abstain {_fraction(cv_abstain)}, false-confidence "
                     f"{_fraction(cv_confidence)}")
    if fit.low == fit.high:
        lines.append("low = high: this fit has no medium band (a search is high or low)")
    needed = fit.no_answer_needed
    if note is not None:
        lines.append(f"note: {note}")
    if "shrunk towards" not in fit.fitted_for and needed is not None and fit.false_confidence.denominator < needed:
        lines.append(f"note: {fit.false_confidence.denominator} no-answer questions are too few to promise "
                     f"false-confidence <= {fit.max_false_confidence:g} on new questions (that needs {needed}); "
                     "the fit leaves none of them confident. Add no-answer questions to the golden set "
                     "(`pnk eval --init` drafts some) and fit again.")
    if fit.excluded:
        lines.append(f"excluded (no score to fit on): {', '.join(fit.excluded)}")
    if written is None:
        lines.append("Then run `pnk eval --update-baseline` so the gate covers the abstention rates.")
    elif written["backup"] is None:
        lines.append(f"{written['path']} already holds this block; nothing was written.")
    else:
        where = {"replaced": "replaced its [retrieval.confidence]",
                 "placeholder": "in place of the commented-out [retrieval.confidence]",
                 "inserted": "after [retrieval]", "appended": "at the end"}.get(written["placement"], "")
        lines += [f"written: {written['path']} ({where}; every other byte kept; the previous file is "
                  f"{written['backup']})",
                  "`pnk search` now reports high / medium / low; run `pnk eval --update-baseline` so the gate "
                  "covers the abstention rates."]
    return "\n".join(lines)


def _count(rate: Mapping[str, object]) -> str:
    return f"{rate['numerator']}/{rate['denominator']}"


def _report(args: EvalArgs, paths: EvalPaths | None, outcomes: OutcomesFile, board: Scoreboard,
            result: GateResult, *, updated: bool) -> None:
    data: dict[str, object] = {
        "ok": result.ok or updated,
        "header": outcomes.header,
        "scoreboard": board.to_dict(),
        "regressions": [regression.to_dict() for regression in result.regressions],
        "tolerance": result.tolerance,
        "baseline": str(result.baseline.path) if result.baseline and result.baseline.path else None,
        "baseline_changes": list(result.changes),
    }
    if paths is not None:
        data["outcomes"] = str(paths.outcomes)
        if updated:
            data["baseline_written"] = str(paths.baseline)
    if args.json:
        print(json.dumps(data, indent=2, ensure_ascii=False))
        return
    lines = [_board_text(outcomes, board)]
    if paths is not None:
        lines.append(f"outcomes: {paths.outcomes}")
    if result.changes:
        lines.append("differs from the baseline's configuration:")
        lines.extend(f"  {change}" for change in result.changes)
    if updated:
        assert paths is not None
        lines.append(f"baseline written: {paths.baseline}")
        if result.regressions:
            lines.append("(it replaced a baseline this run would have failed:)")
            lines.extend(f"  {regression.render()}" for regression in result.regressions)
    elif result.baseline is None:
        lines.append("no baseline to gate on (run `pnk eval --update-baseline` to create one)")
    elif result.regressions:
        lines.append(f"REGRESSION against {result.baseline.path} (tolerance {result.tolerance}):")
        lines.extend(f"  {regression.render()}" for regression in result.regressions)
    else:
        lines.append(f"no regression against {result.baseline.path} (tolerance {result.tolerance})")
    print("\n".join(lines))


def _board_text(outcomes: OutcomesFile, board: Scoreboard) -> str:
    from pinakes.eval.outcomes import header_object
    from pinakes.eval.scoreboard import null_reasons, render_table
    from pinakes.jsontypes import is_object

    header, retrieval = outcomes.header, outcomes.retrieval
    embedding = header_object(header, "embedding")
    reranker = header.get("reranker")
    golden = header_object(header, "golden_set")
    kb = header_object(header, "kb").get("name", "")
    thresholds = outcomes.thresholds
    lines = [
        f"{kb}: {counted(len(outcomes.rows), 'question')} ({golden.get('path', '?')})",
        f"embedding {embedding.get('model')} ({embedding.get('revision')}); "
        + (f"rerank {header_object(header, 'reranker').get('model')}" if is_object(reranker) else "rerank off")
        + f"; final_k {retrieval['final_k']}, fusion_top_k {retrieval.get('fusion_top_k')}, "
          f"candidates_per_source {retrieval.get('candidates_per_source')}, rrf_k {retrieval.get('rrf_k')}",
        ("confidence thresholds: none" if thresholds is None
         else f"confidence thresholds: low {thresholds['low']} / high {thresholds['high']}"),
        "",
        render_table(board),
    ]
    lines.extend(null_reasons(board))
    return "\n".join(lines)


def _fraction(rate: Rate) -> str:
    value = rate.value
    shown = "null" if value is None else f"{value:.3f}"
    return f"{shown} ({rate.numerator}/{rate.denominator})"


def _tolerance(args: EvalArgs) -> float:
    from pinakes.eval.baseline import DEFAULT_TOLERANCE

    return DEFAULT_TOLERANCE if args.tolerance is None else args.tolerance


def _emit(args: EvalArgs, data: dict[str, object], text: str) -> None:
    if args.json:
        print(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        print(text)
