"""Rows for the self-calibration experiments (issue #41): every development corpus built once
through the product, per seed a KB copy with the evidence of ~40% of its real questions removed
(bench/bench_confidence.py's rule: each question draws no-answer with probability 0.4, its evidence
documents deleted, an incremental sync), and on that same copy:

  real   every real question through the KB's Searcher (its evidence features, as eval rows)
  synth  self-calibration's questions (calibration/questions.py, under named rule variants), each
         searched as it is and with its source left out (calibration/self_calibration.py)

Everything is cached under --cache (default /work/cache/confidence): the built KBs, the seed KBs
(kept, so a new rule variant needs no re-sync) and one JSON file of rows per (corpus, seed, kind).

    python bench/experiments/self_calibration/collect.py build
    python bench/experiments/self_calibration/collect.py rows --corpus cranfield --seeds 5 --variants run6,rare6
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import NoReturn

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent.parent
sys.path[:0] = [str(REPO / "bench"), str(REPO / "src"), str(REPO)]

import bench_confidence  # noqa: E402
import measure_context  # noqa: E402
import tune_retrieval as tune  # noqa: E402

from pinakes.calibration.questions import QuestionRules  # noqa: E402
from pinakes.eval.outcomes import Outcome  # noqa: E402

CACHE = Path("/work/cache/confidence")
CORPORA = ("cranfield", "pydocs", "pymodules", "tldr", "demo")
SEEDS = {"cranfield": 5, "pydocs": 5, "pymodules": 5, "tldr": 3, "demo": 1}
SHARE = 0.4
VARIANTS = {
    "run6": QuestionRules(words=6, pick="run"),
    "run4": QuestionRules(words=4, pick="run"),
    "run8": QuestionRules(words=8, pick="run"),
    "rare6": QuestionRules(words=6, pick="rare"),
    "rare4": QuestionRules(words=4, pick="rare"),
    "run6-p50": QuestionRules(words=6, pick="run", paraphrase=0.5),
    "rare6-p50": QuestionRules(words=6, pick="rare", paraphrase=0.5),
    "lead6": QuestionRules(words=6, pick="lead"),
    "lead6-p50": QuestionRules(words=6, pick="lead", paraphrase=0.5),
    "lead8": QuestionRules(words=8, pick="lead"),
}
DEMO = REPO / "tests" / "demo-kb"


def build(name: str, cache: Path) -> tuple[Path, list[tune.Question]]:
    """The corpus's KB, built once by `init_kb` + `run_sync` (bench/measure_context.py's sources:
    tldr is its 800-page sample), and its real questions."""
    if name == "demo":
        return _demo(cache), []
    from pinakes.init import init_kb
    from pinakes.sync import SyncOptions
    from pinakes.sync.engine import run_sync

    pairs, questions, rewrite, links = measure_context.sources(name)
    kb = cache / name
    if (kb / ".built").exists():
        return kb, questions
    if not (kb / "pinakes.toml").exists():
        init_kb(kb)
        tune._copy(pairs, kb, rewrite)  # pyright: ignore[reportPrivateUsage]  # tune_retrieval's KB copy, reused
    started = time.perf_counter()
    run_sync(kb, SyncOptions(quiet=True, offline=True))
    if links:
        tune._author_links(kb, links)  # pyright: ignore[reportPrivateUsage]  # tune_retrieval's links, reused
        run_sync(kb, SyncOptions(quiet=True, offline=True))
    (kb / ".built").write_text(json.dumps({"seconds": round(time.perf_counter() - started, 1),
                                           "documents": len(pairs)}))
    print(f"{name}: built in {time.perf_counter() - started:.0f} s", flush=True)
    return kb, questions


def _demo(cache: Path) -> Path:
    """A synced copy of tests/demo-kb (and the partner KB its links name)."""
    from pinakes.sync import SyncOptions
    from pinakes.sync.engine import run_sync

    kb = cache / "demo"
    if (kb / ".built").exists():
        return kb
    for name, source in (("demo", DEMO), ("partner-kb", DEMO.parent / "partner-kb")):
        if (cache / name).exists():
            shutil.rmtree(cache / name)
        shutil.copytree(source, cache / name, ignore=shutil.ignore_patterns(".pinakes"))
    run_sync(kb, SyncOptions(quiet=True, offline=True))
    (kb / ".built").write_text("{}")
    return kb


def evidence(name: str, questions: list[tune.Question]) -> dict[str, set[str]]:
    if name == "tldr":
        return bench_confidence.evidence_of("tldr")
    return {question.id: set(question.relevant) | set(question.primary) for question in questions}


def seed_kb(name: str, seed: int, cache: Path) -> tuple[Path, dict[str, set[str]], set[str], list[tune.Question]]:
    """The seed's KB (built once, kept), the kept questions' evidence and the no-answer ids."""
    base, questions = build(name, cache)
    if name == "demo":
        return base, {}, set(), []
    every = evidence(name, questions)
    no_answer, dropped = bench_confidence.choose_no_answer(every, SHARE, seed)
    kept = {qid: docs for qid, docs in every.items() if qid not in dropped}
    kb = cache / "seeds" / f"{name}-{seed}"
    if not (kb / ".seeded").exists():
        removed = set[str]().union(*(kept[qid] for qid in no_answer))
        started = time.perf_counter()
        bench_confidence.seed_kb(name, base, removed, seed, cache / "seeds")
        (kb / ".seeded").write_text(json.dumps({"removed": len(removed), "no_answer": len(no_answer),
                                                "dropped": len(dropped),
                                                "seconds": round(time.perf_counter() - started, 1)}))
        print(f"  {name} seed {seed}: {len(removed)} documents removed, synced in "
              f"{time.perf_counter() - started:.0f} s", flush=True)
    return kb, kept, no_answer, questions


def real_rows(name: str, seed: int, cache: Path) -> list[Outcome]:
    """Every real question through the seed KB's Searcher (cached)."""
    target = cache / "rows" / f"{name}-{seed}.real.json"
    if target.exists():
        return [Outcome.from_dict(row, str(target)) for row in json.loads(target.read_text())]
    if name == "demo":
        from pinakes.eval.outcomes import read_outcomes

        rows = list(read_outcomes(DEMO / "eval" / "outcomes.json").rows)
    else:
        from pinakes.eval.runner import first_relevant_rank
        from pinakes.search.core import Searcher

        kb, kept, no_answer, questions = seed_kb(name, seed, cache)
        rows: list[Outcome] = []
        with Searcher.for_kb(kb, offline=True) as searcher:
            for question in questions:
                if question.id not in kept:
                    continue
                result = searcher.search(question.query, mode="hybrid")
                confidence = result.confidence
                features = dict(confidence.features) if confidence.features is not None else None
                level = "low" if not result.passages else "unknown"
                if question.id in no_answer:
                    rows.append(Outcome(question.id, "no-answer", None, None, level, None, features=features))
                    continue
                rank = first_relevant_rank(result.passages, sorted(kept[question.id]))
                rows.append(Outcome(question.id, "simple-lookup", rank is not None, rank, level, None, 0,
                                    len(result.passages), features=features))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps([row.to_dict() for row in rows]))
    return rows


