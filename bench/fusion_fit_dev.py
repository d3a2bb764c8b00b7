"""Issue #46, what remains of "hybrid ≥ its best single channel": (a) a fusion fitted per KB from
its own golden set (RRF weights, RRF k, or one channel alone), guarded so a small or indifferent
set keeps fixed RRF; (b) a confident keyword top kept first. Each is fitted on one half of a
corpus's questions and scored on the other (SEEDS seeds × both halves), from the lists
`bench/fusion_dev.py collect` stored (the keyword side rescored as the product's BM25F).

    python bench/fusion_fit_dev.py [--json out.json]

Per held-out half it reports: the fitted arm minus fixed RRF (today's hybrid), minus the best
single channel of that half, and whether either paired sign test is significant (p < 0.05).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fusion_dev import CACHE, CORPORA, K1, Corpus, folded, halves, ndcg, paired, rrf, term_idf
from fusion_report import NEW

SEEDS = 10
RATIOS = (0.25, 0.5, 1.0, 2.0, 4.0)  # keyword weight / vector weight
KS = (60, 20, 5)
ALPHA = 0.05


def arms() -> list[tuple[str, float, float, int]]:
    out = [("vector only", 0.0, 1.0, 60), ("keyword only", 1.0, 0.0, 60)]
    out += [(f"rrf {r:g}:1 k{k}", r, 1.0, k) for r in RATIOS for k in KS]
    return out


FIXED = "rrf 1:1 k60"


class Grid:
    """Per question: nDCG@10 under every arm, and the keyword side's confidence features."""

    def __init__(self, corpus: Corpus):
        self.corpus = corpus
        keyword, vector = corpus.keyword(NEW), corpus.vector()
        self.names = [a[0] for a in arms()]
        self.scores = np.zeros((len(keyword), len(self.names)))
        self.fused: dict[str, list[list[str]]] = {}
        for j, (name, wk, wv, k) in enumerate(arms()):
            rankings = [rrf(kw, v, corpus.paths, wk, wv, k) for kw, v in zip(keyword, vector, strict=True)]
            self.fused[name] = rankings
            self.scores[:, j] = corpus.scores(rankings)
        self.keyword_top = [folded(kw, corpus.paths)[:1] for kw in keyword]
        ratio: list[float] = []
        margin: list[float] = []
        for row, kw in zip(corpus.rows, keyword, strict=True):
            idf = {t: term_idf(row, t, corpus.n, "text-plus-context-docs") for t in row["terms"]}
            bound = sum(idf.values()) * (K1 + 1.0)
            ratio.append(kw[0][1] / bound if kw and bound else 0.0)
            margin.append((kw[0][1] - kw[1][1]) / bound if len(kw) > 1 and bound else (ratio[-1] if kw else 0.0))
        self.ratio, self.margin = np.array(ratio), np.array(margin)
        # whether the keyword top document is among the vector list's first 10 documents
        self.agreed = np.array([bool(top) and top[0] in folded(v, corpus.paths)[:10]
                                for top, v in zip(self.keyword_top, vector, strict=True)])
        self.require_agreement = False

    def column(self, name: str) -> np.ndarray:
        return self.scores[:, self.names.index(name)]

    def kept_top(self, base: str, ratio_at: float, margin_at: float) -> np.ndarray:
        """`base`'s scores with the keyword list's top document first where the keyword top is
        confident (bm25 over its bound ≥ ratio_at and margin over the bound ≥ margin_at)."""
        out = self.column(base).copy()
        confident = (self.ratio >= ratio_at) & (self.margin >= margin_at)
        if self.require_agreement:
            confident &= self.agreed
        for i in np.nonzero(confident)[0]:
            top = self.keyword_top[i]
            ranking = self.fused[base][i]
            if top and ranking and ranking[0] != top[0]:
                out[i] = ndcg([*top, *(d for d in ranking if d != top[0])], self.corpus.questions[int(i)])
        return out


class ProductGrid(Grid):
    """A KB with a golden set (the demo KB): each golden query's two lists from the product's own
    `pnk eval --fit-fusion` collection, every arm scored by its own fusion (eval/fusion_fit.py)."""

    def __init__(self, name: str, kb: Path):
        from pinakes.eval import fusion_fit, harness
        from pinakes.eval.runner import open_searcher
        from pinakes.manifest import load_manifest

        manifest = load_manifest(kb / "pinakes.toml")
        golden, _ = harness.load_for_run(harness.EvalPaths.for_kb(kb), manifest)
        assert golden is not None
        with open_searcher(kb, manifest) as searcher:
            lists = fusion_fit.collect_lists(searcher, golden)
            top = searcher.settings.fusion_top_k
        self.corpus = type("Named", (), {"name": name})()
        self.names = [a[0] for a in arms()]
        self.scores = np.array([[fusion_fit._score(item,  # pyright: ignore[reportPrivateUsage] -- the fit's own scorer
                                                   fusion_fit.FusionArm(wk, wv, k), top)
                                 for (_, wk, wv, k) in arms()] for item in lists])


