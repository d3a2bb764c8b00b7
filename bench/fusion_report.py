"""The tables of bench/fusion_dev.py (issue #46): channels, context on the keyword side, and
query-adaptive fusion fitted on held-out halves. Imported by `fusion_dev.py report`."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

import numpy as np
from fusion_dev import SHIPPED, Corpus, Variant, halves, interval, paired

SEEDS = 10
NO_CONTEXT: Variant = {"form": "shipped", "w": 0.0}
KEYWORD_VARIANTS: dict[str, Variant] = {
    "no context (w 0)": NO_CONTEXT,
    "shipped (w 1, text length)": SHIPPED,
    "shipped w 0.5": {"form": "shipped", "w": 0.5},
    "shipped, idf text": {"form": "shipped", "w": 1.0, "idf": "text"},
    "shipped, idf doc-context": {"form": "shipped", "w": 1.0, "idf": "doc-context"},
    "shipped, idf text-or-context-docs": {"form": "shipped", "w": 1.0, "idf": "text-or-context-docs"},
    "bm25f w 1 bc 0.75, idf text": {"form": "bm25f", "w": 1.0, "bc": 0.75, "idf": "text"},
    "bm25f w 1 bc 0.75, idf text-plus-context-docs": {"form": "bm25f", "w": 1.0, "bc": 0.75,
                                                       "idf": "text-plus-context-docs"},
    "shipped, idf text-plus-context-docs": {"form": "shipped", "w": 1.0, "idf": "text-plus-context-docs"},
    "bm25f w 1 bc 1, idf text": {"form": "bm25f", "w": 1.0, "bc": 1.0, "idf": "text"},
    "bm25f w 0.5 bc 0.75, idf text": {"form": "bm25f", "w": 0.5, "bc": 0.75, "idf": "text"},
    **{f"bm25f w {w:g} bc {bc:g}{'' if idf == 'row' else ', idf ' + idf}": {"form": "bm25f", "w": w, "bc": bc, "idf": idf}
       for w in (0.25, 0.5, 1.0) for bc in (0.0, 0.75, 1.0) for idf in ("row", "doc-context")},
    **{f"fields w {w:g} bc {bc:g}": {"form": "fields", "w": w, "bc": bc} for w in (0.25, 0.5, 1.0) for bc in (0.75,)},
}
RATIOS = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0, float("inf"))  # keyword weight / vector weight
FEATURES = ("cosine", "cosine_margin", "cosine_spread", "bm25_ratio", "bm25_margin", "agreement",
            "doc_agreement", "top_doc_same", "terms")


def weights_of(ratio: float) -> tuple[float, float]:
    return (1.0, 0.0) if ratio == float("inf") else (ratio, 1.0)


def fmt(values: Sequence[float]) -> str:
    low, high = interval(values)
    return f"{statistics.fmean(values):.4f} [{low:.3f}, {high:.3f}]"


NEW: Variant = {"form": "bm25f", "w": 1.0, "bc": 0.75, "idf": "text-plus-context-docs"}  # what this change ships


def channels(corpora: Sequence[Corpus], keyword_side: Variant = SHIPPED, label: str = "shipped") -> dict[str, object]:
    print(f"\n## Channels, keyword side {label} (all questions; nDCG@10 with a bootstrap 95 % interval)")
    print("| corpus | q | keyword, no context | keyword (shipped) | vector | hybrid (shipped) | hybrid vs vector | hybrid vs keyword | keyword: context vs none |")
    print("|---|---|---|---|---|---|---|---|---|")
    out: dict[str, object] = {}
    for corpus in corpora:
        k0, k1 = corpus.keyword_only(NO_CONTEXT), corpus.keyword_only(keyword_side)
        v, h = corpus.vector_only(), corpus.hybrid(keyword_side)
        row = {"keyword_no_context": k0, "keyword": k1, "vector": v, "hybrid": h}
        out[corpus.name] = {key: statistics.fmean(value) for key, value in row.items()}
        pv, pk, pc = paired(v, h), paired(k1, h), paired(k0, k1)
        print(f"| {corpus.name} | {len(h)} | {fmt(k0)} | {fmt(k1)} | {fmt(v)} | {fmt(h)} | "
              f"{pv['up']}/{pv['down']} p_worse {pv['p_worse']} | {pk['up']}/{pk['down']} p_worse {pk['p_worse']} | "
              f"{pc['up']}/{pc['down']} p_worse {pc['p_worse']} |")
    print("\nPer held-out half (seeds 0-9): hybrid minus the best single channel of that half")
    for corpus in corpora:
        h, v, k = corpus.hybrid(keyword_side), corpus.vector_only(), corpus.keyword_only(keyword_side)
        gaps: list[float] = []
        for seed in range(SEEDS):
            for half in halves(len(h), seed):
                best = max(statistics.fmean(v[i] for i in half), statistics.fmean(k[i] for i in half))
                gaps.append(statistics.fmean(h[i] for i in half) - best)
        print(f"- {corpus.name}: min {min(gaps):+.4f}, mean {statistics.fmean(gaps):+.4f}, "
              f"halves below: {sum(1 for g in gaps if g < 0)}/{len(gaps)}")
    return out


def keyword_variants(corpora: Sequence[Corpus]) -> dict[str, object]:
    print("\n## The keyword side: context scoring variants (keyword only, nDCG@10; paired against no context)")
    print("| variant | " + " | ".join(c.name for c in corpora) + " | mean |")
    print("|---|" + "---|" * (len(corpora) + 1))
    out: dict[str, object] = {}
    base = {c.name: c.keyword_only(NO_CONTEXT) for c in corpora}
    for label, variant in KEYWORD_VARIANTS.items():
        cells: list[str] = []
        means: list[float] = []
        for corpus in corpora:
            scores = corpus.keyword_only(variant)
            p = paired(base[corpus.name], scores)
            means.append(statistics.fmean(scores))
            cells.append(f"{means[-1]:.4f} ({p['up']}/{p['down']}{', p_w ' + str(p['p_worse']) if p['down'] > p['up'] else ''})")
        out[label] = dict(zip([c.name for c in corpora], means, strict=True))
        print(f"| {label} | " + " | ".join(cells) + f" | {statistics.fmean(means):.4f} |")
    return out


def against_shipped(corpora: Sequence[Corpus], labels: Sequence[str]) -> None:
    print("\n## Against the shipped keyword side, paired (keyword only | hybrid): rises/falls, p")
    print("| variant | " + " | ".join(c.name for c in corpora) + " |")
    print("|---|" + "---|" * len(corpora))
    for label in labels:
        cells: list[str] = []
        for corpus in corpora:
            k, h = corpus.keyword_only(KEYWORD_VARIANTS[label]), corpus.hybrid(KEYWORD_VARIANTS[label])
            pk, ph = paired(corpus.keyword_only(SHIPPED), k), paired(corpus.hybrid(SHIPPED), h)
            cells.append(f"{statistics.fmean(k):.4f} {pk['up']}/{pk['down']} p_w {pk['p_worse']} | "
                         f"{statistics.fmean(h):.4f} {ph['up']}/{ph['down']} p_w {ph['p_worse']}")
        print(f"| {label} | " + " | ".join(cells) + " |")


def hybrid_variants(corpora: Sequence[Corpus], labels: Sequence[str]) -> None:
    print("\n## Hybrid with the keyword side's variants (nDCG@10; paired against the shipped hybrid)")
    print("| variant | " + " | ".join(c.name for c in corpora) + " |")
    print("|---|" + "---|" * len(corpora))
    base = {c.name: c.hybrid(SHIPPED) for c in corpora}
    for label in labels:
        cells: list[str] = []
        for corpus in corpora:
            scores = corpus.hybrid(KEYWORD_VARIANTS[label])
            p = paired(base[corpus.name], scores)
            cells.append(f"{statistics.fmean(scores):.4f} ({p['up']}/{p['down']}, p_b {p['p_better']} p_w {p['p_worse']})")
        print(f"| {label} | " + " | ".join(cells) + " |")


class Table:
    """Per question: nDCG@10 under each keyword/vector weight ratio, and the features."""

    def __init__(self, corpus: Corpus, variant: Variant):
        self.corpus = corpus
        keyword, vector = corpus.keyword(variant), corpus.vector()
        from fusion_dev import rrf

        self.scores = np.zeros((len(keyword), len(RATIOS)))
        for j, ratio in enumerate(RATIOS):
            rankings = [rrf(k, v, corpus.paths, *weights_of(ratio)) for k, v in zip(keyword, vector, strict=True)]
            self.scores[:, j] = corpus.scores(rankings)
        feats = [corpus.features_of(row, k, v) for row, k, v in zip(corpus.rows, keyword, vector, strict=True)]
        self.features = np.array([[f[name] for name in FEATURES] for f in feats])


def rule_scores(table: Table, feature: int, threshold: float, low: int, high: int) -> np.ndarray:
    below = table.features[:, feature] < threshold
    return np.where(below, table.scores[:, low], table.scores[:, high])


def fit_rule(tables: Sequence[Table], rows: Sequence[np.ndarray]) -> tuple[int, float, int, int]:
    """The rule (feature, threshold, ratio below, ratio at or above) with the best mean over corpora
    of the train rows' mean nDCG@10 (each corpus weighing the same); ties keep the fixed RRF."""
    one = RATIOS.index(1.0)
    best = (sum(float(t.scores[r, one].mean()) for t, r in zip(tables, rows, strict=True)), (0, -np.inf, one, one))
    for f in range(len(FEATURES)):
        pooled = np.concatenate([t.features[r, f] for t, r in zip(tables, rows, strict=True)])
        for threshold in np.unique(np.quantile(pooled, np.linspace(0.05, 0.95, 19))):
            for low in range(len(RATIOS)):
                for high in range(len(RATIOS)):
                    if low == high:
                        continue
                    value = sum(float(rule_scores(t, f, threshold, low, high)[r].mean())
                                for t, r in zip(tables, rows, strict=True))
                    if value > best[0] + 1e-9:
                        best = (value, (f, float(threshold), low, high))
    return best[1]


