"""Document context (issue #28), measured end to end: each arm is a KB built by the product's own
`init_kb` + `run_sync` from the code on `sys.path` (today's tree, or the commit before the change
unpacked elsewhere and put first with PYTHONPATH), searched through the product's `Searcher`
(hybrid, no reranker), scored at document level (nDCG@10, the `pnk eval --questions` scorer's
metric) and compared per question with the paired sign test.

    # the arm "before" from the commit before the change, "after" from this tree
    git archive <commit> src | tar -x -C /work/cache/pnk-ctx/base
    PYTHONPATH=/work/cache/pnk-ctx/base/src python bench/measure_context.py rank --arm before --corpus pymodules
    python bench/measure_context.py rank --arm after --corpus pymodules
    python bench/measure_context.py compare before after --corpus pymodules
    python bench/measure_context.py fusion --arm after --corpus pymodules   # document-level fusion

Corpora: `pymodules` (bench/corpora/pymodules: the shape #28 is about), and tune_retrieval's
`cranfield`, `tldr` (a smaller seeded sample, TLDR_SAMPLE pages, for two shared cores) and `pydocs`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tune_retrieval as tune

CACHE = Path(os.environ.get("PNK_CTX_CACHE", "/work/cache/pnk-ctx"))
PYMODULES = Path(__file__).resolve().parent / "corpora" / "pymodules"
FILINGS = Path(__file__).resolve().parent / "corpora" / "filings"
PYDOCS = tune.SHARED / "python-3.11-docs-rst" / "docs"
TLDR_SAMPLE = 800

# A corpus: its (source, relative path) pairs, questions, text rewrite and authored links.
Sources = tuple[list[tuple[Path, str]], list[tune.Question], Callable[[str, str], str] | None, dict[str, set[str]]]


def pymodules_sources() -> tuple[list[tuple[Path, str]], list[tune.Question]]:
    pages = (PYMODULES / "pages.txt").read_text(encoding="utf-8").split()
    questions = [tune.Question(row["id"], row["query"], tuple(f"docs/{p}" for p in row["relevant"]),
                               tuple(f"docs/{p}" for p in row["relevant"]))
                 for row in tune._jsonl(  # pyright: ignore[reportPrivateUsage]  # tune's helper, reused
                     PYMODULES / "questions.jsonl")]
    return [(PYDOCS / page, page) for page in pages], questions


def filings_sources(named_body: bool = False) -> tuple[list[tuple[Path, str]], list[tune.Question]]:
    """bench/corpora/filings, generated (deterministically) into the cache on first use; with
    `named_body` each section also names the company and the periods in its body text."""
    made = CACHE / ("filings-named-src" if named_body else "filings-src")
    if not (made / "questions.jsonl").exists():
        import subprocess

        subprocess.run([sys.executable, str(FILINGS / "build.py"), str(made), *(["--named-body"] if named_body else [])],
                       check=True)
    questions = [tune.Question(row["id"], row["query"], tuple(f"docs/{p}" for p in row["relevant"]),
                               tuple(f"docs/{p}" for p in row["relevant"]))
                 for row in tune._jsonl(  # pyright: ignore[reportPrivateUsage]  # tune's helper, reused
                     made / "questions.jsonl")]
    return [(path, path.name) for path in sorted((made / "docs").glob("*.pdf"))], questions


def sources(name: str) -> Sources:  # -> (pairs, questions, rewrite, links)
    if name in ("filings", "filings-named"):
        return (*filings_sources(name == "filings-named"), None, {})
    if name == "pymodules":
        return (*pymodules_sources(), None, {})
    if name == "cranfield":
        return (*tune.cranfield_sources(), None, {})
    if name == "tldr":
        return (*tune.tldr_sources(TLDR_SAMPLE), None, {})
    if name == "pydocs":
        pairs, questions, links = tune.pydocs_sources()
        rewrite = tune._strip_synopsis  # pyright: ignore[reportPrivateUsage]  # tune's helper, reused
        return pairs, questions, rewrite, links
    raise SystemExit(f"unknown corpus {name!r}")


def build(name: str, arm: str) -> tuple[Path, list[tune.Question]]:
    from pinakes.init import init_kb
    from pinakes.sync import SyncOptions
    from pinakes.sync.engine import run_sync

    pairs, questions, rewrite, links = sources(name)
    kb = CACHE / arm / name
    if (kb / ".built").exists():
        return kb, questions
    if not (kb / "pinakes.toml").exists():
        kb.parent.mkdir(parents=True, exist_ok=True)
        init_kb(kb)
        tune._copy(pairs, kb, rewrite)  # pyright: ignore[reportPrivateUsage]  # tune's helper, reused
    started = time.perf_counter()
    run_sync(kb, SyncOptions(quiet=True, offline=True))
    if links:
        tune._author_links(kb, links)  # pyright: ignore[reportPrivateUsage]  # tune's helper, reused
        run_sync(kb, SyncOptions(quiet=True, offline=True))
    seconds = round(time.perf_counter() - started, 1)
    (kb / ".built").write_text(json.dumps({"seconds": seconds, "documents": len(pairs)}))
    print(f"{arm}/{name}: built in {seconds} s", file=sys.stderr, flush=True)
    return kb, questions


def rank(name: str, arm: str, label: str, overrides: dict[str, object]) -> Path:
    kb, questions = build(name, arm)
    rankings = tune.product_rankings(kb, questions, **overrides)
    out = CACHE / f"{name}.{label}.json"
    out.write_text(json.dumps({"questions": [q.id for q in questions], "rankings": rankings}))
    return out


def compare(name: str, before: str, after: str) -> dict[str, object]:
    _pairs, questions, _rewrite, _links = sources(name)
    rows: dict[str, list[dict[str, float]]] = {}
    for label in (before, after):
        stored = json.loads((CACHE / f"{name}.{label}.json").read_text())
        assert stored["questions"] == [q.id for q in questions], f"{label}: another question set"
        rows[label] = [tune.score(ranking, q) for ranking, q in zip(stored["rankings"], questions, strict=True)]
    return {"corpus": name, "questions": len(questions), before: tune.mean_scores(rows[before]),
            after: tune.mean_scores(rows[after]), "paired_ndcg": tune.paired(rows[before], rows[after])}


def fusion_levels(name: str, arm: str) -> dict[str, object]:
    """Document-level fusion (a document's evidence maxed or summed across its chunks before the
    ranking) against today's chunk-level fusion, on one arm's KB: tune_retrieval's fusion over the
    product's own candidate lists, 200 deep, default weights."""
    import dataclasses

    kb, questions = build(name, arm)
    lists = tune.candidate_lists(kb, questions, 200)
    docs = tune.chunk_documents(kb)
    rows = {level: [tune.score(tune.fuse_documents(candidates, dataclasses.replace(tune.DEFAULT, level=level), docs), q)
                    for candidates, q in zip(lists, questions, strict=True)]
            for level in ("chunk", "doc-max", "doc-sum")}
    return {"corpus": name, "arm": arm, **{level: tune.mean_scores(r) for level, r in rows.items()},
            "doc-max vs chunk": tune.paired(rows["chunk"], rows["doc-max"]),
            "doc-sum vs chunk": tune.paired(rows["chunk"], rows["doc-sum"])}


