"""Word segmenters against the shipped character bigrams on the CJK development set (issue #18).

    python bench/bench_segmenters.py                 # every language whose segmenter is installed
    python bench/bench_segmenters.py --langs ja      # one language
    python bench/bench_segmenters.py --json out.json # and every per-question score

The segmenters are not dependencies of pinakes: `pip install jieba sudachipy sudachidict-core
kiwipiepy` (kiwipiepy brings kiwipiepy_model). A language whose segmenter is not installed is
skipped, saying why.

The set and the scoring are bench_cjk.py's (its docstring): the product-built KB of each language
(`bench_cjk.py --pages 1500` builds it into its cache, read here, never written), each page's
one-line description as the question and the page as the only relevant document, keyword search
alone (`mode="bm25"`, the product's keyword plan and BM25), 100 passages folded to documents,
binary nDCG@10, and the paired sign test against the shipped arm.

Each arm works on its own copy of the index. The shipped index is searched as built. Every other
arm rewrites the shadow text (`chunks.fts_text`) of each chunk holding Han, kana or Hangul, as
lexical/scripts.py does, except that each run of those scripts becomes the segmenter's words
(`words`) or the words followed by the run's bigrams (`words + bigrams`: a two-character word is
then also one of the bigrams, and counts twice, as it would in such a shadow); the triggers re-index
FTS5, and `chunk_terms` (the per-chunk term counts the keyword side's BM25 reads) is refilled from
FTS5's own postings, so it holds exactly what the FTS table holds. Text outside such runs is left
alone, so Latin words are indexed as before. The segmenter sees each line whole (its context); its
words are cut back to the runs.

Queries: for the shipped arm the question as typed (the product's phrase-and-bigrams plan); for
`words` the question's runs cut by the same segmenter, each word one plain keyword unit; for
`words + bigrams` both sets of units in one OR; and, as a query-side-only variant, the shipped
index searched with the question cut into words first (each word then the product's phrase of its
bigrams, with its bigrams).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Generator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import import_module, metadata
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_cjk import Question, build, mean, paired  # noqa: E402

from pinakes.eval.corpus import document_ranking, ndcg  # noqa: E402
from pinakes.eval.paired import rises_and_falls, sign_test  # noqa: E402
from pinakes.lexical import scripts  # noqa: E402
from pinakes.lexical import tokenizer as lexical_tokenizer  # noqa: E402
from pinakes.lexical.scripts import SEGMENTED_RUN, bigrams  # noqa: E402
from pinakes.lexical.tokenizer import Tokenizer  # noqa: E402
from pinakes.search import core, query  # noqa: E402
from pinakes.search.core import Searcher, SearchSettings  # noqa: E402
from pinakes.search.query import AnalyzedQuery, QueryUnit  # noqa: E402

LANGS = ("zh", "ja", "ko")
# (start, end, word) in characters of one line; a word may be a normalised form, not the surface.
Span = tuple[int, int, str]
Cutter = Callable[[str], list[Span]]


@dataclass(frozen=True)
class Mode:
    """One way a segmenter cuts text: `label` names it in the tables."""

    label: str
    load: Callable[[], Cutter]


@dataclass(frozen=True)
class Segmenter:
    lang: str
    package: str  # the import that must succeed
    distributions: tuple[str, ...]  # what `pip install` put in site-packages, for size and licence
    modes: tuple[Mode, Mode]


# The segmenters are imported by name, typed as Any: none of them is a dependency of pinakes, and
# this module type-checks the same whether or not they are installed.
def jieba_cutter(search: bool) -> Cutter:
    import logging

    jieba = import_module("jieba")
    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    mode = "search" if search else "default"
    return lambda line: [(start, end, word) for word, start, end in jieba.tokenize(line, mode=mode)]


def sudachi_cutter(split: str) -> Cutter:
    sudachipy = import_module("sudachipy")
    mode = {"A": sudachipy.SplitMode.A, "C": sudachipy.SplitMode.C}[split]
    tokenizer = sudachipy.Dictionary(dict="core").tokenizer(mode)
    return lambda line: [(m.begin(), m.end(), m.surface()) for m in tokenizer.tokenize(line, mode)]


def kiwi_cutter(forms: bool) -> Cutter:
    kiwi = import_module("kiwipiepy").Kiwi()

    def cut(line: str) -> list[Span]:
        tokens = kiwi.tokenize(line)
        return [(t.start, t.end, t.form if forms else line[t.start : t.end]) for t in tokens]

    return cut


SEGMENTERS = (
    Segmenter("zh", "jieba", ("jieba",), (
        Mode("jieba cut", lambda: jieba_cutter(search=False)),
        Mode("jieba cut_for_search", lambda: jieba_cutter(search=True)))),
    Segmenter("ja", "sudachipy", ("sudachipy", "sudachidict-core"), (
        Mode("sudachi C", lambda: sudachi_cutter("C")),
        Mode("sudachi A", lambda: sudachi_cutter("A")))),
    Segmenter("ko", "kiwipiepy", ("kiwipiepy", "kiwipiepy_model"), (
        Mode("kiwi morphemes (surface)", lambda: kiwi_cutter(forms=False)),
        Mode("kiwi morphemes (forms)", lambda: kiwi_cutter(forms=True)))),
)


def run_words(line: str, spans: list[Span], start: int, end: int) -> list[str]:
    """The words of the run line[start:end]: each span inside it (its word), each span straddling
    its edge (the part inside, as written), and any character no span covers, in text order."""
    words: list[tuple[int, int, str]] = []
    covered = [False] * (end - start)
    for span_start, span_end, word in spans:
        low, high = max(span_start, start), min(span_end, end)
        if low >= high:
            continue
        inside = span_start >= start and span_end <= end
        words.append((low, high, word if inside else line[low:high]))
        for position in range(low, high):
            covered[position - start] = True
    words += [(start + i, start + i + 1, line[start + i]) for i, seen in enumerate(covered) if not seen]
    # One morpheme may yield several words on the same characters (했 -> 하, 었): each is kept once.
    return [word for _, _, word in sorted(dict.fromkeys(words), key=lambda w: (w[0], w[1]))]


def shadow(text: str, cut: Cutter, with_bigrams: bool) -> str | None:
    """The FTS5 text for `text` under this arm, or None when it holds no Han, kana or Hangul (the
    product stores nothing then either)."""
    if not SEGMENTED_RUN.search(text):
        return None
    lines: list[str] = []
    for line in text.split("\n"):
        runs = list(SEGMENTED_RUN.finditer(line))
        if not runs:
            lines.append(line)
            continue
        spans = cut(line)
        pieces: list[str] = []
        position = 0
        for run in runs:
            words = run_words(line, spans, run.start(), run.end())
            if with_bigrams:
                words += bigrams(run.group())
            pieces += [line[position : run.start()], " " + " ".join(words) + " "]
            position = run.end()
        lines.append("".join(pieces) + line[position:])
    return "\n".join(lines)


def words_only(text: str, cut: Cutter) -> str:
    return shadow(text, cut, with_bigrams=False) or text


def arm_index(source: Path, target: Path, cut: Cutter | None, with_bigrams: bool) -> None:
    """A copy of the index with every chunk's shadow rewritten and chunk_terms refilled to match."""
    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in target.parent.glob(target.name + "*"):
        stale.unlink()
    source_conn = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    conn = sqlite3.connect(target)
    source_conn.backup(conn)
    source_conn.close()
    if cut is not None:
        rows = conn.execute("SELECT id, text FROM chunks").fetchall()
        updates = [(shadow(text, cut, with_bigrams), chunk_id) for chunk_id, text in rows]
        conn.executemany("UPDATE chunks SET fts_text = ? WHERE id = ?",
                         [(fts_text, chunk_id) for fts_text, chunk_id in updates if fts_text is not None])
    conn.execute("DELETE FROM chunk_terms")
    conn.execute("CREATE VIRTUAL TABLE temp.postings USING fts5vocab(main, chunks_fts, 'instance')")
    conn.execute("INSERT INTO chunk_terms (chunk_id, term, frequency) "
                 "SELECT doc, term, count(*) FROM temp.postings GROUP BY doc, term")
    conn.commit()
    conn.close()


