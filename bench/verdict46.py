"""Issue #46's "Done when", measured through the product: per corpus and per held-out half, the
shipped hybrid against each single channel and against today's hybrid (the commit before #46),
and the keyword side with context against it without, each by a one-sided paired exact sign test.

    python bench/verdict46.py all [--base DIR] [--json out.json]     # ranks what is not cached, then the tables
    python bench/verdict46.py rank --corpus NAME --label after|before|noctx|fit-KW-VW-K   # one arm (a process)
    python bench/verdict46.py table [--json out.json]                 # from the cached rankings only

Every ranking is the product's own: `Searcher.for_kb(kb).search(query, mode=..., final_k=100)` folded
to documents and scored by nDCG@10 as `pnk eval --questions` scores (eval/corpus.py's `ndcg` and
`document_ranking`), rerank off (no KB here has a reranker). Arms, each its own process:
- `after`: this tree (whatever is on PYTHONPATH): modes bm25, vector, hybrid; and, per question, the
  two lists `pnk eval --fit-fusion` collects (eval/fusion_fit.py's `_lists`, the KB's own widths);
- `before`: the tree before issue #46 (`git archive 207c877 src`, the parent of the BM25F commit
  e540148, put first on PYTHONPATH by `all --base`): modes bm25 and hybrid ("today's hybrid");
- `noctx`: this tree with the keyword side's context weight 0: mode bm25;
- `fit-KW-VW-K`: this tree with `[retrieval.fusion]` keyword_weight KW, vector_weight VW, rrf_k K:
  mode hybrid; made only for an arm `--fit-fusion` chose on some training half;
- `ties-reversed`: this tree with the last key of the fused order (chunk id, i.e. storage order)
  reversed, modes bm25, vector, hybrid: what each channel scores when its exact ties fall the other
  way. `--reading stored|reversed|averaged` reads the channels (and fixed-RRF hybrid) that way;
  "averaged" is the per-question mean of the two orders, the expected nDCG@10 of a two-way tie.
Held-out halves: `fusion_dev.halves(n, seed)` for seeds 0-9, each half held out once (20 per corpus,
the splits fusion_fit_dev.py uses). On each training half the product's own `fit_fusion` (its
arms, its scorer, its p < 0.005 guard) picks the fusion; the held-out half is searched with it
("hybrid as shipped" for a KB that ran `pnk eval --fit-fusion`), and with fixed RRF (a KB that did not).

Corpora: the demo KB (a synced copy of tests/demo-kb, its golden set's answerable queries, each hop
one query, with the question's filters), and the six of bench/fusion_dev.py, built by the product
for issue #46 (KBs under /work/cache/fusion; questions from bench/measure_context.py). Rankings are
cached per corpus and arm in $PNK_VERDICT_CACHE (default /work/cache/verdict46): a rerun is cheap.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from contextlib import closing, nullcontext
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from pinakes.eval.golden import Question
    from pinakes.lexical.filters import SearchFilters

os.environ.setdefault("PNK_CTX_CACHE", "/work/cache/fusion/ctx")
sys.path.insert(0, str(Path(__file__).resolve().parent))

CACHE = Path(os.environ.get("PNK_VERDICT_CACHE", "/work/cache/verdict46"))
KBS = {"demo": CACHE / "demo", "cranfield": Path("/work/cache/fusion/cranfield"),
       "tldr": Path("/work/cache/fusion/tldr"), "pydocs": Path("/work/cache/fusion/pydocs"),
       "pymodules": Path("/work/cache/fusion/pymodules"),
       "filings": Path("/work/cache/fusion/ctx/after/filings"),
       "filings-named": Path("/work/cache/fusion/ctx/after/filings-named")}
CORPORA = tuple(KBS)
PASSAGES = 100  # eval/corpus.py PASSAGES_PER_QUESTION
DEPTH = 10
SEEDS = 10
ALPHA = 0.05
BASE_COMMIT = "207c877"  # the parent of e540148, the first commit of issue #46
MODES = {"after": ("bm25", "vector", "hybrid"), "before": ("bm25", "hybrid"), "noctx": ("bm25",),
         "ties-reversed": ("bm25", "vector", "hybrid")}


@dataclasses.dataclass(frozen=True)
class Asked:
    id: str
    query: str
    relevant: tuple[str, ...]
    golden: Question | None = None  # the demo's golden question (its filters)


def questions(name: str, kb: Path) -> list[Asked]:
    if name != "demo":
        import measure_context

        return [Asked(q.id, q.query, tuple(q.relevant)) for q in measure_context.sources(name)[1]]
    from pinakes.eval import harness
    from pinakes.manifest import load_manifest

    golden, _ = harness.load_for_run(harness.EvalPaths.for_kb(kb), load_manifest(kb / "pinakes.toml"))
    assert golden is not None, kb
    out: list[Asked] = []
    for question in golden.questions:  # as eval/fusion_fit.collect_lists asks them
        if not question.answerable:
            continue
        asked = [(hop.query, hop.expect) for hop in question.hops] or [(question.query, question.expect)]
        out += [Asked(f"{question.id}#{i}", query, tuple(expect), question if question.filters else None)
                for i, (query, expect) in enumerate(asked)]
    return out


def _filters(a: Asked) -> SearchFilters | None:
    """The demo question's filters (None for a corpus question)."""
    return a.golden.search_filters() if a.golden is not None else None