def dump_lists(name: str, arm: str) -> Path:
    """One arm's keyword and vector candidate lists (200 deep) and its chunk -> document map, for
    `sides` (run under the arm's own code)."""
    kb, questions = build(name, arm)
    lists = tune.candidate_lists(kb, questions, 200)
    out = CACHE / f"{name}.{arm}.lists.json"
    out.write_text(json.dumps({"k": [c.keyword for c in lists], "v": [c.vector for c in lists],
                               "docs": tune.chunk_documents(kb)}))
    return out


def sides(name: str, before: str, after: str) -> dict[str, object]:
    """Context on one side only: the keyword list of one arm fused with the vector list of the
    other (chunk ids kept apart, documents shared), by the product's default fusion."""
    _pairs, questions, _rewrite, _links = sources(name)
    arms = {label: json.loads((CACHE / f"{name}.{label}.lists.json").read_text()) for label in (before, after)}
    offset = 10_000_000  # the vector arm's chunk ids, apart from the keyword arm's

    def rows(keyword_arm: str, vector_arm: str) -> list[dict[str, float]]:
        k, v = arms[keyword_arm], arms[vector_arm]
        docs = {int(c): d for c, d in k["docs"].items()} | {int(c) + offset: d for c, d in v["docs"].items()}
        out: list[dict[str, float]] = []
        for index, question in enumerate(questions):
            lists = tune.Candidates([(c, s) for c, s in k["k"][index]], [(c + offset, s) for c, s in v["v"][index]])
            out.append(tune.score(tune.fuse_documents(lists, tune.DEFAULT, docs), question))
        return out

    base = rows(before, before)
    variants = {"keyword side": rows(after, before), "vector side": rows(before, after), "both": rows(after, after)}
    return {"corpus": name, "without": tune.mean_scores(base),
            **{label: {**tune.mean_scores(r), "paired": tune.paired(base, r)} for label, r in variants.items()}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["build", "rank", "compare", "fusion", "lists", "sides"])
    parser.add_argument("labels", nargs="*", help="compare: the two ranking labels")
    parser.add_argument("--corpus", required=True, choices=["pymodules", "cranfield", "tldr", "pydocs", "filings", "filings-named"])
    parser.add_argument("--arm", default="after", help="the KB's arm (its directory under the cache)")
    parser.add_argument("--label", help="rank: the rankings' label (default: the arm)")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=JSON",
                        help="rank: a SearchSettings field overridden (e.g. document_fusion=\"max\")")
    parser.add_argument("--context-weight", type=float, help="rank: the keyword side's context weight")
    args = parser.parse_args()
    if args.command == "build":
        build(args.corpus, args.arm)
    elif args.command == "rank":
        overrides = {key: json.loads(value) for key, value in (item.split("=", 1) for item in args.set)}
        if args.context_weight is not None:
            from pinakes.search.bm25 import KeywordOptions

            overrides["keyword"] = KeywordOptions(context_weight=args.context_weight)
        print(rank(args.corpus, args.arm, args.label or args.arm, overrides))
    elif args.command == "lists":
        print(dump_lists(args.corpus, args.arm))
    elif args.command == "sides":
        print(json.dumps(sides(args.corpus, *args.labels), indent=1))
    elif args.command == "fusion":
        print(json.dumps(fusion_levels(args.corpus, args.arm), indent=1))
    else:
        print(json.dumps(compare(args.corpus, *args.labels), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
