"""The golden-set harness behind `pnk eval` (spec §7).

    golden.py      load and validate eval/questions.yaml (kinds validated, never defaulted)
    runner.py      sync if needed, then every question through the same Searcher the CLI uses
    outcomes.py    one row per question under a header naming models and settings (eval/outcomes.json)
    scoreboard.py  per-class and aggregate rates, each with its numerator and denominator
    baseline.py    the committed baseline and the regression gate
    paired.py      the sign test and paired before/after comparison of two outcome files
    fitting.py     fitting [retrieval.confidence] thresholds on the golden set
    corpus.py      `--questions FILE.jsonl`: nDCG@10, recall@10/100 and MRR over any KB

The scoreboard is a function of the outcome rows alone, so a committed outcomes file is re-scorable
offline with no weights and no network.
"""
