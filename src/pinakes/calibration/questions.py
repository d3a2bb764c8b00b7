"""Questions made from a KB's own documents by fixed rules, for self-calibration (issue #41).

A KB without a golden set still holds what a fit needs: every passage states something, and a
question made from it is answerable while its document is in the KB and unanswerable, in-domain,
once that document is left out. The rules, applied in a deterministic order (a hash of each
document's id, so the same KB always makes the same questions):

  - documents: the active ones in hash order, one question each, then a second round for a second
    question each, and so on (at most `per_document` rounds), until `max_questions` are made;
  - from each, a sentence of one of its passages: of the sentences that hold at least
    MIN_CONTENT_WORDS content words (no function word, at least three characters, at least one
    letter), one per passage first, in hash order;
  - the question is `words` of that sentence's content words, a run in the sentence's own order
    starting at a hashed place (what a person types, never the sentence itself);
  - paraphrased where a free rule can: each content word WordNet relates a word to (another word
    WordNet files, lexical/relations.py) is replaced by one of them with probability `paraphrase`,
    the closest (WordRelations.other_words). A paraphrase keeps the asked fact and drops the shared word, as real questions do;
  - left out for its unanswerable twin: the source document and its near-duplicates, the documents
    with a passage that holds every content word of the question (the same statement, copied) or
    whose vector is within NEAR_DUPLICATE_COSINE of the source passage's.

docs/QUALITY.md ("Self-calibration") measures how far such questions are from real ones.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from pinakes.lexical.relations import WordRelations
from pinakes.lexical.tokenizer import FUNCTION_WORDS, split_words

RULES_VERSION = 1
MIN_CONTENT_WORDS = 4
MIN_WORD_CHARS = 3
SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+|\n+")
# Given the questions' source chunk ids, the chunk ids within NEAR_DUPLICATE_COSINE of each
# (calibration/near_duplicates.py).
NearVectors = Callable[[Sequence[int]], Mapping[int, set[int]]]


@dataclass(frozen=True)
class QuestionRules:
    """What varies between rule sets (bench/experiments/self_calibration measured them)."""

    words: int = 6  # content words per question
    # "run": a run of the sentence's content words; "rare": its rarest ones, in order; "lead": a
    # document's first question from its opening sentence (what it is about), the others as "run"
    pick: str = "run"
    paraphrase: float = 0.0  # the chance each word with a WordNet relative is replaced by one
    max_questions: int = 200
    per_document: int = 4  # questions one document may give (a small KB asks each several)

    def describe(self) -> str:
        how = {"run": "a run of", "rare": "the rarest", "lead": "the opening sentence's first, then a run of"}[self.pick]
        return f"rules {RULES_VERSION}: {how} {self.words} content words of a sentence, paraphrase {self.paraphrase:g}"


@dataclass(frozen=True)
class MadeQuestion:
    id: str  # "<document path>#<passage ordinal>"
    query: str
    source: str  # the document id it was made from
    left_out: tuple[str, ...]  # document ids its unanswerable twin is searched without (source first)


def _hashed(*parts: object) -> int:
    return zlib.crc32("\x1f".join(str(part) for part in parts).encode("utf-8"))


def content_words(sentence: str) -> list[str]:
    """The sentence's content words, in order, each once (compared lower-cased)."""
    seen: set[str] = set()
    words: list[str] = []
    for word in split_words(sentence):
        lowered = word.lower()
        if lowered in FUNCTION_WORDS or len(word) < MIN_WORD_CHARS or lowered in seen or not _has_letter(word):
            continue
        seen.add(lowered)
        words.append(word)
    return words


def _has_letter(word: str) -> bool:
    # An ASCII word of split_words is digits and Latin letters only: it has a letter unless all digits.
    return not word.isdigit() if word.isascii() else any(char.isalpha() for char in word)


def sentences(text: str) -> list[str]:
    return [part.strip() for part in SENTENCE_END.split(text) if part.strip()]


def make_questions(conn: sqlite3.Connection, rules: QuestionRules, relations: WordRelations | None = None,
                   near_vectors: NearVectors | None = None) -> list[MadeQuestion]:
    """The KB's self-calibration questions (module docstring). `near_vectors` answers the
    near-duplicate rule for all the questions' source passages at once (calibration/near_duplicates.py);
    without it only the words rule applies."""
    made: list[_Made] = []
    sentences_of: dict[str, list[tuple[int, int, list[str]]]] = {}
    frequencies = _Frequencies(conn)
    order = list(_documents_in_order(conn))
    for round_number in range(rules.per_document):
        for doc_id, path in order:
            if len(made) >= rules.max_questions:
                return _with_left_out(conn, made, near_vectors)
            if doc_id not in sentences_of:
                sentences_of[doc_id] = _sentences_of(conn, doc_id, lead=rules.pick == "lead")
            if round_number >= len(sentences_of[doc_id]):
                continue
            chunk_id, ordinal, words = sentences_of[doc_id][round_number]
            salt = f"{doc_id}#{round_number}"
            if rules.pick == "rare":
                asked = frequencies.rarest(words, rules.words)
            elif rules.pick == "lead" and round_number == 0:
                asked = words[:rules.words]
            else:
                start = _hashed("start", salt) % (len(words) - rules.words + 1) if len(words) > rules.words else 0
                asked = words[start:start + rules.words]
            shown = (_paraphrased(asked, salt, rules.paraphrase, relations, frequencies) if rules.paraphrase > 0
                     else asked)
            made.append(_Made(f"{path}#{ordinal}.{round_number}", " ".join(shown), doc_id, chunk_id, asked))
    return _with_left_out(conn, made, near_vectors)


