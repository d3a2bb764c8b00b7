"""The keyword side on Chinese, Japanese and Korean tldr pages against plain FTS5 over character
bigrams, fitted on held-out halves (issue #46).

    python bench/bench_cjk_keyword.py                       # zh, ja, ko and all three in one KB
    python bench/bench_cjk_keyword.py --sets ja --seeds 3   # a quick look
    python bench/bench_cjk_keyword.py --latency-only --sets ko

The pages: every page of ../shared/corpora/tldr-pages-translations for zh (1 535), ja (492) and ko
(6 648), one KB per language and one KB holding all 8 675 (`cjk`, pages under docs/<lang>/: Han is
shared by zh and ja, so the IDF of their bigrams is the mixed corpus's). Each KB is built by `pnk
init` and the product's sync with the default model's tokenizer sizing the chunks and no vectors
(bench_keyword.py's ChunkingOnlyEmbedder: the keyword side never reads them), cached under --cache.

The questions, two per page: `desc`, its one-line description with punctuation and symbols
removed (bench_cjk.py's), and `frag`, one of its example descriptions (the `- ` lines, the one at
the page path's SHA-1 modulo their number), cleaned the same way; the page is the only relevant
document. Many pages share an example line (aliases, sibling subcommands): those questions are as
hard as the corpus makes them.

The arms, scored as `pnk eval --questions` (100 passages folded to documents, binary nDCG@10):
- `baseline`: plain FTS5 over overlapping character bigrams of the same pages (bench_cjk.py's
  `bigram_baseline`: one row per page, `unicode61`, the question's terms OR-ed, FTS5's bm25());
- `main`: the product's keyword side as main shipped it for these scripts (each word the phrase of
  its bigrams OR-ed with the bigrams, ranked by FTS5's bm25());
- the candidates: bigrams OR-ed, ranked by the keyword side's BM25 over `chunk_terms` with k1 and b
  for such queries (`KeywordOptions.segmented_k1/_b`); `shipped` is the product's defaults now.

Held out: for each seed the questions of every set are split in half at random; the candidate with
the best mean nDCG@10 on half A (all sets and kinds pooled) is reported on half B against the
baseline and against main, with a paired sign test on half B's per-question scores.

Latency: keyword search (`mode="bm25"`) p50 per query on one KB (the largest chosen, ko: 16k
chunks), main's options against the shipped ones, interleaved in the same run.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import unicodedata
from dataclasses import dataclass, replace
from pathlib import Path
from typing import cast

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_cjk import SOURCE, Question, bigram_baseline, description, sample  # noqa: E402
from bench_keyword import ChunkingOnlyEmbedder  # noqa: E402

from pinakes.eval.corpus import document_ranking, ndcg  # noqa: E402
from pinakes.eval.paired import rises_and_falls, sign_test  # noqa: E402
from pinakes.search import bm25  # noqa: E402
from pinakes.search.core import Searcher, SearchSettings  # noqa: E402

SETS = {"zh": ("zh",), "ja": ("ja",), "ko": ("ko",), "cjk": ("zh", "ja", "ko")}
KINDS = ("desc", "frag")
MAIN = bm25.KeywordOptions(segmented=bm25.SegmentedPlan.PHRASE_AND_OR, segmented_k1=None)
SHIPPED = bm25.KeywordOptions()
CANDIDATES = {"main": MAIN, "or, FTS5 bm25()": replace(SHIPPED, segmented_k1=None)} | {
    f"or, k1 {k1} b {b}, pool {pool}": replace(SHIPPED, segmented=bm25.SegmentedPlan.OR, segmented_k1=k1,
                                               segmented_b=b, segmented_pool=pool)
    for k1, b, pool in ((0.9, 0.75, 1), (0.9, 0.75, 3), (1.2, 0.75, 1), (0.7, 0.75, 1))}
Scores = dict[str, float]


@dataclass(frozen=True)
class Set:
    name: str
    kb: Path
    questions: dict[str, list[Question]]  # by kind


def build(name: str, cache: Path) -> Path:
    kb = cache / name
    if (kb / ".pinakes" / "index.db").exists():
        return kb
    if kb.exists():
        shutil.rmtree(kb)
    subprocess.run([sys.executable, "-m", "pinakes", "init", str(kb), "--name", f"tldr-{name}"], check=True,
                   stdout=subprocess.DEVNULL)
    langs = SETS[name]
    for lang in langs:
        for page in sample(lang, 100_000):
            target = kb / "docs" / (lang if len(langs) > 1 else "") / page.relative_to(SOURCE / lang)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(page, target)
    from pinakes.embed import load_embedder
    from pinakes.embed.base import Embedder
    from pinakes.manifest import load_manifest
    from pinakes.sync import SyncOptions
    from pinakes.sync.engine import run_sync

    # count_tokens and count_tokens_batch reach the real model through __getattr__
    real = load_embedder(load_manifest(kb / "pinakes.toml").embedding, offline=True)
    embedder = cast(Embedder, ChunkingOnlyEmbedder(real))
    started = time.perf_counter()
    run_sync(kb, SyncOptions(), embedder=embedder)
    print(f"{name}: built in {time.perf_counter() - started:.0f} s", flush=True)
    return kb


def cleaned(line: str) -> str | None:
    text = "".join(char for char in line if unicodedata.category(char)[0] not in "PS")
    return " ".join(text.split()) or None


def example(page: Path, relative: str) -> str | None:
    lines = [line[2:] for line in page.read_text(encoding="utf-8").splitlines() if line.startswith("- ")]
    if not lines:
        return None
    return cleaned(lines[int(hashlib.sha1(relative.encode()).hexdigest(), 16) % len(lines)])


def questions_of(kb: Path) -> dict[str, list[Question]]:
    result: dict[str, list[Question]] = {kind: [] for kind in KINDS}
    for page in sorted((kb / "docs").rglob("*.md")):
        relative = page.relative_to(kb).as_posix()
        for kind, text in (("desc", description(page)), ("frag", example(page, relative))):
            if text:
                result[kind].append(Question(relative, text, relative))
    return result


def product(kb: Path, questions: list[Question], options: bm25.KeywordOptions) -> Scores:
    scores: Scores = {}
    with Searcher(kb / ".pinakes" / "index.db", SearchSettings(rerank=False, keyword=options)) as searcher:
        for question in questions:
            result = searcher.search(question.query, mode="bm25", final_k=100)
            scores[question.id] = ndcg(document_ranking([p.path for p in result.passages]), [question.relevant], 10)
    return scores


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def paired(after: Scores, before: Scores) -> str:
    up, down = rises_and_falls(after, before)
    return f"+{up}/−{down}, p {sign_test(up, down):.2g}"


def limited(questions: list[Question], most: int | None) -> list[Question]:
    return questions if most is None or len(questions) <= most else random.Random(0).sample(questions, most)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--questions", type=int, help="at most this many questions per set and kind")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "pnk-cjk-keyword")
    parser.add_argument("--latency-only", action="store_true")
    parser.add_argument("--latency-queries", type=int, default=300)
    parser.add_argument("--latency-set", default="ko", help="the KB timed (default ko: 16k chunks)")
    args = parser.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    sets = [Set(name, kb, {kind: limited(qs, args.questions) for kind, qs in questions_of(kb).items()})
            for name in args.sets.split(",") for kb in [build(name, args.cache)]]
    if not args.latency_only:
        quality(sets, args.seeds)
    timed = next((entry for entry in sets if entry.name == args.latency_set), sets[-1])
    latency(timed, args.latency_queries)
    return 0


def quality(sets: list[Set], seeds: int) -> None:
    # scores[arm]["set|kind|question id"]
    scores: dict[str, Scores] = {}
    for entry in sets:
        for kind, questions in entry.questions.items():
            arms = {"baseline": bigram_baseline(entry.kb, questions)} | {
                name: product(entry.kb, questions, options) for name, options in CANDIDATES.items()}
            for arm, values in arms.items():
                scores.setdefault(arm, {}).update({f"{entry.name}|{kind}|{key}": value for key, value in values.items()})
    shipped = next(name for name, options in CANDIDATES.items() if options == SHIPPED)
    print("\n| set | kind | questions | baseline | main | shipped (" + shipped + ") | shipped vs baseline | shipped vs main |")
    print("|---|---|---|---|---|---|---|---|")
    for entry in sets:
        for kind in KINDS:
            keys = [key for key in scores["baseline"] if key.startswith(f"{entry.name}|{kind}|")]
            cell = {arm: {key: scores[arm][key] for key in keys} for arm in ("baseline", "main", shipped)}
            print(f"| {entry.name} | {kind} | {len(keys)} | " + " | ".join(
                f"{mean(list(cell[arm].values())):.3f}" for arm in ("baseline", "main", shipped))
                + f" | {paired(cell[shipped], cell['baseline'])} | {paired(cell[shipped], cell['main'])} |")
    print("\nEvery candidate, all sets pooled: " + ", ".join(
        f"{arm} {mean(list(values.values())):.3f}" for arm, values in scores.items()))
    print("\nHeld out (fit on half A, report half B):")
    print("| seed | fitted on A | B: fitted | B: baseline | B: main | fitted vs baseline | fitted vs main |")
    print("|---|---|---|---|---|---|---|")
    keys = sorted(scores["baseline"])
    for seed in range(seeds):
        shuffled = keys[:]
        random.Random(seed).shuffle(shuffled)
        half_a, half_b = shuffled[: len(keys) // 2], shuffled[len(keys) // 2 :]
        fitted = max(CANDIDATES, key=lambda arm: mean([scores[arm][key] for key in half_a]))
        b = {arm: {key: scores[arm][key] for key in half_b} for arm in ("baseline", "main", fitted)}
        print(f"| {seed} | {fitted} | {mean(list(b[fitted].values())):.3f} | {mean(list(b['baseline'].values())):.3f}"
              f" | {mean(list(b['main'].values())):.3f} | {paired(b[fitted], b['baseline'])}"
              f" | {paired(b[fitted], b['main'])} |")


def latency(entry: Set, count: int) -> None:
    questions = limited([q for qs in entry.questions.values() for q in qs], count)
    index = entry.kb / ".pinakes" / "index.db"
    import sqlite3

    chunks = sqlite3.connect(index).execute("SELECT count(*) FROM chunks").fetchone()[0]
    timings: dict[str, list[float]] = {"main": [], "shipped": []}
    with Searcher(index, SearchSettings(rerank=False, keyword=MAIN)) as before, \
            Searcher(index, SearchSettings(rerank=False, keyword=SHIPPED)) as after:
        for searcher in (before, after):  # warm: the first query opens the generation
            for question in questions[:20]:
                searcher.search(question.query, mode="bm25", final_k=100)
        for question in questions:
            for arm, searcher in (("main", before), ("shipped", after)):
                started = time.perf_counter()
                searcher.search(question.query, mode="bm25", final_k=100)
                timings[arm].append((time.perf_counter() - started) * 1000)
    print(f"\nLatency on {entry.name} ({chunks} chunks, {len(questions)} queries, interleaved): " + "; ".join(
        f"{arm} p50 {statistics.median(values):.2f} ms, p90 {statistics.quantiles(values, n=10)[-1]:.2f} ms"
        for arm, values in timings.items()))


if __name__ == "__main__":
    raise SystemExit(main())