def significant_gain(train_fit: np.ndarray, train_fixed: np.ndarray) -> bool:
    p = paired(list(train_fixed), list(train_fit))
    return p["p_better"] < ALPHA


def fit_arm(grid: Grid, rows: np.ndarray, guard: str, alpha: float = ALPHA, single: bool = True) -> str:
    """The arm with the best training mean; with `guard` 'sign', fixed RRF unless that arm beats it
    significantly (paired sign test at `alpha`) on the training rows. `single` False: fused arms only."""
    fixed = grid.column(FIXED)[rows]
    means = grid.scores[rows].mean(axis=0)
    allowed = [j for j, name in enumerate(grid.names) if single or not name.endswith(" only")]
    best = grid.names[max(allowed, key=lambda j: means[j])]
    if means[grid.names.index(best)] <= fixed.mean() + 1e-12:
        return FIXED
    if guard == "sign":
        p = paired(list(fixed), list(grid.column(best)[rows]))
        if not p["p_better"] < alpha:
            return FIXED
    return best


THRESHOLDS = [(r, m) for r in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8) for m in (0.0, 0.05, 0.1, 0.2)]


def fit_keep_top(grids: Sequence[Grid], rows: Sequence[np.ndarray], guard: str) -> tuple[float, float] | None:
    """One (ratio, margin) threshold pair for every corpus, best summed training mean; None keeps RRF."""
    base = sum(float(g.column(FIXED)[r].mean()) for g, r in zip(grids, rows, strict=True))
    best: tuple[float, tuple[float, float] | None] = (base, None)
    for ratio_at, margin_at in THRESHOLDS:
        value = sum(float(g.kept_top(FIXED, ratio_at, margin_at)[r].mean()) for g, r in zip(grids, rows, strict=True))
        if value > best[0] + 1e-9:
            best = (value, (ratio_at, margin_at))
    return best[1]


def verdict(grid: Grid, test: np.ndarray, fitted: np.ndarray, out: dict[str, list[float]]) -> None:
    fixed = grid.column(FIXED)[test]
    mine = fitted[test]
    vector, keyword = grid.column("vector only")[test], grid.column("keyword only")[test]
    best = vector if vector.mean() >= keyword.mean() else keyword
    p_rrf, p_best = paired(list(fixed), list(mine)), paired(list(best), list(mine))
    out["vs_rrf"].append(float(mine.mean() - fixed.mean()))
    out["vs_best"].append(float(mine.mean() - best.mean()))
    out["fixed_vs_best"].append(float(fixed.mean() - best.mean()))
    out["worse_rrf"].append(float(p_rrf["p_worse"] < ALPHA))
    out["worse_best"].append(float(p_best["p_worse"] < ALPHA))
    out["better_rrf"].append(float(p_rrf["p_better"] < ALPHA))