def same_terms(built: Path, refilled: Path) -> bool:
    """Whether chunk_terms refilled from the postings equals what `pnk sync` wrote: the method's
    check, on the shipped arm."""
    conn = sqlite3.connect(refilled)
    conn.execute("ATTACH DATABASE ? AS built", (f"file:{built}?mode=ro",))
    differ = conn.execute(
        "SELECT count(*) FROM (SELECT * FROM main.chunk_terms EXCEPT SELECT * FROM built.chunk_terms "
        "UNION ALL SELECT * FROM built.chunk_terms EXCEPT SELECT * FROM main.chunk_terms)").fetchone()[0]
    conn.close()
    return differ == 0


# ---- queries ------------------------------------------------------------------------------------


@contextmanager
def plain_words() -> Generator[None, None, None]:
    """Query analysis that takes each space-separated word as one plain unit: no bigram shadow."""
    saved = (query.segmented_parts, query.shadow_or_self, lexical_tokenizer.shadow_or_self)

    def one_plain_part(word: str) -> list[tuple[str, bool]]:
        return [(word, False)]

    def no_shadow(text: str) -> str:
        return text

    query.segmented_parts = one_plain_part
    query.shadow_or_self = no_shadow
    lexical_tokenizer.shadow_or_self = no_shadow
    try:
        yield
    finally:
        query.segmented_parts, query.shadow_or_self, lexical_tokenizer.shadow_or_self = saved


