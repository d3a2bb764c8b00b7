"""The retrieval tuning harness (issue #18): every index built by the product's own `pnk init` +
`run_sync` (the template's manifest, the default embedding model, the product chunker), the two
retrievers' candidate lists computed once per question, and fusion re-run per setting in process.

    python bench/tune_retrieval.py build                 # build (or reuse) the KBs under $TMPDIR/pnk-tune
    python bench/tune_retrieval.py sweep --json out.json # the fusion sweep over every built corpus
    python bench/tune_retrieval.py graph                 # the graph channel, off vs expand, per corpus

Corpora (../shared/corpora, each with its SOURCE.md), sized so a cold build takes minutes on two
shared cores:

- `cranfield`: all 1 400 abstracts, 225 judged questions (`relevant`, codes 1-4).
- `tldr`: the 504 NL2Bash questions over a seeded sample of the tldr pages: every page any question
  names (relevant, primary or also-acceptable) plus random pages up to TLDR_PAGES. A smaller
  haystack than the full 7 425 pages, so absolute figures are higher than over the whole corpus;
  the arms are compared on the same sample.
- `pydocs`: the Python 3.11 library reference, one page per module that declares a `:synopsis:`
  (a seeded sample of PYDOCS_PAGES). The question is the synopsis; the page that declares it is the
  relevant one. The synopsis line is removed from the copied page, so the page must be found by
  what it says, not by the sentence the question was made from. Its reST cross-references between
  sampled pages (`:mod:`, `:func:`, `:class:` ... resolved to the page that defines the module)
  become authored links (`rel = "references"`), written into the sidecars by `pnk link`'s own API:
  the corpus the graph channel is measured on.

Never tune on one corpus and report on the same: the sweep picks the setting that maximises the mean
nDCG@10 over the corpora *other* than the one reported (leave-one-corpus-out) as well as the mean
over all, and prints both.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import re
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from pinakes.eval.outcomes import Outcome

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SHARED = REPO.parent / "shared" / "corpora"
CACHE = Path(os.environ.get("TMPDIR") or "/tmp") / "pnk-tune"
TLDR_PAGES = 2000
PYDOCS_PAGES = 120
SEED = 20261201


@dataclass(frozen=True)
class Question:
    id: str
    query: str
    relevant: tuple[str, ...]  # KB-root-relative paths (docs/...)
    primary: tuple[str, ...]
    hit_recall: bool = False  # tldr: recall@10 is hit@10 on primary_relevant (its SOURCE.md)


@dataclass
class CorpusBuild:
    name: str
    root: Path
    questions: list[Question] = field(default_factory=list[Question])


# -- corpora -----------------------------------------------------------------------------------


def _copy(pairs: Iterable[tuple[Path, str]], kb: Path, rewrite: Callable[[str, str], str] | None = None) -> None:
    for source, relative in pairs:
        target = kb / "docs" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if rewrite is None:
            shutil.copyfile(source, target)
        else:
            target.write_text(rewrite(relative, source.read_text(encoding="utf-8")), encoding="utf-8")


def _jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def cranfield_sources() -> tuple[list[tuple[Path, str]], list[Question]]:
    base = SHARED / "cranfield"
    pairs = [(path, path.name) for path in sorted((base / "docs").glob("*.txt")) if path.stat().st_size]
    questions = [Question(str(row["id"]), row["query"], tuple(f"docs/{p}" for p in row["relevant"]),
                          tuple(f"docs/{p}" for p in row["relevant"]))
                 for row in _jsonl(base / "questions.jsonl")]
    return pairs, questions


def tldr_sources(pages: int = TLDR_PAGES) -> tuple[list[tuple[Path, str]], list[Question]]:
    base = SHARED / "tldr-nl2bash-dev"
    rows = _jsonl(base / "questions.jsonl")
    named = {p for row in rows for key in ("relevant", "primary_relevant", "also_acceptable")
             for p in row.get(key) or ()}
    everything = sorted(path.relative_to(base / "docs").as_posix() for path in (base / "docs").glob("*/*.md"))
    others = [p for p in everything if p not in named]
    random.Random(SEED).shuffle(others)
    chosen = sorted(named | set(others[: max(0, pages - len(named))]))
    questions = [Question(str(row["id"]), row["query"], tuple(f"docs/{p}" for p in row["relevant"]),
                          tuple(f"docs/{p}" for p in row["primary_relevant"]), hit_recall=True)
                 for row in rows]
    return [(base / "docs" / p, p) for p in chosen], questions


SYNOPSIS = re.compile(r"^\s*:synopsis:\s*(.+)$", re.MULTILINE)
MODULE = re.compile(r"^\.\.\s+(?:py:)?module::\s*([\w.]+)\s*$", re.MULTILINE)
XREF = re.compile(r":(?:py:)?(?:mod|func|class|meth|exc|data|attr|const|obj):`~?!?([\w.]+)(?:\(\))?`")
XREF_TARGET = re.compile(r":(?:py:)?(?:mod|func|class|meth|exc|data|attr|const|obj):`[^`<]*<~?([\w.]+)>`")


def pydocs_sources(pages: int = PYDOCS_PAGES) -> tuple[list[tuple[Path, str]], list[Question], dict[str, set[str]]]:
    """The sampled library pages, one synopsis question each, and the cross-reference links between
    sampled pages (source page -> target pages)."""
    base = SHARED / "python-3.11-docs-rst" / "docs"
    declared: dict[str, tuple[str, str]] = {}  # page -> (module, synopsis)
    for path in sorted((base / "library").glob("*.rst.txt")):
        text = path.read_text(encoding="utf-8")
        module, synopsis = MODULE.search(text), SYNOPSIS.search(text)
        if module and synopsis and len(synopsis.group(1).split()) >= 3:
            declared[path.relative_to(base).as_posix()] = (module.group(1), synopsis.group(1).strip())
    chosen = sorted(declared)
    random.Random(SEED).shuffle(chosen)
    chosen = sorted(chosen[:pages])
    module_page = {declared[page][0]: page for page in chosen}
    links: dict[str, set[str]] = {}
    for page in chosen:
        text = (base / page).read_text(encoding="utf-8")
        targets: set[str] = set()
        for match in [*XREF.finditer(text), *XREF_TARGET.finditer(text)]:
            name = match.group(1)
            parts = name.split(".")
            for cut in range(len(parts), 0, -1):  # the longest prefix that is a sampled module
                target = module_page.get(".".join(parts[:cut]))
                if target:
                    if target != page:
                        targets.add(target)
                    break
        if targets:
            links[page] = targets
    questions = [Question(f"py-{declared[page][0]}", _plain(declared[page][1]), (f"docs/{page}",),
                          (f"docs/{page}",)) for page in chosen]
    return [(base / p, p) for p in chosen], questions, links


def _plain(synopsis: str) -> str:
    """A synopsis as a person would type it: roles and markup reduced to their words."""
    text = re.sub(r":\w+(?::\w+)?:`~?!?([^`<]*?)(?:\s*<[^>]*>)?`", r"\1", synopsis)
    return re.sub(r"[`*]", "", text).strip()


def _strip_synopsis(_relative: str, text: str) -> str:
    return SYNOPSIS.sub("", text, count=1)


# -- building, through the product ---------------------------------------------------------------


def build_corpus(name: str, cache: Path = CACHE, *, quiet: bool = False) -> CorpusBuild:
    """The KB for `name`, built (once) by `init_kb` + `run_sync` exactly as `pnk init` + `pnk sync`."""
    from pinakes.init import init_kb
    from pinakes.sync import SyncOptions
    from pinakes.sync.engine import run_sync

    kb = cache / name
    links: dict[str, set[str]] = {}
    if name == "cranfield":
        pairs, questions = cranfield_sources()
        rewrite = None
    elif name == "tldr":
        pairs, questions = tldr_sources()
        rewrite = None
    elif name == "pydocs":
        pairs, questions, links = pydocs_sources()
        rewrite = _strip_synopsis
    else:
        raise SystemExit(f"unknown corpus {name!r}")
    build = CorpusBuild(name, kb, questions)
    if (kb / ".built").exists():
        return build
    if not (kb / "pinakes.toml").exists():  # else an interrupted build: the syncs below resume it
        if kb.exists():
            shutil.rmtree(kb)
        init_kb(kb)
        _copy(pairs, kb, rewrite)
    started = time.perf_counter()
    run_sync(kb, SyncOptions(quiet=quiet, offline=True))
    if links:
        _author_links(kb, links)
        run_sync(kb, SyncOptions(quiet=quiet, offline=True))
    (kb / ".built").write_text(json.dumps({"seconds": round(time.perf_counter() - started, 1),
                                           "documents": len(pairs), "links": sum(map(len, links.values()))}))
    return build


def _author_links(kb: Path, links: dict[str, set[str]]) -> None:
    """The corpus's own cross-references as authored links, through `pnk link`'s API."""
    from pinakes.links.authoring import link

    for source, targets in sorted(links.items()):
        for target in sorted(targets):
            link(kb, f"docs/{source}", f"docs/{target}", rel="references")


# -- candidate lists, once per question ------------------------------------------------------------


@dataclass
class Candidates:
    keyword: list[tuple[int, float]]
    vector: list[tuple[int, float]]


def candidate_lists(kb: Path, questions: Sequence[Question], width: int) -> list[Candidates]:
    """Each question's keyword and vector lists, `width` deep, from the product's own retrievers."""
    from pinakes.lexical.filters import SearchFilters
    from pinakes.search.core import (
        Searcher,
        SearchSettings,
        _Run,  # pyright: ignore[reportPrivateUsage] -- the harness drives a search run's own steps
    )

    base = Searcher.for_kb(kb, offline=True)
    settings = SearchSettings(candidates_per_source=width, fusion_top_k=width, final_k=min(width, 100),
                              rerank=False)
    searcher = Searcher(base.index_path, settings,
                        embedder_loader=base._embedder_loader,  # pyright: ignore[reportPrivateUsage] -- the KB's own
                        embedding_section=base.embedding_section)
    out: list[Candidates] = []
    for question in questions:
        with searcher._lock:  # pyright: ignore[reportPrivateUsage] -- as search() holds it
            run = _Run(searcher, question.query, SearchFilters(), "hybrid", False, None)
            run.candidates_per_source = width
            with searcher.snapshot() as generation:
                embedder = searcher.embedder()
                mask = run._prepare_vectors(generation, embedder)  # pyright: ignore[reportPrivateUsage] -- its own step
                _plan, keyword, vector = run._retrieve(  # pyright: ignore[reportPrivateUsage] -- its own step
                    generation, None, embedder, mask)
        out.append(Candidates(list(keyword), list(vector)))
    searcher.close()
    return out


def chunk_documents(kb: Path) -> dict[int, str]:
    from pinakes.index import schema

    conn = schema.open_reader(KBPaths_index(kb))
    try:
        return dict(conn.execute("SELECT c.id, d.path FROM chunks c JOIN documents d ON d.id = c.doc_id"))
    finally:
        conn.close()


def KBPaths_index(kb: Path) -> Path:
    from pinakes.kb import KBPaths

    return KBPaths(kb).index_db


# -- scoring -----------------------------------------------------------------------------------------


def score(documents: Sequence[str], question: Question) -> dict[str, float]:
    top = list(documents[:10])
    relevant = set(question.relevant)
    dcg = sum(1.0 / math.log2(rank + 2) for rank, doc in enumerate(top) if doc in relevant)
    ideal = sum(1.0 / math.log2(rank + 2) for rank in range(min(10, len(relevant))))
    primary = set(question.primary)
    if question.hit_recall:
        recall = 1.0 if primary.intersection(top) else 0.0
    else:
        recall = len(primary.intersection(top)) / len(primary) if primary else 0.0
    mrr = next((1.0 / (rank + 1) for rank, doc in enumerate(documents) if doc in primary), 0.0)
    return {"ndcg@10": dcg / ideal if ideal else 0.0, "recall@10": recall, "mrr": mrr}


def mean_scores(rows: Sequence[dict[str, float]]) -> dict[str, float]:
    return {metric: round(statistics.fmean(row[metric] for row in rows), 4) for metric in rows[0]}


# -- the fusion sweep ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fusion:
    """One fusion setting, applied to precomputed candidate lists."""

    rrf_k: int = 60
    keyword_weight: float = 1.0
    vector_weight: float = 1.0
    width: int = 50  # candidates_per_source
    level: str = "chunk"  # chunk | doc-max | doc-sum
    dedupe: float | None = None  # drop a document whose best chunk is this similar to a kept one

    def label(self) -> str:
        parts = [f"k={self.rrf_k}", f"w_kw={self.keyword_weight:g}", f"w_vec={self.vector_weight:g}",
                 f"width={self.width}", self.level]
        if self.dedupe is not None:
            parts.append(f"dedupe>={self.dedupe:g}")
        return " ".join(parts)


DEFAULT = Fusion()


def fuse_documents(lists: Candidates, setting: Fusion, docs: dict[int, str],
                   shingles: dict[int, frozenset[str]] | None = None) -> list[str]:
    """The document ranking one fusion setting gives (passages folded to documents, best first)."""
    keyword = lists.keyword[: setting.width]
    vector = lists.vector[: setting.width]
    scores: dict[str, float] = {}
    best_chunk: dict[str, tuple[float, int]] = {}
    if setting.level == "doc-max":
        for weight, ranked in ((setting.keyword_weight, keyword), (setting.vector_weight, vector)):
            for rank, doc in enumerate(dict.fromkeys(docs[c] for c, _ in ranked), start=1):
                scores[doc] = scores.get(doc, 0.0) + weight / (setting.rrf_k + rank)
        for chunk_id, _ in [*keyword, *vector]:
            best_chunk.setdefault(docs[chunk_id], (0.0, chunk_id))
    else:
        chunk_scores: dict[int, float] = {}
        for weight, ranked in ((setting.keyword_weight, keyword), (setting.vector_weight, vector)):
            for chunk_id, rank in _competition(ranked):
                chunk_scores[chunk_id] = chunk_scores.get(chunk_id, 0.0) + weight / (setting.rrf_k + rank)
        for chunk_id, value in chunk_scores.items():
            doc = docs[chunk_id]
            if setting.level == "doc-sum":
                scores[doc] = scores.get(doc, 0.0) + value
            else:
                scores[doc] = max(scores.get(doc, 0.0), value)
            if value > best_chunk.get(doc, (-1.0, 0))[0]:
                best_chunk[doc] = (value, chunk_id)
    ranking = sorted(scores, key=lambda d: (-scores[d], d))
    if setting.dedupe is None or shingles is None:
        return ranking
    kept: list[str] = []
    kept_shingles: list[frozenset[str]] = []
    for doc in ranking:
        mine = shingles.get(best_chunk[doc][1], frozenset())
        if any(_jaccard(mine, other) >= setting.dedupe for other in kept_shingles):
            continue
        kept.append(doc)
        kept_shingles.append(mine)
    return kept


def _competition(ranked: Sequence[tuple[int, float]]) -> list[tuple[int, int]]:
    """(chunk_id, competition rank): equal scores share a rank, as the product's fusion does."""
    out: list[tuple[int, int]] = []
    rank, previous = 0, None
    for position, (chunk_id, value) in enumerate(ranked, start=1):
        if value != previous:
            rank, previous = position, value
        out.append((chunk_id, rank))
    return out


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def chunk_shingles(kb: Path, chunk_ids: Iterable[int]) -> dict[int, frozenset[str]]:
    from pinakes.index import schema

    wanted = sorted(set(chunk_ids))
    conn = schema.open_reader(KBPaths_index(kb))
    try:
        out: dict[int, frozenset[str]] = {}
        for start in range(0, len(wanted), 500):
            part = wanted[start:start + 500]
            marks = ",".join("?" * len(part))
            for chunk_id, text in conn.execute(f"SELECT id, text FROM chunks WHERE id IN ({marks})", part):
                words = re.findall(r"\w+", text.lower())
                out[chunk_id] = frozenset(" ".join(words[i:i + 3]) for i in range(max(1, len(words) - 2)))
        return out
    finally:
        conn.close()