# -- one arm, in its own process ---------------------------------------------------------------------


def rank(name: str, label: str) -> Path:
    from pinakes.eval.corpus import document_ranking
    from pinakes.search.core import Searcher

    kb = KBS[name]
    asked = questions(name, kb)
    searcher = Searcher.for_kb(kb, offline=True)
    settings = dataclasses.replace(searcher.settings, rerank=False)
    modes = MODES.get(label, ("hybrid",))
    if label == "noctx":
        settings = dataclasses.replace(settings, keyword=dataclasses.replace(settings.keyword, context_weight=0.0))
    if label.startswith("fit-"):
        from pinakes.search.fusion import FusionWeights

        kw, vw, k = label.split("-")[1:]
        settings = dataclasses.replace(settings, fusion_weights=FusionWeights(float(kw), float(vw)), rrf_k=int(k))
    if label == "ties-reversed":  # exact ties in the other storage order: the last key, chunk id, reversed
        import pinakes.search.core as core
        from pinakes.search.fusion import Candidate

        def ties_reversed(pool: list[Candidate]) -> list[Candidate]:
            return sorted(pool, key=lambda c: (-c.rrf, -(c.coverage or 0.0), c.best_rank, -c.chunk_id))

        core.order_fused = ties_reversed
    searcher.settings = settings
    out: dict[str, object] = {"corpus": name, "label": label, "questions": [a.id for a in asked],
                              "fusion_top_k": settings.fusion_top_k}
    try:
        for mode in modes:
            rankings: list[list[str]] = []
            for a in asked:
                filters = _filters(a)
                result = searcher.search(a.query, filters=filters, mode=mode, final_k=PASSAGES)
                rankings.append(document_ranking([p.path for p in result.passages])[:DEPTH])
            out[mode] = rankings
        if label == "after":  # the lists `pnk eval --fit-fusion` fits on, at the KB's own widths
            from pinakes.eval import fusion_fit
            from pinakes.search.core import MAX_FINAL_K

            width = min(settings.candidates_per_source, MAX_FINAL_K)
            lists: list[dict[str, Any]] = []
            # since shared vector ranks the lists are read beside one reader of the index (either tree runs here)
            lists_of = cast(Callable[..., Any], fusion_fit._lists)  # pyright: ignore[reportPrivateUsage] -- its lists
            with_reader = "conn" in inspect.signature(lists_of).parameters
            from pinakes.index import schema

            with closing(schema.open_reader(searcher.index_path)) if with_reader else nullcontext() as conn:
                for a in asked:
                    filters = _filters(a)
                    first = (searcher, conn) if with_reader else (searcher,)
                    got = lists_of(*first, a.query, filters, a.relevant, width)
                    shared = {name: getattr(got, name) for name in ("near_duplicates", "coverage") if hasattr(got, name)}
                    lists.append({"keyword": got.keyword, "vector": got.vector, "paths": got.paths, **shared})
            out["fit_lists"] = lists
    finally:
        searcher.close()
    path = CACHE / f"{name}.{label}.json"
    path.write_text(json.dumps(out))
    return path


