"""Two trees' verdict46 rankings against each other, question by question: this branch against main.

    PNK_VERDICT_CACHE=DIR_MAIN PYTHONPATH=MAIN/src python bench/verdict46.py all      # main's arms
    PNK_VERDICT_CACHE=DIR_NEW python bench/verdict46.py all                             # this tree's
    python bench/verdict46_versus.py DIR_MAIN DIR_NEW [CORPUS ...]

For each corpus and mode (bm25, vector, hybrid as shipped, fixed RRF): both means, the questions the
new tree ranks worse / better with one-sided sign-test p, and over the 20 held-out halves
(`fusion_dev.halves`, seeds 0-9) how many are significantly worse / better; in the stored tie order
and as the mean of both tie orders (the `ties-reversed` arm). For the filings corpora, keyword and
hybrid by the four forms a question names its quarter in (`Q1 2025`, `first quarter 2025`, `quarter
ended March 31 2025`, `March 2025 quarter`): only the last two share a word with the running heads.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import verdict46 as v
from fusion_dev import halves

FORMS = ("Q1 2025", "first quarter 2025", "quarter ended March 31 2025", "March 2025 quarter")


def form(query: str) -> str:
    if re.search(r"\bQ[12]\b", query):
        return FORMS[0]
    if "quarter ended" in query:
        return FORMS[2]
    if re.search(r"\b(first|second) quarter\b", query):
        return FORMS[1]
    return FORMS[3]


def scored(cache: Path, name: str, mode: str, asked: list[v.Asked], reading: str) -> list[float]:
    stored = v.scores(json.loads((cache / f"{name}.after.json").read_text())[mode], asked)
    if reading == "stored":
        return stored
    reversed_ = v.scores(json.loads((cache / f"{name}.ties-reversed.json").read_text())[mode], asked)
    return [(a + b) / 2 for a, b in zip(stored, reversed_, strict=True)]


def main() -> int:
    main_cache, new_cache = Path(sys.argv[1]), Path(sys.argv[2])
    names = sys.argv[3:] or list(v.CORPORA)
    for reading in ("stored", "averaged"):
        print(f"\n## {reading} tie order\n\n| corpus | mode | main | new | new worse/better, p_worse | p_better "
              "| halves new significantly worse / better |\n|---|---|---|---|---|---|---|")
        for name in names:
            asked = v.questions(name, v.KBS[name])
            for mode in ("bm25", "vector", "hybrid"):
                old, new = scored(main_cache, name, mode, asked, reading), scored(new_cache, name, mode, asked, reading)
                down, up, p_worse = v.worse(new, old)
                p_better = v.worse(old, new)[2]
                worse = better = 0
                for seed in range(v.SEEDS):
                    for test in halves(len(asked), seed):
                        worse += v.worse([new[i] for i in test], [old[i] for i in test])[2] < v.ALPHA
                        better += v.worse([old[i] for i in test], [new[i] for i in test])[2] < v.ALPHA
                print(f"| {name} | {mode} | {statistics.fmean(old):.4f} | {statistics.fmean(new):.4f} | "
                      f"{down}/{up}, {p_worse:.3g} | {p_better:.3g} | {worse} / {better} |")
        for name in (n for n in names if n.startswith("filings")):
            asked = v.questions(name, v.KBS[name])
            print(f"\n{name}, by the quarter's form ({reading}): keyword / hybrid, hybrid vs keyword worse/better\n\n"
                  "| form | n | main | new |\n|---|---|---|---|")
            cells = {cache: (scored(cache, name, "bm25", asked, reading), scored(cache, name, "hybrid", asked, reading))
                     for cache in (main_cache, new_cache)}
            for shape in FORMS:
                rows = [i for i, a in enumerate(asked) if form(a.query) == shape]
                out: list[str] = []
                for keyword, hybrid in cells.values():
                    k, h = [keyword[i] for i in rows], [hybrid[i] for i in rows]
                    down, up, _ = v.worse(h, k)
                    out.append(f"{statistics.fmean(k):.4f} / {statistics.fmean(h):.4f}, {down}/{up}")
                print(f"| {shape} | {len(rows)} | {out[0]} | {out[1]} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