@dataclass
class Prepared:
    build: CorpusBuild
    lists: list[Candidates]
    docs: dict[int, str]
    shingles: dict[int, frozenset[str]]

    def per_question(self, setting: Fusion) -> list[dict[str, float]]:
        return [score(fuse_documents(lists, setting, self.docs, self.shingles), question)
                for lists, question in zip(self.lists, self.build.questions, strict=True)]

    def single(self, which: str, width: int = 50) -> list[dict[str, float]]:
        rows: list[dict[str, float]] = []
        for lists, question in zip(self.lists, self.build.questions, strict=True):
            ranked = (lists.keyword if which == "keyword" else lists.vector)[:width]
            rows.append(score(list(dict.fromkeys(self.docs[c] for c, _ in ranked)), question))
        return rows


def prepare(name: str, cache: Path, width: int = 200) -> Prepared:
    build = build_corpus(name, cache, quiet=True)
    store = cache / f"{name}.lists.json"
    if store.exists():
        raw = json.loads(store.read_text())
        lists = [Candidates([tuple(x) for x in row["k"]], [tuple(x) for x in row["v"]]) for row in raw]
    else:
        started = time.perf_counter()
        lists = candidate_lists(build.root, build.questions, width)
        store.write_text(json.dumps([{"k": c.keyword, "v": c.vector} for c in lists]))
        print(f"  {name}: candidate lists for {len(lists)} questions in {time.perf_counter() - started:.0f} s",
              file=sys.stderr)
    docs = chunk_documents(build.root)
    shingles = chunk_shingles(build.root, [c for row in lists for c, _ in [*row.keyword, *row.vector]])
    return Prepared(build, lists, docs, shingles)


