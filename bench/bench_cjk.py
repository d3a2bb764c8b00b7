"""The CJK development set: keyword, vector and hybrid nDCG@10 on Chinese, Japanese and Korean
tldr pages, before and after the keyword index learnt to segment Han, kana and Hangul.

    python bench/bench_cjk.py                   # the table (builds the indexes on first run)
    python bench/bench_cjk.py --variants        # also how a segmented word is searched
    python bench/bench_cjk.py --pages 200 --langs zh

The set. From ../shared/corpora/tldr-pages-translations (CC BY 4.0, see its SOURCE.md), for each
of zh, ja and ko, `--pages` pages (default 500; ja has 492) taken in the order of the SHA-1 of
their path, so every platform is represented and the sample is the same on every run. Each page
is a document of its language's KB; each page gives one question: its one-line description (the
first `> ` line), with punctuation and symbols removed, and the page itself as the only relevant
document. Pages sharing a description (aliases differ only in the command they name) stay in:
the question is as hard as the corpus makes it.

The indexes are the product's: `pnk init`, the pages copied into docs/, `pnk sync` with the
template's default model (the packaged all-MiniLM-L6-v2), cached under --cache. "Before" is the
same index with every chunk's shadow text cleared (the triggers re-index the plain text, which is
what the FTS table held before) searched with query segmentation and the blind-retriever rule
switched off, ranked by FTS5's own bm25() as main ranked: the keyword side exactly as main's
`unicode61` left it. Vectors are the same in
both. The baseline row is plain FTS5 over overlapping
character bigrams of the same pages (`bigram_baseline`: one row per page, FTS5's own bm25()).
Scoring is `pnk eval --questions`'s (pinakes.eval.corpus): 100 passages folded to
documents, binary nDCG@10; the paired sign test counts questions whose nDCG@10 rose or fell.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pinakes.eval.corpus import document_ranking, ndcg  # noqa: E402
from pinakes.eval.paired import rises_and_falls, sign_test  # noqa: E402
from pinakes.lexical.scripts import SEGMENTED_CLASS  # noqa: E402
from pinakes.search import bm25, core, query  # noqa: E402
from pinakes.search.core import Searcher, SearchSettings  # noqa: E402

if TYPE_CHECKING:
    from pinakes.embed.base import Embedder

BASELINE_RUN = re.compile(f"[{SEGMENTED_CLASS}]+")
BASELINE_WORD = re.compile(r"\w+")  # what the baseline's query keeps: letters, digits, underscore
SOURCE = REPO.parent / "shared" / "corpora" / "tldr-pages-translations" / "docs"
LANGS = ("zh", "ja", "ko")


@dataclass(frozen=True)
class Question:
    id: str
    query: str
    relevant: str  # KB-root-relative path


def description(page: Path) -> str | None:
    """The first `> ` line, with punctuation (P*) and symbols (S*) removed."""
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("> "):
            text = "".join(char for char in line[2:] if unicodedata.category(char)[0] not in "PS")
            return " ".join(text.split()) or None
    return None


def sample(lang: str, pages: int) -> list[Path]:
    every = sorted((SOURCE / lang).rglob("*.md"))
    return sorted(every, key=lambda p: hashlib.sha1(str(p.relative_to(SOURCE)).encode()).hexdigest())[:pages]


def build(lang: str, pages: int, cache: Path) -> tuple[Path, list[Question], float | None]:
    """The KB (built once, with `pnk sync`) and its questions; the sync's wall time when it ran."""
    kb = cache / f"{lang}-{pages}"
    chosen = sample(lang, pages)
    questions: list[Question] = []
    for page in chosen:
        relative = "docs/" + str(page.relative_to(SOURCE / lang))
        text = description(page)
        if text:
            questions.append(Question(relative, text, relative))
    if (kb / ".pinakes" / "index.db").exists():
        return kb, questions, None
    if kb.exists():
        shutil.rmtree(kb)
    pnk = [sys.executable, "-m", "pinakes"]
    subprocess.run([*pnk, "init", str(kb), "--name", f"tldr-{lang}"], check=True, stdout=subprocess.DEVNULL)
    for page in chosen:
        target = kb / "docs" / page.relative_to(SOURCE / lang)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(page, target)
    started = time.perf_counter()
    subprocess.run([*pnk, "sync", "-C", str(kb), "--offline"], check=True, stdout=subprocess.DEVNULL)
    return kb, questions, time.perf_counter() - started