def describe(rule: tuple[int, float, int, int]) -> str:
    f, threshold, low, high = rule
    if low == high:
        return "fixed RRF"
    return f"{FEATURES[f]} < {threshold:.3f}: ratio {RATIOS[low]:g}, else {RATIOS[high]:g}"


def adaptive(corpora: Sequence[Corpus], variant: Variant, label: str) -> dict[str, object]:
    print(f"\n## Query-adaptive fusion, keyword side {label}: fitted on one half of every corpus, scored on the other")
    tables = [Table(c, variant) for c in corpora]
    one = RATIOS.index(1.0)
    per_corpus: dict[str, dict[str, list[float]]] = {c.name: {"gain_vs_rrf": [], "gain_vs_best": [], "worse": [], "better": []}
                                                    for c in corpora}
    rules: list[str] = []
    for seed in range(SEEDS):
        splits = [halves(len(t.scores), seed) for t in tables]
        for train_side in (0, 1):
            train = [np.array(s[train_side]) for s in splits]
            test = [np.array(s[1 - train_side]) for s in splits]
            rule = fit_rule(tables, train)
            rules.append(describe(rule))
            for t, rows in zip(tables, test, strict=True):
                fixed = t.scores[rows, one]
                mine = rule_scores(t, *rule)[rows] if rule[2] != rule[3] else fixed
                best_single = max(float(t.scores[rows, 0].mean()), float(t.scores[rows, -1].mean()))
                p = paired(list(fixed), list(mine))
                bucket = per_corpus[t.corpus.name]
                bucket["gain_vs_rrf"].append(float(mine.mean() - fixed.mean()))
                bucket["gain_vs_best"].append(float(mine.mean()) - best_single)
                bucket["worse"].append(1.0 if p["p_worse"] < 0.05 else 0.0)
                bucket["better"].append(1.0 if p["p_better"] < 0.05 else 0.0)
    print("| corpus | held-out gain vs fixed RRF (mean, min) | vs best single channel (mean, min) | halves significantly worse / better |")
    print("|---|---|---|---|")
    for name, bucket in per_corpus.items():
        print(f"| {name} | {statistics.fmean(bucket['gain_vs_rrf']):+.4f}, {min(bucket['gain_vs_rrf']):+.4f} | "
              f"{statistics.fmean(bucket['gain_vs_best']):+.4f}, {min(bucket['gain_vs_best']):+.4f} | "
              f"{int(sum(bucket['worse']))} / {int(sum(bucket['better']))} of {len(bucket['worse'])} |")
    counts: dict[str, int] = {}
    for rule in rules:
        counts[rule] = counts.get(rule, 0) + 1
    print("Rules chosen: " + "; ".join(f"{rule} ({n}x)" for rule, n in sorted(counts.items(), key=lambda x: -x[1])))
    return {"per_corpus": {n: {k: statistics.fmean(v) for k, v in b.items()} for n, b in per_corpus.items()},
            "rules": counts}


def report(corpora: Sequence[Corpus]) -> dict[str, object]:
    result: dict[str, object] = {"channels": channels(corpora), "keyword": keyword_variants(corpora)}
    against_shipped(corpora, [label for label in KEYWORD_VARIANTS if "idf" in label and "bc 0," not in label
                              and "w 0.25" not in label])
    result["adaptive"] = adaptive(corpora, SHIPPED, "shipped")
    result["channels_bm25f"] = channels(corpora, NEW, "BM25F (this change)")
    result["adaptive_bm25f"] = adaptive(corpora, NEW, "BM25F (this change)")
    return result