PRODUCT, WORDS, CUT_PRODUCT = "product", "words", "cut-product"


def analyzer(styles: tuple[str, ...], cut: Cutter | None) -> Callable[[str, Tokenizer], AnalyzedQuery]:
    """query.analyze for these query styles, their units in one OR (first spelling of a term kept):
    PRODUCT the question as typed; WORDS its runs cut into words, each a plain unit; CUT_PRODUCT
    the cut question analysed as the product analyses any query (each word a phrase of bigrams)."""
    original = query.analyze

    def analyze(text: str, tokenizer: Tokenizer) -> AnalyzedQuery:
        units: dict[tuple[str, ...], QueryUnit] = {}
        for style in styles:
            if style == PRODUCT:
                found = original(text, tokenizer).units
            elif style == CUT_PRODUCT:
                assert cut is not None
                found = original(words_only(text, cut), tokenizer).units
            else:
                assert cut is not None
                with plain_words():
                    found = original(words_only(text, cut), tokenizer).units
            for unit in found:
                units.setdefault(unit.terms, unit)
        return AnalyzedQuery(units=tuple(units.values()), words_ignored=0)

    return analyze


def scores(index: Path, questions: list[Question], analyze: Callable[[str, Tokenizer], AnalyzedQuery]
           ) -> dict[str, float]:
    saved = core.analyze
    core.analyze = analyze
    try:
        with Searcher(index, SearchSettings(rerank=False)) as searcher:
            result: dict[str, float] = {}
            for question in questions:
                found = searcher.search(question.query, mode="bm25", final_k=100)
                ranking = document_ranking([passage.path for passage in found.passages])
                result[question.id] = ndcg(ranking, [question.relevant], 10)
            return result
    finally:
        core.analyze = saved


# ---- the arms -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Arm:
    key: str  # the row of the table
    mode: int | None  # which of the segmenter's modes; None for the shipped arm
    with_bigrams: bool | None  # the index's runs: None shipped bigrams, False words, True both
    styles: tuple[str, ...]