def before_index(kb: Path) -> Path:
    """A copy of the index whose FTS table holds the plain text, as before segmentation."""
    before = kb / ".pinakes" / "before.db"
    if before.exists():
        return before
    source = sqlite3.connect(kb / ".pinakes" / "index.db")
    target = sqlite3.connect(before)
    source.backup(target)
    source.close()
    target.execute("UPDATE chunks SET fts_text = NULL WHERE fts_text IS NOT NULL")
    target.commit()
    target.close()
    return before


def _unsegmented_parts(word: str) -> list[tuple[str, bool]]:
    return [(word, False)]


def _no_shadow(text: str) -> str:
    return text


def _never_blind(text: str, model: str | None) -> bool:
    return False


@contextmanager
def unsegmented() -> Generator[None, None, None]:
    """Query analysis, keyword plan and fusion as main had them: no segmentation, no blind rule."""
    saved = (query.segmented_parts, query.shadow_or_self, core.vectors_blind_to)
    query.segmented_parts = _unsegmented_parts
    query.shadow_or_self = _no_shadow
    core.vectors_blind_to = _never_blind
    try:
        yield
    finally:
        query.segmented_parts, query.shadow_or_self, core.vectors_blind_to = saved


@contextmanager
def blind_rule_off() -> Generator[None, None, None]:
    saved = core.vectors_blind_to
    core.vectors_blind_to = _never_blind
    try:
        yield
    finally:
        core.vectors_blind_to = saved


def plain_bigrams(text: str) -> str:
    """Every run of Han, kana or Hangul as its overlapping character bigrams (a one-character run as
    itself), everything else as written: the baseline's own rewriting, kept here so that a change to
    the product's shadow (lexical/scripts.py) never moves the baseline."""
    def pairs(match: re.Match[str]) -> str:
        run = match.group()
        return " " + " ".join(run[i : i + 2] for i in range(max(1, len(run) - 1))) + " "

    return BASELINE_RUN.sub(pairs, text)


