"""`pnk eval --questions FILE.jsonl`: the harness pointed at any KB (spec §7: "built to be pointed at
a user's own KB").

The layout is the shared corpora's: one JSON object per line, `{"id", "query", "relevant": [...]}`,
with `relevant` paths relative to the KB's source root (its single `[sources] roots` entry; with
several roots each path is tried under each, first existing wins). Other keys are ignored.

Scoring is per document, binary relevance: each question is searched once, through the KB's own
Searcher, for 100 passages — `search/core.py` caps a request at MAX_FINAL_K = 100 and raises
fusion_top_k and candidates_per_source to at least the request, so nothing clamps below 100 — and
the passages are folded into a document ranking (a document ranks where its first passage does).
  nDCG@10     DCG of the top 10 documents / the ideal DCG (gain 1 per relevant document)
  recall@k    relevant documents in the top k / relevant documents, averaged over questions
  MRR         1 / rank of the first relevant document (0 if none of the 100 passages is one)
recall@100 counts documents among the top 100 *passages*, so on a corpus whose documents have
several chunks it is a lower bound. A relevant path that is not a file in the KB cannot be
retrieved by any configuration; it is left out of that question's relevant set and counted.
"""

from __future__ import annotations

import json
import math
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes.eval.golden import GoldenProblem, GoldenSetError
from pinakes.jsontypes import is_object, str_list
from pinakes.wording import noun_for

if TYPE_CHECKING:
    from pinakes.search.core import Searcher

PASSAGES_PER_QUESTION = 100
CUTOFFS = (10, 100)
NDCG_DEPTH = 10


@dataclass(frozen=True)
class CorpusQuestion:
    id: str
    query: str
    relevant: tuple[str, ...]  # KB-root-relative paths that exist
    missing: tuple[str, ...] = ()  # listed as relevant, but no such file in the KB


@dataclass
class CorpusScores:
    questions: int = 0
    ndcg_sum: float = 0.0
    recall_sums: dict[int, float] = field(default_factory=lambda: dict.fromkeys(CUTOFFS, 0.0))
    reciprocal_rank_sum: float = 0.0
    skipped: list[str] = field(default_factory=list[str])  # no relevant document exists in the KB
    missing_relevant: int = 0
    documents_ranked: int = 0

    def add(self, ranking: Sequence[str], relevant: Sequence[str]) -> None:
        self.questions += 1
        self.ndcg_sum += ndcg(ranking, relevant, NDCG_DEPTH)
        for cutoff in CUTOFFS:
            self.recall_sums[cutoff] += recall(ranking, relevant, cutoff)
        self.reciprocal_rank_sum += reciprocal_rank(ranking, relevant)
        self.documents_ranked += len(ranking)

    def _mean(self, total: float) -> float | None:
        return round(total / self.questions, 6) if self.questions else None

    def to_dict(self) -> dict[str, object]:
        return {
            "ndcg@10": self._mean(self.ndcg_sum),
            "recall@10": self._mean(self.recall_sums[10]),
            "recall@100": self._mean(self.recall_sums[100]),
            "mrr": self._mean(self.reciprocal_rank_sum),
            "questions": self.questions,
            "skipped": list(self.skipped),
            "missing_relevant": self.missing_relevant,
            "mean_documents_ranked": self._mean(float(self.documents_ranked)),
            "passages_per_question": PASSAGES_PER_QUESTION,
        }


def ndcg(ranking: Sequence[str], relevant: Sequence[str], depth: int) -> float:
    wanted = set(relevant)
    if not wanted:
        return 0.0
    dcg = sum(1.0 / math.log2(rank + 1) for rank, doc in enumerate(ranking[:depth], start=1) if doc in wanted)
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(len(wanted), depth) + 1))
    return dcg / ideal


def recall(ranking: Sequence[str], relevant: Sequence[str], cutoff: int) -> float:
    wanted = set(relevant)
    return len(wanted & set(ranking[:cutoff])) / len(wanted) if wanted else 0.0


def reciprocal_rank(ranking: Sequence[str], relevant: Sequence[str]) -> float:
    wanted = set(relevant)
    for rank, doc in enumerate(ranking, start=1):
        if doc in wanted:
            return 1.0 / rank
    return 0.0