@dataclass(frozen=True)
class _Made:
    """A question before its left-out documents are known (they need every question's source)."""

    id: str
    query: str
    source: str
    chunk_id: int
    asked: list[str]


def _with_left_out(conn: sqlite3.Connection, made: Sequence[_Made], near_vectors: NearVectors | None
                   ) -> list[MadeQuestion]:
    near: Mapping[int, set[int]] = near_vectors([question.chunk_id for question in made]) if near_vectors and made else {}
    return [MadeQuestion(question.id, question.query, question.source,
                         (question.source, *sorted(_near_duplicates(conn, question.source, question.chunk_id,
                                                                    question.asked, near.get(question.chunk_id)))))
            for question in made]


def _documents_in_order(conn: sqlite3.Connection) -> Iterator[tuple[str, str]]:
    rows = conn.execute("SELECT id, path FROM documents WHERE state = 'active'").fetchall()
    yield from sorted(((str(doc_id), str(path)) for doc_id, path in rows), key=lambda row: (_hashed(row[0]), row[0]))


def _sentences_of(conn: sqlite3.Connection, doc_id: str, *, lead: bool = False) -> list[tuple[int, int, list[str]]]:
    """(chunk id, ordinal, content words) of the document's sentences that hold enough content
    words, in hash order, one per passage before any passage gives a second; with `lead`, the
    document's first such sentence first."""
    # (place among its passage's sentences, passage hash, chunk id, ordinal, sentence number, words)
    candidates: list[tuple[int, int, int, int, int, list[str]]] = []
    for chunk_id, ordinal, text in conn.execute("SELECT id, ordinal, text FROM chunks WHERE doc_id = ?", (doc_id,)):
        ranked = sorted((_hashed(doc_id, ordinal, number), number, words)
                        for number, sentence in enumerate(sentences(str(text)))
                        if len(words := content_words(sentence)) >= MIN_CONTENT_WORDS)
        candidates += [(place, _hashed(doc_id, ordinal), int(chunk_id), int(ordinal), number, words)
                       for place, (_, number, words) in enumerate(ranked)]
    candidates.sort(key=lambda candidate: candidate[:5])
    if lead and candidates:
        opening = min(candidates, key=lambda candidate: (candidate[3], candidate[4]))
        candidates.remove(opening)
        candidates.insert(0, opening)
    return [(chunk_id, ordinal, words) for _, _, chunk_id, ordinal, _, words in candidates]


class _Frequencies:
    """Document frequencies of words as the index's tokenizer spells them (search/bm25.py's counter)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        from pinakes.lexical.tokenizer import Tokenizer
        from pinakes.search.bm25 import DocumentFrequencies, ensure_vocabulary
        from pinakes.search.query import tokenizer_of

        ensure_vocabulary(conn)
        self._tokenizer = Tokenizer(tokenizer_of(conn))
        self._counts = DocumentFrequencies(conn)

    def of(self, words: Sequence[str]) -> list[int]:
        terms = self._tokenizer.terms(list(words))
        known = self._counts.of_terms(sorted({term[0] for term in terms if len(term) == 1}))
        return [known.get(term[0], 0) if len(term) == 1 else 0 for term in terms]

    def rarest(self, words: Sequence[str], count: int) -> list[str]:
        """The `count` words held by the fewest passages (but some), in their own order."""
        ranked = sorted(range(len(words)), key=lambda i: (frequency if (frequency := self.of([words[i]])[0]) else 1 << 30, i))
        return [words[i] for i in sorted(ranked[:count])]


def _paraphrased(words: Sequence[str], doc_id: str, chance: float, relations: WordRelations | None,
                 frequencies: _Frequencies) -> list[str]:
    """A word WordNet relates to another is swapped for its closest relative the KB itself uses
    (a paraphrase in the KB's own vocabulary), with probability `chance`."""
    if relations is None:
        return list(words)
    shown: list[str] = []
    for word in words:
        related = relations.other_words(word) if word.isalpha() and word.isascii() else ()
        related = tuple(option for option in related if not _same_root(option, word))
        options = [option for option, count in zip(related, frequencies.of(related), strict=True) if count] \
            if related else []
        if options and _hashed("swap", doc_id, word) % 1000 < chance * 1000:
            shown.append(options[0])
        else:
            shown.append(word)
    return shown


def _same_root(one: str, other: str) -> bool:
    """Two spellings of one word (`tester`, `tested`): a paraphrase must use another."""
    one, other = one.lower(), other.lower()
    shared = 0
    for a, b in zip(one, other, strict=False):
        if a != b:
            break
        shared += 1
    return shared >= min(4, len(one), len(other))


def _near_duplicates(conn: sqlite3.Connection, doc_id: str, chunk_id: int, words: Sequence[str],
                     near_chunks: Iterable[int] | None) -> set[str]:
    """Other documents that state what the question asks: a passage holding every one of its words,
    or one whose vector is within NEAR_DUPLICATE_COSINE of the source passage's."""
    chunks: set[int] = set()
    match = " AND ".join('"' + word.replace('"', '""') + '"' for word in words)
    with contextlib.suppress(sqlite3.OperationalError):  # a word FTS5 cannot parse: the vector rule still applies
        chunks.update(int(row[0]) for row in conn.execute("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?",
                                                          (match,)))
    if near_chunks is not None:
        chunks.update(near_chunks)
    chunks.discard(chunk_id)
    if not chunks:
        return set()
    found: set[str] = set()
    listed = sorted(chunks)
    for start in range(0, len(listed), 500):
        part = listed[start:start + 500]
        marks = ", ".join("?" * len(part))
        found.update(str(row[0]) for row in conn.execute(
            f"SELECT DISTINCT doc_id FROM chunks WHERE id IN ({marks})", part))
    found.discard(doc_id)
    return found