def ensure(name: str, label: str, base: Path | None) -> dict[str, Any]:
    path = CACHE / f"{name}.{label}.json"
    if not path.exists():
        env = dict(os.environ)
        if label == "before":
            if base is None:
                raise SystemExit(f"{path} is missing: pass --base (git archive {BASE_COMMIT} src | tar -x -C DIR)")
            env["PYTHONPATH"] = str(base / "src")
        print(f"ranking {name} {label}", file=sys.stderr, flush=True)
        subprocess.run(["nice", "-n", "10", sys.executable, __file__, "rank", "--corpus", name, "--label", label],
                       check=True, env=env)
    return json.loads(path.read_text())


# -- scoring -----------------------------------------------------------------------------------------


def scores(rankings: Sequence[Sequence[str]], asked: Sequence[Asked]) -> list[float]:
    from pinakes.eval.corpus import ndcg

    return [ndcg(r, a.relevant, DEPTH) for r, a in zip(rankings, asked, strict=True)]


def worse(mine: Sequence[float], other: Sequence[float]) -> tuple[int, int, float]:
    """(questions `mine` ranks worse, better, one-sided sign-test p that it is worse)."""
    from pinakes.eval.paired import sign_test

    down = sum(1 for m, o in zip(mine, other, strict=True) if m < o - 1e-12)
    up = sum(1 for m, o in zip(mine, other, strict=True) if m > o + 1e-12)
    return down, up, sign_test(down, up)


def fitted_arm(lists: Sequence[dict[str, Any]], rows: Sequence[int], asked: Sequence[Asked], fusion_top_k: int) -> str:
    """The product's `fit_fusion` on the training rows: 'fixed' or 'fit-KW-VW-K'."""
    from pinakes.eval import fusion_fit

    items = [fusion_fit._Lists(  # pyright: ignore[reportPrivateUsage] -- the bench rebuilds the fit's private lists
                 [tuple(x) for x in lists[i]["keyword"]], [tuple(x) for x in lists[i]["vector"]],
                               {int(k): v for k, v in lists[i]["paths"].items()}, asked[i].relevant,
                               **_shared_fields(lists[i]))
             for i in rows]
    original = fusion_fit.collect_lists
    fusion_fit.collect_lists = lambda searcher, golden: items
    # fit_fusion reads only the searcher's settings.fusion_top_k, and the golden set goes only to the
    # collect_lists replaced above: a stand-in searcher and no golden set
    try:
        searcher = SimpleNamespace(settings=SimpleNamespace(fusion_top_k=fusion_top_k))
        fit = fusion_fit.fit_fusion(searcher,  # pyright: ignore[reportArgumentType]  # a stand-in searcher
                                    None, "verdict46", 60)  # pyright: ignore[reportArgumentType]  # no golden set
    finally:
        fusion_fit.collect_lists = original
    arm = fit.chosen.arm
    return "fixed" if not fit.moved else f"fit-{arm.keyword_weight:g}-{arm.vector_weight:g}-{arm.rrf_k}"


def _shared_fields(stored: dict[str, Any]) -> dict[str, Any]:
    """What a tree whose fusion reads near-duplicates keeps beside the lists (search/shared_ranks.py)."""
    out: dict[str, Any] = {}
    if "near_duplicates" in stored:
        near = stored["near_duplicates"]
        out["near_duplicates"] = None if near is None else {int(k): v for k, v in near.items()}
    if "coverage" in stored:
        out["coverage"] = {int(k): v for k, v in stored["coverage"].items()}
    return out


_FITS: dict[tuple[str, int, int], str] = {}