def document_ranking(paths: Sequence[str]) -> list[str]:
    """Passage paths in rank order, folded to documents (each at its first passage's rank)."""
    return list(dict.fromkeys(paths))


def load_corpus_questions(path: Path, kb_root: Path, roots: Sequence[str]) -> list[CorpusQuestion]:
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise GoldenSetError(path, [GoldenProblem(None, "the questions file does not exist",
                                                  "pass a .jsonl file of {id, query, relevant} lines")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise GoldenSetError(path, [GoldenProblem(None, f"cannot read the questions file ({exc})",
                                                  "pass a UTF-8 .jsonl file")]) from None
    problems: list[GoldenProblem] = []
    questions: list[CorpusQuestion] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        question = _parse_line(line, f"line {number}", kb_root, roots, problems)
        if question is None:
            continue
        if question.id in seen:
            problems.append(GoldenProblem(f"line {number}", f"the id {question.id!r} is used twice",
                                          "give every question its own id"))
            continue
        seen.add(question.id)
        questions.append(question)
    if not problems and not questions:
        problems.append(GoldenProblem(None, "the questions file holds no questions",
                                      'write one {"id", "query", "relevant"} object per line'))
    if not problems and all(not question.relevant for question in questions):
        problems.append(GoldenProblem(
            None, f"no relevant path of any question is a file under the {noun_for(len(roots), 'source root')} "
                  f"{list(roots)}",
            "relevant paths are relative to the KB's [sources] root (e.g. 0184.txt for docs/0184.txt)"))
    if problems:
        raise GoldenSetError(path, problems)
    return questions


def _parse_line(line: str, where: str, kb_root: Path, roots: Sequence[str],
                problems: list[GoldenProblem]) -> CorpusQuestion | None:
    try:
        data: object = json.loads(line)
    except ValueError as exc:
        problems.append(GoldenProblem(where, f"not JSON ({exc})", "write one JSON object per line"))
        return None
    if not is_object(data):
        problems.append(GoldenProblem(where, "not a JSON object", 'write {"id", "query", "relevant"}'))
        return None
    qid, query, relevant = data.get("id"), data.get("query"), data.get("relevant")
    if not isinstance(qid, str | int) or isinstance(qid, bool) or not str(qid).strip():
        problems.append(GoldenProblem(where, f"`id` must be a non-empty string, got {qid!r}", "give it an id"))
        return None
    if not isinstance(query, str) or not query.strip():
        problems.append(GoldenProblem(where, f"`query` must be non-empty text, got {query!r}", "write the query"))
        return None
    relevant_paths = str_list(relevant)
    if relevant_paths is None:
        problems.append(GoldenProblem(where, f"`relevant` must be a list of paths, got {relevant!r}",
                                      "list the relevant documents, relative to the source root"))
        return None
    found: list[str] = []
    missing: list[str] = []
    for entry in relevant_paths:
        resolved = resolve_relevant(entry, kb_root, roots)
        if resolved is None:
            missing.append(entry)
        elif resolved not in found:
            found.append(resolved)
    return CorpusQuestion(str(qid).strip(), query.strip(), tuple(found), tuple(missing))


def resolve_relevant(entry: str, kb_root: Path, roots: Sequence[str]) -> str | None:
    """The KB-root-relative path of a source-root-relative `entry`: the first root holding it."""
    relative = entry.strip().replace("\\", "/")
    for root in roots:
        candidate = posixpath.normpath(posixpath.join(root, relative))
        if not candidate.startswith("../") and (Path(kb_root) / candidate).is_file():
            return candidate
    return None


def score_corpus(searcher: Searcher, questions: Sequence[CorpusQuestion]) -> CorpusScores:
    scores = CorpusScores()
    for question in questions:
        scores.missing_relevant += len(question.missing)
        if not question.relevant:
            scores.skipped.append(question.id)
            continue
        result = searcher.search(question.query, final_k=PASSAGES_PER_QUESTION)
        scores.add(document_ranking([passage.path for passage in result.passages]), question.relevant)
    return scores