def synth_rows(name: str, seed: int, variant: str, cache: Path) -> list[dict[str, object]]:
    """Self-calibration's rows on the seed KB under one rule variant (cached)."""
    from pinakes.calibration.self_calibration import self_calibrate

    target = cache / "rows" / f"{name}-{seed}.synth-{variant}.json"
    if target.exists():
        return json.loads(target.read_text())
    kb, *_ = seed_kb(name, seed, cache)
    started = time.perf_counter()
    result = self_calibrate(kb, rules=VARIANTS[variant], offline=True, fit=_no_fit)
    rows = [row.to_dict() for row in result.rows]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(rows))
    print(f"  {name} seed {seed} {variant}: {result.questions} questions in {time.perf_counter() - started:.0f} s",
          flush=True)
    return rows


def _no_fit(_rows: object, _fitted_for: str) -> NoReturn:
    from pinakes.calibration.fitting import FitError

    raise FitError("rows only")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("what", choices=("build", "rows"))
    parser.add_argument("--corpus", action="append", choices=CORPORA)
    parser.add_argument("--seeds", type=int)
    parser.add_argument("--variants", default="run6")
    parser.add_argument("--cache", type=Path, default=CACHE)
    args = parser.parse_args()
    bench_confidence.CACHE = args.cache
    measure_context.CACHE = args.cache
    for name in args.corpus or CORPORA:
        if args.what == "build":
            build(name, args.cache)
            continue
        for seed in range(1, (args.seeds or SEEDS[name]) + 1):
            if name == "demo" and seed > 1:
                break
            real_rows(name, seed, args.cache)
            for variant in args.variants.split(","):
                synth_rows(name, seed, variant, args.cache)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
