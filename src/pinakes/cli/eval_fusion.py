"""`pnk eval --fit-fusion [--write]`: the fusion fitted on the golden set (eval/fusion_fit.py),
printed as a [retrieval.fusion] block and, with --write, put into pinakes.toml the way
--fit-confidence --write puts its block (manifest/rewrite.py: every other byte kept, a backup)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pinakes.eval.fusion_fit import FusionFit
    from pinakes.eval.harness import EvalPaths
    from pinakes.manifest import Manifest

FUSION_TABLE = "retrieval.fusion"  # replaced whole by --write


def fit_fusion_run(paths: EvalPaths, manifest: Manifest, manifest_bytes: bytes | None, *, write: bool,
                   sync: bool) -> tuple[dict[str, object], str]:
    """The fit, written into pinakes.toml with `write` (`manifest_bytes`: the file as read before
    the run); its JSON and its text."""
    from pinakes.errors import UsageError
    from pinakes.eval import harness
    from pinakes.eval.fusion_fit import fit_fusion
    from pinakes.eval.runner import index_embedding, open_searcher, sync_before_eval

    golden, skipped = harness.load_for_run(paths, manifest)
    if golden is None or not any(question.answerable for question in golden.questions):
        raise UsageError(f"nothing to fit on: {skipped or 'the golden set has no answerable question'}",
                         remedy="draft a golden set with `pnk eval --init`, edit it, then run "
                                "`pnk eval --fit-fusion --write` again")
    if sync:
        for warning in sync_before_eval(paths.kb_root).warnings:
            print(f"warning: {warning}", file=sys.stderr)
    embedding = index_embedding(paths.kb_root)
    golden_path = paths.golden.relative_to(paths.kb_root).as_posix()
    with open_searcher(paths.kb_root, manifest) as searcher:
        fitted_for = (f"{embedding.get('model') or 'unknown embedding model'}, {golden_path}, "
                      f"candidates_per_source={searcher.settings.candidates_per_source} "
                      f"fusion_top_k={searcher.settings.fusion_top_k}")
        fit = fit_fusion(searcher, golden, fitted_for, manifest.retrieval.rrf_k)
    written: dict[str, str | None] | None = None
    if write:
        from pinakes.kb import KBPaths
        from pinakes.manifest.rewrite import write_table

        result = write_table(KBPaths(paths.kb_root).manifest, FUSION_TABLE, fit.manifest_block(), expected=manifest_bytes,
                             backup_label="fusion", command="pnk eval --fit-fusion")
        written = {"path": str(result.path), "placement": result.placement,
                   "backup": str(result.backup) if result.backup else None}
    return {"ok": True, **fit.to_dict(), "block": fit.manifest_block(), "written": written}, _text(fit, written)


def _text(fit: FusionFit, written: dict[str, str | None] | None) -> str:
    from pinakes.eval.fusion_fit import MOVE_AT

    lines = ["# Fitted on the golden set:" if written else
             "# Fitted on the golden set. `pnk eval --fit-fusion --write` writes this block into pinakes.toml "
             "(replacing any [retrieval.fusion]); or paste it:",
             fit.manifest_block().rstrip(), ""]
    fixed = fit.fixed
    lines.append(f"{fit.questions} golden queries, nDCG@10 of the fused pool (rerank off); fixed RRF "
                 f"(k {fixed.arm.rrf_k}) {fixed.ndcg:.4f}")
    for score in fit.arms[:5]:
        mark = ">" if score.arm == fit.chosen.arm else " "
        lines.append(f"  {mark} {score.arm.label:<32} {score.ndcg:.4f}  {score.improved} better / "
                     f"{score.worsened} worse than fixed RRF, p {score.p:.4f}")
    if fit.moved:
        lines.append(f"chosen: {fit.chosen.arm.label} (beats fixed RRF at p < {MOVE_AT:g})")
    else:
        best = fit.arms[0]
        why = ("no arm ranks better than fixed RRF" if best.arm == fixed.arm or best.ndcg <= fixed.ndcg
               else f"the best arm ({best.arm.label}) beats it at p {best.p:.4f}, not below {MOVE_AT:g}")
        lines.append(f"fixed RRF kept: {why}. A larger golden set can move it.")
    lines.append("These are scored on the set they were fitted on: a floor, not a forecast.")
    if written is not None:
        if written["backup"] is None:
            lines.append(f"{written['path']} already holds this block; nothing was written.")
        else:
            lines.append(f"written: {written['path']} ({written['placement']}; every other byte kept; the "
                         f"previous file is {written['backup']}). Run `pnk eval --update-baseline` so the "
                         "gate covers the new ranking.")
    return "\n".join(lines)