def corpus_table(name: str, base: Path | None, reading: str = "stored") -> dict[str, object]:
    """One corpus's verdict. `reading`: the channels' exact ties as the product orders them
    ("stored": by chunk id last), in the reverse storage order ("reversed"), or the mean of the two
    per question ("averaged": the expected nDCG@10 over a tie between two)."""
    from fusion_dev import halves

    after, before, noctx = (ensure(name, label, base) for label in ("after", "before", "noctx"))
    asked = questions(name, KBS[name])
    assert after["questions"] == [a.id for a in asked] == before["questions"] == noctx["questions"], name
    n = len(asked)
    reverse = ensure(name, "ties-reversed", base) if reading != "stored" else after

    def channel(mode: str) -> list[float]:
        stored, other = scores(after[mode], asked), scores(reverse[mode], asked)
        if reading == "stored":
            return stored
        if reading == "reversed":
            return other
        return [(a + b) / 2 for a, b in zip(stored, other, strict=True)]

    keyword, vector, fixed = (channel(m) for m in ("bm25", "vector", "hybrid"))
    today, today_keyword, keyword_noctx = scores(before["hybrid"], asked), scores(before["bm25"], asked), scores(
        noctx["bm25"], asked)
    fits: dict[str, list[float]] = {}
    result: dict[str, object] = {"corpus": name, "questions": n, "reading": reading}

    def row(rows: Sequence[int], hybrid: Sequence[float], arm: str) -> dict[str, object]:
        def pick(values: Sequence[float]) -> list[float]:
            return [values[i] for i in rows]

        h, k, v, f, t = pick(hybrid), pick(keyword), pick(vector), pick(fixed), pick(today)
        best_name = "keyword" if statistics.fmean(k) > statistics.fmean(v) else "vector"
        best = k if best_name == "keyword" else v
        return {"n": len(rows), "arm": arm, "hybrid": statistics.fmean(h), "fixed": statistics.fmean(f),
                "keyword": statistics.fmean(k), "vector": statistics.fmean(v), "today": statistics.fmean(t),
                "best": best_name, "vs_best": worse(h, best), "vs_keyword": worse(h, k), "vs_vector": worse(h, v),
                "vs_today": worse(h, t), "fixed_vs_best": worse(f, best), "fixed_vs_today": worse(f, t),
                "ctx": worse(k, pick(keyword_noctx)), "keyword_noctx": statistics.fmean(pick(keyword_noctx))}

    result["full"] = row(range(n), fixed, "fixed")
    result["full"]["keyword_today"] = statistics.fmean(today_keyword)
    result["full"]["keyword_vs_today"] = worse(keyword, today_keyword)
    halves_out: list[dict[str, object]] = []
    for seed in range(SEEDS):
        split = halves(n, seed)
        for side in (0, 1):
            train, test = split[side], split[1 - side]
            key = (name, seed, side)  # the fit reads the stored lists only: one per half, whatever the reading
            if key not in _FITS:
                _FITS[key] = fitted_arm(after["fit_lists"], train, asked, int(after["fusion_top_k"]))
            arm = _FITS[key]
            if arm == "fixed":
                hybrid = fixed
            else:  # a fitted arm's rankings are in the stored tie order only
                if arm not in fits:
                    fits[arm] = scores(ensure(name, arm, base)["hybrid"], asked)
                hybrid = fits[arm]
            halves_out.append({"seed": seed, "held_out": "B" if side == 0 else "A", **row(test, hybrid, arm)})
    result["halves"] = halves_out
    return result


# -- the tables --------------------------------------------------------------------------------------


def _p(p: float) -> str:
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def _c(triple: Sequence[float]) -> str:
    down, up, p = triple
    mark = "**" if p < ALPHA else ""
    return f"{mark}{int(down)}/{int(up)}, {_p(p)}{mark}"


