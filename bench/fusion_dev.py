"""Issue #46: the keyword side with and without document context (BM25F done properly, IDF variants)
and query-adaptive fusion, measured on product-built KBs with held-out halves.

    python bench/fusion_dev.py collect --corpus pymodules --kb DIR   # once per corpus (lists + term data)
    python bench/fusion_dev.py report [--json out.json]
    PYTHONPATH=BASE/src python bench/fusion_dev.py rank --corpus NAME --kb DIR --label before
    python bench/fusion_dev.py rank --corpus NAME --kb DIR --label after
    python bench/fusion_dev.py compare --corpus NAME --label before,after   # the product end to end, paired

`collect` runs each question through the product's own retrievers (the `Searcher`'s `_Run`, as
`pnk eval --questions` does: 100 candidates per source) and stores, per question, the vector list,
the shipped keyword list, the keyword plan's terms with their document frequencies (rows, text
column, context column, documents whose context holds it), and the raw evidence of every row in
FTS5's rescoring pool (3 × 100 rows by bm25() with the context weighing 1, and with it weighing 0):
each row's text and context lengths and the query terms' counts in each field. `report` rescores
the keyword side under each variant from that evidence in process (the shipped variant reproduces
the product's list; `collect` checks it), fuses, folds to documents and scores nDCG@10 the way
`pnk eval --questions` does. Lists live in $PNK_FUSION_CACHE (default /work/cache/fusion/lists).

KBs: the four of bench/measure_context.py (cranfield, tldr 800 pages, pydocs, pymodules), built by
`init_kb` + `run_sync` with the default model; pass the KB folder with --kb.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent))

import measure_context
import tune_retrieval as tune

CACHE = Path(os.environ.get("PNK_FUSION_CACHE", "/work/cache/fusion/lists"))
WIDTH = 100  # `pnk eval --questions`: 100 passages, candidates_per_source and fusion_top_k raised to it
POOL = 3  # bm25.RESCORE_POOL
K1, B = 2.5, 0.4
CORPORA = ("cranfield", "tldr", "pydocs", "pymodules", "filings", "filings-named")


# -- collect ---------------------------------------------------------------------------------------


def collect(name: str, kb: Path, questions: Sequence[tune.Question] | None = None) -> Path:
    from pinakes.lexical.filters import SearchFilters
    from pinakes.search import bm25, fts5_records
    from pinakes.search.core import (
        Searcher,
        SearchSettings,
        _Run,  # pyright: ignore[reportPrivateUsage] -- the harness drives a search run's own steps
    )

    if questions is None:
        questions = measure_context.sources(name)[1]
    base = Searcher.for_kb(kb, offline=True)
    settings = SearchSettings(candidates_per_source=WIDTH, fusion_top_k=WIDTH, final_k=WIDTH, rerank=False)
    searcher = Searcher(base.index_path, settings,
                        embedder_loader=base._embedder_loader,  # pyright: ignore[reportPrivateUsage] -- the KB's own
                        embedding_section=base.embedding_section)
    rows: list[dict[str, Any]] = []
    mismatched = 0
    with searcher._lock, searcher.snapshot() as generation:  # pyright: ignore[reportPrivateUsage] -- as search()
        conn = generation.conn
        bm25.ensure_vocabulary(conn)
        conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.pnk_vocab_col USING fts5vocab (main, chunks_fts, 'col')")
        values = fts5_records.varints(bytes(conn.execute("SELECT block FROM chunks_fts_data WHERE id = 1").fetchone()[0]))
        n_rows, text_tokens, context_tokens = values[0], values[1], values[2]
        documents = dict(conn.execute("SELECT id, doc_id FROM chunks"))
        for question in questions:
            run = _Run(searcher, question.query, SearchFilters(), "hybrid", False, None)
            run.candidates_per_source = WIDTH
            embedder = searcher.embedder()
            mask = run._prepare_vectors(generation, embedder)  # pyright: ignore[reportPrivateUsage] -- its own step
            plan, keyword, vector = run._retrieve(  # pyright: ignore[reportPrivateUsage] -- its own step
                generation, None, embedder, mask)
            assert plan is not None
            terms = [unit.terms[0] for unit in plan.units if len(unit.terms) == 1]
            single = len(terms) == len(plan.units)
            pools: dict[int, None] = {}
            if plan.match and single:
                for weight in (1.0, 0.0):
                    for rowid, _ in bm25._fts5_ranked(  # pyright: ignore[reportPrivateUsage] -- FTS5's own pool
                            conn, plan.match, WIDTH * POOL, None, None,
                                                      context_weight=weight):
                        pools.setdefault(rowid, None)
            pool = list(pools)
            evidence: dict[int, dict[str, Any]] = {}
            if pool and terms:
                marks, term_marks = ",".join("?" * len(pool)), ",".join("?" * len(terms))
                for rowid, blob in conn.execute(f"SELECT id, sz FROM chunks_fts_docsize WHERE id IN ({marks})", pool):
                    sizes = fts5_records.varints(bytes(blob))
                    evidence[rowid] = {"lt": sizes[0], "lc": sizes[1] if len(sizes) > 1 else 0, "tf": {}}
                for chunk_id, term, tf, ctf in conn.execute(
                        f"SELECT chunk_id, term, frequency, context_frequency FROM chunk_terms "
                        f"WHERE chunk_id IN ({marks}) AND term IN ({term_marks})", [*pool, *terms]):
                    evidence[chunk_id]["tf"][term] = [tf, ctf]
            df: dict[str, dict[str, int]] = {}
            for term in terms:
                by_col = {col: doc for col, doc in conn.execute(
                    "SELECT col, doc FROM temp.pnk_vocab_col WHERE term = ?", (term,))}
                context_documents = conn.execute(
                    "SELECT count(DISTINCT c.doc_id) FROM chunk_terms t JOIN chunks c ON c.id = t.chunk_id "
                    "WHERE t.term = ? AND t.context_frequency > 0", (term,)).fetchone()[0]
                df[term] = {"row": plan.document_frequency[(term,)], "text": by_col.get("text", 0),
                            "context": by_col.get("context", 0), "context_docs": int(context_documents)}
            row: dict[str, Any] = {"id": question.id, "vector": [[c, round(s, 6)] for c, s in vector],
                   "keyword": [[c, round(s, 6)] for c, s in keyword], "terms": terms, "single": single,
                   "idf": {t: plan.idf(u) for t, u in zip(terms, plan.units, strict=False)},
                   "df": df, "pool": {str(k): v for k, v in evidence.items()}}
            if single and terms:
                mine = [c for c, _ in rescored(row, SHIPPED, n_rows, text_tokens / n_rows, 1.0, documents)]
                if mine[:10] != [c for c, _ in keyword][:10]:
                    mismatched += 1
            rows.append(row)
    searcher.close()
    CACHE.mkdir(parents=True, exist_ok=True)
    out = CACHE / f"{name}.json"
    out.write_text(json.dumps({"corpus": name, "n_rows": n_rows, "avg_text": text_tokens / n_rows,
                               "avg_context": context_tokens / n_rows, "documents": {str(k): v for k, v in documents.items()},
                               "paths": tune.chunk_documents(kb), "questions": rows}))
    print(f"{name}: {len(rows)} questions; shipped rescoring differs from the product's top 10 on {mismatched}",
          file=sys.stderr)
    return out


def rank(name: str, kb: Path, label: str, context_weight: float | None = None) -> Path:
    """The product on `sys.path` (this tree, or a base unpacked and put first on PYTHONPATH),
    searched as `pnk eval --questions` searches (100 passages folded to documents), keyword-only and
    hybrid; the rankings stored under `label` for `compare`."""
    from pinakes.search.core import Searcher

    questions = measure_context.sources(name)[1]
    searcher = Searcher.for_kb(kb, offline=True)
    if context_weight is not None:  # the keyword side without (0) or with another weight of the context
        import dataclasses

        from pinakes.search.bm25 import KeywordOptions

        searcher.settings = dataclasses.replace(searcher.settings, keyword=KeywordOptions(context_weight=context_weight))
    try:
        rankings = {mode: [list(dict.fromkeys(p.path for p in searcher.search(q.query, mode=mode, final_k=WIDTH).passages))
                           for q in questions] for mode in ("bm25", "hybrid")}
    finally:
        searcher.close()
    out = CACHE / f"{name}.{label}.rankings.json"
    out.write_text(json.dumps({"questions": [q.id for q in questions], **rankings}))
    return out


def compare(name: str, before: str, after: str) -> dict[str, object]:
    questions = measure_context.sources(name)[1]
    arms = {label: json.loads((CACHE / f"{name}.{label}.rankings.json").read_text()) for label in (before, after)}
    out: dict[str, object] = {"corpus": name}
    for mode in ("bm25", "hybrid"):
        rows = {label: [ndcg(r, q) for r, q in zip(arm[mode], questions, strict=True)] for label, arm in arms.items()}
        out[mode] = {"before": round(statistics.fmean(rows[before]), 4), "after": round(statistics.fmean(rows[after]), 4),
                     "interval_after": [round(x, 3) for x in interval(rows[after])], **paired(rows[before], rows[after])}
    return out


# -- keyword variants --------------------------------------------------------------------------------


Variant = dict[str, object]
SHIPPED: Variant = {"form": "shipped", "w": 1.0}


def _idf(n: int, df: int) -> float:
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def term_idf(row: dict[str, Any], term: str, n: int, kind: str) -> float:
    df = row["df"][term]
    if kind == "row":  # the shipped: chunks holding the term in either field
        return _idf(n, df["row"])
    if kind == "text":  # chunks holding it in their own text (a context-only term: as rare as can be)
        return _idf(n, max(df["text"], 1))
    if kind == "text-plus-context-docs":  # the text's rows plus the context's rows over the chunks per document
        return _idf(n, max(1, min(df["row"], df["text"] + math.ceil(df["context"] * row.get("_docs_per_row", 1.0)))))
    if kind == "text-or-context-docs":  # the text's rows, or the context's rows per document, the larger
        return _idf(n, max(1, df["text"], round(df["context"] * row.get("_docs_per_row", 1.0))))
    # "doc-context": a document's context counted once, whatever its number of chunks
    return _idf(n, max(1, min(df["row"], df["text"] + df["context_docs"])))


def rescored(row: dict[str, Any], variant: Variant, n: int, avg_text: float, avg_context: float,
             documents: dict[int, int] | None = None) -> list[tuple[int, float]]:
    """The keyword list (chunk, score) best first, WIDTH deep, under one scoring variant."""
    form = variant["form"]
    w = float(cast(float, variant.get("w", 1.0)))
    bc = float(cast(float, variant.get("bc", B)))
    k1 = float(cast(float, variant.get("k1", K1)))
    idf_kind = str(variant.get("idf", "row"))
    idf = {t: term_idf(row, t, n, idf_kind) for t in row["terms"]}
    scores: dict[int, float] = {}
    for key, ev in row["pool"].items():
        lt, lc, counts = ev["lt"], ev["lc"], ev["tf"]
        bt = 1.0 - B + B * lt / avg_text
        bcn = 1.0 - bc + bc * (lc / avg_context if avg_context else 0.0)
        total = 0.0
        for term, (tf, ctf) in counts.items():
            if form == "shipped":
                f = tf + w * ctf
                total += idf[term] * f * (k1 + 1.0) / (f + k1 * bt) if f else 0.0
            elif form == "bm25f":  # per-field normalisation, one saturation (Robertson, Zaragoza, Taylor 2004)
                f = tf / bt + (w * ctf / bcn if ctf else 0.0)
                total += idf[term] * f * (k1 + 1.0) / (f + k1) if f else 0.0
            elif form == "fields":  # a BM25 per field, summed (what FTS5's weighted bm25() does)
                if tf:
                    total += idf[term] * tf * (k1 + 1.0) / (tf + k1 * bt)
                if ctf:
                    total += w * idf[term] * ctf * (k1 + 1.0) / (ctf + k1 * max(bcn, 1e-9))
        if total > 0.0:
            scores[int(key)] = total
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:WIDTH]


# -- fusion ------------------------------------------------------------------------------------------


def folded(ranked: Sequence[tuple[int, float]], paths: dict[int, str]) -> list[str]:
    return list(dict.fromkeys(paths[c] for c, _ in ranked))


def rrf(keyword: Sequence[tuple[int, float]], vector: Sequence[tuple[int, float]], paths: dict[int, str],
        wk: float = 1.0, wv: float = 1.0, k: int = 60) -> list[str]:
    scores: dict[int, float] = {}
    for weight, ranked in ((wk, keyword), (wv, vector)):
        if weight <= 0.0:
            continue
        for chunk_id, rank in tune._competition(list(ranked)[:WIDTH]):  # pyright: ignore[reportPrivateUsage] -- ranks
            scores[chunk_id] = scores.get(chunk_id, 0.0) + weight / (k + rank)
    best = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:WIDTH]
    return folded(best, paths)


def features(keyword: Sequence[tuple[int, float]], vector: Sequence[tuple[int, float]], row: dict[str, Any],
             idf: dict[str, float], paths: dict[int, str]) -> dict[str, float]:
    """What the searcher already has for one query (search/signals.py's definitions)."""
    cos = [s for _, s in vector]
    bound = sum(idf.values()) * (K1 + 1.0)
    top_k = {c for c, _ in keyword[:10]}
    top_v = [c for c, _ in vector[:10]]
    docs_k, docs_v = folded(keyword, paths)[:10], folded(vector, paths)[:10]
    return {
        "cosine": cos[0] if cos else 0.0,
        "cosine_margin": cos[0] - cos[1] if len(cos) > 1 else 0.0,
        "cosine_spread": cos[0] - cos[min(9, len(cos) - 1)] if len(cos) > 1 else 0.0,
        "bm25_ratio": (keyword[0][1] / bound) if keyword and bound else 0.0,
        "bm25_margin": (keyword[0][1] - keyword[min(9, len(keyword) - 1)][1]) / bound if len(keyword) > 1 and bound else 0.0,
        "agreement": sum(1 for c in top_v if c in top_k) / len(top_v) if top_v and top_k else 0.0,
        "doc_agreement": len(set(docs_k) & set(docs_v)) / 10.0,
        "top_doc_same": 1.0 if docs_k and docs_v and docs_k[0] == docs_v[0] else 0.0,
        "terms": float(len(row["terms"])),
    }


# -- report ------------------------------------------------------------------------------------------


def load(name: str) -> dict[str, Any]:
    return json.loads((CACHE / f"{name}.json").read_text())


def ndcg(ranking: Sequence[str], question: tune.Question) -> float:
    return tune.score(ranking, question)["ndcg@10"]


def halves(count: int, seed: int) -> tuple[list[int], list[int]]:
    order = list(range(count))
    random.Random(seed).shuffle(order)
    return sorted(order[: count // 2]), sorted(order[count // 2:])


def interval(values: Sequence[float], seed: int = 7, draws: int = 1000) -> tuple[float, float]:
    """A percentile bootstrap 95 % interval of the mean."""
    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choices(values, k=len(values))) for _ in range(draws))
    return means[int(0.025 * draws)], means[int(0.975 * draws) - 1]


def paired(before: Sequence[float], after: Sequence[float]) -> dict[str, float]:
    from pinakes.eval.paired import sign_test

    up = sum(1 for b, a in zip(before, after, strict=True) if a > b + 1e-12)
    down = sum(1 for b, a in zip(before, after, strict=True) if a < b - 1e-12)
    return {"up": up, "down": down, "p_better": round(sign_test(up, down), 4), "p_worse": round(sign_test(down, up), 4)}


class Corpus:
    def __init__(self, name: str):
        data = load(name)
        self.name = name
        self.questions = measure_context.sources(name)[1]
        self.rows: list[dict[str, Any]] = data["questions"]
        assert [r["id"] for r in self.rows] == [q.id for q in self.questions], name
        self.n: int = data["n_rows"]
        self.avg_text: float = data["avg_text"]
        self.avg_context: float = data["avg_context"]
        self.paths: dict[int, str] = {int(k): v for k, v in data["paths"].items()}
        self._keyword: dict[str, list[list[tuple[int, float]]]] = {}
        per_row = len(set(data["documents"].values())) / max(1, len(data["documents"]))
        for row in self.rows:
            row["_docs_per_row"] = per_row

    def keyword(self, variant: Variant) -> list[list[tuple[int, float]]]:
        key = json.dumps(variant, sort_keys=True)
        if key not in self._keyword:
            self._keyword[key] = [
                rescored(r, variant, self.n, self.avg_text, self.avg_context) if r["single"] and r["terms"]
                else [tuple(x) for x in r["keyword"]] for r in self.rows]
        return self._keyword[key]

    def vector(self) -> list[list[tuple[int, float]]]:
        return [[(int(c), float(s)) for c, s in r["vector"]] for r in self.rows]

    def scores(self, rankings: Sequence[Sequence[str]]) -> list[float]:
        return [ndcg(r, q) for r, q in zip(rankings, self.questions, strict=True)]

    def keyword_only(self, variant: Variant) -> list[float]:
        return self.scores([folded(k, self.paths) for k in self.keyword(variant)])

    def vector_only(self) -> list[float]:
        return self.scores([folded(v, self.paths) for v in self.vector()])

    def hybrid(self, variant: Variant, weights: Callable[[dict[str, float]], tuple[float, float]] | None = None,
               ) -> list[float]:
        out: list[list[str]] = []
        for row, keyword, vector in zip(self.rows, self.keyword(variant), self.vector(), strict=True):
            wk, wv = (1.0, 1.0) if weights is None else weights(self.features_of(row, keyword, vector))
            out.append(rrf(keyword, vector, self.paths, wk, wv))
        return self.scores(out)

    def features_of(self, row: dict[str, Any], keyword: Sequence[tuple[int, float]],
                    vector: Sequence[tuple[int, float]]) -> dict[str, float]:
        idf = {t: term_idf(row, t, self.n, "row") for t in row["terms"]}
        return features(keyword, vector, row, idf, self.paths)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["collect", "report", "rank", "compare"])
    parser.add_argument("--label", help="rank: the rankings' label; compare: BEFORE,AFTER")
    parser.add_argument("--context-weight", type=float, help="rank: the keyword side's context weight (0: none)")
    parser.add_argument("--corpus", choices=CORPORA)
    parser.add_argument("--kb", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.command == "collect":
        print(collect(args.corpus, args.kb))
        return 0
    if args.command == "rank":
        print(rank(args.corpus, args.kb, args.label, args.context_weight))
        return 0
    if args.command == "compare":
        print(json.dumps(compare(args.corpus, *args.label.split(","))))
        return 0
    import fusion_report

    result = fusion_report.report([Corpus(name) for name in CORPORA if (CACHE / f"{name}.json").exists()])
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