def paired(before: Sequence[dict[str, float]], after: Sequence[dict[str, float]],
           metric: str = "ndcg@10") -> dict[str, object]:
    from pinakes.eval.paired import sign_test

    improved = sum(1 for b, a in zip(before, after, strict=True) if a[metric] > b[metric] + 1e-12)
    worsened = sum(1 for b, a in zip(before, after, strict=True) if a[metric] < b[metric] - 1e-12)
    return {"improved": improved, "worsened": worsened, "p_better": round(sign_test(improved, worsened), 4),
            "p_worse": round(sign_test(worsened, improved), 4)}


def sweep_settings() -> list[Fusion]:
    grid: list[Fusion] = []
    for width in (50, 100):
        for level in ("chunk", "doc-max", "doc-sum"):
            for rrf_k in (5, 10, 20, 40, 60, 100):
                for w_kw in (0.5, 0.75, 1.0, 1.33, 2.0):
                    grid.append(Fusion(rrf_k, w_kw, 1.0, width, level))
    for width in (20, 30, 200):
        grid.append(Fusion(width=width))
    return grid


def run_sweep(prepared: dict[str, Prepared]) -> dict[str, object]:
    names = list(prepared)
    table: dict[Fusion, dict[str, dict[str, float]]] = {}
    for setting in sweep_settings():
        table[setting] = {name: mean_scores(p.per_question(setting)) for name, p in prepared.items()}

    def mean_over(setting: Fusion, over: Sequence[str]) -> float:
        return statistics.fmean(table[setting][n]["ndcg@10"] for n in over)

    best_all = max(table, key=lambda s: (mean_over(s, names), s == DEFAULT))
    held_out = {}
    for name in names:
        others = [n for n in names if n != name] or names
        chosen = max(table, key=lambda s, others=others: (mean_over(s, others), s == DEFAULT))
        held_out[name] = {"chosen_on_others": chosen.label(), "ndcg@10": table[chosen][name]["ndcg@10"],
                          "default_ndcg@10": table[DEFAULT][name]["ndcg@10"]}
    dedupe_rows = {}
    for threshold in (0.9, 0.8, 0.6):
        for base in (DEFAULT, best_all):
            setting = Fusion(base.rrf_k, base.keyword_weight, base.vector_weight, base.width, base.level, threshold)
            dedupe_rows[setting.label()] = {name: mean_scores(p.per_question(setting))
                                            for name, p in prepared.items()}
    singles = {name: {"keyword": mean_scores(p.single("keyword")), "vector": mean_scores(p.single("vector"))}
               for name, p in prepared.items()}
    tests = {name: paired(p.per_question(DEFAULT), p.per_question(best_all)) for name, p in prepared.items()}
    variants = {"k=10": Fusion(rrf_k=10), "k=5": Fusion(rrf_k=5), "doc-max": Fusion(level="doc-max"),
                "doc-max k=10": Fusion(rrf_k=10, level="doc-max"), "keyword weight 0.75": Fusion(keyword_weight=0.75),
                "near-duplicates 0.9": Fusion(dedupe=0.9)}
    variant_tests = {label: {name: paired(p.per_question(DEFAULT), p.per_question(setting))
                             for name, p in prepared.items()} for label, setting in variants.items()}
    ranked = sorted(table, key=lambda s: -mean_over(s, names))
    return {
        "corpora": {n: len(p.build.questions) for n, p in prepared.items()},
        "default": {"setting": DEFAULT.label(), **table[DEFAULT]},
        "best_mean": {"setting": best_all.label(), "mean_ndcg@10": round(mean_over(best_all, names), 4),
                      **table[best_all]},
        "leave_one_corpus_out": held_out,
        "paired_best_vs_default": tests,
        "paired_variants_vs_default": variant_tests,
        "single_retrievers": singles,
        "dedupe": dedupe_rows,
        "top": [{"setting": s.label(), "mean_ndcg@10": round(mean_over(s, names), 4),
                 **{n: table[s][n]["ndcg@10"] for n in names}} for s in ranked[:15]],
        "all": [{"setting": s.label(), **{n: table[s][n]["ndcg@10"] for n in names}} for s in table],
    }