def render(results: Sequence[dict[str, Any]], halves_table: bool = True) -> str:
    """The tables. Today's hybrid and the keyword side without context were searched in the stored
    tie order only, so a reading other than "stored" shows the channels alone."""
    reading = results[0]["reading"] if results else "stored"
    stored = reading == "stored"
    lines = [f"# Exact ties read: {reading}", "", "## Full sets (hybrid as shipped: fixed RRF; worse/better questions, "
             "one-sided p that hybrid is worse)", "",
             "| corpus | n | keyword | vector | hybrid | hybrid vs keyword | hybrid vs vector |"
             + (" today's hybrid | hybrid vs today | keyword: no context → context (worse/better, p) |" if stored else ""),
             "|---|---|---|---|---|---|---|" + ("---|---|---|" if stored else "")]
    for r in results:
        f = r["full"]
        lines.append(f"| {r['corpus']} | {f['n']} | {f['keyword']:.4f} | {f['vector']:.4f} | {f['hybrid']:.4f} | "
                     f"{_c(f['vs_keyword'])} | {_c(f['vs_vector'])} |" + (
                         f" {f['today']:.4f} | {_c(f['vs_today'])} | {f['keyword_noctx']:.4f} → {f['keyword']:.4f}, "
                         f"{_c(f['ctx'])} |" if stored else ""))
    if halves_table:
        lines += ["", "## Held-out halves (fit on the other half by the product's `fit_fusion`; fixed RRF where it "
                  "kept it)", "", "| corpus | seed | held out | n | arm | hybrid | keyword | vector | today | vs keyword "
                  "| vs vector | vs today | keyword ctx vs none |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in results:
            for h in r["halves"]:
                lines.append(f"| {r['corpus']} | {h['seed']} | {h['held_out']} | {h['n']} | {h['arm']} | "
                             f"{h['hybrid']:.4f} | {h['keyword']:.4f} | {h['vector']:.4f} | {h['today']:.4f} | "
                             f"{_c(h['vs_keyword'])} | {_c(h['vs_vector'])} | {_c(h['vs_today'])} | {_c(h['ctx'])} |")
    lines += ["", "## Per corpus, over its 20 halves", "",
              "| corpus | mean below best channel | significant vs best / vs keyword / vs vector | min p (vs best) |"
              + (" vs today: mean below / significant | keyword with context: mean below none / significant |"
                 if stored else ""), "|---|---|---|---|" + ("---|---|" if stored else "")]
    total = {"best": 0, "today": 0, "ctx": 0, "tests": 0}
    for r in results:
        hs = r["halves"]
        below = sum(1 for h in hs if h["hybrid"] < max(h["keyword"], h["vector"]) - 1e-12)
        sig = [sum(1 for h in hs if h[key][2] < ALPHA) for key in ("vs_best", "vs_keyword", "vs_vector")]
        today_below = sum(1 for h in hs if h["hybrid"] < h["today"] - 1e-12)
        today_sig = sum(1 for h in hs if h["vs_today"][2] < ALPHA)
        ctx_sig = sum(1 for h in hs if h["ctx"][2] < ALPHA)
        ctx_below = sum(1 for h in hs if h["keyword"] < h["keyword_noctx"] - 1e-12)
        total["best"] += sig[0]
        total["today"] += today_sig
        total["ctx"] += ctx_sig
        total["tests"] += len(hs)
        lines.append(f"| {r['corpus']} | {below}/{len(hs)} | {sig[0]} / {sig[1]} / {sig[2]} | "
                     f"{_p(min(h['vs_best'][2] for h in hs))} |"
                     + (f" {today_below} / {today_sig} | {ctx_below} / {ctx_sig} |" if stored else ""))
    lines.append(f"\n{total['tests']} halves: significant losses vs the half's best channel {total['best']}"
                 + (f", vs today's hybrid {total['today']}, keyword context vs none {total['ctx']}" if stored else "")
                 + f" (each family of {total['tests']} tests; at most {total['tests'] * ALPHA:.0f} expected by chance "
                 "at α 0.05 were every null true and the halves independent, fewer since the exact sign test is "
                 "conservative; the 20 halves of a corpus are resplits of the same questions, so they are not)")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["all", "rank", "table"])
    parser.add_argument("--corpus", choices=CORPORA, action="append")
    parser.add_argument("--label")
    parser.add_argument("--base", type=Path, help=f"a tree of {BASE_COMMIT} (its src/ goes first on PYTHONPATH)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--reading", choices=["stored", "reversed", "averaged", "all"], default="all",
                        help="how the channels' exact ties are read (all: the stored order in full, the others summed up)")
    args = parser.parse_args()
    CACHE.mkdir(parents=True, exist_ok=True)
    if args.command == "rank":
        print(rank(args.corpus[0], args.label))
        return 0
    names = args.corpus or [c for c in CORPORA if (KBS[c] / ".pinakes").exists()]
    base = args.base if args.command == "all" else None
    readings = ["stored", "reversed", "averaged"] if args.reading == "all" else [args.reading]
    out: dict[str, list[dict[str, object]]] = {}
    for reading in readings:
        results = [corpus_table(name, base, reading) for name in names]
        print(render(results, halves_table=reading == readings[0]) + "\n")
        out[reading] = results
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
