"""`pnk eval --init`: draft a golden set from the KB's own documents, for a person to check in minutes.

Confidence stays `unknown` until `[retrieval.confidence]` is fitted on a golden set (spec §4.2), and
a new KB has none (a template ships none: its questions would name documents that do not exist).
Writing one from nothing is the barrier; this drafts both kinds the fit needs, from what the index
already holds:

  - answerable (`simple-lookup`): per document, its most specific heading (or its title), then, while
    there is room, the opening words of its longest passage; each expects that document.
  - no-answer: in the KB's own vocabulary about something no document covers — two words common in
    the KB that no drafted-from document uses together ("How does X affect Y?"). A fit learns where
    to abstain from in-domain questions like these; an off-topic question ("who won the 1930 world
    cup?") scores low on any KB and teaches it nothing. Each is marked TODO: the words never meeting
    in one document makes an answer unlikely, not impossible, and only a person can tell.

Every draft works as written (so `pnk eval --fit-confidence` runs at once), and the file says in
comments how to edit it and what to run next, because a heading copied verbatim is an easier
question than any real one and a drafted no-answer question is a guess until someone checks it.
"""

from __future__ import annotations

import itertools
import json
import re
import sqlite3
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from pinakes.errors import UsageError
from pinakes.eval.fitting import MAX_FALSE_CONFIDENCE, no_answer_needed
from pinakes.eval.golden import GOLDEN_SET_RELPATH, NO_ANSWER

# Answerable drafts, at most: enough to fit on, few enough to rewrite by hand.
MAX_DRAFTED = 30
# No-answer drafts: a third of the answerable ones, within these bounds: at least as many as the fit
# needs to promise its false-confidence ceiling for new questions (eval/fitting.py), at most as many as
# a person checks in minutes.
MIN_NO_ANSWER, MAX_NO_ANSWER = no_answer_needed(MAX_FALSE_CONFIDENCE) or 1, 12
# Documents whose words the no-answer drafts are built from (and checked against), at most.
VOCABULARY_DOCUMENTS = 300
VOCABULARY_TERMS = 40  # the most widespread words considered for pairing
MIN_TERM_CHARS = 6
SHORT_HEADING_WORDS = 3  # a heading this short is drafted with its document's title before it
PASSAGE_WORDS = 12  # words of a passage copied into its draft
WORD = re.compile(r"[^\W\d_]{4,}")
NO_ANSWER_TEMPLATES = (
    "How does {a} affect {b}?",
    "What is the relationship between {a} and {b}?",
    "Which {b} requirements apply to {a}?",
    "When was {a} first used for {b}?",
)
SINGLE_TERM_TEMPLATE = "What did {a} cost in 1987?"  # when every pair of words meets in some document

HEADER = f"""\
# The golden set of this KB ({GOLDEN_SET_RELPATH}): questions, and the documents that answer them.
# `pnk eval --init` drafted it from the KB's own documents. Making it yours takes a few minutes:
#
#   1. Answerable questions (id draft-NNN, kind simple-lookup) copy a heading or a passage's words,
#      which is easier than anything a person asks. Rewrite each query the way someone would really
#      ask it; fix `expect` if another document answers better (finding any document listed counts).
#      Delete a question you cannot make sensible.
#   2. No-answer questions (id none-NNN, kind no-answer, marked TODO) use this KB's own words about
#      something no document seems to cover. Check each one: if the KB does answer it, delete it or
#      make it answerable (kind simple-lookup, the answering document in `expect`). Rewrite the
#      awkward ones, add your own, delete the TODO once checked. In-domain questions the KB cannot
#      answer are what teach the fit where to abstain: keep at least {MIN_NO_ANSWER}.
#   3. Keep every `id` (it pairs one run's row with the next run's). The kinds are lexical,
#      simple-lookup, paraphrase, filter, multi-hop and no-answer (docs/QUALITY.md).
#
# Then: `pnk eval --fit-confidence --write` fits [retrieval.confidence] on these questions and writes
# it into pinakes.toml, after which `pnk search` reports high / medium / low instead of unknown.
"""