SHIPPED = Arm("bigrams (shipped)", None, None, (PRODUCT,))
ARMS = (
    SHIPPED,
    *(arm for mode in (0, 1) for arm in (
        Arm(f"mode {mode + 1}: words", mode, False, (WORDS,)),
        Arm(f"mode {mode + 1}: words + bigrams", mode, True, (PRODUCT, WORDS)),
        Arm(f"mode {mode + 1}: bigrams, query cut into words", mode, None, (CUT_PRODUCT,)))),
)


@dataclass
class Language:
    lang: str
    segmenter: Segmenter
    results: dict[str, dict[str, float]]
    speed: dict[str, tuple[float, int, float]]  # mode label -> (load s, chars, chars/s)


def measure(lang: str, segmenter: Segmenter, kb: Path, questions: list[Question], work: Path,
            speed_only: bool = False) -> Language:
    built = kb / ".pinakes" / "index.db"
    texts = [text for (text,) in sqlite3.connect(f"file:{built}?mode=ro", uri=True).execute("SELECT text FROM chunks")]
    cutters: list[Cutter] = []
    chars = sum(len(text) for text in texts)
    started = time.perf_counter()
    for text in texts:
        scripts.shadow(text)
    speed = {f"bigrams ({lang}, shipped: scripts.shadow)": (0.0, chars, chars / (time.perf_counter() - started))}
    for mode in segmenter.modes:
        started = time.perf_counter()
        cut = mode.load()
        loaded = time.perf_counter() - started  # the first mode of a package pays its dictionary
        for text in texts[:50]:  # warm: the first mode timed must not pay lazy set-up for the second
            cut(text)
        started = time.perf_counter()
        for text in texts:
            for line in text.split("\n"):
                cut(line)
        seconds = time.perf_counter() - started
        speed[mode.label] = (loaded, chars, chars / seconds)
        cutters.append(cut)
        print(f"{lang}: {mode.label}: loaded in {loaded:.1f} s, {chars / seconds:,.0f} chars/s", flush=True)
    results: dict[str, dict[str, float]] = {}
    for arm in () if speed_only else ARMS:
        started = time.perf_counter()
        cut = None if arm.mode is None else cutters[arm.mode]
        if arm.with_bigrams is None:
            index = work / lang / "shipped.db"
            if not index.exists():
                arm_index(built, index, None, False)
                if not same_terms(built, index):
                    raise SystemExit(f"{lang}: chunk_terms refilled from the postings differ from the sync's")
        else:
            index = work / lang / f"mode{arm.mode}-{'both' if arm.with_bigrams else 'words'}.db"
            arm_index(built, index, cut, arm.with_bigrams)
        results[arm.key] = scores(index, questions, analyzer(arm.styles, cut))
        print(f"{lang}: {arm.key}: nDCG@10 {mean(results[arm.key]):.3f} "
              f"({time.perf_counter() - started:.0f} s)", flush=True)
    return Language(lang, segmenter, results, speed)


# ---- installs -----------------------------------------------------------------------------------


def installed_size(distribution: str) -> int:
    """Bytes on disk of what the distribution installed (its RECORD), .pyc caches included."""
    files = metadata.distribution(distribution).files or []
    total = 0
    for file in files:
        path = Path(str(file.locate()))
        if path.is_file():
            total += path.stat().st_size
    return total