# -- the graph channel, through the product's Searcher ------------------------------------------------


def product_rankings(kb: Path, questions: Sequence[Question], **overrides: object) -> list[list[str]]:
    """Each question's document ranking from the product's own search (100 passages, folded to
    documents in rank order), with [retrieval] settings overridden."""
    import dataclasses

    from pinakes.search.core import Searcher

    searcher = Searcher.for_kb(kb, offline=True)
    searcher.settings = dataclasses.replace(searcher.settings, rerank=False, **overrides)
    out: list[list[str]] = []
    try:
        for question in questions:
            result = searcher.search(question.query, final_k=100)
            out.append(list(dict.fromkeys(f"{p.path}" for p in result.passages)))
    finally:
        searcher.close()
    return out


GRAPH_VARIANTS = {  # label -> (GRAPH_WEIGHT, SEEDS, EDGES)
    "w1 all edges": (1.0, 5, None),
    "w0.5 all edges": (0.5, 5, None),
    "w0.25 all edges": (0.25, 5, None),
    "w0.25 chunk + authored": (0.25, 5, ("sibling", "parent-child", "in-section", "authored")),
    "w0.25 authored": (0.25, 5, ("authored",)),
    "w0.5 authored": (0.5, 5, ("authored",)),
}


@contextlib.contextmanager
def graph_variant(weight: float, seeds: int, edges: tuple[str, ...] | None) -> Generator[None, None, None]:
    from pinakes.search import graph

    saved = (graph.GRAPH_WEIGHT, graph.SEEDS, graph.EDGES)
    graph.GRAPH_WEIGHT, graph.SEEDS = weight, seeds
    graph.EDGES = edges or graph.CHUNK_EDGES + graph.DOCUMENT_EDGES
    try:
        yield
    finally:
        graph.GRAPH_WEIGHT, graph.SEEDS, graph.EDGES = saved