@dataclass(frozen=True)
class Draft:
    path: str | None  # the document that answers it; None for a no-answer draft
    query: str
    note: str  # the comment beside its id: where it came from, what to do


@dataclass(frozen=True)
class DraftedSet:
    path: Path
    answerable: int
    no_answer: int


@dataclass(frozen=True)
class _Document:
    path: str
    title: str | None
    headings: list[list[str]]
    passages: list[str]


def draft_golden_set(kb_root: Path, conn: sqlite3.Connection) -> DraftedSet:
    """Write `eval/questions.yaml` under `kb_root` from the index; never over an existing one."""
    from pinakes.atomic import atomic_write_bytes

    target = kb_root / GOLDEN_SET_RELPATH
    if target.exists():
        raise UsageError(f"{GOLDEN_SET_RELPATH} already exists; --init never overwrites a golden set",
                         remedy="edit it, or move it away and run `pnk eval --init` again", path=target)
    documents = _documents(conn)
    answerable = _answerable(documents)
    if not answerable:
        raise UsageError("the index holds no documents to draft questions from",
                         remedy="add documents under the source roots and run `pnk sync` first")
    no_answer = _no_answer(documents, max(MIN_NO_ANSWER, min(MAX_NO_ANSWER, len(answerable) // 3)))
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(target, render(answerable, no_answer).encode("utf-8"))
    return DraftedSet(target, len(answerable), len(no_answer))


def render(answerable: list[Draft], no_answer: list[Draft]) -> str:
    lines = [HEADER, "questions:"]
    for number, draft in enumerate(answerable, start=1):
        lines += [f"  - id: draft-{number:03d}  # {draft.note}",
                  "    kind: simple-lookup",
                  f"    query: {json.dumps(draft.query, ensure_ascii=False)}",
                  f"    expect: [{json.dumps(draft.path, ensure_ascii=False)}]"]
    for number, draft in enumerate(no_answer, start=1):
        lines += [f"  - id: none-{number:03d}  # TODO {draft.note}",
                  f"    kind: {NO_ANSWER}",
                  f"    query: {json.dumps(draft.query, ensure_ascii=False)}",
                  "    expect: []"]
    return "\n".join(lines) + "\n"


def _documents(conn: sqlite3.Connection) -> list[_Document]:
    """Up to VOCABULARY_DOCUMENTS active documents, spread evenly over the KB by path."""
    rows = conn.execute("SELECT id, path, title FROM documents WHERE state = 'active' ORDER BY path").fetchall()
    step = max(1, len(rows) // VOCABULARY_DOCUMENTS)
    documents: list[_Document] = []
    for doc_id, path, title in rows[::step][:VOCABULARY_DOCUMENTS]:
        chunks = conn.execute("SELECT heading_path, text FROM chunks WHERE doc_id = ? ORDER BY ordinal",
                              (doc_id,)).fetchall()
        headings = [json.loads(heading) for heading, _ in chunks if heading is not None]
        documents.append(_Document(path, title, headings, [text for _, text in chunks]))
    return documents


def _answerable(documents: list[_Document]) -> list[Draft]:
    """Headings first (one per document, spread over the KB), then passages while there is room."""
    step = max(1, len(documents) // MAX_DRAFTED)
    chosen = documents[::step][:MAX_DRAFTED]
    drafts = [draft for document in chosen if (draft := _from_heading(document)) is not None]
    for document in chosen:
        if len(drafts) >= MAX_DRAFTED:
            break
        draft = _from_passage(document)
        if draft is not None and all(draft.query != other.query for other in drafts):
            drafts.append(draft)
    return drafts


def _from_heading(document: _Document) -> Draft | None:
    """The document's most specific heading below its first one (more findable than a title)."""
    deepest = max(document.headings[1:] or document.headings, key=len, default=None)
    title = _clean(document.title or "")
    if deepest:
        query = _clean(deepest[-1])
        if query and len(query.split()) < SHORT_HEADING_WORDS and title and title.lower() != query.lower():
            query = f"{title}: {query}"  # "Appraisal" alone names a topic, not a question
        if query:
            return Draft(document.path, query, "copied from a heading: rewrite as a real question")
    return Draft(document.path, title, "copied from the title: rewrite as a real question") if title else None


def _from_passage(document: _Document) -> Draft | None:
    """The opening words of the first sentence of the document's longest passage (its heading,
    table and code lines left out: a heading is drafted from already)."""
    longest = max(document.passages, key=len, default="")
    prose = " ".join(line for line in longest.splitlines()
                     if not line.lstrip().startswith(("#", "|", "```", "    ")))
    sentence = re.split(r"(?<=[.!?])\s", prose.strip(), maxsplit=1)[0]
    words = [word.strip("*_`[]()") for word in sentence.split()][:PASSAGE_WORDS]
    query = " ".join(word for word in words if word)
    if len(query.split()) < 3:
        return None
    return Draft(document.path, query, "copied from a passage: ask what it answers instead")


def _no_answer(documents: list[_Document], wanted: int) -> list[Draft]:
    """Pairs of widespread words that no document uses together, worded as questions."""
    from pinakes.lexical.tokenizer import FUNCTION_WORDS

    word_sets: list[set[str]] = []
    occurrences: Counter[str] = Counter()
    surface: dict[str, str] = {}
    for document in documents:
        words: set[str] = set()
        for text in [document.title or "", *document.passages]:
            for match in WORD.finditer(text):
                word = match.group(0)
                lowered = word.lower()
                if lowered not in FUNCTION_WORDS and len(lowered) >= MIN_TERM_CHARS:
                    words.add(lowered)
                    occurrences[lowered] += 1
                    surface.setdefault(lowered, word if not word.isupper() else lowered)
        word_sets.append(words)
    spread = Counter(word for words in word_sets for word in words)
    # In-domain but specific: in more than one document where the KB has several, in at most a fifth
    # of them (a word in most documents says little about any); then the words repeated most within
    # those documents, which are the KB's terms ("strongroom") rather than everyday words
    # ("everyone"), which occur about once wherever they occur.
    # A small KB has few such words; then words of one document each come next (two of them from
    # different documents never meet in one).
    floor = 2 if len(word_sets) >= 4 else 1
    ceiling = max(floor, len(word_sets) // 5)

    def ranked(low: int, high: int) -> list[str]:
        eligible = [word for word, count in spread.items() if low <= count <= high]
        return sorted(eligible, key=lambda word: (-occurrences[word] / spread[word], word))[:VOCABULARY_TERMS]

    terms = ranked(floor, ceiling) + (ranked(1, 1) if floor > 1 else [])
    drafts: list[Draft] = []
    used: set[str] = set()
    for a, b in itertools.combinations(terms, 2):
        if len(drafts) >= wanted:
            break
        if a in used or b in used or any(a in words and b in words for words in word_sets):
            continue
        used.update((a, b))
        template = NO_ANSWER_TEMPLATES[len(drafts) % len(NO_ANSWER_TEMPLATES)]
        drafts.append(Draft(None, template.format(a=surface[a], b=surface[b]),
                            f"check: no document should answer this ('{surface[a]}' and '{surface[b]}' "
                            "never meet in one)"))
    for word in terms:
        if len(drafts) >= wanted:
            break
        if word not in used:
            used.add(word)
            drafts.append(Draft(None, SINGLE_TERM_TEMPLATE.format(a=surface[word]),
                                "check: no document should answer this"))
    return drafts


def _clean(heading: str) -> str:
    return " ".join(heading.lstrip("#").split()).strip()