def licence(distribution: str) -> str:
    meta = metadata.metadata(distribution)
    declared = next(iter((meta.get_all("License-Expression") or []) + (meta.get_all("License") or [])), "")
    classifiers = [c.split(" :: ")[-1] for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
    first_line = declared.strip().splitlines()[0] if declared.strip() else ""
    return "; ".join(part for part in (first_line[:60], *classifiers) if part) or "(not declared)"


# ---- the report ---------------------------------------------------------------------------------


def report(languages: list[Language]) -> None:
    langs = [language.lang for language in languages]
    by = {language.lang: language for language in languages}
    print("\nModes: " + "; ".join(
        f"{lang} mode 1 = {by[lang].segmenter.modes[0].label}, mode 2 = {by[lang].segmenter.modes[1].label}"
        for lang in langs))
    for arm in ARMS if all(language.results for language in languages) else ():
        if arm is SHIPPED:
            print("\n| arm (keyword nDCG@10) | " + " | ".join(langs) + " | mean | vs shipped: up/down, one-sided p |")
            print("|---|" + "---|" * (len(langs) + 2))
        values = [mean(by[lang].results[arm.key]) for lang in langs]
        versus = "" if arm is SHIPPED else "; ".join(
            f"{lang} {paired(by[lang].results[arm.key], by[lang].results[SHIPPED.key])}" for lang in langs)
        print(f"| {arm.key} | " + " | ".join(f"{v:.3f}" for v in values)
              + f" | {sum(values) / len(values):.3f} | {versus} |")
    print("\n| segmenter | installed (MiB) | licence |")
    print("|---|---|---|")
    for language in languages:
        for distribution in language.segmenter.distributions:
            size = installed_size(distribution) / 2**20
            version = metadata.version(distribution)
            print(f"| {distribution} {version} ({language.lang}) | {size:.1f} | {licence(distribution)} |")
    print("\n| mode | load (s) | chars segmented | chars/s |")
    print("|---|---|---|---|")
    for language in languages:
        for label, (loaded, chars, rate) in language.speed.items():
            print(f"| {label} | {loaded:.1f} | {chars:,} | {rate:,.0f} |")
    if not all(language.results for language in languages):
        return
    print("\nVerdict (significantly better than bigrams: one-sided sign test p < 0.05, "
          "Bonferroni over the arms tried per language):")
    tried = len(ARMS) - 1
    for lang in langs:
        shipped = by[lang].results[SHIPPED.key]
        better: list[str] = []
        for arm in ARMS[1:]:
            after = by[lang].results[arm.key]
            up, down = rises_and_falls(after, shipped)
            if sign_test(up, down) * tried < 0.05:
                better.append(arm.key)
        name = by[lang].segmenter.package
        print(f"- {lang} ({name}): " + (f"better: {', '.join(better)}" if better else "no arm significantly better"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=1500, help="pages per language, as bench_cjk (default 1500)")
    parser.add_argument("--langs", default=",".join(LANGS))
    temp = Path(os.environ.get("TMPDIR", tempfile.gettempdir()))
    parser.add_argument("--cache", type=Path, default=temp / "pnk-cjk", help="bench_cjk.py's KBs (read only)")
    parser.add_argument("--work", type=Path, default=temp / "pnk-segmenters", help="the arms' index copies")
    parser.add_argument("--keep", action="store_true", help="keep the index copies")
    parser.add_argument("--json", type=Path, help="write every per-question score here")
    parser.add_argument("--speed-only", action="store_true", help="only the sizes, licences and speeds")
    args = parser.parse_args(argv)
    wanted = [lang.strip() for lang in args.langs.split(",") if lang.strip()]
    languages: list[Language] = []
    for segmenter in SEGMENTERS:
        if segmenter.lang not in wanted:
            continue
        try:
            import_module(segmenter.package)
        except ImportError as error:
            print(f"{segmenter.lang}: skipped, {segmenter.package} is not installed ({error}); "
                  f"pip install {' '.join(segmenter.distributions)}", flush=True)
            continue
        kb, questions, seconds = build(segmenter.lang, args.pages, args.cache)
        took = f", pnk sync {seconds:.0f} s" if seconds is not None else ""
        print(f"{segmenter.lang}: {len(questions)} questions{took}", flush=True)
        languages.append(measure(segmenter.lang, segmenter, kb, questions, args.work, args.speed_only))
        if not args.keep:
            shutil.rmtree(args.work / segmenter.lang, ignore_errors=True)
    if not languages:
        print("no language measured")  # every one skipped, saying why: not a failure
        return 0
    report(languages)
    if args.json:
        args.json.write_text(json.dumps({language.lang: language.results for language in languages},
                                        ensure_ascii=False, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