def run_graph(names: Sequence[str], cache: Path, demo: Path | None) -> dict[str, object]:
    result: dict[str, object] = {}
    for name in names:
        build = build_corpus(name, cache, quiet=True)
        rows = {"off": [score(r, q) for r, q in zip(product_rankings(build.root, build.questions),
                                                      build.questions, strict=True)]}
        corpus: dict[str, object] = {"off": mean_scores(rows["off"])}
        for label, variant in GRAPH_VARIANTS.items():
            started = time.perf_counter()
            with graph_variant(*variant):
                rankings = product_rankings(build.root, build.questions, graph_channel="expand")
            rows[label] = [score(r, q) for r, q in zip(rankings, build.questions, strict=True)]
            corpus[label] = {**mean_scores(rows[label]), "paired_ndcg": paired(rows["off"], rows[label]),
                             "paired_recall@10": paired(rows["off"], rows[label], "recall@10"),
                             "seconds": round(time.perf_counter() - started, 1)}
            print(f"  {name} {label}: {corpus[label]}", file=sys.stderr, flush=True)
        result[name] = corpus
    if demo is not None:
        result["demo-kb"] = demo_graph(demo)
    return result


def demo_graph(kb: Path) -> dict[str, object]:
    """The demo KB's golden set per class, off against each variant (the `pnk eval` runner)."""
    import dataclasses

    from pinakes.eval.golden import load_golden_set
    from pinakes.eval.paired import is_right
    from pinakes.eval.runner import outcomes_for
    from pinakes.manifest import load_manifest

    manifest = load_manifest(kb / "pinakes.toml")
    golden = load_golden_set(kb / "eval" / "questions.yaml", kb, sources=manifest.sources)

    def run(channel: str) -> list[Outcome]:
        changed = dataclasses.replace(manifest, retrieval=dataclasses.replace(manifest.retrieval,
                                                                              graph_channel=channel))
        return list(outcomes_for(kb, changed, golden).rows)

    def per_class(rows: list[Outcome]) -> dict[str, str]:
        out: dict[str, str] = {}
        for kind in sorted({r.kind for r in rows}):
            mine = [r for r in rows if r.kind == kind and r.kind != "no-answer"]
            if mine:
                mrr = sum(1.0 / r.hit_rank for r in mine if r.hit_rank) / len(mine)
                out[kind] = f"recall {sum(1 for r in mine if r.hit)}/{len(mine)}, MRR {mrr:.3f}"
        return out

    off = run("off")
    result: dict[str, object] = {"off": per_class(off)}
    for label, variant in GRAPH_VARIANTS.items():
        with graph_variant(*variant):
            rows = run("expand")
        improved = [b.id for a, b in zip(off, rows, strict=True) if is_right(a) is False and is_right(b)]
        worsened = [b.id for a, b in zip(off, rows, strict=True) if is_right(a) and is_right(b) is False]
        rank_up = sum(1 for a, b in zip(off, rows, strict=True) if a.hit_rank and b.hit_rank and b.hit_rank < a.hit_rank)
        rank_down = sum(1 for a, b in zip(off, rows, strict=True)
                        if a.hit_rank and (not b.hit_rank or b.hit_rank > a.hit_rank))
        result[label] = {"per_class": per_class(rows), "improved": improved, "worsened": worsened,
                         "hit_rank_up": rank_up, "hit_rank_down": rank_down}
        print(f"  demo {label}: {result[label]}", file=sys.stderr, flush=True)
    return result