def summary(name: str, bucket: dict[str, list[float]]) -> str:
    below = sum(1 for g in bucket["vs_best"] if g < -1e-12)
    was = sum(1 for g in bucket["fixed_vs_best"] if g < -1e-12)
    below_rrf = sum(1 for g in bucket["vs_rrf"] if g < -1e-12)
    return (f"| {name} | {statistics.fmean(bucket['vs_rrf']):+.4f} (min {min(bucket['vs_rrf']):+.4f}; "
            f"below in {below_rrf}) | {statistics.fmean(bucket['vs_best']):+.4f} (min {min(bucket['vs_best']):+.4f}) | "
            f"{below}/{len(bucket['vs_best'])} (today {was}) | {int(sum(bucket['worse_rrf']))} / "
            f"{int(sum(bucket['worse_best']))} / {int(sum(bucket['better_rrf']))} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--demo", type=Path, help="a synced copy of tests/demo-kb (its golden set is the questions)")
    parser.add_argument("--only-product", action="store_true", help="only the arms the product ships (no keep-top)")
    parser.add_argument("--only-agreement", action="store_true", help="only the keep-top rule gated by agreement")
    args = parser.parse_args()
    corpora = [Corpus(name) for name in CORPORA if (CACHE / f"{name}.json").exists()]
    grids: list[Grid] = ([ProductGrid("demo", args.demo)] if args.demo else []) + [Grid(c) for c in corpora]
    print("## Channels (all questions, nDCG@10)")
    for g in grids:
        print(f"- {g.corpus.name}: " + ", ".join(f"{n} {g.scores[:, j].mean():.4f}" for j, n in enumerate(g.names)
                                                 if n in ("vector only", "keyword only", FIXED)))
    result: dict[str, object] = {}
    arms_chosen: dict[str, dict[str, int]] = {}
    for label, guard in (("per-KB fit, best arm", "none"), ("per-KB fit, sign-test guard", "sign"),
                         ("per-KB fit, sign-test guard p<0.01", "sign01"),
                         ("per-KB fit, fused arms only, sign-test guard", "signfused"),
                         ("keep a confident keyword top (global thresholds)", "keep"),
                         ("keep a confident keyword top (per-KB thresholds, sign-test guard)", "keepkb"),
                         ("per-KB fit (guarded) + confident keyword top", "both"),
                         ("per-KB fit, sign-test guard p<0.005", "sign005"),
                         ("per-KB fit, sign-test guard p<0.001", "sign001"),
                         ("keep a confident keyword top the vector list's top 10 documents hold (global)", "keepagree")):
        if args.only_product and guard not in ("sign01", "sign005", "sign001"):
            continue
        if args.only_agreement and guard != "keepagree":
            continue
        for g in grids:
            g.require_agreement = guard == "keepagree"
        if args.demo and guard in ("keep", "keepkb", "both", "keepagree"):
            continue  # the demo's lists carry no keyword-side features
        buckets: dict[str, dict[str, list[float]]] = {
            g.corpus.name: {k: [] for k in ("vs_rrf", "vs_best", "fixed_vs_best", "worse_rrf", "worse_best",
                                            "better_rrf")} for g in grids}
        for seed in range(SEEDS):
            splits = [halves(len(g.scores), seed) for g in grids]
            for side in (0, 1):
                train = [np.array(s[side]) for s in splits]
                test = [np.array(s[1 - side]) for s in splits]
                rule = fit_keep_top(grids, train, guard) if guard in ("keep", "both", "keepagree") else None
                for g, tr, te in zip(grids, train, test, strict=True):
                    if guard in ("keep", "keepagree"):
                        fitted = g.column(FIXED) if rule is None else g.kept_top(FIXED, *rule)
                        chosen = str(rule)
                    elif guard == "keepkb":
                        own = fit_keep_top([g], [tr], guard)
                        if own is not None:
                            p = paired(list(g.column(FIXED)[tr]), list(g.kept_top(FIXED, *own)[tr]))
                            own = own if p["p_better"] < ALPHA else None
                        fitted = g.column(FIXED) if own is None else g.kept_top(FIXED, *own)
                        chosen = str(own)
                    elif guard in ("sign01", "signfused", "sign005", "sign001"):
                        alpha = {"sign01": 0.01, "sign005": 0.005, "sign001": 0.001}.get(guard, ALPHA)
                        chosen = fit_arm(g, tr, "sign", alpha, guard != "signfused")
                        fitted = g.column(chosen)
                    else:
                        chosen = fit_arm(g, tr, "sign" if guard == "both" else guard)
                        fitted = g.column(chosen)
                        if guard == "both" and rule is not None and chosen != "vector only" and chosen != "keyword only":
                            fitted = g.kept_top(chosen, *rule)
                    arms_chosen.setdefault(f"{label} | {g.corpus.name}", {}).setdefault(chosen, 0)
                    arms_chosen[f"{label} | {g.corpus.name}"][chosen] += 1
                    verdict(g, te, fitted, buckets[g.corpus.name])
        print(f"\n## {label}: fitted on one half, scored on the other ({SEEDS} seeds × 2)")
        print("| corpus | vs fixed RRF (mean) | vs best single channel of the half (mean) | halves below best | "
              "significantly worse than RRF / than best / better than RRF |")
        print("|---|---|---|---|---|")
        for name, bucket in buckets.items():
            print(summary(name, bucket))
        result[label] = {n: {k: statistics.fmean(v) for k, v in b.items()} for n, b in buckets.items()}
    print("\n## Arms chosen")
    for key, counts in arms_chosen.items():
        print(f"- {key}: " + ", ".join(f"{a} ×{n}" for a, n in sorted(counts.items(), key=lambda x: -x[1])))
    result["chosen"] = arms_chosen
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