def bigram_baseline(kb: Path, questions: list[Question]) -> dict[str, float]:
    """Plain FTS5 over overlapping character bigrams of the same pages: one row per page (its file
    as `pnk sync` read it, not its chunks), FTS5's default `unicode61` tokenizer, every term of the
    rewritten question quoted and OR-ed, ranked by FTS5's own bm25(), the first 100 pages."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE pages USING fts5 (path UNINDEXED, body)")
        conn.executemany("INSERT INTO pages (path, body) VALUES (?, ?)",
                         ((page.relative_to(kb).as_posix(), plain_bigrams(page.read_text(encoding="utf-8")))
                          for page in sorted((kb / "docs").rglob("*.md"))))
        scores: dict[str, float] = {}
        for question in questions:
            terms = plain_bigrams(" ".join(BASELINE_WORD.findall(question.query))).split()
            match = " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
            rows = conn.execute("SELECT path FROM pages WHERE pages MATCH ? ORDER BY bm25(pages) LIMIT 100",
                                (match,)).fetchall() if match else []
            scores[question.id] = ndcg([row[0] for row in rows], [question.relevant], 10)
        return scores
    finally:
        conn.close()


def per_question(searcher: Searcher, questions: list[Question], mode: str) -> dict[str, float]:
    scores: dict[str, float] = {}
    for question in questions:
        result = searcher.search(question.query, mode=mode, final_k=100)
        ranking = document_ranking([passage.path for passage in result.passages])
        scores[question.id] = ndcg(ranking, [question.relevant], 10)
    return scores


def load_embedder(kb: Path) -> Embedder:
    """The model the KB's manifest names (the template's default), as `pnk search` loads it."""
    from pinakes.embed import load_embedder as load
    from pinakes.manifest import load_manifest

    return load(load_manifest(kb / "pinakes.toml").embedding, offline=True)


@dataclass(frozen=True)
class Arm:
    name: str
    mode: str
    before: bool = False
    keyword: bm25.KeywordOptions = field(default_factory=bm25.KeywordOptions)
    blind_rule: bool = True


MAIN_KEYWORD = bm25.KeywordOptions(k1=None)  # before: FTS5's own bm25(), as main ranked
ARMS = (
    Arm("keyword, before (unicode61 runs)", "bm25", before=True, keyword=MAIN_KEYWORD),
    Arm("keyword, after (as shipped)", "bm25"),
    Arm("vector (MiniLM)", "vector"),
    Arm("hybrid, before", "hybrid", before=True, keyword=MAIN_KEYWORD),
    Arm("hybrid, after, vectors kept", "hybrid", blind_rule=False),
    Arm("hybrid, after (vectors left out: blind)", "hybrid"),
)
VARIANTS = tuple(
    Arm(f"keyword, segmented words as {plan.value}", "bm25", keyword=bm25.KeywordOptions(segmented=plan))
    for plan in bm25.SegmentedPlan
)


def run_arm(arm: Arm, kb: Path, questions: list[Question], embedder: Embedder) -> dict[str, float]:
    index = before_index(kb) if arm.before else kb / ".pinakes" / "index.db"
    settings = SearchSettings(rerank=False, keyword=arm.keyword)
    with Searcher(index, settings, embedder=embedder) as searcher:
        if arm.before:
            with unsegmented():
                return per_question(searcher, questions, arm.mode)
        if not arm.blind_rule:
            with blind_rule_off():
                return per_question(searcher, questions, arm.mode)
        return per_question(searcher, questions, arm.mode)


def mean(values: dict[str, float]) -> float:
    return sum(values.values()) / len(values) if values else 0.0


def paired(after: dict[str, float], before: dict[str, float]) -> str:
    up, down = rises_and_falls(after, before)
    return f"+{up}/-{down}, p={sign_test(up, down):.2g}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=500, help="pages per language (default 500)")
    parser.add_argument("--langs", default=",".join(LANGS))
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("TMPDIR", tempfile.gettempdir())) / "pnk-cjk")
    parser.add_argument("--variants", action="store_true", help="also each SegmentedPlan, keyword only")
    parser.add_argument("--build-only", action="store_true")
    parser.add_argument("--json", type=Path, help="write every per-question score here")
    args = parser.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    langs = [lang.strip() for lang in args.langs.split(",") if lang.strip()]
    built: dict[str, tuple[Path, list[Question]]] = {}
    for lang in langs:
        kb, questions, seconds = build(lang, args.pages, args.cache)
        built[lang] = (kb, questions)
        chunks = sqlite3.connect(kb / ".pinakes" / "index.db").execute("SELECT count(*) FROM chunks").fetchone()[0]
        took = f", pnk sync {seconds:.0f} s" if seconds is not None else " (cached)"
        print(f"{lang}: {len(questions)} pages and questions, {chunks} chunks{took}", flush=True)
    if args.build_only:
        return 0
    embedder = load_embedder(built[langs[0]][0])
    arms = ARMS + (VARIANTS if args.variants else ())
    results: dict[str, dict[str, dict[str, float]]] = {}
    for lang in langs:
        kb, questions = built[lang]
        results[lang] = {arm.name: run_arm(arm, kb, questions, embedder) for arm in arms}
    baseline = {lang: bigram_baseline(*built[lang]) for lang in langs}
    print()
    print("| arm | " + " | ".join(f"{lang} nDCG@10" for lang in langs) + " | mean |")
    values = [mean(baseline[lang]) for lang in langs]
    print("| plain FTS5 over character bigrams (pages) | " + " | ".join(f"{v:.3f}" for v in values)
          + f" | {sum(values) / len(values):.3f} |")
    print("|---|" + "---|" * (len(langs) + 1))
    for arm in arms:
        values = [mean(results[lang][arm.name]) for lang in langs]
        print(f"| {arm.name} | " + " | ".join(f"{v:.3f}" for v in values) + f" | {sum(values) / len(values):.3f} |")
    print()
    print("Paired sign test on per-question nDCG@10 (questions up / down, one-sided p):")
    comparisons = [("keyword after vs before", ARMS[1], ARMS[0]), ("hybrid after vs before", ARMS[5], ARMS[3]),
                   ("hybrid after vs keyword after", ARMS[5], ARMS[1]), ("hybrid after vs vector", ARMS[5], ARMS[2]),
                   ("blind rule: vectors left out vs kept", ARMS[5], ARMS[4])]
    for label, after, before in comparisons:
        cells = [paired(results[lang][after.name], results[lang][before.name]) for lang in langs]
        print(f"- {label}: " + "; ".join(f"{lang} {cell}" for lang, cell in zip(langs, cells, strict=True)))
    cells = [paired(results[lang][ARMS[1].name], baseline[lang]) for lang in langs]
    print("- keyword after vs plain FTS5 bigrams: " + "; ".join(
        f"{lang} {cell}" for lang, cell in zip(langs, cells, strict=True)))
    if args.json:
        args.json.write_text(json.dumps(results, ensure_ascii=False, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