# -- document context: the title and heading trail in each chunk's keyword and vector text -----------


def context_prefix(title: str | None, path: str, heading: str | None) -> str:
    """What a chunk's keyword/vector text would carry ahead of it: the document's title (the file
    name when it declares none) and the chunk's heading trail."""
    from pinakes.extract.titles import display_title

    parts = [display_title(title, path)]
    parts.extend(json.loads(heading) if heading else ())
    return " > ".join(part for part in parts if part)


def context_copy(name: str, cache: Path, *, keyword: bool, vector: bool) -> Path:
    """A copy of `name`'s built KB whose chunks carry document context on the chosen sides. The
    cited text (chunks.text, char_start, char_end) is untouched: the keyword side goes through
    `chunks.fts_text` (what the FTS5 table indexes), the vector side re-embeds prefix + text with
    the KB's own model, dropping the text's last words where the prefix would push it past the
    model's input limit (a sync would reserve the room in the chunker instead)."""
    from pinakes.embed import load_embedder
    from pinakes.manifest import load_manifest

    source = cache / name
    label = "ctx-" + ("k" if keyword else "") + ("v" if vector else "")
    target = cache / f"{name}-{label}"
    if (target / ".built").exists():
        return target
    if target.exists():
        shutil.rmtree(target)
    (target / ".pinakes").mkdir(parents=True)
    shutil.copyfile(source / "pinakes.toml", target / "pinakes.toml")
    embedded = cache / f"{name}-ctx-kv"  # the vectors with context are the same for every copy
    reuse = vector and (embedded / ".built").exists()
    shutil.copyfile((embedded if reuse else source) / ".pinakes" / "index.db", target / ".pinakes" / "index.db")
    import sqlite3

    conn = sqlite3.connect(target / ".pinakes" / "index.db")
    _ensure_shadow_text(conn)
    if reuse:
        with conn:  # back to the plain keyword text (these corpora have no shadow)
            conn.execute("UPDATE chunks SET fts_text = NULL")
        vector = False
    rows = conn.execute("SELECT c.id, c.text, c.fts_text, c.heading_path, d.title, d.path FROM chunks c "
                        "JOIN documents d ON d.id = c.doc_id ORDER BY c.id").fetchall()
    if keyword:
        with conn:
            conn.executemany("UPDATE chunks SET fts_text = ? WHERE id = ?",
                             [(context_prefix(title, path, heading) + "\n" + (fts or text), chunk_id)
                              for chunk_id, text, fts, heading, title, path in rows])
    if vector:
        embedder = load_embedder(load_manifest(target / "pinakes.toml").embedding, offline=True)
        texts: list[str] = []
        for _chunk_id, text, _fts, heading, title, path in rows:
            prefix = context_prefix(title, path, heading) + "\n"
            words = text.split(" ")
            candidate = prefix + text
            while embedder.count_tokens(candidate) > embedder.max_input_tokens and len(words) > 1:
                words = words[: max(1, len(words) - max(1, len(words) // 20))]
                candidate = prefix + " ".join(words)
            texts.append(candidate)
        started = time.perf_counter()
        vectors = embedder.embed_documents(texts, batch_size=32)
        print(f"  {name}: re-embedded {len(texts)} chunks in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        with conn:
            conn.executemany("UPDATE embeddings SET vector = ? WHERE chunk_id = ?",
                             [(vectors[i].astype("float32").tobytes(), row[0]) for i, row in enumerate(rows)])
    conn.close()
    (target / ".built").write_text("{}")
    return target


def _ensure_shadow_text(conn: object) -> None:
    """An index built before `chunks.fts_text` existed gets the column and today's FTS table, view
    and triggers (schema.DDL's own statements), re-indexed from the same text."""
    import sqlite3

    from pinakes.index import schema

    assert isinstance(conn, sqlite3.Connection)
    columns = {row[1] for row in conn.execute("PRAGMA table_info(chunks)")}
    if "fts_text" in columns:
        return
    start = schema.DDL.index("CREATE VIEW chunks_fts_source")
    end = schema.DDL.index("END;", schema.DDL.index("CREATE TRIGGER chunks_fts_update")) + len("END;")
    with conn:
        conn.execute("ALTER TABLE chunks ADD COLUMN fts_text TEXT")
        for trigger in ("chunks_fts_insert", "chunks_fts_delete", "chunks_fts_update"):
            conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        conn.execute("DROP TABLE chunks_fts")
        conn.executescript(schema.DDL[start:end])
        conn.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('rebuild')")


def run_context(names: Sequence[str], cache: Path, sides: Sequence[str]) -> dict[str, object]:
    result: dict[str, object] = {}
    for name in names:
        base = prepare(name, cache)
        # Fresh lists from today's retrievers, never the cached ones: both arms must come from the
        # same code, and the keyword retriever may have changed since the cache was written.
        base = Prepared(base.build, candidate_lists(base.build.root, base.build.questions, 200), base.docs,
                        base.shingles)
        before = base.per_question(DEFAULT)
        corpus: dict[str, object] = {"without": mean_scores(before)}
        for side in sides:
            kb = context_copy(name, cache, keyword="k" in side, vector="v" in side)
            lists = candidate_lists(kb, base.build.questions, 200)
            after_prepared = Prepared(base.build, lists, base.docs, base.shingles)
            after = after_prepared.per_question(DEFAULT)
            corpus[f"with ({side})"] = {**mean_scores(after), "paired": paired(before, after),
                                        "keyword_only": mean_scores(after_prepared.single("keyword")),
                                        "vector_only": mean_scores(after_prepared.single("vector"))}
            print(f"  {name} {side}: {corpus[f'with ({side})']}", file=sys.stderr, flush=True)
        corpus["single_without"] = {"keyword": mean_scores(base.single("keyword")),
                                    "vector": mean_scores(base.single("vector"))}
        result[name] = corpus
    return result


# -- calibration: one more free signal beside the best cosine ------------------------------------------


def calibration_rows(kb: Path) -> list[dict[str, object]]:
    """Per golden question: answerable?, the run's hit, the confidence signal (best cosine), and two
    free candidates: whether the keyword and vector retrievers' top documents agree (every hop's),
    and the cosine margin between the best two distinct documents (the weakest hop's)."""
    from pinakes.eval.golden import load_golden_set
    from pinakes.eval.runner import answer, open_searcher
    from pinakes.manifest import load_manifest

    manifest = load_manifest(kb / "pinakes.toml")
    golden = load_golden_set(kb / "eval" / "questions.yaml", kb, sources=manifest.sources)
    rows: list[dict[str, object]] = []
    with open_searcher(kb, manifest) as searcher:
        for question in golden.questions:
            outcome = answer(searcher, question)
            filters = question.search_filters() if question.filters else None
            queries = [hop.query for hop in question.hops] if question.hops else [question.query]
            agree = True
            margins: list[float] = []
            for query in queries:
                tops: list[str | None] = []
                for mode in ("bm25", "vector"):
                    passages = searcher.search(query, filters=filters, mode=mode).passages
                    tops.append(passages[0].path if passages else None)
                agree = agree and tops[0] is not None and tops[0] == tops[1]
                hybrid = searcher.search(query, filters=filters).passages
                best: dict[str, float] = {}
                for passage in hybrid:
                    if passage.scores.cosine is not None:
                        best[passage.path] = max(best.get(passage.path, -1.0), passage.scores.cosine)
                ordered = [*sorted(best.values(), reverse=True), 0.0, 0.0]
                margins.append(ordered[0] - ordered[1])
            rows.append({"id": question.id, "kind": question.kind, "answerable": question.answerable,
                         "hit": outcome.hit, "level": outcome.confidence, "signal": outcome.signal,
                         "agree": agree, "margin": round(min(margins), 4)})
    return rows


def fit_with_agreement(rows: Sequence[dict[str, object]], low: float) -> dict[str, object]:
    """The shipped rule (low iff best cosine < `low`) against the same rule relaxed where the two
    retrievers agree: not low when they agree and the cosine clears a second threshold, the lowest
    that keeps every no-answer question low (zero false confidence on the golden set)."""
    answerable = [r for r in rows if r["answerable"] and r["signal"] is not None]
    no_answer = [r for r in rows if not r["answerable"] and r["signal"] is not None]

    def low_under(row: dict[str, object], relaxed: float | None) -> bool:
        signal = float(cast(float, row["signal"]))
        if signal >= low:
            return False
        return not (relaxed is not None and row["agree"] and signal >= relaxed)

    agreeing_no_answer = [float(cast(float, r["signal"])) for r in no_answer if r["agree"]]
    # just above the best agreeing no-answer question, so none of them leaves "low"
    relaxed = (max(agreeing_no_answer) + 1e-4) if agreeing_no_answer else min(
        float(cast(float, r["signal"])) for r in answerable)
    relaxed = min(relaxed, low)
    out: dict[str, object] = {}
    for label, threshold in (("cosine only", None), ("cosine, relaxed where the retrievers agree", relaxed)):
        fa = sum(1 for r in answerable if low_under(r, threshold))
        fc = sum(1 for r in no_answer if not low_under(r, threshold))
        out[label] = {"false_abstain": f"{fa}/{len(answerable)}", "false_confidence": f"{fc}/{len(no_answer)}",
                      "relaxed_low": None if threshold is None else round(threshold, 4)}
    out["agreement_rate"] = {
        "answerable": f"{sum(1 for r in answerable if r['agree'])}/{len(answerable)}",
        "no_answer": f"{sum(1 for r in no_answer if r['agree'])}/{len(no_answer)}"}
    margin_no_answer = max((float(cast(float, r["margin"])) for r in no_answer), default=0.0)
    rescued = sum(1 for r in answerable
                  if low_under(r, None) and float(cast(float, r["margin"])) > margin_no_answer)
    out["margin"] = {"best_no_answer_margin": round(margin_no_answer, 4),
                     "false_abstains_above_it": f"{rescued}/{len(answerable)}"}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", nargs="?", default="sweep",
                        choices=["build", "sweep", "graph", "calibrate", "context"])
    parser.add_argument("--sides", default="k,kv", help="context: which sides carry it (k, v, kv), comma-separated")
    parser.add_argument("--kb", type=Path, help="calibrate: the KB with a golden set (a synced copy)")
    parser.add_argument("--low", type=float, help="calibrate: the fitted low threshold")
    parser.add_argument("--demo", type=Path, help="graph: also the demo KB (a synced copy) per class")
    parser.add_argument("--corpus", action="append", choices=["cranfield", "tldr", "pydocs"])
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    names = args.corpus or ["cranfield", "tldr", "pydocs"]
    args.cache.mkdir(parents=True, exist_ok=True)
    if args.command == "build":
        for name in names:
            started = time.perf_counter()
            build = build_corpus(name, args.cache)
            print(f"{name}: {build.root} ({len(build.questions)} questions, "
                  f"{time.perf_counter() - started:.0f} s)", flush=True)
        return 0
    if args.command == "sweep":
        prepared = {name: prepare(name, args.cache) for name in names}
        result = run_sweep(prepared)
        if args.json:
            args.json.write_text(json.dumps(result, indent=1))
        for key in ("corpora", "default", "best_mean", "leave_one_corpus_out", "paired_best_vs_default",
                    "paired_variants_vs_default", "single_retrievers", "dedupe", "top"):
            print(key, json.dumps(result[key], indent=1))
        return 0
    if args.command == "context":
        result = run_context(names, args.cache, [side for side in args.sides.split(",") if side])
        if args.json:
            args.json.write_text(json.dumps(result, indent=1))
        print(json.dumps(result, indent=1))
        return 0
    if args.command == "calibrate":
        if args.kb is None or args.low is None:
            parser.error("calibrate needs --kb (a synced copy of a KB with a golden set) and --low")
        rows = calibration_rows(args.kb)
        result = {"rows": rows, "fit": fit_with_agreement(rows, args.low)}
        if args.json:
            args.json.write_text(json.dumps(result, indent=1))
        print(json.dumps(result["fit"], indent=1))
        return 0
    result = run_graph(names, args.cache, args.demo)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
