"""Sentence-level cosine as a confidence feature on the demo KB (experiment only; nothing in src/).

    nice -n 10 python bench/experiments/finer_similarity/sentence_demo.py --kb /tmp/sc-demo/demo-kb

A chunk's cosine averages every sentence in it; a paraphrase asks about one sentence. Each
search's top passages are split into sentences, each embedded with the KB's own model, and the
best sentence cosine against the query becomes a feature: `sent1` (top passage), `sent3` (top 3),
`sent8` (all returned). Measured with cross_encoder/measure_demo.py's in-sample and held-out code.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path[:0] = [str(HERE.parent / "cross_encoder"), str(REPO / "bench"), str(REPO / "src"), str(REPO)]

import bench_confidence as bench  # noqa: E402
import measure_demo as ce  # noqa: E402
import numpy as np  # noqa: E402

from pinakes.eval.fitting import L2_PENALTY  # noqa: E402
from pinakes.search.confidence import MODEL  # noqa: E402

SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+|\n+")


def sentences(text: str) -> list[str]:
    parts = [p.strip(" -*#>|\t") for p in SENTENCE_END.split(text)]
    return [p for p in parts if len(p.split()) >= 3] or [text]


class SentenceReader:
    def __init__(self, embedder: object) -> None:
        self.embedder = embedder
        self.calls = 0

    def features(self, query: str, passages: list[str]) -> dict[str, float]:
        q = np.asarray(self.embedder.embed_query(query), dtype=np.float32)  # type: ignore[attr-defined]
        best = []
        for text in passages:
            vectors = np.asarray(self.embedder.embed_documents(sentences(text)), dtype=np.float32)  # type: ignore[attr-defined]
            best.append(float(np.max(vectors @ q)))
        self.calls += 1
        return {"sent1": best[0], "sent3": max(best[:3]), "sent8": max(best)}


class ReadingSearcher:
    def __init__(self, searcher: object, reader: SentenceReader) -> None:
        self._searcher = searcher
        self._reader = reader

    def search(self, query: str, **kwargs: object) -> object:
        result = self._searcher.search(query, **kwargs)  # type: ignore[attr-defined]
        confidence = result.confidence
        if confidence.features is None or not result.passages:
            return result
        extra = self._reader.features(query, [p.text for p in result.passages])
        return replace(result, confidence=replace(confidence, features={**confidence.features, **extra}))


def collect(kb: Path, out: Path) -> object:
    from pinakes.embed.loader import load_for_kb
    from pinakes.eval.golden import load_golden_set
    from pinakes.eval.outcomes import OutcomesFile, write_outcomes
    from pinakes.eval.runner import answer, open_searcher, run_header
    from pinakes.kb import KBPaths
    from pinakes.manifest.loading import load_manifest

    paths = KBPaths(kb)
    manifest = load_manifest(paths.manifest)
    golden = load_golden_set(kb / "eval" / "questions.yaml", kb, sources=manifest.sources)
    reader = SentenceReader(load_for_kb(kb, manifest))
    with open_searcher(kb, manifest) as searcher:
        reading = ReadingSearcher(searcher, reader)
        rows = [answer(reading, question) for question in golden.questions]  # type: ignore[arg-type]
    outcomes = OutcomesFile(run_header(kb, manifest, golden), tuple(rows))
    write_outcomes(out, outcomes)
    return outcomes


ce.CANDIDATES = (
    bench.Candidate("shipped (feature set chosen per KB)", MODEL, (), L2_PENALTY),
    ce.CANDIDATES[1],
    bench.Candidate("sent1 alone", MODEL, ("sent1",), L2_PENALTY),
    bench.Candidate("sent3 alone", MODEL, ("sent3",), L2_PENALTY),
    bench.Candidate("sent8 alone", MODEL, ("sent8",), L2_PENALTY),
    bench.Candidate("sent1 + keyword_share", MODEL, ("sent1", "keyword_share"), L2_PENALTY),
    bench.Candidate("sent3 + keyword_share", MODEL, ("sent3", "keyword_share"), L2_PENALTY),
    bench.Candidate("cosine + keyword_share + sent1", MODEL, ("cosine", "keyword_share", "sent1"), L2_PENALTY),
    bench.Candidate("cosine + keyword_share + sent3", MODEL, ("cosine", "keyword_share", "sent3"), L2_PENALTY),
    bench.Candidate("cosine + keyword_share (the 2-feature model)", MODEL, ("cosine", "keyword_share"), L2_PENALTY),
)
ce.CONTROL = ce.CANDIDATES[-1]
ce.collect = collect

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    raise SystemExit(ce.main(sys.argv[1:]))
